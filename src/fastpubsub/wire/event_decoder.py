"""Batch decoding of event values into columnar arrays, without a Python object per pair.

Decoding Avro events one by one with fastavro builds a dict and a Python
object per attribute; the statistics job and the processor decode millions.  :func:`decode_events` takes a list of raw values and returns the
engine's columnar format directly: a numba kernel walks the Confluent wire
format + Avro map encoding of ``wire/schemas/event.avsc`` for every record it can
prove well-formed, another the text of JSON records (``wire.json_kernel``),
and they hand every other record (other schema ids, malformed Avro or JSON,
duplicate keys, non-canonical booleans, JSON escapes, attribute names longer
than ``codecs.MAX_ATTRIBUTE_BYTES``, ...) to ``wire.codecs.decode_event``
(JSON, nested or flat, to ``decode_json_event``: its pairs by the path rule of
wire/paths.py, an array's values each a pair).  So for every record the result is, by
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
from fastpubsub.engine import KIND_STRING, Utf8Strings

from .avro_binary import Pairs, block_count, empty_pairs, first_pairs, gather_bytes, interned_key, name_table, scalar
from .avro_binary import schema_id as framed_schema_id
from .codecs import MAX_ATTRIBUTE_BYTES, SCHEMA_IDS, DecodeError, decode_event_pairs
from .avro_program import dates_as_text, decode_registered
from .fallback import FallbackPairs
from .json_kernel import decode_json
from .paths import escape
from .registered import RegisteredDecoders, schema_id

_EVENT_SCHEMA_ID = SCHEMA_IDS["event"]
_FAST, _SLOW = 0, 1


# --- the kernel -----------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _decode_avro(buf, starts, ends, schema_id, max_names, max_name_bytes):
    """Decode every well-formed Avro event; mark the others for the slow path.

    Returns per record a status; the pairs (:class:`~.avro_binary.Pairs`,
    strings as slices of ``buf``); each attribute id's name (start, length)
    in ``buf``; and whether more than ``max_names`` distinct
    names were met (then the caller retries with more room: fixed-size tables
    keep this loop free of reallocation, which numba does not hoist out of it).
    """
    n = len(starts)
    status = np.full(n, _SLOW, np.int8)
    cap = len(buf) // 3 + 1  # a map entry takes at least 3 bytes (key length, key, union index...)
    pairs = empty_pairs(cap)
    rec, attr, _, kind, number, sstart, slen = pairs
    names = name_table(max_names)
    seen = np.full(max_names, -1, np.int64)  # last record that carried each attribute (duplicate keys)
    n_names = 0
    m = 0
    full = False
    for r in range(n):
        s, e = starts[r], ends[r]
        if framed_schema_id(buf, s, e) != schema_id:
            continue
        pos = s + 5
        m0 = m
        ok = True
        while ok:
            count, pos, ok = block_count(buf, pos, e)
            if not ok or count == 0:
                break
            for _j in range(count):
                aid, n_names, pos, ok = interned_key(buf, pos, e, max_name_bytes, names, n_names)
                if not ok:
                    break
                full = aid < 0  # the caller retries with more room
                ok = not full and seen[aid] != r  # a duplicate key: fastavro keeps the last value, in the first's place
                if not ok:
                    break
                seen[aid] = r
                kind[m], number[m], sstart[m], slen[m], pos, ok = scalar(buf, pos, e)
                if not ok:
                    break
                rec[m] = r
                attr[m] = aid
                m += 1
        if full:
            break
        if ok and pos == e:
            status[r] = _FAST
        else:
            m = m0
    return status, first_pairs(pairs, m), names.start[:n_names], names.length[:n_names], full


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
    per_record: int = 0  # how many input values the per-record path decoded (no kernel could prove them)

    def __len__(self) -> int:
        return len(self.rows)

    def event_batch(self) -> EventBatch:
        """The engine's format, its strings kept as UTF-8 slices (``engine.Utf8Strings``: the matcher encodes,
        slices and folds them as bytes; a ``str`` is made of one only where a reader asks for it)."""
        is_string = self.kinds == KIND_STRING
        offsets, data = gather_bytes(self.buffer, self.string_start[is_string], self.string_length[is_string])
        strings = Utf8Strings(data, offsets[:-1], np.diff(offsets))
        return EventBatch(self.attribute_names, self.offsets, self.attributes, self.kinds, self.numbers, strings)

    def string_array(self):
        """Per pair, its string value as an Arrow ``string`` array (null for numbers and booleans)."""
        import pyarrow as pa

        offsets, data = gather_bytes(self.buffer, self.string_start, self.string_length)
        valid = pa.py_buffer(np.packbits(self.string_length >= 0, bitorder="little").tobytes())
        return pa.LargeStringArray.from_buffers(len(self.kinds), pa.py_buffer(offsets), pa.py_buffer(data), valid).cast(pa.string())


def decode_registered_avro(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, registered: RegisteredDecoders,
                           wanted: frozenset[str] | None, status: np.ndarray, names: list[str],
                           pairs: Pairs) -> tuple[np.ndarray, Pairs]:
    """Records in a registered Avro schema through its compiled program (``wire.avro_program``), merged into the
    native kernel's ``pairs`` and ``names`` (extended in place, like ``status``); returns the buffer the strings
    are slices of (``buf``, the programs' enum symbols, the text of dates) and the merged pairs."""
    framed = (ends - starts >= 5) & (buf[np.minimum(starts, max(len(buf) - 1, 0))] == 0) if len(buf) else \
        np.zeros(len(starts), bool)
    s = starts[framed]
    sizes = (ends - starts)[framed]
    ids = (buf[s + 1].astype(np.int64) << 24) | (buf[s + 2].astype(np.int64) << 16) \
        | (buf[s + 3].astype(np.int64) << 8) | buf[s + 4].astype(np.int64)
    programs = []
    for sid in sorted(set(ids.tolist())):
        if sid != registered.native_event_id:
            found = registered.program(sid, wanted)
            if found is not None:
                programs.append((sid, *found))
    if not programs:
        return buf, pairs
    base = len(buf)
    buf = np.concatenate([buf, *(np.frombuffer(p.pool, np.uint8) for _, p, _ in programs)])
    index = {name: i for i, name in enumerate(names)}
    merged = [pairs]
    for sid, prog, mask in programs:
        path_bytes = np.array([len(p.encode("utf-8")) for p in prog.paths] or [0], np.int64)
        max_names = 256
        while True:
            st, got, dprefix, dstart, dlen, full = decode_registered(
                buf, starts, ends, sid, prog.op, prog.arg, prog.count, prog.path, prog.slow, mask, prog.kids,
                prog.symbol_start, prog.symbol_length, base, len(prog.paths), prog.depth, max_names,
                MAX_ATTRIBUTE_BYTES, path_bytes, int(sizes[ids == sid].sum()))
            if not full:
                break
            max_names *= 4
        base += len(prog.pool)
        status[st == _FAST] = _FAST
        if not len(got.rec):
            continue
        buf, got = dates_as_text(buf, got)
        local = np.empty(len(prog.paths) + len(dprefix), np.int32)
        used = np.flatnonzero(np.bincount(got.attr, minlength=len(local)))
        keep = np.ones(len(local), bool)
        for a in used.tolist():
            if a < len(prog.paths):
                name = prog.paths[a]
            else:  # a map entry: its map is wanted, the entry maybe not
                d = a - len(prog.paths)
                name = prog.paths[dprefix[d]] + "." + buf[dstart[d]:dstart[d] + dlen[d]].tobytes().decode("utf-8")
                if wanted is not None and name not in wanted:
                    keep[a] = False
                    continue
            local[a] = index.setdefault(name, len(index))
        if not keep.all():
            got = Pairs(*(col[keep[got.attr]] for col in got))
        merged.append(got._replace(attr=local[got.attr]))
    names[:] = list(index)
    merged = [p for p in merged if len(p.rec)]
    if len(merged) <= 1:  # each kernel's pairs are in record order already
        return buf, merged[0] if merged else pairs
    rec = np.concatenate([p.rec for p in merged])
    order = np.argsort(rec, kind="stable")
    return buf, Pairs(*(np.concatenate(cols)[order] for cols in zip(*merged)))


def _merge(names: list[str], pairs: Pairs, more_names: list[str], more: Pairs) -> Pairs:
    """``more`` (attribute ids indexing ``more_names``) merged into ``pairs`` (ids indexing ``names``, which is
    extended in place); the two never share a record, so a stable sort by record keeps each record's pairs in
    order."""
    if not len(more.rec):
        return pairs
    if names:
        index = {name: i for i, name in enumerate(names)}
        local = np.array([index.setdefault(name, len(index)) for name in more_names], np.int32)
        names[:] = list(index)
        more = more._replace(attr=local[more.attr])
    else:
        names[:] = more_names
    if not len(pairs.rec):
        return more
    order = np.argsort(np.concatenate([pairs.rec, more.rec]), kind="stable")
    return Pairs(*(np.concatenate(cols)[order] for cols in zip(pairs, more)))


# --- entry point -------------------------------------------------------------------


def concatenated(values: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The values one after the other in one read-only buffer, with each one's (start, end) in it (None: empty)."""
    if None in values:
        lengths = np.fromiter((len(v) if v else 0 for v in values), np.int64, len(values))
        data = b"".join(v for v in values if v)
    else:  # (the usual batch: C-level map and join, no generator step per value)
        lengths = np.fromiter(map(len, values), np.int64, len(values))
        data = b"".join(values)
    ends = np.cumsum(lengths)
    return np.frombuffer(data, np.uint8), ends - lengths, ends


def decode_events(values: Sequence[bytes | None], registered: RegisteredDecoders | None = None,
                  wanted: frozenset[str] | None = None) -> DecodedEvents:
    """Decode raw event values (Avro wire format or JSON); bad ones go to ``errors``.  Attributes are named by the
    path rule (``wire.paths``): a field whose name has a ``.`` or starts with ``$`` (which names a record's metadata,
    ``wire.metadata``) is escaped with a backslash.

    ``wanted``: the attribute names some subscription references; every record then gives only these (a compiled
    Avro schema skips the rest unread, ``wire.avro_program``; the other decoders' pairs are dropped after the
    scan), so the matcher never spends time on a pair no predicate can test.  None: every attribute.

    ``registered``: records framed with another schema id than fastpubsub's event schema are read with the schema
    registered under it (``wire.registered``); it raises ``RegistryUnavailable`` out of here when the registry does
    not answer, since such a record is neither good nor bad yet.
    """
    event_schema_id = _EVENT_SCHEMA_ID if registered is None else registered.native_event_id
    buf, starts, ends = concatenated(values)
    lengths = ends - starts
    max_names = 1024
    while True:
        status, pairs, nstart, nlen, overflow = _decode_avro(
            buf, starts, ends, event_schema_id, max_names, MAX_ATTRIBUTE_BYTES)
        if not overflow:
            break
        max_names *= 4
    raw = buf.tobytes() if len(nstart) else b""
    names = [escape(raw[a:a + n].decode("utf-8")) for a, n in zip(nstart.tolist(), nlen.tolist())]  # keys as paths
    json_like = (status == _SLOW) & (lengths > 0)
    if json_like.any():
        json_like[json_like] = buf[starts[json_like]] == ord("{")
        if json_like.any():
            done, more, more_names = decode_json(buf, starts, ends, json_like, wanted)
            status[done] = _FAST
            pairs = _merge(names, pairs, more_names, more)
    if registered is not None:
        buf, pairs = decode_registered_avro(buf, starts, ends, registered, wanted, status, names, pairs)
    slow = np.flatnonzero(status == _SLOW)
    errors: dict[int, str] = {}
    if len(slow):
        fallback = FallbackPairs(names, len(buf))
        for r in slow.tolist():
            try:
                pairs_of = decode_event_pairs(values[r], registered)
            except DecodeError as exc:
                errors[r] = str(exc)
                continue
            for a, v in pairs_of:
                fallback.add(r, a, v)
        names = fallback.names
        buf, pairs = fallback.merged(buf, pairs)
        if wanted is not None and registered is not None:  # a subscribed field no predicate compares: said once
            for sid in {schema_id(values[r]) for r in slow.tolist() if registered.handles(values[r])}:
                registered.check_paths(sid, wanted)
    if wanted is not None and len(pairs.rec):
        keep_name = np.fromiter((name in wanted for name in names), bool, len(names))
        if not keep_name.all():  # the pairs of the other names dropped, and the names themselves
            pairs = Pairs(*(col[keep_name[pairs.attr]] for col in pairs))
            kept = np.flatnonzero(keep_name)
            renumber = np.full(len(names), -1, np.int32)
            renumber[kept] = np.arange(len(kept), dtype=np.int32)
            names = [names[i] for i in kept.tolist()]
            pairs = pairs._replace(attr=renumber[pairs.attr])
    good = np.ones(len(values), bool)
    if errors:
        good[list(errors)] = False
    rows = np.flatnonzero(good).astype(np.int64)
    per_record = np.bincount(pairs.rec, minlength=len(values)) if len(values) else np.zeros(0, np.int64)
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(per_record[rows], out=offsets[1:])
    return DecodedEvents(rows, errors, tuple(names), offsets, pairs.attr, pairs.kind, pairs.number, pairs.start,
                         pairs.length, buf, len(slow))
