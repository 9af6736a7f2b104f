"""Pattern subscriptions on the wire (JSON field, Avro schema id 9), whose record each service takes, the bound
events' contents as restorable state, and the placement of events by an attribute."""

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fastpubsub.patterns import parse
from fastpubsub.patterns.contents import BoundContents, content_key, split
from fastpubsub.patterns.engine import PatternEngine
from fastpubsub.state import KeyedStore, StateChanges
from fastpubsub.wire import codecs
from fastpubsub.wire.codecs import framing
from fastpubsub.wire.codecs import PatternDecodeError, PatternSubscription, decode_any_subscription
from fastpubsub.wire.placement import partition_for
from fastpubsub.wire.subscription_decoder import decode_subscriptions

S3 = "seq a: price > 0 next b: name = a.name where b.price > 1.05 * a.price within 1d"
S4 = ("seq a: volume > 10000 fold r: name = a.name while r.price >= r.last.price "
      "agg n = count(), lo = min(price) until dur >= 30m within 2h")


@pytest.mark.parametrize("fmt", ["avro", "json"])
@pytest.mark.parametrize("text", [S3, S4])
def test_a_pattern_subscription_round_trips_in_both_forms(fmt, text):
    value = codecs.encode_pattern_subscription(PatternSubscription("carol", parse(text)), fmt)
    assert codecs.is_pattern_subscription(value) and not codecs.is_aggregate_subscription(value)
    if fmt == "avro":
        assert value[:5] == b"\x00\x00\x00\x00\x09"  # schema id 9
    assert decode_any_subscription(value) == PatternSubscription("carol", parse(text))


def test_the_text_form_is_accepted_in_the_json_field_and_avro_carries_either_form():
    assert decode_any_subscription(json.dumps({"subscriber": "c", "pattern": S3}).encode()).pattern == parse(S3)
    avro = framing._wire("pattern_subscription", framing._avro_write(codecs.SCHEMAS["pattern_subscription"],
                                                                    {"subscriber": "c", "pattern": S3}))
    assert decode_any_subscription(avro).pattern == parse(S3)


@pytest.mark.parametrize("value, reason", [
    (b'{"subscriber": "c", "pattern": "seq a: price > 1"}', "invalid pattern: column 17: a pattern needs 'within"),
    (b'{"subscriber": "c", "pattern": "seq a: price > 1 next b: c.x = 1 within 1h"}', "unknown binding 'c'"),
    (b'{"subscriber": "c", "pattern": 7}', "'pattern' must be the text or JSON form"),
    (b'{"subscriber": "", "pattern": "seq a: x = 1 within 1s"}', "subscriber must be a non-empty string"),
    (b'{"subscriber": "c", "pattern": "seq a: x = 1 within 1s", "since": 0}', "unknown pattern subscription field"),
    (b"\x00\x00\x00\x00\x09\x02", "invalid Avro pattern subscription"),
])
def test_a_bad_pattern_subscription_is_a_pattern_error_with_its_reason(value, reason):
    assert codecs.is_pattern_subscription(value)
    with pytest.raises(PatternDecodeError) as info:
        decode_any_subscription(value)
    assert reason in str(info.value)


def test_plain_and_aggregate_subscriptions_stay_what_they_were():
    plain = codecs.encode_subscription(codecs.Subscription("a", [("x", "=", 1)]), "avro")
    assert not codecs.is_pattern_subscription(plain)
    assert isinstance(decode_any_subscription(plain), codecs.Subscription)
    assert not codecs.is_pattern_subscription(b'{"subscriber": "a", "aggregate": "count(*) over t"}')


def test_the_event_processor_decoder_leaves_pattern_records_to_the_pattern_service():
    good = codecs.encode_pattern_subscription(PatternSubscription("c", parse(S3)))
    bad = b'{"subscriber": "c", "pattern": "seq a: price > 1"}'
    plain = codecs.encode_subscription(codecs.Subscription("a", [("x", "=", 1)]), "avro")
    decoded = decode_subscriptions([b"1", b"2", b"3", b"x-4"], [good, bad, plain, good])
    assert decoded.errors == {} and decoded.aggregate == {0, 1, 3}  # neither reported nor held
    assert decoded.tombstone.tolist() == [True, True, False, False] and decoded.valid.tolist()[2]


def test_bound_contents_follow_the_live_instances_and_restore_from_their_changes():
    engine = PatternEngine(track_changes=True)
    engine.subscribe(1, parse("seq a: x > 0 next b: y = a.y where b.x > a.x within 10ms"), 0)
    contents = BoundContents()
    events = [(0, 1, {"x": 1, "y": "u"}), (1, 2, {"x": 0, "y": "v"}), (2, 3, {"x": 5, "y": "u"})]

    def step(evs):
        ids, ts = [e[0] for e in evs], [e[1] for e in evs]
        contents.offer(ids, ts, [json.dumps(e[2]).encode() for e in evs])
        witnesses = engine.process_events(evs)
        bound = [[contents.get(i) for i, _ in w.bound] for w in witnesses]
        contents.settle(engine.bound_event_ids(), ids[-1])
        return witnesses, bound

    _, bound = step(events[:2])
    assert bound == [] and sorted(contents.kept) == [0]  # the start event 1 has x = 0: no instance
    first = contents.changes()
    assert first.keys == [content_key(0)] and first.offsets.tolist() == [0]
    witnesses, bound = step(events[2:])
    assert [w.notification_id for w in witnesses] == ["1/0|2"]
    assert bound == [[(1, b'{"x": 1, "y": "u"}'), (3, b'{"x": 5, "y": "u"}')]]
    assert sorted(contents.kept) == [2]  # the instance started at 2 is live; 0's completed
    second = contents.changes()
    assert second.values[0] is None and second.offsets.tolist() == [2, 2]  # 0 released at 2, 2 kept from 2
    # a restore at committed offset 2 discards what the batch of event 2 wrote: event 0's content comes back
    store = KeyedStore.restore(StateChanges.concat([first, second]), 2)
    engine_part, contents_part = split(store)
    assert len(engine_part) == 0
    again = BoundContents()
    assert again.restore(contents_part) == 1 and again.kept == {0: (1, b'{"x": 1, "y": "u"}')}


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=8), st.integers(-10**6, 10**6), st.booleans()), st.integers(1, 64))
def test_placement_is_a_function_of_the_value_and_agrees_on_equal_numbers(value, partitions):
    p = partition_for(value, partitions)
    assert 0 <= p < partitions and p == partition_for(value, partitions)
    if type(value) is int:
        assert partition_for(float(value), partitions) == p


def test_placement_is_stable_across_releases():
    # other producers compute the same partition: crc32 of the JSON text
    assert [partition_for(s, 4) for s in ("IBM", "MSFT", "AAPL")] == [
        __import__("zlib").crc32(json.dumps(s).encode()) % 4 for s in ("IBM", "MSFT", "AAPL")]
    assert np.all(np.array([partition_for(7, 16), partition_for(7.0, 16)]) == partition_for(7, 16))


def test_pubsub_subscribe_tells_a_pattern_from_a_predicate_on_an_attribute_named_seq():
    from fastpubsub.cli.messages import PATTERN_TEXT

    assert PATTERN_TEXT.match("seq a: price > 1 within 1s") and PATTERN_TEXT.match("  seq  first : x = 1 within 1s")
    assert not PATTERN_TEXT.match("seq = 5") and not PATTERN_TEXT.match("seq > 1 and x = 2")
