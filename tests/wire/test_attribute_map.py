"""A notification's Avro event part written by the kernel (wire/attribute_map.py): byte for byte the per-record path's.

The oracle is that path (``services.events.encode.notification_attributes``): fastavro's map writer over
``registered.indexed_attributes`` of a registered record's pairs, or over ``codecs.decode_event`` of a JSON event.
Records come from the decoders' own generators (random registered schemas and records, JSON texts from a grammar);
the kernel may leave a record to that path (None), never write other bytes.
"""

from __future__ import annotations

import io
import json
import math
import random

import fastavro
import pytest
from confluent_kafka import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.services.events.encode import Encode, notification_attributes
from fastpubsub.services.events.match import Matched
from fastpubsub.wire import codecs
from fastpubsub.wire.attribute_map import attribute_maps
from fastpubsub.wire.codecs import DecodeError

from tests.wire.test_avro_program import _datum, _decoders, _escaped_key, _framed, _simple, draw_batch, schemas
from tests.wire.test_json_kernel import _record as json_records


def _oracle(value: bytes, registered) -> bytes | str:
    try:
        return notification_attributes(value, "avro", registered)
    except DecodeError as exc:
        return str(exc)


def _agree(values: list[bytes], registered) -> list[bytes | None]:
    """Assert that every part the kernel writes is the per-record path's; the kernel's parts."""
    got = attribute_maps(values, registered)
    assert len(got) == len(values)
    for value, part in zip(values, got):
        if part is not None:
            assert part == _oracle(value, registered), value
    return got


def _plain(pairs) -> bool:
    """No value the kernel leaves to the per-record path: an integer beyond 2**53, a non-finite double, a repeated
    path beside a name ending with ``]``."""
    names = [a for a, _ in pairs]
    if len(set(names)) < len(names) and any(a.endswith("]") for a in names):
        return False
    return all(not isinstance(v, (int, float)) or isinstance(v, bool)
               or (math.isfinite(v) and (not isinstance(v, int) or abs(v) <= 2**53)) for _, v in pairs)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_registered_records_part_is_the_per_record_paths(data):
    schema, datums, values = draw_batch(data)
    decoders = _decoders(schema)
    got = _agree(values, decoders)
    if _simple(schema):  # the kernel does the work: it takes every record it can prove
        for i, v in enumerate(values):
            try:
                pairs = decoders.pairs(v)
            except DecodeError:
                continue
            if i < len(datums) and v == _framed(schema, datums[i]) and not _escaped_key(datums[i]) and _plain(pairs):
                assert got[i] is not None, (schema, v)


@settings(max_examples=200, deadline=None)
@given(st.lists(json_records(), min_size=1, max_size=6))
def test_a_json_events_part_is_the_per_record_paths(values):
    _agree(values, None)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_json_events_and_registered_records_in_one_batch_are_each_written_as_alone(data):
    schema = data.draw(schemas)
    decoders = _decoders(schema)
    values = [_framed(schema, _datum(schema, data.draw)) for _ in range(data.draw(st.integers(0, 3)))]
    values += data.draw(st.lists(json_records(), max_size=3))
    values = data.draw(st.permutations(values))
    got = _agree(values, decoders)
    assert got == [attribute_maps([v], decoders)[0] for v in values]


# --- what each value becomes --------------------------------------------------------------------------------------

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "n", "type": "long"}, {"name": "x", "type": "double"}, {"name": "f", "type": "float"},
    {"name": "ok", "type": "boolean"}, {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["OK", "FAIL"]}},
    {"name": "labels", "type": {"type": "map", "values": ["null", "long", "string"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "nums", "type": {"type": "array", "items": ["long", "double"]}}]}


_MAP = fastavro.parse_schema({"type": "map", "values": ["long", "double", "string", "boolean"]})  # event.avsc's


def _reading(**change):
    return {"n": 7, "x": 2.0, "f": 0.5, "ok": True, "tags": ["a", "é"], "status": "FAIL", "labels": {"k": 1, "j": "v"},
            "at": 1_700_000_000_123_000, "day": 19_000, "nums": [1, 2.5], **change}


@pytest.mark.parametrize("change, taken", [
    ({}, True), ({"at": 1_700_000_000_123_456}, True), ({"tags": [], "nums": []}, True), ({"labels": {}}, True),
    ({"n": -2**53}, True), ({"x": -0.0}, True),
    ({"n": -2**53 - 1}, False), ({"n": -(2**63)}, False),  # beyond what the float64 column holds exactly
    ({"x": float("nan")}, False), ({"f": float("inf")}, False),
    ({"labels": {"a]": 1}}, False),  # beside the generated tags[0]...: Python's dict decides
    ({"labels": {"a]": 1}, "tags": ["a"], "nums": []}, True)])
def test_every_kind_of_field_is_written_as_the_per_record_path_writes_it(change, taken):
    decoders = _decoders(SCHEMA)
    part = _agree([_framed(SCHEMA, _reading(**change))], decoders)[0]
    assert (part is not None) == taken
    if not change:  # integers are longs, doubles doubles; an array's elements path[0], path[1]...
        event = fastavro.schemaless_reader(io.BytesIO(part), _MAP)
        assert event == {"n": 7, "x": 2.0, "f": 0.5, "ok": True, "tags[0]": "a", "tags[1]": "é", "status": "FAIL",
                         "labels.k": 1, "labels.j": "v", "at": 1_700_000_000_123, "day": "2022-01-08",
                         "nums[0]": 1, "nums[1]": 2.5}
        assert type(event["n"]) is int and type(event["x"]) is float


@pytest.mark.parametrize("text, taken", [
    (b'{"a": 1, "b": {"c": [1, -2, true, "x\xc3\xa9\xf0\x9f\x98\x80"], "d": -0}}', True),
    (b'{"a": [1.5, 2]}', False),  # a list's double: Python's repr
    (b'{"a": 1.0, "b": 1e2, "c": 10000000000000000000000}', False),  # an integer beyond 2**53
    (b'{"a": 1.0, "b": 1e2, "c": 9007199254740992, "d": [], "e": {}, "f": null}', True),
    (b'{"a": "x\\"y"}', False),  # an escape: the JSON kernel leaves it
])
def test_json_events_lists_and_numbers(text, taken):
    assert (_agree([text], None)[0] is not None) == taken


def test_values_no_kernel_reads_are_left_to_the_per_record_path():
    decoders = _decoders(SCHEMA)
    cut = _framed(SCHEMA, _reading())[:-1]
    assert attribute_maps([b"", b"[1]", b"{", b'{"a": 1} x', cut], decoders) == [None] * 5
    assert attribute_maps([], decoders) == []


# --- the encode stage ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "full", "reference"])
@pytest.mark.parametrize("event_format", ["decoded", "original"])
@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_encode_gives_the_same_notifications_with_and_without_the_kernel(mode, event_format, fmt):
    decoders = _decoders(SCHEMA)
    rng = random.Random(5)
    values = [_framed(SCHEMA, _reading(n=i, x=rng.random(), tags=["t"] * (i % 3))) for i in range(6)]
    values += [json.dumps({"a": i, "b": {"c": [i, "x"]}, "d": i / 3}).encode() for i in range(6)]
    values += [codecs.encode_event({"a": i}, "avro") for i in range(3)]
    values += [_framed(SCHEMA, _reading(n=2**60)), b'{"a": [0.5, 1]}']
    groups = [(f"e{i}", v, [(i, "alice"), (100 + i, "bob")],
               None if i % 5 == 0 else Message(topic="events", partition=0, offset=i, key=None, value=v))
              for i, v in enumerate(values)]

    def run(fast: bool):
        encode = Encode(fmt, mode, event_format=event_format, registered=decoders, fast=fast)
        return [(o.topic, o.key, o.value) if hasattr(o, "topic") else o for o in encode(Matched(groups))]

    assert run(True) == run(False)
