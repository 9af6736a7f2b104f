"""Event strings as UTF-8 slices of one buffer: encoded, sliced and case-folded without a Python ``str`` each.

A decoder that reads text (``wire.event_decoder``) holds an event's strings
as bytes; making a ``str`` of each only for the matcher to hash it again
costs more per value than the scan that found it.  :class:`Utf8Strings` is
the ``strings`` of an :class:`~engine.columnar.EventBatch` kept as slices,
a ``str`` made only where some reader asks for one, and the kernels here
give the matcher what it needs of them from the bytes:

* a string's id among the constants (:class:`Utf8Table`, an open-addressing
  table over their UTF-8 text) and, for one that is none, the order code
  between its neighbours, by a binary search over the constants' sorted text
  (UTF-8's byte order is the code points' order, Python's ``str`` order);
* the derived values of engine/frontend/lowering.py that slice, case-fold or test a wildcard or a substring
  (:func:`glob`):
  the first or last ``n`` characters (a character is a byte that is no
  continuation byte, ``10xxxxxx``) and ``str.casefold`` of a value whose bytes
  are all ASCII (``A``-``Z`` to ``a``-``z``, nothing else changes); a value with
  other bytes is folded by ``str.casefold`` (:func:`fold`).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numba
import numpy as np

from ..structures.byte_table import file_texts, find_text, same_bytes


class Utf8Strings(Sequence[str]):
    """Strings as ``data[start[i]:start[i] + length[i]]`` (UTF-8); item ``i`` is made a ``str`` when it is read,
    all of them once when iterated."""

    __slots__ = ("data", "start", "length", "_all")

    def __init__(self, data: np.ndarray, start: np.ndarray, length: np.ndarray) -> None:
        self.data, self.start, self.length = data, start, length
        self._all: tuple[str, ...] | None = None

    @classmethod
    def of(cls, strings: Sequence[str]) -> "Utf8Strings":
        """The strings given as ``str`` (tests, and a derived batch that mixes both)."""
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        length = np.fromiter(map(len, encoded), np.int64, len(encoded))
        start = np.zeros(len(encoded), np.int64)
        np.cumsum(length[:-1], out=start[1:])
        return cls(np.frombuffer(b"".join(encoded), np.uint8), start, length)

    def __len__(self) -> int:
        return len(self.start)

    def _strings(self) -> tuple[str, ...]:
        if self._all is None:
            raw = self.data.tobytes()
            self._all = tuple(raw[a:a + n].decode("utf-8", "surrogatepass")
                              for a, n in zip(self.start.tolist(), self.length.tolist()))
        return self._all

    def __getitem__(self, i):  # type: ignore[override]
        if self._all is not None or isinstance(i, slice):
            return self._strings()[i]
        a, n = int(self.start[i]), int(self.length[i])
        return self.data[a:a + n].tobytes().decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        return iter(self._strings())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(self._strings())

    def __repr__(self) -> str:
        return f"Utf8Strings({self._strings()!r})"

    def take(self, index: np.ndarray) -> "Utf8Strings":
        """The strings at ``index``, slices of the same buffer."""
        return Utf8Strings(self.data, self.start[index], self.length[index])


def utf8_of(strings: Sequence[str]) -> Utf8Strings | None:
    """``strings`` as slices when they are held so, else None (the ``str`` path)."""
    return strings if type(strings) is Utf8Strings else None


def picked(strings: Sequence[str], index: np.ndarray) -> list[str]:
    """``[strings[i] for i in index]``, the ``str`` of slices made in one pass over them."""
    utf8 = utf8_of(strings)
    if utf8 is not None and utf8._all is None:
        return list(utf8.take(index))
    return list(map(strings.__getitem__, index.tolist()))


@numba.njit(cache=True, _nrt=False, nogil=True)
def _lookup(slots, hashes, text, tstart, tlength, data, start, length, out):
    """``out[i]``: the id in the table of string ``data[start[i]:start[i] + length[i]]``, or -1 (no allocation,
    so no reference counting around the helpers, ``wire.json_kernel``'s ``_walk``)."""
    for i in range(len(start)):
        out[i] = find_text(slots, hashes, text, tstart, tlength, data, start[i], length[i])


@numba.njit(cache=True, _nrt=False)
def _less(a, a_start, a_length, b, b_start, b_length):
    """Whether text ``a`` sorts before text ``b`` (bytewise; a prefix first)."""
    n = min(a_length, b_length)
    for j in range(n):
        x, y = a[a_start + j], b[b_start + j]
        if x != y:
            return x < y
    return a_length < b_length


@numba.njit(cache=True, _nrt=False)
def _between(text, sstart, slength, codes, spacing, data, start, length, which, out):
    """``out[which[k]]``: the code of string ``which[k]`` placed among the sorted constants (``sstart``,
    ``slength`` into ``text``, ascending, with ``codes``): the midpoint of its neighbours' codes, 0 below the
    first, the last's + 2 * ``spacing`` above it (``StringDictionary``'s rule, bisect_left)."""
    n = len(sstart)
    for k in range(len(which)):
        i = which[k]
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if _less(text, sstart[mid], slength[mid], data, start[i], length[i]):
                lo = mid + 1
            else:
                hi = mid
        below = codes[lo - 1] if lo > 0 else 0
        above = codes[lo] if lo < n else below + 2 * spacing
        out[i] = (below + above) / 2.0


class Utf8Table:
    """The string constants of a ``StringDictionary`` by their UTF-8 text: id by text (grown as constants are
    added, ids being dense and never reused) and, rebuilt on demand, the text in sorted order."""

    def __init__(self) -> None:
        self.text = np.zeros(1024, np.uint8)
        self.used = 0
        self.start = np.zeros(64, np.int64)
        self.length = np.zeros(64, np.int64)
        self.hashes = np.zeros(64, np.uint64)
        self.slots = np.full(128, -1, np.int64)
        self.count = 0
        self.sorted: tuple | None = None  # (start, length, code) of the constants, ascending

    def add(self, strings: Sequence[str]) -> None:
        """File the next ids' strings (``strings[0]`` is id ``count``)."""
        if not strings:
            return
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        blob = b"".join(encoded)
        n = self.count + len(encoded)
        if self.used + len(blob) > len(self.text):
            self.text = np.concatenate([self.text[:self.used], np.zeros(max(len(self.text), len(blob)), np.uint8)])
        self.text[self.used:self.used + len(blob)] = np.frombuffer(blob, np.uint8)
        if n > len(self.start):
            grow = max(n, 2 * len(self.start))
            self.start, self.length, self.hashes = (np.concatenate([a[:self.count], np.zeros(grow - self.count, a.dtype)])
                                                    for a in (self.start, self.length, self.hashes))
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        self.length[self.count:n] = lengths
        self.start[self.count:n] = self.used + np.concatenate([[0], np.cumsum(lengths)[:-1]])
        self.used += len(blob)
        first = self.count
        if 2 * n >= len(self.slots):
            size = len(self.slots)
            while 2 * n >= size:
                size *= 2
            self.slots = np.full(size, -1, np.int64)
            first = 0
        self.count = n
        file_texts(self.slots, self.hashes[:n], self.text, self.start[:n], self.length[:n], first)
        self.sorted = None

    def ids(self, strings: Utf8Strings) -> np.ndarray:
        """Per string, its id, or -1 for one that is no constant."""
        n = self.count
        out = np.empty(len(strings), np.int64)
        _lookup(self.slots, self.hashes[:n], self.text, self.start[:n], self.length[:n], strings.data,
                strings.start, strings.length, out)
        return out

    def sort(self, order: np.ndarray, codes: np.ndarray) -> None:
        """Hold the constants in sorted order (``order``: their ids so, ``codes`` their order codes) until the next
        change."""
        self.sorted = (self.start[order], self.length[order], codes)

    def place(self, spacing: int, strings: Utf8Strings, which: np.ndarray, out: np.ndarray) -> None:
        """``out[which]``: the order codes of those strings, none a constant (after :meth:`sort`)."""
        start, length, codes = self.sorted
        _between(self.text, start, length, codes, spacing, strings.data, strings.start, strings.length, which, out)


# --- derived values ------------------------------------------------------------------


@numba.njit(cache=True)
def char_lengths(data, start, length):
    """Per string, its length in characters."""
    out = np.empty(len(start), np.int64)
    for i in range(len(start)):
        c = 0
        for j in range(start[i], start[i] + length[i]):
            if (data[j] & 0xC0) != 0x80:
                c += 1
        out[i] = c
    return out


@numba.njit(cache=True, nogil=True)
def char_slices(data, start, length, chars, head, whole):
    """Per string, (start, length) of its first (``head``) or last ``chars`` characters; a shorter string: all of
    it where ``whole``, else length -1 (no value)."""
    n = len(start)
    s_out = np.empty(n, np.int64)
    l_out = np.empty(n, np.int64)
    for i in range(n):
        s, e = start[i], start[i] + length[i]
        c = 0
        if head:
            j = s
            while j < e:
                if (data[j] & 0xC0) != 0x80:
                    if c == chars:
                        break
                    c += 1
                j += 1
            full = c == chars
            s_out[i], l_out[i] = s, j - s
        else:
            j = e
            while j > s and c < chars:
                j -= 1
                if (data[j] & 0xC0) != 0x80:
                    c += 1
            full = c == chars
            s_out[i], l_out[i] = j, e - j
        if not full and not whole:
            l_out[i] = -1
    return s_out, l_out


@numba.njit(cache=True)
def _fold_ascii(data, start, length):
    """The strings' text with ``A``-``Z`` lowered, one after another, and per string whether all of it is ASCII."""
    total = 0
    for i in range(len(start)):
        total += length[i]
    out = np.empty(total, np.uint8)
    ascii_ = np.ones(len(start), np.bool_)
    o = 0
    for i in range(len(start)):
        for j in range(start[i], start[i] + length[i]):
            b = data[j]
            if b >= 0x80:
                ascii_[i] = False
            elif 0x41 <= b <= 0x5A:
                b += 0x20
            out[o] = b
            o += 1
    return out, ascii_


@numba.njit(cache=True, _nrt=False)
def _find(data, pos, end, text, t_start, t_length):
    """The first position at or after ``pos`` where ``text[t_start:t_start + t_length]`` occurs wholly before
    ``end``, or -1."""
    last = end - t_length
    while pos <= last:
        if same_bytes(data, pos, text, t_start, t_length):
            return pos
        pos += 1
    return -1


@numba.njit(cache=True, _nrt=False, nogil=True)
def _glob(data, start, length, text, p_start, p_length, out):
    """``out[i]``: whether string ``i`` is the literals ``p`` (at least one) with anything between consecutive
    ones (the wildcard's stars): it starts with the first, ends with the last, and holds the others in order
    between them, each found leftmost (which finds a match whenever there is one).  Bytewise, this is the
    match of the characters: a literal's UTF-8 starts with no continuation byte, so it is found only at a
    character's start."""
    k = len(p_start)
    for i in range(len(start)):
        s, e = start[i], start[i] + length[i]
        first, final = p_length[0], p_length[k - 1]
        if k == 1:
            out[i] = length[i] == first and same_bytes(data, s, text, p_start[0], first)
            continue
        if length[i] < first + final or not same_bytes(data, s, text, p_start[0], first) \
                or not same_bytes(data, e - final, text, p_start[k - 1], final):
            out[i] = False
            continue
        pos, end = s + first, e - final
        ok = True
        for j in range(1, k - 1):
            at = _find(data, pos, end, text, p_start[j], p_length[j])
            if at < 0:
                ok = False
                break
            pos = at + p_length[j]
        out[i] = ok


def glob(strings: Utf8Strings, parts: Sequence[str]) -> np.ndarray:
    """Per string, whether it is ``parts`` (``semantics.wildcard_parts``) with anything between consecutive ones."""
    encoded = [p.encode("utf-8", "surrogatepass") for p in parts]
    length = np.fromiter(map(len, encoded), np.int64, len(encoded))
    start = np.zeros(len(encoded), np.int64)
    np.cumsum(length[:-1], out=start[1:])
    text = np.frombuffer(b"".join(encoded) or b"\0", np.uint8)
    out = np.empty(len(strings), np.bool_)
    _glob(strings.data, strings.start, strings.length, text, start, length, out)
    return out


def fold(strings: Utf8Strings) -> Utf8Strings:
    """``str.casefold`` of every string: ASCII ones by a kernel, the others one by one."""
    out, ascii_ = _fold_ascii(strings.data, strings.start, strings.length)
    start = np.zeros(len(strings), np.int64)
    np.cumsum(strings.length[:-1], out=start[1:])
    length = strings.length.copy()
    other = np.flatnonzero(~ascii_)
    if len(other):
        folded = [strings[i].casefold().encode("utf-8", "surrogatepass") for i in other.tolist()]
        start[other] = len(out) + np.concatenate([[0], np.cumsum([len(f) for f in folded])[:-1]])
        length[other] = [len(f) for f in folded]
        out = np.concatenate([out, np.frombuffer(b"".join(folded), np.uint8)])
    return Utf8Strings(out, start, length)


def concatenate(parts: list[Utf8Strings]) -> Utf8Strings:
    """One sequence of the parts' strings, in order, over one buffer (a part's buffer copied once)."""
    if len(parts) == 1:
        return parts[0]
    datas, starts, lengths, base, seen = [], [], [], 0, {}
    for p in parts:
        key = id(p.data)
        if key not in seen:
            seen[key] = base
            datas.append(p.data)
            base += len(p.data)
        starts.append(p.start + seen[key])
        lengths.append(p.length)
    data = np.concatenate(datas) if len(datas) > 1 else datas[0]
    return Utf8Strings(data, np.concatenate(starts).astype(np.int64), np.concatenate(lengths).astype(np.int64))
