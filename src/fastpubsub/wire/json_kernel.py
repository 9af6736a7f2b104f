"""JSON events decoded by a compiled scanner: the per-record path's pairs without a Python object per value.

``codecs.decode_json_event`` parses a record with orjson, then flattens it in
Python (``wire.paths``), a Python object per value and per pair: many times
what the batch kernel of Avro events spends on a record of the same leaves
(``python -m benchmarks.processor.json_events``).  :func:`decode_json` walks the text
of a batch of records byte by byte in one numba kernel and writes the batch
decoder's columns (:class:`~.avro_binary.Pairs`, strings as slices of the
input buffer) for every record it can prove the per-record path decodes to
exactly these pairs; the others it leaves to that path, which gives their
pairs or their reason.  A record is proved when it is strict JSON (RFC 8259),
an object at the top, and

* no string, key or value, holds a backslash escape (escapes may spell a
  lone surrogate or a NUL, which that path refuses), a control character or
  bytes that are not UTF-8;
* no key is empty or twice in one object, nesting is at most
  ``MAX_JSON_DEPTH`` levels, no key's path is longer than
  ``MAX_ATTRIBUTE_BYTES`` (that path's errors, all of them);
* every number is finite as a double.

Given the paths the caller keeps (``wanted``), a value at any other path is
checked as above but not converted nor written: no ``strtod`` for a number
that is finite by its form, no pair for the caller to drop.

Paths are ``wire.paths``' (a key's ``.`` and a leading ``$`` escaped);
numbers Python's: an integer is ``float(int(text))`` (``-0`` is ``0.0``),
any other number ``float(text)``, both correctly rounded -- by arithmetic when
the digits and the power of ten are exact doubles (Clinger's fast path), else
by the C library's ``strtod`` (correctly rounded in glibc and the BSDs'), whose
end pointer is checked so that a locale's decimal comma cannot misread one.
"""

from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

import llvmlite.binding as llvm
import numba
import numpy as np
from numba import types

from fastpubsub.engine import (FNV_OFFSET, FNV_PRIME, KIND_BOOL, KIND_NUMBER, KIND_STRING, file_texts, find_text, fnv1a,
                               same_bytes)

from .avro_binary import INEXACT_PAIR, INTEGRAL_PAIR, Pairs, empty_pairs, first_pairs, name_table, utf8_ok
from .codecs import MAX_ATTRIBUTE_BYTES, MAX_JSON_DEPTH
from .paths import join, split

# strtod as a named symbol (not a ctypes pointer, which numba bakes into the code as an address it cannot cache)
llvm.add_symbol("fastpubsub_strtod", ctypes.cast(ctypes.CDLL(None).strtod, ctypes.c_void_p).value)
_strtod = types.ExternalFunction("fastpubsub_strtod", types.float64(types.uintp, types.uintp))

#: Longest number text the kernel reads (longer ones, all beyond a double's 17 digits, go to the per-record path).
MAX_NUMBER_BYTES = 400
_POW10 = np.array([float(10**i) for i in range(23)])  # exact doubles
_TWO53 = 2**53
_OBJECT, _ARRAY = 0, 1
_QUOTE, _BACKSLASH, _COLON, _COMMA = 0x22, 0x5C, 0x3A, 0x2C
_OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_ARRAY, _CLOSE_ARRAY = 0x7B, 0x7D, 0x5B, 0x5D
_TRUE, _FALSE, _NULL = (np.frombuffer(word, np.uint8) for word in (b"true", b"false", b"null"))


@numba.njit(cache=True, _nrt=False)
def _space(buf, pos, end):
    """The position of the first byte at or after ``pos`` that is not JSON whitespace."""
    while pos < end:
        c = buf[pos]
        if c != 0x20 and c != 0x0A and c != 0x0D and c != 0x09:
            break
        pos += 1
    return pos


@numba.njit(cache=True, _nrt=False)
def _string(buf, pos, end):
    """The string whose text starts at ``pos`` (after its opening quote): (length, pos after its closing quote,
    ok); not ok for an escape, a control character or bytes that are not UTF-8."""
    start = pos
    wide = False
    while pos < end:
        c = buf[pos]
        if c == _QUOTE:
            n = pos - start
            return n, pos + 1, not wide or utf8_ok(buf, start, n)
        if c == _BACKSLASH or c < 0x20:
            return 0, pos, False
        if c >= 0x80:
            wide = True
        pos += 1
    return 0, pos, False


@numba.njit(cache=True, _nrt=False)
def _literal(buf, pos, end, word):
    """Whether ``buf[pos:]`` starts with the bytes of ``word``."""
    if pos + len(word) > end:
        return False
    for i in range(len(word)):
        if buf[pos + i] != word[i]:
            return False
    return True


@numba.njit(cache=True, _nrt=False)
def _is_digit(buf, pos, end):
    return pos < end and 0x30 <= buf[pos] <= 0x39


@numba.njit(cache=True, _nrt=False)
def _number(buf, pos, end, scratch, end_pointer):
    """The JSON number at ``pos`` as Python reads it (module docstring): (value, new pos, ok, form), the form
    ``INTEGRAL_PAIR`` for an integer ``value`` holds exactly, ``INEXACT_PAIR`` for one it does not, else 0."""
    start = pos
    negative = pos < end and buf[pos] == 0x2D
    if negative:
        pos += 1
    if not _is_digit(buf, pos, end):
        return 0.0, pos, False, 0
    digits = np.int64(0)  # the first 18 significant digits (an int64 holds them all)
    significant = 0
    exponent = 0  # value = digits * 10**exponent, when no digit was dropped
    dropped = False
    if buf[pos] == 0x30:
        pos += 1
    else:
        while _is_digit(buf, pos, end):
            if significant < 18:
                digits = digits * 10 + (buf[pos] - 0x30)
                significant += 1
            else:
                dropped = True
            pos += 1
    integral = True
    if pos < end and buf[pos] == 0x2E:
        integral = False
        pos += 1
        if not _is_digit(buf, pos, end):
            return 0.0, pos, False, 0
        while _is_digit(buf, pos, end):
            d = buf[pos] - 0x30
            if digits == 0 and d == 0:
                exponent -= 1
            elif significant < 18:
                digits = digits * 10 + d
                significant += 1
                exponent -= 1
            else:
                dropped = True
            pos += 1
    if pos < end and (buf[pos] == 0x65 or buf[pos] == 0x45):
        integral = False
        pos += 1
        negative_exponent = pos < end and buf[pos] == 0x2D
        if pos < end and (buf[pos] == 0x2D or buf[pos] == 0x2B):
            pos += 1
        if not _is_digit(buf, pos, end):
            return 0.0, pos, False, 0
        x = 0
        while _is_digit(buf, pos, end):
            if x < 100_000:
                x = x * 10 + (buf[pos] - 0x30)
            pos += 1
        exponent += -x if negative_exponent else x
    if not dropped:
        if integral:  # float(int(text)): int64 to double rounds to nearest; -0 is the integer 0
            value = np.float64(digits)
            form = INTEGRAL_PAIR if digits <= _TWO53 else INEXACT_PAIR
            return -value if negative and digits != 0 else value, pos, True, form
        if digits <= _TWO53 and -22 <= exponent <= 22:  # exact operands: one correctly rounded operation
            value = np.float64(digits)
            value = value * _POW10[exponent] if exponent >= 0 else value / _POW10[-exponent]
            return -value if negative else value, pos, True, 0
    n = pos - start
    if n > MAX_NUMBER_BYTES:
        return 0.0, pos, False, 0
    for i in range(n):
        scratch[i] = buf[start + i]
    scratch[n] = 0
    base = scratch.ctypes.data
    value = _strtod(base, end_pointer.ctypes.data)
    return value, pos, end_pointer[0] == base + np.uint64(n) and np.isfinite(value), INEXACT_PAIR if integral else 0


class WantedPaths(NamedTuple):
    """The paths whose values a caller keeps and the paths that lead to them (``a`` and ``a.b`` for ``a.b.c``), as
    an open-addressing table over their UTF-8 text (FNV-1a of the whole path), probed once per distinct path a
    batch meets (``slots`` empty: every path is kept).  A path in neither holds nothing wanted at any depth."""

    slots: np.ndarray  # int32 [power of two, or 0]: path index, or -1
    hash: np.ndarray  # uint64 [paths]
    start: np.ndarray  # int64 [paths]: where path i starts in ``text``
    length: np.ndarray  # int64 [paths]
    text: np.ndarray  # uint8: the paths, one after another
    kept: np.ndarray  # bool [paths]: a wanted path (else only one leading to some)


@numba.njit(cache=True, _nrt=False)
def _wanted_index(wanted, path, w):
    """The index of ``path[:w]`` among ``wanted``'s paths (wanted or leading to one), or -1."""
    return find_text(wanted.slots, wanted.hash, wanted.text, wanted.start, wanted.length, path, 0, w)


def _leading_paths(name: str) -> list[str]:
    """The paths that lead to ``name``: ``a`` and ``a.b`` for ``a.b.c`` (none for a name that is not a path)."""
    try:
        segments = split(name)
    except ValueError:
        return []
    return [join(*segments[:i]) for i in range(1, len(segments))]


@functools.lru_cache(maxsize=8)
def wanted_paths(names: frozenset[str] | None) -> WantedPaths:
    """The table of ``names`` (None: every path kept); cached, as a source's set is the same object batch after
    batch."""
    if names is None:
        return WantedPaths(np.zeros(0, np.int32), np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                           np.zeros(0, np.uint8), np.zeros(0, np.bool_))
    leading = {p for n in names for p in _leading_paths(n)} - set(names)
    paths = [*names, *sorted(leading)]
    encoded = [n.encode("utf-8", "surrogatepass") for n in paths]
    length = np.array([len(b) for b in encoded], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64) if encoded else np.zeros(0, np.int64)
    size = 1
    while size < 2 * len(encoded) + 1:
        size *= 2
    slots = np.full(size, -1, np.int32)
    hashes = np.zeros(len(encoded), np.uint64)
    text = np.frombuffer(b"".join(encoded), np.uint8) if encoded else np.zeros(0, np.uint8)
    file_texts(slots, hashes, text, start, length, 0)
    kept = np.zeros(len(encoded), np.bool_)
    kept[:len(names)] = True
    return WantedPaths(slots, hashes, start, length, text, kept)


@numba.njit(cache=True, _nrt=False)
def _number_checked(buf, pos, end, scratch, end_pointer):
    """(pos after the number at ``pos``, ok): what :func:`_number` says of it, without its value where its form
    proves it finite (no exponent, at most 300 bytes: under 10**300); else :func:`_number` reads it."""
    start = pos
    if pos < end and buf[pos] == 0x2D:
        pos += 1
    if not _is_digit(buf, pos, end):
        return pos, False
    if buf[pos] == 0x30:
        pos += 1
    else:
        while _is_digit(buf, pos, end):
            pos += 1
    if pos < end and buf[pos] == 0x2E:
        pos += 1
        if not _is_digit(buf, pos, end):
            return pos, False
        while _is_digit(buf, pos, end):
            pos += 1
    if (pos < end and (buf[pos] == 0x65 or buf[pos] == 0x45)) or pos - start > 300:
        value, pos, good, form = _number(buf, start, end, scratch, end_pointer)
        return pos, good
    return pos, True


@numba.njit(cache=True, _nrt=False)
def _value_checked(buf, pos, end, scratch, end_pointer):
    """(pos after the scalar value at ``pos``, ok): checked as the walk checks what it writes (:func:`_string`,
    the literals, :func:`_number_checked`), nothing converted: a value no one wants."""
    c = buf[pos]
    if c == _QUOTE:
        length, pos, good = _string(buf, pos + 1, end)
        return pos, good
    if c == 0x74:
        return pos + 4, _literal(buf, pos, end, _TRUE)
    if c == 0x66:
        return pos + 5, _literal(buf, pos, end, _FALSE)
    if c == 0x6E:
        return pos + 4, _literal(buf, pos, end, _NULL)
    return _number_checked(buf, pos, end, scratch, end_pointer)


#: Keys of one object a skipped subtree checks for duplicates pairwise; an object with more is walked as any other.
SKIP_OBJECT_KEYS = 16
_SKIPPED, _REFUSED, _TOO_WIDE = 0, 1, 2


@numba.njit(cache=True, _nrt=False)
def _skip(buf, pos, e, depth, length, max_name_bytes, scratch, end_pointer, kinds, lens, kstart, klen, kbase):
    """Check the object or array at ``pos`` (at nesting ``depth``, its path ``length`` bytes long) that holds no
    wanted path, without interning its keys: (pos after it, ``_SKIPPED``), or ``_REFUSED`` where the walk of
    :func:`_decode_json` would not prove the record, or ``_TOO_WIDE`` (``pos`` unchanged) for an object of more
    than ``SKIP_OBJECT_KEYS`` keys, which the walk then reads.

    It checks what that walk checks: the grammar, strings and numbers as in :func:`_string` and
    :func:`_number_checked`, the nesting depth, every key's path length (escaped as ``wire.paths`` escapes it) and
    that no key is empty or twice in one object (here by comparing the raw keys of the object, pairwise).  Its
    loop repeats the walk's grammar on purpose: without the walk's interning and pairs, in a kernel of its own.
    """
    start = pos
    base = depth
    if depth == MAX_JSON_DEPTH:
        return pos, _REFUSED
    kinds[depth] = _OBJECT if buf[pos] == _OPEN_OBJECT else _ARRAY
    lens[depth] = length
    kbase[depth] = 0
    nkeys = 0
    depth += 1
    pos += 1
    fresh = True
    while True:
        pos = _space(buf, pos, e)
        if pos >= e:
            return pos, _REFUSED
        c = buf[pos]
        top = depth - 1
        closing = _CLOSE_OBJECT if kinds[top] == _OBJECT else _CLOSE_ARRAY
        if c == closing:
            depth -= 1
            pos += 1
            nkeys = kbase[top]
            if depth == base:
                return pos, _SKIPPED
            fresh = False
            continue
        if not fresh:
            if c != _COMMA:
                return pos, _REFUSED
            pos = _space(buf, pos + 1, e)
            if pos >= e:
                return pos, _REFUSED
            c = buf[pos]
        fresh = False
        w = lens[top]
        if kinds[top] == _OBJECT:
            if c != _QUOTE:
                return pos, _REFUSED
            key = pos + 1
            q = key
            w += 1  # the separating dot (a skipped container is never the top object)
            if q < e and buf[q] == 0x24:
                w += 1
            wide = False
            while q < e:
                b = buf[q]
                if b == _QUOTE or b == _BACKSLASH or b < 0x20:
                    break
                if b >= 0x80:
                    wide = True
                if b == 0x2E:
                    w += 1
                w += 1
                q += 1
            if q >= e or buf[q] != _QUOTE or q == key or w > max_name_bytes:
                return pos, _REFUSED
            n = q - key
            if wide and not utf8_ok(buf, key, n):
                return pos, _REFUSED
            first = kbase[top]
            if nkeys - first == SKIP_OBJECT_KEYS:
                return start, _TOO_WIDE
            for k in range(first, nkeys):
                if klen[k] == n and same_bytes(buf, kstart[k], buf, key, n):
                    return pos, _REFUSED
            kstart[nkeys], klen[nkeys] = key, n
            nkeys += 1
            pos = _space(buf, q + 1, e)
            if pos >= e or buf[pos] != _COLON:
                return pos, _REFUSED
            pos = _space(buf, pos + 1, e)
            if pos >= e:
                return pos, _REFUSED
            c = buf[pos]
        if c == _OPEN_OBJECT or c == _OPEN_ARRAY:
            if depth == MAX_JSON_DEPTH:
                return pos, _REFUSED
            kinds[depth] = _OBJECT if c == _OPEN_OBJECT else _ARRAY
            lens[depth] = w
            kbase[depth] = nkeys
            depth += 1
            pos += 1
            fresh = True
            continue
        pos, good = _value_checked(buf, pos, e, scratch, end_pointer)
        if not good:
            return pos, _REFUSED


@numba.njit(cache=True, _nrt=False)
def _walk(buf, starts, ends, todo, max_name_bytes, wanted, filtered, done, rec, attr, op, kind, number, sstart, slen,
          table, parent, owner, keep, holds, kstart, klen, kbase, text, path, scratch, end_pointer, kinds, ids, lens,
          serials):
    """The walk of :func:`_decode_json` over every record, in the room it allocated (no allocation here, so no
    reference counting: with it, every array passed to a helper is increfed and decrefed, an atomic operation
    each, which cost more than the bytes read).  Returns (pairs written, names, bytes of their text, full)."""
    n = len(starts)
    used = 0
    n_names = 0
    serial = 0
    mask = len(table.slots) - 1
    m = 0
    full = False
    for r in range(n):
        s, e = starts[r], ends[r]
        if not todo[r] or e - s < 2 or buf[s] != _OPEN_OBJECT:
            continue
        m0 = m
        ok = False
        depth = 1
        kinds[0], ids[0], lens[0], serials[0] = _OBJECT, -1, 0, serial
        serial += 1
        pos = s + 1
        fresh = True  # just after an opening bracket
        while True:
            pos = _space(buf, pos, e)
            if pos >= e:
                break
            c = buf[pos]
            top = depth - 1
            closing = _CLOSE_OBJECT if kinds[top] == _OBJECT else _CLOSE_ARRAY
            if c == closing:
                depth -= 1
                pos += 1
                if depth == 0:
                    ok = _space(buf, pos, e) == e
                    break
                fresh = False
                continue
            if not fresh:
                if c != _COMMA:
                    break
                pos = _space(buf, pos + 1, e)
                if pos >= e:
                    break
                c = buf[pos]
            fresh = False
            if kinds[top] == _OBJECT:  # a key: its path, interned
                if c != _QUOTE:
                    break
                pid = ids[top]
                w = lens[top]
                if w > 0:
                    path[w] = 0x2E
                    w += 1
                segment = w
                key = pos + 1
                q = key
                wide = False
                if q < e and buf[q] == 0x24:  # a leading $ (metadata's sigil)
                    path[w] = _BACKSLASH
                    w += 1
                while q < e and w <= max_name_bytes:
                    b = buf[q]
                    if b == _QUOTE or b == _BACKSLASH or b < 0x20:
                        break
                    if b >= 0x80:
                        wide = True
                    if b == 0x2E:
                        path[w] = _BACKSLASH
                        w += 1
                    path[w] = b
                    w += 1
                    q += 1
                if q >= e or buf[q] != _QUOTE or q == key or w > max_name_bytes:
                    break
                if wide and not utf8_ok(buf, key, q - key):
                    break
                h = fnv1a((FNV_OFFSET ^ np.uint64(pid + 1)) * FNV_PRIME, path, segment, w)
                slot = np.int64(h & np.uint64(mask))
                aid = -1
                while table.slots[slot] >= 0:
                    cand = table.slots[slot]
                    if (table.hash[cand] == h and parent[cand] == pid and table.length[cand] == w
                            and same_bytes(text, table.start[cand] + segment, path, segment, w - segment)):
                        aid = cand
                        break
                    slot = (slot + 1) & mask
                if aid < 0:
                    if n_names == len(table.start) or used + w > len(text):
                        full = True
                        break
                    for i in range(w):
                        text[used + i] = path[i]
                    table.start[n_names], table.length[n_names], table.hash[n_names] = used, w, h
                    table.slots[slot] = n_names
                    parent[n_names] = pid
                    if filtered:
                        found = _wanted_index(wanted, path, w)
                        keep[n_names] = found >= 0 and wanted.kept[found]
                        holds[n_names] = found >= 0
                    aid = n_names
                    n_names += 1
                    used += w
                if owner[aid] == serials[top]:  # a duplicate key
                    break
                owner[aid] = serials[top]
                pos = _space(buf, q + 1, e)
                if pos >= e or buf[pos] != _COLON:
                    break
                pos = _space(buf, pos + 1, e)
                if pos >= e:
                    break
                c = buf[pos]
                vid, vlen = aid, w
            else:  # an array's element: the array's path
                vid, vlen = ids[top], lens[top]
            if c == _OPEN_OBJECT or c == _OPEN_ARRAY:
                if not holds[vid]:  # nothing wanted inside: checked, not interned
                    pos, status = _skip(buf, pos, e, depth, vlen, max_name_bytes, scratch, end_pointer, kinds, lens,
                                        kstart, klen, kbase)
                    if status == _SKIPPED:
                        continue
                    if status == _REFUSED:
                        break
                if depth == MAX_JSON_DEPTH:
                    break
                kinds[depth] = _OBJECT if c == _OPEN_OBJECT else _ARRAY
                ids[depth], lens[depth], serials[depth] = vid, vlen, serial
                serial += 1
                depth += 1
                pos += 1
                fresh = True
                continue
            if not keep[vid]:  # a path no one wants: the value checked as below, not written
                pos, good = _value_checked(buf, pos, e, scratch, end_pointer)
                if not good:
                    break
                continue
            form = 0
            if c == _QUOTE:
                length, after, good = _string(buf, pos + 1, e)
                if not good:
                    break
                kind[m], number[m], sstart[m], slen[m] = KIND_STRING, np.nan, pos + 1, length
                pos = after
            elif c == 0x74:
                if not _literal(buf, pos, e, _TRUE):
                    break
                kind[m], number[m], sstart[m], slen[m] = KIND_BOOL, 1.0, 0, -1
                pos += 4
            elif c == 0x66:
                if not _literal(buf, pos, e, _FALSE):
                    break
                kind[m], number[m], sstart[m], slen[m] = KIND_BOOL, 0.0, 0, -1
                pos += 5
            elif c == 0x6E:  # null: no pair
                if not _literal(buf, pos, e, _NULL):
                    break
                pos += 4
                continue
            else:
                value, pos, good, form = _number(buf, pos, e, scratch, end_pointer)
                if not good:
                    break
                kind[m], number[m], sstart[m], slen[m] = KIND_NUMBER, value, 0, -1
            rec[m], attr[m], op[m] = r, vid, form
            m += 1
        if full:
            m = m0
            break
        if ok:
            done[r] = True
        else:
            m = m0
    return m, n_names, used, full


@numba.njit(cache=True, nogil=True)
def _decode_json(buf, starts, ends, todo, max_names, names_capacity, max_name_bytes, wanted):
    """Decode every record ``todo`` marks that the kernel proves (module docstring); leave the others.

    Returns per record whether it was decoded; the pairs; the names' text and
    each attribute id's name (start, length) in it, ids numbered by first
    appearance in the pairs; and whether the table of ``max_names`` names or
    their ``names_capacity`` bytes were full (then the caller retries with
    more room).  ``wanted`` (:class:`WantedPaths`): a value at another path is checked, not written.
    Names are interned as (parent path, escaped key), so that a
    key costs a hash of its own bytes whatever its depth; every key's path
    is interned, also one that holds an object, so that a key met twice in
    one object (the same path, the same object number) is seen.  An object
    or array whose path leads to no wanted path is checked by :func:`_skip`
    instead, its keys not interned.
    """
    n = len(starts)
    done = np.zeros(n, np.bool_)
    pairs = empty_pairs(len(buf) // 2 + 1)  # a value takes 2 bytes at least (a digit and a comma)
    rec, attr, op, kind, number, sstart, slen = pairs
    table = name_table(max_names)
    parent = np.empty(max_names, np.int32)
    owner = np.full(max_names, -1, np.int64)  # the object that last had each path as a key
    filtered = len(wanted.slots) > 0
    keep = np.ones(max_names, np.bool_)  # per path: whether its values are written
    holds = np.ones(max_names, np.bool_)  # per path: whether it is or leads to a wanted path (else skipped)
    kstart = np.empty(MAX_JSON_DEPTH * SKIP_OBJECT_KEYS, np.int64)  # the keys of the objects _skip is in
    klen = np.empty(MAX_JSON_DEPTH * SKIP_OBJECT_KEYS, np.int64)
    kbase = np.empty(MAX_JSON_DEPTH, np.int64)
    text = np.empty(names_capacity, np.uint8)
    path = np.empty(max_name_bytes + 2, np.uint8)  # the path being read (escaping writes 2 bytes per check)
    scratch = np.empty(MAX_NUMBER_BYTES + 1, np.uint8)
    end_pointer = np.zeros(1, np.uint64)
    kinds = np.empty(MAX_JSON_DEPTH, np.int8)  # per open object or array: which it is,
    ids = np.empty(MAX_JSON_DEPTH, np.int32)  # its path's name (-1: the top),
    lens = np.empty(MAX_JSON_DEPTH, np.int64)  # its path's length in ``path``,
    serials = np.empty(MAX_JSON_DEPTH, np.int64)  # and an object's number
    m, n_names, used, full = _walk(buf, starts, ends, todo, max_name_bytes, wanted, filtered, done, rec, attr, op,
                                   kind, number, sstart, slen, table, parent, owner, keep, holds, kstart, klen, kbase,
                                   text, path, scratch, end_pointer, kinds, ids, lens, serials)
    renamed = np.full(n_names, -1, np.int32)  # ids by first appearance in the pairs (the per-record path's order)
    order = np.empty(n_names, np.int64)
    k = 0
    for i in range(m):
        a = attr[i]
        if renamed[a] < 0:
            renamed[a] = k
            order[k] = a
            k += 1
        attr[i] = renamed[a]
    return done, first_pairs(pairs, m), text[:used], table.start[order[:k]], table.length[order[:k]], full


def decode_json(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, todo: np.ndarray,
                wanted: frozenset[str] | None = None) -> tuple[np.ndarray, Pairs, list[str]]:
    """The records ``buf[starts[i]:ends[i]]`` that ``todo`` marks and the kernel proves, decoded: (which, their
    pairs in record order, the attribute names the pairs' ids index).  ``wanted``: only the pairs of these paths
    (None: all); the records proved are the same either way."""
    table = wanted_paths(wanted)
    max_names, capacity = 1024, 1 << 16
    while True:
        done, pairs, text, nstart, nlen, full = _decode_json(buf, starts, ends, todo, max_names, capacity,
                                                             MAX_ATTRIBUTE_BYTES, table)
        if not full:
            break
        max_names, capacity = max_names * 4, capacity * 4
    raw = text.tobytes()
    return done, pairs, [raw[a:a + n].decode("utf-8") for a, n in zip(nstart.tolist(), nlen.tolist())]
