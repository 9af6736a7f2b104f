"""Compiled registered-Avro decoding (``wire.avro_program``): the same pairs as the per-record reader, for any
schema and record; only the referenced paths when some are named; the kernel, not the fallback, does the work."""

from __future__ import annotations

import io
import json
import math
import struct

import fastavro
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.wire.avro_program import compile_schema, decode_registered
from fastpubsub.wire.codecs import MAX_ATTRIBUTE_BYTES, DecodeError
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.registered import RegisteredDecoders, RegisteredSchema

SID = 77
NATIVE = 2

# --- random schemas and records -------------------------------------------------------------------------------------

_names = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True)
_counter = iter(range(10**9))

SCALARS = ["null", "boolean", "int", "long", "float", "double", "string", "bytes",
           {"type": "long", "logicalType": "timestamp-millis"}, {"type": "long", "logicalType": "timestamp-micros"},
           {"type": "int", "logicalType": "time-millis"}, {"type": "int", "logicalType": "date"},
           {"type": "string", "logicalType": "uuid"}]


def _enum() -> st.SearchStrategy:
    return st.lists(_names, min_size=1, max_size=4, unique=True).map(
        lambda s: {"type": "enum", "name": f"E{next(_counter)}", "symbols": [x.upper() for x in s]})


def _fixed() -> st.SearchStrategy:
    return st.integers(0, 4).map(lambda n: {"type": "fixed", "name": f"F{next(_counter)}", "size": n})


def _record(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(st.tuples(_names, inner), min_size=1, max_size=6, unique_by=lambda f: f[0]).map(
        lambda fs: {"type": "record", "name": f"R{next(_counter)}", "fields": [{"name": n, "type": t} for n, t in fs]})


def _types() -> st.SearchStrategy:
    leaf = st.one_of(st.sampled_from(SCALARS), _enum(), _fixed())
    return st.recursive(leaf, lambda inner: st.one_of(
        _record(inner),
        inner.map(lambda t: {"type": "array", "items": t}),
        inner.map(lambda t: {"type": "map", "values": t}),
        inner.filter(lambda t: not isinstance(t, list) and t != "null").map(lambda t: ["null", t]),
    ), max_leaves=8)


schemas = _record(_types())


def _datum(t, draw):
    if isinstance(t, list):
        return _datum(t[1], draw) if draw(st.booleans()) else None
    if isinstance(t, str):
        t = {"type": t}
    kind, logical = t["type"], t.get("logicalType")
    if logical == "timestamp-millis" or logical == "timestamp-micros":
        return draw(st.integers(0, 2**41 * (1000 if logical.endswith("micros") else 1)))
    if logical == "time-millis":
        return draw(st.integers(0, 86_399_999))
    if logical == "date":
        return draw(st.integers(-719162, 2932896))
    if logical == "uuid":
        return str(draw(st.uuids()))
    if kind == "null":
        return None
    if kind == "boolean":
        return draw(st.booleans())
    if kind in ("int", "long"):
        return draw(st.integers(-2**31, 2**31 - 1) if kind == "int" else st.integers(-2**63, 2**63 - 1))
    if kind == "float":
        return draw(st.floats(width=32, allow_nan=False))
    if kind == "double":
        return draw(st.floats())
    if kind == "string":
        return draw(st.text(max_size=6))
    if kind == "bytes":
        return draw(st.binary(max_size=4))
    if kind == "fixed":
        return draw(st.binary(min_size=t["size"], max_size=t["size"]))
    if kind == "enum":
        return draw(st.sampled_from(t["symbols"]))
    if kind == "record":
        return {f["name"]: _datum(f["type"], draw) for f in t["fields"]}
    if kind == "array":
        return [_datum(t["items"], draw) for _ in range(draw(st.integers(0, 3)))]
    if kind == "map":
        return {draw(st.text(max_size=3)): _datum(t["values"], draw) for _ in range(draw(st.integers(0, 3)))}
    raise AssertionError(t)


def _framed(schema, datum) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return struct.pack(">bI", 0, SID) + buf.getvalue()


def _decoders(schema) -> RegisteredDecoders:
    text = json.dumps(schema)
    return RegisteredDecoders(lambda sid: RegisteredSchema("AVRO", text), NATIVE)


def _events(decoded):
    """Per input value: its (attribute, value) pairs, or the error."""
    batch = decoded.event_batch()
    strings = iter(batch.strings)
    out = {}
    for e, row in enumerate(decoded.rows.tolist()):
        pairs = []
        for j in range(batch.offsets[e], batch.offsets[e + 1]):
            k = batch.kinds[j]
            v = next(strings) if k == 1 else bool(batch.numbers[j]) if k == 2 else float(batch.numbers[j])
            pairs.append((batch.attribute_names[batch.attributes[j]], v))
        out[row] = pairs
    out.update(decoded.errors)
    return out


def _naive(decoders, value):
    try:
        pairs = decoders.pairs(value)
    except DecodeError as exc:
        return str(exc)
    return [(a, v if isinstance(v, (str, bool)) else float(v)) for a, v in pairs]


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return len(a) == len(b) and all(
        x[0] == y[0] and type(x[1]) is type(y[1]) and (x[1] == y[1] or (
            isinstance(x[1], float) and math.isnan(x[1]) and math.isnan(y[1]))) for x, y in zip(a, b))


def _kernel_status(decoders, values):
    prog, wanted = decoders.program(SID)
    buf = np.frombuffer(b"".join(values) + prog.pool, np.uint8)
    ends = np.cumsum([len(v) for v in values]).astype(np.int64)
    starts = ends - np.array([len(v) for v in values], np.int64)
    path_bytes = np.array([len(p.encode()) for p in prog.paths] or [0], np.int64)
    status, *_ = decode_registered(buf, starts, ends, SID, prog.op, prog.arg, prog.count, prog.path, prog.slow,
                                   wanted, prog.kids, prog.symbol_start, prog.symbol_length, len(buf) - len(prog.pool),
                                   len(prog.paths), prog.depth, 1024, MAX_ATTRIBUTE_BYTES, path_bytes,
                                   int(ends[-1]))
    return status


def _simple(t) -> bool:
    """No type the kernel leaves to the per-record path (maps of containers)."""
    if isinstance(t, list):
        return all(_simple(x) for x in t)
    if isinstance(t, str):
        return True
    if t["type"] == "record":
        return all(_simple(f["type"]) for f in t["fields"])
    if t["type"] == "array":
        return _simple(t["items"])
    if t["type"] == "map":
        v = t["values"]
        v = v[1] if isinstance(v, list) else v
        return isinstance(v, str) or (v["type"] not in ("record", "array", "map") and _simple(v))
    return True


def _escaped_key(datum) -> bool:
    """A map key the path rule escapes (``.``, ``\\``, a leading ``$``): the kernel leaves its record to Python."""
    if isinstance(datum, dict):
        return any(isinstance(k, str) and ("." in k or "\\" in k or k.startswith("$")) or _escaped_key(v)
                   for k, v in datum.items())
    if isinstance(datum, (list, tuple)):
        return any(_escaped_key(x) for x in datum)
    return False


# --- the properties ---------------------------------------------------------------------------------------------------


def draw_batch(data) -> tuple[dict, list, list[bytes]]:
    """A random schema, 1-4 records of it and their framed values, one of them perhaps damaged (cut short or with a
    trailing byte)."""
    schema = data.draw(schemas)
    datums = [_datum(schema, data.draw) for _ in range(data.draw(st.integers(1, 4)))]
    values = [_framed(schema, d) for d in datums]
    if data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(values) - 1))
        values[i] = values[i][:-1] if data.draw(st.booleans()) and len(values[i]) > 5 else values[i] + b"\x00"
    return schema, datums, values


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_every_record_decodes_to_the_per_record_readers_pairs(data):
    schema, datums, values = draw_batch(data)
    decoders = _decoders(schema)
    got = _events(decode_events(values, decoders))
    for i, v in enumerate(values):
        assert _same(got[i], _naive(decoders, v)), (schema, v)
    if _simple(schema):
        status = _kernel_status(decoders, values)
        for i, v in enumerate(values):
            if not isinstance(_naive(decoders, v), str) and not _escaped_key(datums[i]):
                assert status[i] == 0, (schema, v)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_only_the_referenced_paths_are_decoded(data):
    schema = data.draw(schemas)
    values = [_framed(schema, _datum(schema, data.draw)) for _ in range(3)]
    full = _decoders(schema)
    every = sorted({a for v in values if not isinstance(_naive(full, v), str) for a, _ in _naive(full, v)})
    wanted = frozenset(data.draw(st.lists(st.sampled_from(every), unique=True)) if every else []) | {"nowhere"}
    got = _events(decode_events(values, _decoders(schema), wanted))
    for i, v in enumerate(values):
        naive = _naive(full, v)
        if isinstance(naive, str):
            continue
        assert _same(got[i], [p for p in naive if p[0] in wanted]), (schema, v, wanted)


def test_a_recursive_schema_is_read_by_the_per_record_path():
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}]}
    d = _decoders(node)
    assert d.program(SID) is None
    value = _framed(node, {"v": 1, "next": {"v": 2, "next": None}})
    assert _events(decode_events([value], d))[0] == [("v", 1.0), ("next.v", 2.0)]


def test_enum_symbols_and_map_entries_come_out_by_path():
    schema = {"type": "record", "name": "O", "fields": [
        {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["OK", "FAIL"]}},
        {"name": "labels", "type": {"type": "map", "values": "string"}},
        {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "I", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}}]}
    d = _decoders(schema)
    value = _framed(schema, {"status": "FAIL", "labels": {"a": "x", "b": "y"},
                             "items": [{"sku": "s1", "qty": 2}, {"sku": "s2", "qty": 3}]})
    assert _kernel_status(d, [value])[0] == 0
    assert _events(decode_events([value, value], d))[1] == [
        ("status", "FAIL"), ("labels.a", "x"), ("labels.b", "y"), ("items.sku", "s1"), ("items.qty", 2.0),
        ("items.sku", "s2"), ("items.qty", 3.0)]


def test_compile_keeps_one_path_id_per_path():
    schema = {"type": "record", "name": "O", "fields": [
        {"name": "a", "type": ["null", "long", "string"]}, {"name": "b", "type": {"type": "array", "items": "long"}}]}
    prog = compile_schema(fastavro.parse_schema(schema), {}, MAX_ATTRIBUTE_BYTES)
    assert prog.paths == ("a", "b")


def test_more_map_entries_than_the_first_table_holds_are_all_kept():
    schema = {"type": "record", "name": "M", "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}]}
    values = [_framed(schema, {"m": {f"k{i}-{j}": i for j in range(100)}}) for i in range(5)]
    got = _events(decode_events(values, _decoders(schema)))
    assert [len(got[i]) for i in range(5)] == [100] * 5
    assert got[4][99] == ("m.k4-99", 4.0)


def test_decoding_only_what_subscriptions_reference_matches_as_decoding_everything():
    from fastpubsub.engine import Matcher
    from fastpubsub.services.events.decode import ReferencedAttributes

    schema = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": "string"},
        {"name": "customer", "type": {"type": "record", "name": "C", "fields": [
            {"name": "name", "type": "string"}, {"name": "country", "type": "string"}]}},
        {"name": "tags", "type": ["null", "string"]},
        {"name": "labels", "type": {"type": "map", "values": "long"}}]}
    values = [_framed(schema, {"id": i, "note": f"n{i}", "customer": {"name": f"c{i % 3}", "country": "FR" if i % 2 else "DE"},
                               "tags": f"t{i % 4}", "labels": {"a": i, "b": -i}}) for i in range(12)]
    m = Matcher()
    m.add(1, [("customer.country", "=", "FR")])
    m.add(2, [("customer.name", "prefix", "c1")])  # a prefix-only subscription: held apart from the index
    m.add(3, [("tags", "suffix", "3"), ("id", ">", 2)])
    m.add(4, [("labels.a", ">=", 5)])
    m.add(5, [("note", "contains", "1")])
    referenced = ReferencedAttributes(lambda: m)
    wanted = referenced()
    assert {"customer.country", "customer.name", "tags", "id", "labels.a", "note"} <= wanted
    assert "customer" not in wanted and "labels.b" not in wanted
    d = _decoders(schema)
    some = decode_events(values, d, wanted)
    assert set(some.attribute_names) <= wanted
    every = m.match_encoded(decode_events(values, d).event_batch())
    only = m.match_encoded(some.event_batch())
    assert np.array_equal(every.offsets, only.offsets) and np.array_equal(every.ids, only.ids)
    assert len(every.ids) > 0
    m.add(6, [("labels.b", "<", 0)])  # a new subscription names a new attribute: decoded from the next batch on
    assert "labels.b" in referenced()


def test_dates_are_text_and_uuids_canonical_text_whatever_form_the_producer_wrote():
    schema = {"type": "record", "name": "U", "fields": [
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}]}
    u = "12345678-9abc-def0-1234-56789abcdef0"
    forms = [u, u.upper(), u.replace("-", ""), "{" + u + "}"]
    values = [_framed(schema, {"day": day, "id": form}) for day, form in zip([0, -719162, 2932896, 19000], forms)]
    d = _decoders(schema)
    assert list(_kernel_status(d, values)) == [0, 1, 1, 1]  # other forms: Python's uuid module reads them
    got = _events(decode_events(values, d))
    assert [g[0][1] for g in got.values()] == ["1970-01-01", "0001-01-01", "9999-12-31", "2022-01-08"]
    assert {g[1] for g in got.values()} == {("id", u)}


def test_a_block_count_beyond_the_bytes_left_is_left_to_the_per_record_reader():
    schema = {"type": "record", "name": "N", "fields": [{"name": "a", "type": {"type": "array", "items": "null"}},
                                                         {"name": "n", "type": "long"}]}
    d = _decoders(schema)
    few, many = _framed(schema, {"a": [None] * 3, "n": 1}), _framed(schema, {"a": [None] * 5000, "n": 2})
    assert list(_kernel_status(d, [few, many])) == [0, 1]
    assert _events(decode_events([few, many], d)) == {0: [("n", 1.0)], 1: [("n", 2.0)]}
