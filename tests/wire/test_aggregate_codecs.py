"""Aggregate subscriptions on pubsub.subscriptions: text, JSON and Avro forms, and the errors that dead-letter them."""

from __future__ import annotations

import json

import pytest

from fastpubsub.aggregates import parse_subscription
from fastpubsub.wire import codecs
from fastpubsub.wire.codecs import AggregateDecodeError, AggregateSubscription, decode_any_subscription

TEXT = 'min(per) over stock where risk between 20 and 60 and sector = "tech"'


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_an_encoded_subscription_decodes_to_the_same_spec(fmt):
    sub = AggregateSubscription("alice", parse_subscription(TEXT))
    value = codecs.encode_aggregate_subscription(sub, fmt)
    assert decode_any_subscription(value) == sub
    assert codecs.is_aggregate_subscription(value)


def test_the_text_and_the_json_form_travel_in_the_aggregate_field():
    spec = parse_subscription(TEXT)
    for definition in (TEXT, spec.to_json(), json.dumps(spec.to_json())):
        value = json.dumps({"subscriber": "bob", "aggregate": definition}).encode()
        assert decode_any_subscription(value) == AggregateSubscription("bob", spec)
    join = "join orders o, shipments s on o.order_id = s.order_id where o.amount > 100"
    assert decode_any_subscription(json.dumps({"subscriber": "c", "aggregate": join}).encode()).spec == \
        parse_subscription(join)


@pytest.mark.parametrize("obj, reason", [
    ({"subscriber": "a", "aggregate": "min(per) over stock where risk between 9 and 1"}, "above range high"),
    ({"subscriber": "a", "aggregate": "median(per) over stock where risk between 1 and 9"}, "median"),
    ({"subscriber": "a", "aggregate": 42}, "text or JSON form"),
    ({"subscriber": "", "aggregate": TEXT}, "subscriber must be a non-empty string"),
    ({"subscriber": "a", "aggregate": TEXT, "valid_until": 5}, "unknown aggregate subscription field"),
    ({"subscriber": "a", "aggregate": {"kind": "aggregate", "table": "t", "fn": "min", "value": "y",
                                       "range": {"attribute": "x", "low": float("nan"), "high": 1}}}, "NaN"),
])
def test_a_bad_aggregate_subscription_says_why(obj, reason):
    value = json.dumps(obj).encode()
    assert codecs.is_aggregate_subscription(value)
    with pytest.raises(AggregateDecodeError, match=reason):
        decode_any_subscription(value)


def test_plain_subscriptions_still_decode_as_plain():
    plain = codecs.Subscription("a", [("x", "=", 1)])
    for fmt in ("avro", "json"):
        value = codecs.encode_subscription(plain, fmt)
        assert not codecs.is_aggregate_subscription(value)
        assert decode_any_subscription(value).predicates == [("x", "=", 1)]
    with pytest.raises(codecs.DecodeError) as info:
        decode_any_subscription(b'{"subscriber": "a", "predicates": []}')
    assert not isinstance(info.value, AggregateDecodeError)


def test_a_truncated_avro_aggregate_subscription_is_an_aggregate_error():
    value = codecs.encode_aggregate_subscription(AggregateSubscription("a", parse_subscription(TEXT)))
    with pytest.raises(AggregateDecodeError, match="invalid Avro"):
        decode_any_subscription(value[:-3])
