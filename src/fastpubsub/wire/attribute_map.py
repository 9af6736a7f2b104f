"""The ``event`` part of notifications in Avro, written for a batch of records by one numba kernel.

A notification in Avro ends with its event's attribute map (``wire/schemas/event.avsc``: a map of
``["long", "double", "string", "boolean"]``).  For fastpubsub's own Avro event that is the input's bytes; for a
producer's registered record or a JSON event the per-record path (``services.events.encode.notification_attributes``)
decodes the record in Python (fastavro or orjson, then ``wire.paths.flatten``) and writes the map with fastavro: a
Python object per leaf and per pair, most of the produce stage (``python -m benchmarks.processor.notification_parts``).  :func:`attribute_maps` instead decodes the batch's records again
with the decoders' kernels (every leaf: ``wire.avro_program``, ``wire.json_kernel``), which also say which numbers
were integers in the input (``avro_binary.INTEGRAL_PAIR``: the long branch, not the double), and writes each map in
one pass over the pairs.

The bytes are the per-record path's, which stays the one definition (tests compare the two): the same entries in the
same order, a registered record's repeated path (an array's) as ``path[0]``, ``path[1]``...
(``registered.indexed_attributes``), a JSON event's as one string, the JSON text of the list of its values
(``codecs.encode_attributes``).  A record the decoders' kernels do not prove, an integer beyond 2**53 (the float64
column cannot hold it), a non-finite double, a JSON list holding a non-integral number (Python's shortest ``repr``
of a double is left to Python), or a generated ``path[i]`` that could meet a name of the record ending with ``]``:
None, and the caller takes the per-record path.
"""

from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from fastpubsub.engine import KIND_BOOL, KIND_NUMBER, KIND_STRING

from .avro_binary import INEXACT_PAIR, INTEGRAL_PAIR, empty_pairs
from .event_decoder import concatenated, decode_registered_avro
from .json_kernel import decode_json
from .registered import RegisteredDecoders

_LONG, _DOUBLE, _STRING, _BOOLEAN = 0, 1, 2, 3  # the union's branches
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_TRUE, _FALSE = np.frombuffer(b"true", np.uint8), np.frombuffer(b"false", np.uint8)


@numba.njit(cache=True, inline="always")
def _long(out, at, v):
    """Avro long ``v`` (zig-zag, then base-128 varint) written at ``at``: the position after it."""
    z = (np.uint64(v) << np.uint64(1)) ^ np.uint64(v >> 63)
    while z > np.uint64(0x7F):
        out[at] = np.uint8((z & np.uint64(0x7F)) | np.uint64(0x80))
        z >>= np.uint64(7)
        at += 1
    out[at] = np.uint8(z)
    return at + 1


@numba.njit(cache=True, inline="always")
def _decimal(out, at, v):
    """The decimal text of int64 ``v`` (``str(int)``) written at ``at``: the position after it."""
    if v < 0:
        out[at] = 0x2D
        at += 1
        u = np.uint64(-(v + 1)) + np.uint64(1)  # no overflow at the int64 minimum
    else:
        u = np.uint64(v)
    n = 1
    t = u
    while t >= np.uint64(10):
        t //= np.uint64(10)
        n += 1
    for i in range(n - 1, -1, -1):
        out[at + i] = 0x30 + np.int64(u % np.uint64(10))
        u //= np.uint64(10)
    return at + n


@numba.njit(cache=True, inline="always")
def _u_escape(out, at, unit):
    """``\\uXXXX`` (lowercase hex, as ``json.dumps`` writes it) at ``at``."""
    out[at], out[at + 1] = 0x5C, 0x75
    for i in range(4):
        out[at + 2 + i] = _HEX[(unit >> (12 - 4 * i)) & 0xF]
    return at + 6


@numba.njit(cache=True, inline="always")
def _json_string(out, at, buf, s, n):
    """``json.dumps`` of a string the JSON kernel read (valid UTF-8, no quote, backslash or control character):
    quoted, every character beyond ``~`` as ``\\u`` escapes (UTF-16 units)."""
    out[at] = 0x22
    at += 1
    i = s
    while i < s + n:
        c = np.int64(buf[i])
        if c < 0x7F:
            out[at] = c
            at += 1
            i += 1
            continue
        if c < 0x80:
            cp, w = c, 1
        elif c < 0xE0:
            cp, w = c & 0x1F, 2
        elif c < 0xF0:
            cp, w = c & 0x0F, 3
        else:
            cp, w = c & 0x07, 4
        for j in range(1, w):
            cp = (cp << 6) | (np.int64(buf[i + j]) & 0x3F)
        i += w
        if cp >= 0x10000:
            cp -= 0x10000
            at = _u_escape(out, at, 0xD800 | (cp >> 10))
            at = _u_escape(out, at, 0xDC00 | (cp & 0x3FF))
        else:
            at = _u_escape(out, at, cp)
    out[at] = 0x22
    return at + 1


@numba.njit(cache=True, nogil=True)
def _attribute_maps(offsets, attr, op, kind, number, number_bytes, sstart, slen, buf, take, as_list, name_pool, name_start,
                    name_len, bracket, capacity):
    """Per record ``r`` that ``take`` marks (its pairs ``offsets[r]:offsets[r + 1]``), its attribute map written
    into one buffer; ``as_list[r]``: a repeated name is one JSON list (a JSON event), else ``name[i]`` each.

    Returns the buffer, each record's (start, end) in it and whether it was written (module docstring: else the
    per-record path), and whether ``capacity`` bytes were too few (the caller retries with more).
    """
    n = len(offsets) - 1
    out = np.empty(capacity, np.uint8)
    start = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    done = np.zeros(n, np.bool_)
    count = np.zeros(len(name_start), np.int64)  # per name, its pairs in the record being written
    index = np.zeros(len(name_start), np.int64)  # ... and how many of them are written
    at = 0
    for r in range(n):
        if not take[r]:
            continue
        p0, p1 = offsets[r], offsets[r + 1]
        ok = True
        repeated = False
        ends_in_bracket = False
        bound = 16
        for p in range(p0, p1):
            a = attr[p]
            count[a] += 1
            repeated = repeated or count[a] > 1
            ends_in_bracket = ends_in_bracket or bracket[a]
            if kind[p] == KIND_NUMBER:
                ok = ok and op[p] != INEXACT_PAIR and np.isfinite(number[p])
            bound += name_len[a] + 48 + (6 * slen[p] if kind[p] == KIND_STRING else 0)
        if repeated:
            if as_list[r]:
                for p in range(p0, p1):  # a list's double would need Python's repr
                    if count[attr[p]] > 1 and kind[p] == KIND_NUMBER and op[p] != INTEGRAL_PAIR:
                        ok = False
            else:
                ok = ok and not ends_in_bracket  # ``a[0]`` written for ``a`` could be another field's name
        if ok and at + bound > capacity:
            return out, start, end, done, True
        if ok:
            start[r] = at
            entries = 0
            for p in range(p0, p1):
                if not as_list[r] or index[attr[p]] == 0:
                    entries += 1
                index[attr[p]] += 1
            for p in range(p0, p1):
                index[attr[p]] = 0
            if entries:
                at = _long(out, at, entries)
            for p in range(p0, p1):
                a = attr[p]
                c = count[a]
                if as_list[r] and c > 1:
                    i = index[a]
                    index[a] += 1
                    if i > 0:
                        continue  # written with the first
                    at = _long(out, at, name_len[a])
                    out[at:at + name_len[a]] = name_pool[name_start[a]:name_start[a] + name_len[a]]
                    at += name_len[a]
                    out[at] = 2 * _STRING
                    body = at + 11  # the text after room for its length, moved once the length is known
                    w = body
                    out[w] = 0x5B
                    w += 1
                    first = True
                    for q in range(p, p1):
                        if attr[q] != a:
                            continue
                        if not first:
                            out[w], out[w + 1] = 0x2C, 0x20
                            w += 2
                        first = False
                        if kind[q] == KIND_STRING:
                            w = _json_string(out, w, buf, sstart[q], slen[q])
                        elif kind[q] == KIND_BOOL:
                            word = _TRUE if number[q] != 0 else _FALSE
                            out[w:w + len(word)] = word
                            w += len(word)
                        else:
                            w = _decimal(out, w, np.int64(number[q]))
                    out[w] = 0x5D
                    w += 1
                    at = _long(out, at + 1, w - body)
                    out[at:at + w - body] = out[body:w].copy()
                    at += w - body
                    continue
                if c > 1:  # name[i]
                    i = index[a]
                    index[a] += 1
                    digits = 1
                    t = i
                    while t >= 10:
                        t //= 10
                        digits += 1
                    at = _long(out, at, name_len[a] + 2 + digits)
                    out[at:at + name_len[a]] = name_pool[name_start[a]:name_start[a] + name_len[a]]
                    at += name_len[a]
                    out[at] = 0x5B
                    at = _decimal(out, at + 1, i)
                    out[at] = 0x5D
                    at += 1
                else:
                    at = _long(out, at, name_len[a])
                    out[at:at + name_len[a]] = name_pool[name_start[a]:name_start[a] + name_len[a]]
                    at += name_len[a]
                k = kind[p]
                if k == KIND_STRING:
                    out[at] = 2 * _STRING
                    at = _long(out, at + 1, slen[p])
                    out[at:at + slen[p]] = buf[sstart[p]:sstart[p] + slen[p]]
                    at += slen[p]
                elif k == KIND_BOOL:
                    out[at] = 2 * _BOOLEAN
                    out[at + 1] = 1 if number[p] != 0 else 0
                    at += 2
                elif op[p] == INTEGRAL_PAIR:
                    out[at] = 2 * _LONG
                    at = _long(out, at + 1, np.int64(number[p]))
                else:
                    out[at] = 2 * _DOUBLE
                    out[at + 1:at + 9] = number_bytes[8 * p:8 * p + 8]  # little-endian, as Avro's double
                    at += 9
            out[at] = 0  # the end of the map's blocks
            at += 1
            end[r] = at
            done[r] = True
        for p in range(p0, p1):
            count[attr[p]] = 0
            index[attr[p]] = 0
    return out, start, end, done, False


def attribute_maps(values: Sequence[bytes], registered: RegisteredDecoders | None = None) -> list[bytes | None]:
    """Per value (a JSON event, or a record ``registered`` handles), its notification's Avro ``event`` part, the
    bytes of ``codecs.encode_attributes`` on the per-record path; None where that path must write it (module
    docstring)."""
    n = len(values)
    if not n:
        return []
    buf, starts, ends = concatenated(values)
    lengths = ends - starts
    status = np.zeros(n, bool)  # taken by a kernel
    names: list[str] = []
    pairs = empty_pairs(0)
    as_list = np.zeros(n, bool)
    nonempty = lengths > 0
    as_list[nonempty] = buf[starts[nonempty]] == ord("{")
    if as_list.any():
        done, pairs, names = decode_json(buf, starts, ends, as_list)
        status |= done
        names = list(names)
    if registered is not None:
        framed = np.ones(n, np.int8)  # decode_registered_avro's status: 1 slow, 0 taken
        buf, pairs = decode_registered_avro(buf, starts, ends, registered, None, framed, names, pairs)
        status |= framed == 0
    if not status.any():
        return [None] * n
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(pairs.rec, minlength=n), out=offsets[1:])
    encoded = [name.encode("utf-8") for name in names] or [b""]
    name_len = np.fromiter((len(b) for b in encoded), np.int64, len(encoded))
    name_start = np.cumsum(name_len) - name_len
    name_pool = np.frombuffer(b"".join(encoded) or b"\0", np.uint8).copy()
    bracket = np.fromiter((b[-1:] == b"]" for b in encoded), bool, len(encoded))
    number = np.ascontiguousarray(pairs.number, "<f8")
    if not buf.flags.writeable:  # (one compiled version: with registered records it is a writable concatenation)
        buf = buf.copy()
    capacity = int(lengths[status].sum()) * 2 + 64 * n + 1024
    while True:
        out, start, end, done, full = _attribute_maps(offsets, pairs.attr, pairs.op, pairs.kind, number,
                                                      number.view(np.uint8), pairs.start, pairs.length, buf, status,
                                                      as_list, name_pool, name_start, name_len, bracket, capacity)
        if not full:
            break
        capacity *= 4
    raw = out[:int(end.max())].tobytes()
    return [raw[a:b] if d else None for a, b, d in zip(start.tolist(), end.tolist(), done.tolist())]

