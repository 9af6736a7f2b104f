"""Avro binary primitives shared by the batch decoders of events and subscriptions.

Both decoders walk the Confluent wire format (a zero byte, a 4-byte schema id,
then the Avro body) in numba, and hand whatever they cannot prove well-formed
to fastavro's per-record path, so every primitive here answers "ok" only
when fastavro would read the same value, and otherwise leaves the verdict to
it.  The scalar union (long, double, string, boolean) is the value type of an
event attribute and of a predicate alike (``wire/schemas/``).

The primitives read once per pair (varint, block count, name, scalar) are
inlined into the kernels (``inline="always"``): a call per read would cost
the decoders more than the reads themselves.  Names are hashed and compared
by the engine's byte-string helpers (``fnv1a``, ``same_bytes``), the one copy
the engine's string constants and every decoder share.  numba checks a cached
kernel against its own source file only: after editing a primitive here, clear
the cache (``pubsub warmup --clear``) so that the decoders take the change.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from fastpubsub.engine import FNV_OFFSET, fnv1a, same_bytes


@numba.njit(cache=True, inline="always")
def varint(buf, pos, end):
    """Zigzag varint (Avro int/long) at ``pos``: (value, new pos, ok)."""
    result = np.uint64(0)
    shift = np.uint64(0)
    for i in range(10):
        if pos >= end:
            return np.int64(0), pos, False
        b = np.uint64(buf[pos])
        pos += 1
        if i == 9 and b > np.uint64(1):  # more than 64 bits: leave it to fastavro's verdict
            return np.int64(0), pos, False
        result |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            value = np.int64(result >> np.uint64(1)) ^ -np.int64(result & np.uint64(1))
            return value, pos, True
        shift += np.uint64(7)
    return np.int64(0), pos, False


@numba.njit(cache=True)
def utf8_ok(buf, start, n):
    """Strict UTF-8 (as Python's decoder: no overlongs, surrogates or code points > U+10FFFF)."""
    i = start
    end = start + n
    while i < end:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif c == 0xE0:
            need, lo, hi = 2, 0xA0, 0xBF
        elif 0xE1 <= c <= 0xEC or 0xEE <= c <= 0xEF:
            need, lo, hi = 2, 0x80, 0xBF
        elif c == 0xED:
            need, lo, hi = 2, 0x80, 0x9F
        elif c == 0xF0:
            need, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= c <= 0xF3:
            need, lo, hi = 3, 0x80, 0xBF
        elif c == 0xF4:
            need, lo, hi = 3, 0x80, 0x8F
        else:
            return False
        if i + need >= end:
            return False
        b = buf[i + 1]
        if b < lo or b > hi:
            return False
        for j in range(2, need + 1):
            b = buf[i + j]
            if b < 0x80 or b > 0xBF:
                return False
        i += need + 1
    return True


@numba.njit(cache=True, inline="always")
def block_count(buf, pos, end):
    """Item count of the next block of an Avro map at ``pos``: (count, new pos, ok); a count of 0 ends the map.

    A negative count is followed by the block's size in bytes, which a reader
    that walks the items skips.
    """
    count, pos, ok = varint(buf, pos, end)
    if ok and count < 0:
        count = -count
        _, pos, ok = varint(buf, pos, end)
    return count, pos, ok


@numba.njit(cache=True, inline="always")
def name_string(buf, pos, end, max_bytes):
    """An Avro string of 1 to ``max_bytes`` bytes of strict UTF-8 at ``pos``: (length, pos of its first byte, ok)."""
    n, pos, ok = varint(buf, pos, end)
    return n, pos, ok and 0 < n <= max_bytes and pos + n <= end and utf8_ok(buf, pos, n)


@numba.njit(cache=True, inline="always")
def attribute_name(buf, pos, end, max_bytes):
    """An attribute name at ``pos`` (:func:`name_string` not starting with NUL, which the engine reserves)."""
    n, pos, ok = name_string(buf, pos, end, max_bytes)
    return n, pos, ok and buf[pos] != 0


@numba.njit(cache=True, inline="always")
def scalar(buf, pos, end):
    """The scalar union (long, double, string, boolean) at ``pos``: (kind, number, string start and length, new pos, ok).

    Kinds are the engine's (0 number, 1 string, 2 boolean); a string is the
    slice ``buf[start:start + length]`` with number NaN, anything else has
    length -1.  A boolean byte other than 0 or 1 is not ok: fastavro reads any
    non-zero byte as true, so its per-record path decides.
    """
    branch, pos, ok = varint(buf, pos, end)
    if ok:
        if branch == 0:
            v, pos, ok = varint(buf, pos, end)
            return 0, np.float64(v), np.int64(0), np.int64(-1), pos, ok
        if branch == 1 and pos + 8 <= end:
            return 0, buf[pos:pos + 8].view(np.float64)[0], np.int64(0), np.int64(-1), pos + 8, True
        if branch == 2:
            n, pos, ok = varint(buf, pos, end)
            if ok and n >= 0 and pos + n <= end and utf8_ok(buf, pos, n):
                return 1, np.nan, pos, n, pos + n, True
        if branch == 3 and pos < end and buf[pos] <= 1:
            return 2, np.float64(buf[pos]), np.int64(0), np.int64(-1), pos + 1, True
    return 0, np.nan, np.int64(0), np.int64(-1), pos, False


@numba.njit(cache=True, nogil=True)
def gather_bytes(buf, starts, lengths):
    """Concatenate ``buf[starts[i]:starts[i]+lengths[i]]`` (length < 0: empty) with Arrow offsets."""
    n = len(starts)
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + max(lengths[i], 0)
    out = np.empty(offsets[n], np.uint8)
    for i in range(n):
        o = offsets[i]
        s = starts[i]
        for j in range(max(lengths[i], 0)):
            out[o + j] = buf[s + j]
    return offsets, out


@numba.njit(cache=True)
def schema_id(buf, start, end):
    """The schema id of the Confluent-framed value ``buf[start:end]``, or -1 if it is not framed so."""
    if end - start < 5 or buf[start] != 0:
        return np.int64(-1)
    return (np.int64(buf[start + 1]) << 24) | (np.int64(buf[start + 2]) << 16) | (np.int64(buf[start + 3]) << 8) \
        | np.int64(buf[start + 4])


class Pairs(NamedTuple):
    """Decoded (attribute, value) pairs as columns, each value a scalar (:func:`scalar`)."""

    rec: np.ndarray  # int32: index of the input record
    attr: np.ndarray  # int32: attribute id (the index of its name)
    op: np.ndarray  # int8: operator code (a predicate's); an event's: its number's form (INTEGRAL_PAIR...) or 0
    kind: np.ndarray  # int8: the engine's kind
    number: np.ndarray  # float64: the value of a number or boolean; NaN for a string
    start: np.ndarray  # int64: where a string starts in the buffer
    length: np.ndarray  # int32: its length in bytes; -1 for a number or boolean


#: ``Pairs.op`` of an event's number that its input wrote as an integer (an Avro int or long, a timestamp of whole
#: milliseconds, a JSON number without ``.``, ``e`` or ``E``: a Python ``int`` on the per-record path) and that
#: ``number`` holds exactly; a notification's attribute map writes it as a long (``wire.attribute_map``).
INTEGRAL_PAIR = 2
#: ``Pairs.op`` of such an integer that ``number`` cannot hold exactly (beyond 2**53): its notification takes the
#: per-record path.
INEXACT_PAIR = 3


@numba.njit(cache=True, nogil=True)
def empty_pairs(capacity):
    """Room for ``capacity`` :class:`Pairs`."""
    return Pairs(np.empty(capacity, np.int32), np.empty(capacity, np.int32), np.empty(capacity, np.int8),
                 np.empty(capacity, np.int8), np.empty(capacity, np.float64), np.empty(capacity, np.int64),
                 np.empty(capacity, np.int32))


@numba.njit(cache=True)
def first_pairs(pairs, m):
    """The first ``m`` of ``pairs`` (views)."""
    return Pairs(pairs.rec[:m], pairs.attr[:m], pairs.op[:m], pairs.kind[:m], pairs.number[:m], pairs.start[:m],
                 pairs.length[:m])


@numba.njit(cache=True)
def copy_pairs(pairs):
    """Copies of ``pairs`` (of a part of a larger room, so that the rest of the room may be freed)."""
    return Pairs(pairs.rec.copy(), pairs.attr.copy(), pairs.op.copy(), pairs.kind.copy(), pairs.number.copy(),
                 pairs.start.copy(), pairs.length.copy())


class NameTable(NamedTuple):
    """The distinct names met in ``buf``, each a slice of it, interned by their FNV-1a hash.

    ``slots`` is an open-addressing table (-1: free) of twice the capacity
    rounded up to a power of two, so it stays at most half full and a probe
    always ends on a free slot; fixed sizes keep a kernel's loop free of
    reallocation (its caller retries with more room when the table is full).
    """

    slots: np.ndarray  # int32 [power of two]: name index, or -1
    start: np.ndarray  # int64 [capacity]: where name i starts in buf
    length: np.ndarray  # int32 [capacity]
    hash: np.ndarray  # uint64 [capacity]


@numba.njit(cache=True)
def name_table(capacity):
    """An empty :class:`NameTable` for ``capacity`` names."""
    size = 1
    while size < 2 * capacity:
        size *= 2
    return NameTable(np.full(size, -1, np.int32), np.empty(capacity, np.int64), np.empty(capacity, np.int32),
                     np.empty(capacity, np.uint64))


@numba.njit(cache=True, inline="always")
def intern_name(buf, pos, n, table, count):
    """Index of the name ``buf[pos:pos+n]`` in ``table``, which holds ``count`` names, adding it if new.

    Returns (index, new count); index -1 if the table is full.
    """
    h = fnv1a(FNV_OFFSET, buf, pos, pos + n)
    mask = len(table.slots) - 1
    slot = np.int64(h & np.uint64(mask))
    while table.slots[slot] >= 0:
        cand = table.slots[slot]
        if table.hash[cand] == h and table.length[cand] == n and same_bytes(buf, table.start[cand], buf, pos, n):
            return cand, count
        slot = (slot + 1) & mask
    if count == len(table.start):
        return -1, count
    table.start[count] = pos
    table.length[count] = n
    table.hash[count] = h
    table.slots[slot] = count
    return count, count + 1


@numba.njit(cache=True, inline="always")
def interned_key(buf, pos, end, max_bytes, table, count):
    """The key of an Avro map entry at ``pos``, an :func:`attribute_name` interned in ``table`` (``count`` names):
    (its index, -1 if the table is full; the new count; pos after it; ok)."""
    n, pos, ok = attribute_name(buf, pos, end, max_bytes)
    if not ok:
        return -1, count, pos, False
    aid, count = intern_name(buf, pos, n, table, count)
    return aid, count, pos + n, True
