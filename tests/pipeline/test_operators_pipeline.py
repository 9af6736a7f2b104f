"""End to end through the embedded broker: every operator and OR, in JSON and Avro (schema ids 1 and 7)."""

from __future__ import annotations

import random
from collections import Counter

from tests.support.kafka_helpers import dead_letters, notifications, send, wait_processed
from tests.support.random_workload import by_event, expected_matches, random_events, send_events, send_subscriptions

from fastpubsub.engine import AnyOf
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

WORDS = ["a", "b", "c", "odeon", "rex", "ode", "x"]


def _predicate(rng: random.Random):
    attr = rng.choice(["price", "rating", "movie", "theater", "kids", "seats"])
    op = rng.choice(["=", "<", "in", "not in", "between", "not between", "prefix", "suffix", "contains", "exists"])
    if op in ("prefix", "suffix", "contains"):
        return (attr, op, rng.choice(["o", "od", "de", "x", "re", "rex", "b"]))
    if op == "exists":
        return (attr, op, None)
    pool = rng.choice([list(range(10)), WORDS, [False, True], [0.5, 1.5, 2.5]])
    if op in ("in", "not in"):
        return (attr, op, rng.sample(pool, rng.randint(1, 2)))
    if op in ("between", "not between"):
        return (attr, op, sorted(rng.sample(pool, 2)))
    return (attr, op, rng.choice(pool))


def operator_subscriptions(n: int, seed: int) -> list[tuple[int, Subscription]]:
    rng = random.Random(seed)
    out = []
    for sid in range(n):
        conj = lambda: [_predicate(rng) for _ in range(rng.randint(1, 2))]  # noqa: E731
        preds = AnyOf([conj() for _ in range(rng.randint(2, 3))]) if rng.random() < 0.4 else conj()
        out.append((sid, Subscription(f"user{sid % 13}", preds)))
    return out


def test_every_operator_and_or_end_to_end_equal_the_oracle(bootstrap, group_id, start_processor):
    subs = operator_subscriptions(600, seed=3)
    plain = [(1000 + sid, Subscription("old", [("price", "<=", sid % 10)])) for sid in range(20)]  # schema id 1
    events = random_events(200, seed=4)
    send_subscriptions(bootstrap, subs + plain)
    assert {codecs.encode_subscription(s)[4] for _, s in subs + plain} == {1, 7}  # both Avro schema ids travel
    p = start_processor()
    assert len(p.state) == len(subs) + len(plain)
    send_events(bootstrap, events)
    wait_processed(bootstrap, group_id)
    notes = notifications(bootstrap)
    p.stop()
    expected = {n: sids for n, sids in expected_matches(subs + plain, events).items() if sids}
    assert sum(map(len, expected.values())) > 200
    assert by_event(notes) == expected
    assert max(Counter(n["notification_id"] for n in notes).values()) == 1  # once per event, whichever disjuncts hold

    # a restart rebuilds the same state (subscriptions of several rows included) and replaces one of them
    send(bootstrap, topics.SUBSCRIPTIONS, [("0", codecs.encode_subscription(
        Subscription("zoe", AnyOf([[("movie", "prefix", "rex")], [("price", "in", [77, 78])]])), "json"))])
    p2 = start_processor()
    assert len(p2.state) == len(subs) + len(plain) and p2.state.subscribers[0] == "zoe"
    send(bootstrap, topics.EVENTS, [("z1", codecs.encode_event({"n": -1, "price": 78})),
                                    ("z2", codecs.encode_event({"n": -2, "movie": "rexx"}, "json"))])
    wait_processed(bootstrap, group_id)
    p2.stop()
    zoe = sorted(n["event_id"] for n in notifications(bootstrap) if n["subscriber"] == "zoe")
    assert zoe == ["z1", "z2"]


def test_bad_operators_and_values_are_dead_lettered_with_their_reason(bootstrap, group_id, start_processor):
    send(bootstrap, topics.SUBSCRIPTIONS, [
        ("1", codecs.encode_subscription(Subscription("alice", [("price", "between", [5, 10])]))),
        ("2", b'{"subscriber": "bob", "predicates": [["price", "like", 3]]}'),
        ("3", b'{"subscriber": "bob", "predicates": [["color", "in", []]]}'),
        ("4", b'{"subscriber": "bob", "predicates": [["color", "in", ["red", 1]]]}'),
        ("5", b'{"subscriber": "bob", "predicates": [["price", "between", [10, 5]]]}'),
        ("6", b'{"subscriber": "bob", "any": [[["a", "=", 1]]], "predicates": [["a", "=", 1]]}'),
        ("7", b'{"subscriber": "bob", "predicates": [["title", "prefix", ""]]}'),
        ("8", b'{"subscriber": "carol", "any": [[["title", "prefix", "ha"]], [["price", "in", [1, 2]]]]}'),
    ])
    p = start_processor()
    assert sorted(p.state.subscribers) == [1, 8]
    send(bootstrap, topics.EVENTS, [("e1", codecs.encode_event({"price": 7, "title": "harry"}))])
    wait_processed(bootstrap, group_id)
    p.wait_for(lambda: p.processor.dead_letters.total == 6, what="dead letters counted")
    p.stop()
    assert sorted(n["subscriber"] for n in notifications(bootstrap)) == ["alice", "carol"]
    reasons = {d.key: d.reason for d in dead_letters(bootstrap)}
    assert "unknown operator 'like'" in reasons[b"2"]
    assert "the list of values is empty" in reasons[b"3"]
    assert "values of more than one kind" in reasons[b"4"]
    assert "lo 10 is above hi 5" in reasons[b"5"]
    assert "exactly one of 'predicates'" in reasons[b"6"]
    assert "expected a non-empty string" in reasons[b"7"]
