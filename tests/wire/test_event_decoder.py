"""The batch event decoder agrees with codecs.decode_event on every record."""

import math
import re
import struct

import numpy as np
import pytest

from fastpubsub.workloads.fabret import PRESETS, generate_events
from fastpubsub.wire.codecs import DecodeError, decode_event, encode_event
from fastpubsub.engine import KIND_STRING
from fastpubsub.wire.event_decoder import decode_events
from tests.support.avro import avro_string, zigzag


def _avro(blocks: list[tuple[int, bytes]], schema_id: int = 2, tail: bytes = b"") -> bytes:
    """Hand-made event value: each block is (count, encoded entries); a negative count carries its size."""
    body = bytearray(b"\x00" + struct.pack(">I", schema_id))
    for count, entries in blocks:
        body += zigzag(count)
        if count < 0:
            body += zigzag(len(entries))
        body += entries
    return bytes(body + b"\x00" + tail)


def _long(k: bytes, v: int) -> bytes:
    return avro_string(k) + zigzag(0) + zigzag(v)


def _bool(k: bytes, byte: int) -> bytes:
    return avro_string(k) + zigzag(3) + bytes([byte])


def _string(k: bytes, v: bytes) -> bytes:
    return avro_string(k) + zigzag(2) + avro_string(v)


ODD_VALUES = [
    encode_event({"movie": "groundhog day", "price": 8}),
    encode_event({"s": "héllo wörld ✓ 😀", "t": True, "f": False, "big": 2**62, "neg": -(2**63), "x": -3.25}),
    encode_event({"nan": float("nan"), "inf": float("inf"), "zero": -0.0}),
    encode_event({}),
    b'{"movie": "heat", "price": 7.5, "vip": true}',
    b'{"a": 1, "a": 2}',  # duplicate JSON key: bad
    b'{"a": [1]}',  # an array: one pair per element
    b'{"c": {"a": {"b": 1}, "t": ["x", "y", {"u": true}]}, "n": null, "e": []}',  # nested: paths, null absent
    b'{"k": "10:30", "a": 1}',  # a colon in a string (the duplicate-key check parses it again)
    b'{"c": {"a": 1, "a": 2}}',  # duplicate JSON key, nested: bad
    b"{not json",
    b"",
    None,
    b"garbage",
    b"\x00\x00\x00",  # too short
    encode_event({"a": 1})[:-2],  # truncated
    encode_event({"a": 1}) + b"\x00",  # trailing byte
    b"\x00\x00\x00\x00\x01" + encode_event({"a": 1})[5:],  # subscription schema id
    _avro([(2, _long(b"a", 1) + _long(b"a", 2))]),  # duplicate Avro key: last value wins
    _avro([(1, _long(b"a", 1)), (1, _long(b"b", 2))]),  # two blocks
    _avro([(-2, _long(b"a", 5) + _string(b"b", b"x"))]),  # negative count with a byte size
    _avro([(1, _bool(b"a", 2))]),  # non-canonical boolean byte
    _avro([(1, _bool(b"a", 1))]),
    _avro([(1, _long(b"", 1))]),  # empty attribute name: bad
    _avro([(1, _long(b"\x00x", 1))]),  # attribute name starting with NUL (reserved): bad
    _avro([(1, _string(b"k", b"\xff\xfe"))]),  # invalid UTF-8 value
    _avro([(1, _long(b"\xed\xa0\x80", 1))]),  # UTF-16 surrogate in a key
    _avro([(1, _string(b"k", b"\xf0\x9f\x98"))]),  # truncated 4-byte sequence
    _avro([(1, avro_string(b"a") + zigzag(7) + b"\x00")]),  # union index out of range
    _avro([(1, avro_string(b"a") + zigzag(0) + b"\xff" * 11)]),  # varint longer than 64 bits
    _avro([(1, avro_string(b"a") + zigzag(1) + b"\x00\x00")]),  # short double
]


def _reference(values):
    events, errors = [], {}
    for i, v in enumerate(values):
        try:
            events.append((i, decode_event(v)))
        except DecodeError as exc:
            errors[i] = str(exc)
    return events, errors


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b or (type(a) in (int, float) and type(b) in (int, float) and float(a) == float(b))


def test_every_record_decodes_as_codecs_decode_event_says():
    w0 = [encode_event(e) for e in generate_events(PRESETS["W0"], 300, seed=3).to_dicts()]
    values = w0[:100] + ODD_VALUES + w0[100:] + ODD_VALUES[::-1]
    decoded = decode_events(values)
    events, errors = _reference(values)
    def addressless(d):  # fastavro names the BytesIO object in some messages
        return {i: re.sub(r"0x[0-9a-f]+", "0x…", m) for i, m in d.items()}

    assert addressless(decoded.errors) == addressless(errors)
    assert len(errors) == 2 * 18  # the bad ones of ODD_VALUES, twice
    assert decoded.rows.tolist() == [i for i, _ in events]
    got = decoded.event_batch().to_dicts()
    assert len(got) == len(events)
    for g, (_, ref) in zip(got, events):
        assert list(g) == list(ref)  # same attributes in the same order
        assert all(_same(g[k], ref[k]) for k in ref), (g, ref)


@pytest.mark.parametrize("wanted", [frozenset(), frozenset({"price", "a", "c.a.b", "c.t", "s", "nowhere"}),
                                    frozenset({"movie", "vip", "big", "x", "k"})])
def test_wanted_keeps_only_the_referenced_attributes_of_every_format(wanted):
    """Native Avro, flat and nested JSON alike: with ``wanted`` an event gives exactly its pairs named there, in
    their order, and the same records are good or bad as without it."""
    w0 = [encode_event(e) for e in generate_events(PRESETS["W0"], 50, seed=4).to_dicts()]
    values = ODD_VALUES + w0 + ODD_VALUES[::-1]
    every, some = decode_events(values), decode_events(values, wanted=wanted)
    assert some.errors == every.errors and some.rows.tolist() == every.rows.tolist()
    for whole, part in zip(every.event_batch().to_dicts(), some.event_batch().to_dicts()):
        assert list(part) == [k for k in whole if k in wanted]
        assert all(_same(part[k], whole[k]) for k in part)


def test_w0_batch_equals_the_generator_batch():
    batch = generate_events(PRESETS["W0"], 2000, seed=9)
    decoded = decode_events([encode_event(e) for e in batch.to_dicts()])
    assert not decoded.errors
    eb = decoded.event_batch()
    eb.validate()
    np.testing.assert_array_equal(eb.offsets, batch.offsets)
    assert [eb.attribute_names[a] for a in eb.attributes] == [batch.attribute_names[a] for a in batch.attributes]
    np.testing.assert_array_equal(eb.numbers, batch.numbers)


def test_string_array_has_each_pairs_string():
    values = ODD_VALUES + [encode_event({"movie": "heat", "vip": False})]
    decoded = decode_events(values)
    strings = decoded.string_array().to_pylist()
    batch = decoded.event_batch()
    text = iter(batch.strings)
    assert strings == [next(text) if k == KIND_STRING else None for k in batch.kinds.tolist()]  # pair by pair
    assert "héllo wörld ✓ 😀" in strings


@pytest.mark.parametrize("n_names", [1, 300, 5000])
def test_many_distinct_attribute_names_grow_the_dictionary(n_names):
    events = [{f"attr{(i * 7 + j) % n_names}": j for j in range(min(n_names, 5))} for i in range(n_names)]
    decoded = decode_events([encode_event(e) for e in events])
    assert decoded.event_batch().to_dicts() == events
