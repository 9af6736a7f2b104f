"""valid_from / valid_until on the wire and in the state; the valid_until event header."""

from __future__ import annotations

import io

import fastavro
import numpy as np
import pytest

from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.validity.event_store import ValidEventStore
from fastpubsub.wire import codecs
from fastpubsub.wire.codecs import framing
from fastpubsub.wire.codecs import DecodeError, Subscription
from fastpubsub.services.events.subscriptions import SubscriptionState
from fastpubsub.services.events.valid_events import valid_until_of


@pytest.mark.parametrize("fmt", codecs.FORMATS)
def test_valid_from_round_trips(fmt):
    sub = Subscription("alice", [("price", "<", 3)], valid_until=2_000, valid_from=1_000)
    assert codecs.decode_subscription(codecs.encode_subscription(sub, fmt)) == sub


def test_values_written_before_valid_from_existed_still_decode():
    old = framing._PREVIOUS["subscription"][0]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, old, {"subscriber": "bob", "valid_until": 5,
                                          "predicates": [{"attribute": "a", "operator": "=", "value": 1}]})
    value = b"\x00\x00\x00\x00\x01" + buf.getvalue()
    assert codecs.decode_subscription(value) == Subscription("bob", [("a", "=", 1)], valid_until=5, valid_from=None)
    with pytest.raises(DecodeError, match="invalid Avro subscription"):
        codecs.decode_subscription(value[:-1])
    assert codecs.decode_subscription(b'{"subscriber": "c", "predicates": [["a", "=", 1]]}').valid_from is None


@pytest.mark.parametrize("doc, reason", [
    ('"valid_from": 5, "valid_until": 5', "must be before valid_until"),
    ('"valid_from": "soon"', "valid_from must be null or milliseconds"),
    ('"valid_from": true', "valid_from must be null or milliseconds"),
    ('"valid_until": 99999999999999999999', "64-bit"),
])
def test_bad_intervals_are_rejected(doc, reason):
    with pytest.raises(DecodeError, match=reason):
        codecs.decode_subscription(('{"subscriber": "c", "predicates": [["a", "=", 1]], ' + doc + "}").encode())


def test_state_matches_only_inside_the_interval():
    s = SubscriptionState()
    s.apply(b"1", codecs.encode_subscription(Subscription("a", [("x", "=", 1)], valid_until=200, valid_from=100)))
    s.apply(b"2", codecs.encode_subscription(Subscription("a", [("x", "=", 1)], valid_from=150)))
    assert [s.valid_at(1, t) for t in (99, 100, 199, 200)] == [False, True, True, False]
    mask = s.valid_mask(np.array([1, 2, 1, 2]), np.array([120, 120, 160, 160]))
    assert mask.tolist() == [True, False, True, True]
    assert s.expire(200) == 1 and sorted(s.subscribers) == [2] and 2 in s.matcher


@pytest.mark.parametrize("headers, want", [
    (None, None), ([], None), ([("other", b"1")], None), ([("valid_until", b"1700000000000")], 1_700_000_000_000),
    ([("valid_until", b"-5")], -5),
])
def test_valid_until_header(headers, want):
    assert valid_until_of(headers) == want


@pytest.mark.parametrize("headers, reason", [
    ([("valid_until", b"soon")], "not a decimal integer"), ([("valid_until", None)], "not a decimal integer"),
    ([("valid_until", b"1 ")], "signed 64-bit"), ([("valid_until", b"99999999999999999999")], "signed 64-bit"),
    ([("valid_until", b"1"), ("valid_until", b"2")], "at most one"),
])
def test_bad_valid_until_headers_are_rejected(headers, reason):
    with pytest.raises(DecodeError, match=reason):
        valid_until_of(headers)


def test_the_store_is_bounded_in_bytes_and_survives_its_arrays():
    store = ValidEventStore(max_events=1000, max_bytes=1000)
    events = [{"a": i, "s": "x" * 50} for i in range(20)]
    payloads = [codecs.encode_event(e) for e in events]
    store.add(EventBatch.from_dicts(events), [f"e{i}" for i in range(20)], np.arange(20) + 100, 0,
              payloads=payloads)
    assert store.stats()["bytes"] <= 1000 < sum(len(p) for p in payloads) + 20 * 40
    kept = store.match_bulk(SubscriptionState().apply_records([(b"1", codecs.encode_subscription(
        Subscription("a", [("a", ">=", 0)])))]).added)
    assert kept.event_ids == [f"e{i}" for i in range(20 - len(store), 20)]  # the soonest to expire went first
    assert store.stats()["evicted"] == 20 - len(store) > 0
    again = ValidEventStore()
    again.load_arrays(store.to_arrays())
    assert again.match_bulk(SubscriptionState().apply_records([(b"1", codecs.encode_subscription(
        Subscription("a", [("a", ">=", 0)])))]).added).payloads == kept.payloads
