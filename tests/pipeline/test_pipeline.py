"""End to end through the embedded broker: subscriptions and events in, notifications out."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from tests.support.kafka_helpers import dead_letters, notifications, producer, send, wait_processed
from tests.support.random_workload import by_event, expected_matches, random_events, random_subscriptions, send_events, send_subscriptions

from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

@pytest.mark.parametrize("output_format, delivery, matcher", [
    ("avro", "auto", {}),
    ("json", "at-least-once", {}),
    ("avro", "auto", {"algorithm": "static", "runs": 2}),  # every cluster of 2 or more sorted into runs
    ("avro", "auto", {"algorithm": "opindex"}),
])
def test_notifications_equal_the_oracle(bootstrap, group_id, start_processor, output_format, delivery, matcher):
    subs = random_subscriptions(1500, seed=1)
    events = random_events(300, seed=2)
    send_subscriptions(bootstrap, subs)
    p = start_processor(output_format=output_format, delivery=delivery, **matcher)
    assert len(p.state) == len(subs)  # rebuilt before matching anything
    send_events(bootstrap, events)
    wait_processed(bootstrap, group_id)
    notes = notifications(bootstrap)
    stats = p.stop()

    expected = {n: sids for n, sids in expected_matches(subs, events).items() if sids}
    assert sum(map(len, expected.values())) > 300  # the workload does produce matches
    assert by_event(notes) == expected
    ids = Counter(n["notification_id"] for n in notes)
    assert max(ids.values()) == 1  # no duplicates without failures
    owner = dict(subs)
    for n in notes:
        i = n["event"]["n"]
        assert n["subscriber"] == owner[n["subscription_id"]].subscriber
        assert n["event"] == events[i]
        if i % 3:
            assert n["event_id"] == f"k{i}"
        else:
            assert re.fullmatch(r"pubsub\.events:\d:\d+", n["event_id"])
        assert n["notification_id"] == f"{n['event_id']}/{n['subscription_id']}"
    assert stats["events"] == len(events) and stats["notifications"] == len(notes)
    assert stats["delivery"] == ("transactional" if delivery == "auto" else "at-least-once")
    assert (stats["task"]["matcher"], stats["task"]["runs"]) == (matcher.get("algorithm", "dynamic"), matcher.get("runs"))  # None: the engine default


def test_removal_and_replacement_take_effect_and_restart_rebuilds(bootstrap, group_id, start_processor):
    subs = {
        1: Subscription("alice", [("price", "<=", 10)]),
        2: Subscription("bob", [("movie", "=", "rex")]),
        3: Subscription("carol", [("price", ">", 100)]),
    }
    send_subscriptions(bootstrap, subs.items())
    p = start_processor()
    send(bootstrap, topics.EVENTS, [("e1", codecs.encode_event({"price": 5, "movie": "rex"}))])
    wait_processed(bootstrap, group_id)
    assert {(n["event_id"], n["subscriber"]) for n in notifications(bootstrap)} == {("e1", "alice"), ("e1", "bob")}

    # live: remove 2 (tombstone), replace 3 so that it matches, add 4
    send(bootstrap, topics.SUBSCRIPTIONS, [
        ("2", None),
        ("3", codecs.encode_subscription(Subscription("carol", [("price", "<", 100)]), "json")),
        ("4", codecs.encode_subscription(Subscription("dave", [("movie", "!=", "odeon")]))),
    ])
    p.wait_for(lambda: 2 not in p.state.matcher and 4 in p.state.matcher and p.state.replaced == 1, what="changes applied")
    send(bootstrap, topics.EVENTS, [("e2", codecs.encode_event({"price": 5, "movie": "rex"}))])
    wait_processed(bootstrap, group_id)
    first = p.stop()
    assert first["task"]["subscriptions"] == 3
    e2 = {n["subscriber"] for n in notifications(bootstrap) if n["event_id"] == "e2"}
    assert e2 == {"alice", "carol", "dave"}

    # restart: state comes back from the subscriptions topic; committed events are not matched again
    p2 = start_processor()
    assert sorted(p2.state.subscribers) == [1, 3, 4] and p2.state.subscribers[3] == "carol"
    send(bootstrap, topics.EVENTS, [("e3", codecs.encode_event({"price": 50, "movie": "odeon"}))])
    wait_processed(bootstrap, group_id)
    second = p2.stop()
    notes = notifications(bootstrap)
    assert {n["subscriber"] for n in notes if n["event_id"] == "e3"} == {"carol"}
    assert Counter(n["event_id"] for n in notes) == {"e1": 2, "e2": 3, "e3": 1}
    assert second["events"] == 1


def test_bad_records_go_to_the_dead_letter_topic_and_good_ones_still_flow(bootstrap, group_id, start_processor):
    good = codecs.encode_subscription(Subscription("alice", [("price", "<=", 10)]))
    send(bootstrap, topics.SUBSCRIPTIONS, [
        ("1", good),
        ("nope", good),  # key is not an id
        ("2", b'{"subscriber": "bob", "predicates": [["price", "~", 3]]}'),
        ("3", b"\x00\x00\x00\x00\x01garbage"),
        ("4", b'{"subscriber": "dan", "predicates": [["price", ">", 1]]}'),
    ])
    p = start_processor()
    assert sorted(p.state.subscribers) == [1, 4]
    send(bootstrap, topics.EVENTS, [
        ("e1", codecs.encode_event({"price": 5})),
        ("e2", b"not an event"),
        ("e3", b'{"": 5}'),  # (an array is a value now: an attribute carried several times, wire/paths.py)
        ("e4", b'{"price": 6'),
        ("e5", b'{"price": 7}'),
        (b"\xff", b'{"price": 8}'),  # key not UTF-8
        ("e7", codecs.encode_subscription(Subscription("x", [("a", "=", 1)]))),  # wrong schema id
        ("e8", codecs.encode_event({"price": 9}, "json")),
    ])
    wait_processed(bootstrap, group_id)
    p.wait_for(lambda: p.processor.dead_letters.total == 8, what="dead letters counted")
    stats = p.stop()

    notes = notifications(bootstrap)
    assert sorted((n["event_id"], n["subscriber"]) for n in notes) == [
        (e, s) for e in ("e1", "e5", "e8") for s in ("alice", "dan")
    ]
    letters = dead_letters(bootstrap)
    reasons = {(d.source_topic, d.key): d.reason for d in letters}
    assert len(letters) == 8 and stats["dead_letters"] == {topics.SUBSCRIPTIONS: 3, topics.EVENTS: 5}
    assert "not a decimal integer" in reasons[(topics.SUBSCRIPTIONS, b"nope")]
    assert "unknown operator '~'" in reasons[(topics.SUBSCRIPTIONS, b"2")]
    assert "invalid Avro subscription" in reasons[(topics.SUBSCRIPTIONS, b"3")]
    assert "neither JSON" in reasons[(topics.EVENTS, b"e2")]
    assert "field names must be non-empty" in reasons[(topics.EVENTS, b"e3")]
    assert "invalid JSON" in reasons[(topics.EVENTS, b"e4")]
    assert "not UTF-8" in reasons[(topics.EVENTS, b"\xff")]
    assert "unexpected Avro schema id 1" in reasons[(topics.EVENTS, b"e7")]
    by_key = {(d.source_topic, d.key): d for d in letters}
    bad = by_key[(topics.EVENTS, b"e2")]
    assert bad.value == b"not an event" and bad.partition in range(4) and bad.offset >= 0


def test_subscriptions_expire_at_valid_until_in_event_time(bootstrap, group_id, start_processor):
    until = 1_700_000_000_000
    send_subscriptions(bootstrap, [
        (1, Subscription("alice", [("price", "<=", 10)], valid_until=until)),
        (2, Subscription("bob", [("price", "<=", 10)])),
        (3, Subscription("carol", [("price", "<=", 10)], valid_until=until + 100)),
    ])
    p = start_processor()
    assert sorted(p.state.subscribers) == [1, 2, 3]
    events = producer(bootstrap)
    for key, timestamp in [("before", until - 1), ("at", until), ("late-but-older", until - 5)]:
        events.produce(topics.EVENTS, codecs.encode_event({"price": 5}), key, partition=0, timestamp=timestamp)
        assert events.flush(30) == 0
        wait_processed(bootstrap, group_id)  # one event per batch
    for key, timestamp in [("b1", until + 99), ("b2", until + 100)]:  # together: likely one batch
        events.produce(topics.EVENTS, codecs.encode_event({"price": 5}), key, partition=1, timestamp=timestamp)
    assert events.flush(30) == 0
    wait_processed(bootstrap, group_id)
    stats = p.stop()
    got = sorted((n["event_id"], n["subscriber"]) for n in notifications(bootstrap))
    # event time decides, so a replay gives the same; once dropped, a subscription stays dropped
    assert got == [("at", "bob"), ("at", "carol"), ("b1", "bob"), ("b1", "carol"), ("b2", "bob"),
                   ("before", "alice"), ("before", "bob"), ("before", "carol"),
                   ("late-but-older", "bob"), ("late-but-older", "carol")]
    # alice was dropped; carol too unless b1 and b2 shared a batch (then b2 was filtered by valid_at)
    assert (stats["task"]["expired"], stats["task"]["subscriptions"]) in [(1, 2), (2, 1)]
