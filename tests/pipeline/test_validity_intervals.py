"""Validity intervals end to end (Fabret et al., section 1), through the real broker.

Subscriptions match only events whose record time t has valid_from <= t <
valid_until; events carrying a ``valid_until`` header are kept, and a
subscription that arrives later is evaluated against them at once.  Times are
record timestamps, so a replay gives exactly the same notifications.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from tests.support.kafka_helpers import RunningProcessor, dead_letters, notifications, producer, service_config, wait_processed
from tests.support.random_workload import expected_matches, random_events, random_subscriptions

from fastpubsub.wire import codecs, topics
from fastpubsub.services.events.processor import ProcessorConfig
from fastpubsub.services.events.shard import Shard
from fastpubsub.wire.codecs import Subscription

T0 = 1_700_000_000_000


def with_intervals(subs, seed):
    """The subscriptions with random valid_from / valid_until around the events' times (T0 + n)."""
    rng = random.Random(seed)
    out = []
    for sid, s in subs:
        start = rng.choice([None, T0 + rng.randrange(300)])
        end = rng.choice([None, (start or T0) + 1 + rng.randrange(300)])
        out.append((sid, Subscription(s.subscriber, s.predicates, valid_until=end, valid_from=start)))
    return out


def in_interval(sub: Subscription, t: int) -> bool:
    return (sub.valid_from is None or sub.valid_from <= t) and (sub.valid_until is None or t < sub.valid_until)


def send_subs(bootstrap, subs, timestamp=None):
    p = producer(bootstrap)
    for sid, s in subs:
        p.produce(topics.SUBSCRIPTIONS, codecs.encode_subscription(s, "avro" if sid % 2 else "json"), str(sid),
                  **({"timestamp": timestamp} if timestamp is not None else {}))
    assert p.flush(30) == 0


def send_timed_events(bootstrap, events, headers=lambda e: None):
    """Event n at time T0 + n, in order on one partition (expiry follows the newest batch's oldest time)."""
    p = producer(bootstrap)
    for e in events:
        p.produce(topics.EVENTS, codecs.encode_event(e, "avro" if e["n"] % 2 else "json"), f"k{e['n']}",
                  partition=0, timestamp=T0 + e["n"], headers=headers(e))
    assert p.flush(30) == 0


def test_valid_from_and_valid_until_agree_with_the_oracle(bootstrap, group_id, start_processor):
    subs = with_intervals(random_subscriptions(150, seed=21), seed=22)
    events = random_events(400, seed=23)
    send_subs(bootstrap, subs)
    p = start_processor(batch_size=37)
    send_timed_events(bootstrap, events)
    wait_processed(bootstrap, group_id)
    stats = p.stop()

    by_id = dict(subs)
    expected = {(f"k{n}", sid) for n, hits in expected_matches(subs, events).items() for sid in hits
                if in_interval(by_id[sid], T0 + n)}
    notes = notifications(bootstrap)
    assert {(n["event_id"], n["subscription_id"]) for n in notes} == expected
    assert len(notes) == len(expected)  # no duplicates without failures
    # expired ones left the matcher (those due within the last batch may still be there, filtered by valid_at)
    due = sum(1 for _, s in subs if s.valid_until is not None and s.valid_until <= T0 + 399)
    assert due - 37 < stats["task"]["expired"] <= due and stats["task"]["subscriptions"] == len(subs) - stats["task"]["expired"]


def test_replaying_the_same_records_gives_the_same_notifications(bootstrap, group_id):
    subs = with_intervals(random_subscriptions(80, seed=31), seed=32)
    events = random_events(300, seed=33)
    send_subs(bootstrap, subs)
    send_timed_events(bootstrap, events)
    for group, batch in ((group_id, 23), (group_id + "-replay", 100)):  # the second reads the events again
        p = RunningProcessor(service_config(ProcessorConfig, bootstrap, group_id=group, progress_interval=60,
                                                   batch_size=batch))
        try:
            wait_processed(bootstrap, group)
        finally:
            p.stop()
    counts = Counter(n["notification_id"] for n in notifications(bootstrap))
    assert counts and set(counts.values()) == {2}  # each notification once per run, whatever the batching


@pytest.mark.parametrize("shards", [1, 2], ids=["unsharded", "2-shards"])
def test_a_new_subscription_sees_the_still_valid_events(bootstrap, group_id, start_processor, shards):
    """Sharded, every shard keeps every valid event and evaluates its own new subscriptions against them."""
    events = random_events(300, seed=41)
    lifetimes = {e["n"]: random.Random(e["n"]).choice([None, 50, 200, 400]) for e in events}

    def header(e):
        life = lifetimes[e["n"]]
        return None if life is None else [("valid_until", str(T0 + e["n"] + life).encode())]

    bad = producer(bootstrap)
    for k, value in [("bad1", b"soon"), ("bad2", b" 12"), ("bad3", None)]:
        bad.produce(topics.EVENTS, codecs.encode_event({"price": 1}), k, partition=1, headers=[("valid_until", value)])
    assert bad.flush(30) == 0
    send_timed_events(bootstrap, events, header)
    procs = [start_processor(batch_size=50, shard=Shard(i, shards)) for i in range(shards)]
    for i in range(shards):
        wait_processed(bootstrap, Shard(i, shards).group(group_id))
    assert all(p.processor.task.store.stats()["added"] == sum(1 for life in lifetimes.values() if life) for p in procs)

    subs = with_intervals([(1000 + sid, s) for sid, s in random_subscriptions(120, seed=42)], seed=43)
    arrival = T0 + 350  # the subscriptions' record time: events whose valid_until is at or before it are gone
    send_subs(bootstrap, subs, timestamp=arrival)
    for i, p in enumerate(procs):
        held = sum(1 for sid, _ in subs if Shard(i, shards).owns(sid))
        p.wait_for(lambda: len(p.state) == held, what="the new subscriptions")
        p.wait_for(lambda: not p.processor.delivery.pending(), what="their notifications")
    every = [p.stop() for p in procs]

    by_id = dict(subs)
    expected = {(f"k{n}", sid) for n, hits in expected_matches(subs, events).items() for sid in hits
                if lifetimes[n] and arrival < T0 + n + lifetimes[n] and in_interval(by_id[sid], T0 + n)}
    assert expected  # the workload exercises the path
    notes = notifications(bootstrap)
    assert {(n["event_id"], n["subscription_id"]) for n in notes} == expected
    assert len(notes) == len(expected) == sum(stats["task"]["stored_notifications"] for stats in every)
    if shards > 1:
        assert all(stats["task"]["stored_notifications"] > 0 for stats in every)  # each shard notified its own
    reasons = {d.key: d.reason for d in dead_letters(bootstrap)}
    assert set(reasons) == {b"bad1", b"bad2", b"bad3"} and all("valid_until header" in r for r in reasons.values())
    assert sum(p.processor.dead_letters.total for p in procs) == 3  # by shard 0 alone when sharded
