"""Batch decoding of event values into columnar arrays, without a Python object per pair.

Decoding Avro events one by one with fastavro builds a dict and a Python
object per attribute; the statistics job and the processor decode millions.  :func:`decode_events` takes a list of raw values and returns the
engine's columnar format directly: a numba kernel walks the Confluent wire
format + Avro map encoding of ``wire/schemas/event.avsc`` for every record it can
prove well-formed, and hands every other record (JSON, other schema ids,
malformed Avro, duplicate map keys, non-canonical booleans, attribute names
longer than ``codecs.MAX_ATTRIBUTE_BYTES``, ...) to
``wire.codecs.decode_event``.  So for every record the result is, by
construction, what ``codecs.decode_event`` says: the same event, or a
:class:`~wire.codecs.DecodeError` with the same reason.

Strings stay UTF-8 bytes in one buffer until the caller asks for them:
:meth:`DecodedEvents.event_batch` makes Python strings (the engine's format),
:meth:`DecodedEvents.string_array` an Arrow array without any (the Spark
statistics job counts with Arrow).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numba
import numpy as np

from fastpubsub.engine import EventBatch
from fastpubsub.engine import KIND_BOOL, KIND_NUMBER, KIND_STRING

from .avro_binary import gather_bytes, intern_name, utf8_ok, varint
from .avro_binary import schema_id as framed_schema_id
from .codecs import MAX_ATTRIBUTE_BYTES, SCHEMA_IDS, DecodeError, decode_event

_EVENT_SCHEMA_ID = SCHEMA_IDS["event"]
_FAST, _SLOW = 0, 1


# --- the kernel -----------------------------------------------------------------


@numba.njit(cache=True)
def _decode_avro(buf, starts, ends, schema_id, max_names, max_name_bytes):
    """Decode every well-formed Avro event; mark the others for the slow path.

    Returns per record a status, and per pair: record index, attribute id,
    kind, number, string start and length in ``buf``; each attribute id's name
    (start, length) in ``buf``; and whether more than ``max_names`` distinct
    names were met (then the caller retries with more room: fixed-size tables
    keep this loop free of reallocation, which numba does not hoist out of it).
    """
    n = len(starts)
    status = np.full(n, _SLOW, np.int8)
    cap = len(buf) // 3 + 1  # a map entry takes at least 3 bytes (key length, key, union index...)
    rec = np.empty(cap, np.int32)
    attr = np.empty(cap, np.int32)
    kind = np.empty(cap, np.int8)
    number = np.empty(cap, np.float64)
    sstart = np.empty(cap, np.int64)
    slen = np.empty(cap, np.int32)
    # attribute dictionary: open addressing on FNV-1a hashes of the key bytes, at most half full
    size = 1
    while size < 2 * max_names:
        size *= 2
    mask = size - 1
    slots = np.full(size, -1, np.int32)
    name_start = np.empty(max_names, np.int64)
    name_len = np.empty(max_names, np.int32)
    name_hash = np.empty(max_names, np.uint64)
    seen = np.full(max_names, -1, np.int64)  # last record that carried each attribute (duplicate keys)
    n_names = 0
    m = 0
    for r in range(n):
        s, e = starts[r], ends[r]
        if framed_schema_id(buf, s, e) != schema_id:
            continue
        pos = s + 5
        m0 = m
        ok = True
        while ok:
            count, pos, ok = varint(buf, pos, e)
            if not ok or count == 0:
                break
            if count < 0:
                count = -count
                _, pos, ok = varint(buf, pos, e)  # block size in bytes
                if not ok:
                    break
            for _j in range(count):
                klen, pos, ok = varint(buf, pos, e)
                if not ok or klen <= 0 or klen > max_name_bytes or pos + klen > e or not utf8_ok(buf, pos, klen):
                    ok = False
                    break
                if buf[pos] == 0:  # a name starting with NUL is reserved: the per-record path says so
                    ok = False
                    break
                aid, n_names = intern_name(buf, pos, klen, slots, mask, name_start, name_len, name_hash, n_names)
                if aid < 0:
                    return status, rec[:0], attr[:0], kind[:0], number[:0], sstart[:0], slen[:0], name_start[:0], name_len[:0], True
                pos += klen
                if seen[aid] == r:  # duplicate key: fastavro keeps the last value, in the first's place
                    ok = False
                    break
                seen[aid] = r
                branch, pos, ok = varint(buf, pos, e)
                if not ok:
                    break
                rec[m] = r
                attr[m] = aid
                slen[m] = -1
                sstart[m] = 0
                if branch == 0:
                    v, pos, ok = varint(buf, pos, e)
                    kind[m] = 0
                    number[m] = np.float64(v)
                elif branch == 1:
                    if pos + 8 > e:
                        ok = False
                        break
                    kind[m] = 0
                    number[m] = buf[pos:pos + 8].view(np.float64)[0]
                    pos += 8
                elif branch == 2:
                    ln, pos, ok = varint(buf, pos, e)
                    if not ok or ln < 0 or pos + ln > e or not utf8_ok(buf, pos, ln):
                        ok = False
                        break
                    kind[m] = 1
                    number[m] = np.nan
                    sstart[m] = pos
                    slen[m] = ln
                    pos += ln
                elif branch == 3:
                    if pos >= e or buf[pos] > 1:  # fastavro reads any non-zero byte as true: let it decide
                        ok = False
                        break
                    kind[m] = 2
                    number[m] = np.float64(buf[pos])
                    pos += 1
                else:
                    ok = False
                if not ok:
                    break
                m += 1
        if ok and pos == e:
            status[r] = _FAST
        else:
            m = m0
    return status, rec[:m], attr[:m], kind[:m], number[:m], sstart[:m], slen[:m], name_start[:n_names], name_len[:n_names], False


# --- the result -------------------------------------------------------------------


@dataclass
class DecodedEvents:
    """Events decoded from ``n`` input values, in input order, plus the bad ones.

    ``rows[i]`` is the input index of event ``i``; ``errors`` maps the input
    index of every bad value to its reason.  Pairs are CSR by event
    (``offsets``); strings are UTF-8 slices of ``buffer`` (``string_start``,
    ``string_length``; length -1 for non-strings).
    """

    rows: np.ndarray  # int64 [events]
    errors: dict[int, str]
    attribute_names: tuple[str, ...]
    offsets: np.ndarray  # int64 [events + 1]
    attributes: np.ndarray  # int32 [pairs]
    kinds: np.ndarray  # int8 [pairs]
    numbers: np.ndarray  # float64 [pairs]
    string_start: np.ndarray  # int64 [pairs]
    string_length: np.ndarray  # int32 [pairs]
    buffer: np.ndarray  # uint8

    def __len__(self) -> int:
        return len(self.rows)

    def event_batch(self) -> EventBatch:
        """The engine's format (one Python ``str`` per string value)."""
        is_string = self.kinds == KIND_STRING
        offsets, data = gather_bytes(self.buffer, self.string_start[is_string], self.string_length[is_string])
        raw = data.tobytes()
        strings = tuple(raw[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()))
        return EventBatch(self.attribute_names, self.offsets, self.attributes, self.kinds, self.numbers, strings)

    def string_array(self):
        """Per pair, its string value as an Arrow ``string`` array (null for numbers and booleans)."""
        import pyarrow as pa

        offsets, data = gather_bytes(self.buffer, self.string_start, self.string_length)
        valid = pa.py_buffer(np.packbits(self.string_length >= 0, bitorder="little").tobytes())
        return pa.LargeStringArray.from_buffers(len(self.kinds), pa.py_buffer(offsets), pa.py_buffer(data), valid).cast(pa.string())


# --- entry point -------------------------------------------------------------------


def decode_events(values: Sequence[bytes | None]) -> DecodedEvents:
    """Decode raw event values (Avro wire format or JSON); bad ones go to ``errors``."""
    lengths = np.fromiter((len(v) if v else 0 for v in values), np.int64, len(values))
    buf = np.frombuffer(b"".join(v for v in values if v), np.uint8)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    max_names = 1024
    while True:
        status, rec, attr, kind, number, sstart, slen, nstart, nlen, overflow = _decode_avro(
            buf, starts, ends, _EVENT_SCHEMA_ID, max_names, MAX_ATTRIBUTE_BYTES)
        if not overflow:
            break
        max_names *= 4
    raw = buf.tobytes() if len(nstart) else b""
    names = [raw[a:a + n].decode("utf-8") for a, n in zip(nstart.tolist(), nlen.tolist())]
    slow = np.flatnonzero(status == _SLOW)
    errors: dict[int, str] = {}
    if len(slow):
        index = {name: i for i, name in enumerate(names)}
        extra = bytearray()
        s_rec, s_attr, s_kind, s_num, s_start, s_len = [], [], [], [], [], []
        for r in slow.tolist():
            try:
                event = decode_event(values[r])
            except DecodeError as exc:
                errors[r] = str(exc)
                continue
            for a, v in event.items():
                s_rec.append(r)
                s_attr.append(index.setdefault(a, len(index)))
                if isinstance(v, bool):
                    s_kind.append(KIND_BOOL), s_num.append(float(v)), s_start.append(0), s_len.append(-1)
                elif isinstance(v, str):
                    b = v.encode("utf-8")
                    s_kind.append(KIND_STRING), s_num.append(np.nan), s_start.append(len(buf) + len(extra)), s_len.append(len(b))
                    extra += b
                else:
                    s_kind.append(KIND_NUMBER), s_num.append(float(v)), s_start.append(0), s_len.append(-1)
        names = list(index)
        if extra:
            buf = np.concatenate([buf, np.frombuffer(bytes(extra), np.uint8)])
        # merge: fast and slow pairs never share a record, so a stable sort by record keeps each event's order
        rec = np.concatenate([rec, np.array(s_rec, np.int32)])
        order = np.argsort(rec, kind="stable")
        rec = rec[order]
        attr = np.concatenate([attr, np.array(s_attr, np.int32)])[order]
        kind = np.concatenate([kind, np.array(s_kind, np.int8)])[order]
        number = np.concatenate([number, np.array(s_num, np.float64)])[order]
        sstart = np.concatenate([sstart, np.array(s_start, np.int64)])[order]
        slen = np.concatenate([slen, np.array(s_len, np.int32)])[order]
    good = np.ones(len(values), bool)
    if errors:
        good[list(errors)] = False
    rows = np.flatnonzero(good).astype(np.int64)
    per_record = np.bincount(rec, minlength=len(values)) if len(values) else np.zeros(0, np.int64)
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(per_record[rows], out=offsets[1:])
    return DecodedEvents(rows, errors, tuple(names), offsets, attr, kind, number, sstart, slen, buf)
