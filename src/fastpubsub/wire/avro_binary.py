"""Avro binary primitives shared by the batch decoders of events and subscriptions.

Both decoders walk the Confluent wire format (a zero byte, a 4-byte schema id,
then the Avro body) in numba, and hand whatever they cannot prove well-formed
to fastavro's per-record path, so every primitive here answers "ok" only
when fastavro would read the same value, and otherwise leaves the verdict to
it.  The scalar union (long, double, string, boolean) is the value type of an
event attribute and of a predicate alike (``wire/schemas/``).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
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




@numba.njit(cache=True)
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


@numba.njit(cache=True)
def intern_name(buf, pos, n, slots, mask, name_start, name_len, name_hash, count):
    """Index of the name ``buf[pos:pos+n]`` in an open-addressing table (FNV-1a), adding it if new.

    ``count`` names are held; returns (index, new count), index -1 if the
    table is full.  Its caller keeps the table at most half full, so a probe
    always ends on a free slot.
    """
    h = np.uint64(14695981039346656037)
    for i in range(pos, pos + n):
        h = (h ^ np.uint64(buf[i])) * np.uint64(1099511628211)
    slot = np.int64(h & np.uint64(mask))
    while slots[slot] >= 0:
        cand = slots[slot]
        if name_hash[cand] == h and name_len[cand] == n:
            same = True
            ns = name_start[cand]
            for i in range(n):
                if buf[ns + i] != buf[pos + i]:
                    same = False
                    break
            if same:
                return cand, count
        slot = (slot + 1) & mask
    if count == len(name_start):
        return -1, count
    name_start[count] = pos
    name_len[count] = n
    name_hash[count] = h
    slots[slot] = count
    return count, count + 1
