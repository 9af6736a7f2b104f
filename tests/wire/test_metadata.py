"""A record's metadata as attributes (``wire.metadata``): ``$topic``, ``$key``, ``$timestamp``, ``$header.NAME``...
named so that no payload field can take them, attached only when a subscription names them (unit lane)."""

from __future__ import annotations

import json

import numpy as np
from confluent_kafka import Message
from hypothesis import given, settings, strategies as st

from fastpubsub.engine import Matcher
from fastpubsub.language import ExpressionError, format_predicates, parse
from fastpubsub.wire import codecs
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.metadata import attach, is_metadata, referenced
from fastpubsub.wire.paths import escape
from fastpubsub.services.events.decode import ReferencedAttributes

import pytest


def record(value: dict, topic="orders", partition=0, offset=0, key=b"k", headers=None, timestamp=(1, 1_000)):
    return Message(topic=topic, partition=partition, offset=offset, key=key, value=json.dumps(value).encode(),
                   headers=headers, timestamp=timestamp)


def naive(msg: Message) -> dict:
    """The oracle: the payload (names escaped) plus every metadata attribute the record has."""
    event = {escape(k): v for k, v in json.loads(msg.value()).items()}
    event.update({"$topic": msg.topic(), "$partition": msg.partition(), "$offset": msg.offset()})
    if msg.key() is not None:
        event["$key"] = msg.key().decode()
    if msg.timestamp()[0] != 0:
        event["$timestamp"] = msg.timestamp()[1]
    for k, v in msg.headers() or ():
        event["$header." + k] = v.decode()
    return event


def test_the_language_reads_metadata_names_bare_and_writes_them_back():
    text = r'$topic = "orders" and $header.content-type prefix "app" and \$price < 3 and $timestamp >= 5'
    predicates = parse(text)
    assert [p[0] for p in predicates] == ["$topic", "$header.content-type", r"\$price", "$timestamp"]
    assert parse(format_predicates(predicates)) == predicates
    with pytest.raises(ExpressionError):
        parse("$ = 1")  # a sigil alone names nothing


def test_which_names_are_metadata():
    assert referenced(["price", "$topic", r"\$topic", "$header.x", "$header.", "$other"]) == ("$header.x", "$topic")
    assert is_metadata("$key") and not is_metadata(r"\$key") and not is_metadata("$unknown")


def test_metadata_named_only_through_a_string_operator_is_attached():
    matcher = Matcher()
    matcher.add(1, [("$topic", "prefix", "tele-")])
    matcher.add(2, [("$header.x", "contains", "b"), ("$key", "suffix", "9")])
    matcher.flush()
    assert referenced(matcher.attributes.ids) == ("$header.x", "$key", "$topic")
    msgs = [record({}, topic="tele-1", key=b"k9", headers=[("x", b"abc")]), record({}, topic="orders")]
    decoded = attach(decode_events([m.value() for m in msgs]), msgs, referenced(ReferencedAttributes(lambda: matcher)()))
    assert [sorted(g.tolist()) for g in matcher.match_encoded(decoded.event_batch()).split()] == [[1, 2], []]


def test_a_payload_field_named_with_the_sigil_is_escaped_by_the_path_rule():
    for value in (json.dumps({"$topic": "mine", "$$x": 1, "plain": 2}).encode(),
                  codecs.encode_event({"$topic": "mine", "$$x": 1, "plain": 2}, "avro")):
        decoded = decode_events([value])
        assert set(decoded.attribute_names) == {r"\$topic", r"\$$x", "plain"}
        (event,) = decoded.event_batch().to_dicts()
        assert event == {r"\$topic": "mine", r"\$$x": 1, "plain": 2}


def test_metadata_is_attached_only_as_asked():
    msgs = [record({"price": 1}, key=None, headers=[("trace", b"abc"), ("trace", b"last"), ("bin", b"\xff")]),
            record({"price": 2}, topic="clicks", partition=3, offset=9, timestamp=(0, -1))]
    decoded = decode_events([m.value() for m in msgs])
    assert attach(decoded, msgs, ()) is decoded
    events = attach(decoded, msgs, ("$key", "$header.trace", "$header.bin", "$timestamp", "$topic")).event_batch()
    assert events.to_dicts() == [
        {"price": 1, "$header.trace": "last", "$timestamp": 1_000, "$topic": "orders"},  # no key; bin not UTF-8
        {"price": 2, "$key": "k", "$topic": "clicks"},  # no timestamp
    ]


METADATA = ("$topic", "$partition", "$offset", "$key", "$timestamp", "$header.a", "$header.b")
records = st.builds(
    record,
    st.dictionaries(st.sampled_from(["price", "$topic", "a"]), st.integers(-5, 5), max_size=3),
    topic=st.sampled_from(["orders", "clicks"]), partition=st.integers(0, 3), offset=st.integers(0, 10),
    key=st.one_of(st.none(), st.sampled_from([b"k1", b"k2"])),
    headers=st.one_of(st.none(), st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([b"x", b"y"])),
                                          max_size=3)),
    timestamp=st.one_of(st.just((0, -1)), st.tuples(st.just(1), st.integers(0, 10))))
subscriptions = st.lists(st.tuples(st.sampled_from(METADATA + ("price", r"\$topic")),
                                   st.sampled_from(["=", "exists", "prefix", "<"]),
                                   st.sampled_from(["orders", "k1", "x", 1, 3])), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(records, min_size=1, max_size=8), st.lists(subscriptions, min_size=1, max_size=6))
def test_matching_with_metadata_is_matching_the_records_as_dicts(msgs, subs):
    matcher, by_dicts = Matcher(), Matcher()
    for sid, preds in enumerate(subs):
        preds = [(a, op, None if op == "exists" else v) for a, op, v in preds
                 if op != "prefix" or isinstance(v, str)]
        if not preds:
            continue
        matcher.add(sid, preds)
        by_dicts.add(sid, preds)
    matcher.flush()  # single adds are filed, and their attribute names learned, on the next match or flush
    decoded = attach(decode_events([m.value() for m in msgs]), msgs, referenced(ReferencedAttributes(lambda: matcher)()))
    got = matcher.match_encoded(decoded.event_batch()).split()
    want = [sorted(by_dicts.match(naive(m)).tolist()) for m in msgs]
    assert [sorted(np.asarray(g).tolist()) for g in got] == want


def test_the_json_subscription_format_takes_metadata_names():
    value = json.dumps({"subscriber": "a", "predicates": [["$topic", "=", "orders"], ["$header.x", "exists", None]]})
    sub = codecs.decode_subscription(value.encode())
    assert [p[0] for p in sub.predicates] == ["$topic", "$header.x"]


# --- where a notification's event came from, and the event as it was ---------------------------------------


@pytest.mark.parametrize("fmt", codecs.FORMATS)
def test_a_notification_names_its_source_and_reads_back(fmt):
    attributes = codecs.encode_attributes({"price": 5}, fmt)
    value = codecs.encode_notification(42, "alice", "e1", attributes, fmt, source=("orders", 3, 17))
    assert codecs.decode_notification(value) == {
        "notification_id": "e1/42", "subscription_id": 42, "subscriber": "alice", "event_id": "e1",
        "source": {"topic": "orders", "partition": 3, "offset": 17}, "original": None, "event": {"price": 5}}
    # without a source (a stored valid event), the notification is what it always was
    assert "source" not in codecs.decode_notification(codecs.encode_notification(42, "alice", "e1", attributes, fmt))


@pytest.mark.parametrize("fmt", codecs.FORMATS)
@pytest.mark.parametrize("value", [codecs.encode_event({"price": 5}, "avro"), b'{"price": 5}',
                                   b"\x00\x00\x00\x01\x07" + bytes(range(200))])
def test_the_original_event_is_carried_as_it_was_with_its_schema_id(fmt, value):
    out = codecs.encode_notification(1, "bob", "e2", codecs.encode_attributes({}, fmt), fmt, ("t", 0, 5), value)
    n = codecs.decode_notification(out)
    assert n["original"] == {"schema_id": int.from_bytes(value[1:5], "big") if value[0] == 0 else None,
                             "value": value}
    assert n["event"] == {} and n["source"] == {"topic": "t", "partition": 0, "offset": 5}


@pytest.mark.parametrize("event_format", ["decoded", "original"])
def test_the_processor_encodes_each_notification_with_its_record(event_format):
    from fastpubsub.services.events.encode import Encode
    from fastpubsub.services.events.match import Matched

    value = codecs.encode_event({"price": 5}, "avro")
    msg = Message(topic="orders", partition=2, offset=9, key=b"e1", value=value)
    encode = Encode("avro", "full", topic="alerts", event_format=event_format)
    out = list(encode(Matched([("e1", value, [(7, "alice"), (8, "bob")], msg)])))
    assert [o.topic for o in out] == ["alerts", "alerts"]
    notes = [codecs.decode_notification(o.value) for o in out]
    assert [n["source"] for n in notes] == [{"topic": "orders", "partition": 2, "offset": 9}] * 2
    if event_format == "original":
        assert all(n["original"] == {"schema_id": 2, "value": value} and n["event"] == {} for n in notes)
    else:
        assert all(n["original"] is None and n["event"] == {"price": 5} for n in notes)
