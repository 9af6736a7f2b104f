"""`pubsub patterns --repartition-by ATTR` end to end through the broker: events on random partitions with random keys
are re-keyed into the service's repartition topic and the patterns run there, behind the reorder buffer.  The
de-duplicated notification ids equal the oracle's, run per repartition partition over that partition's events in
(timestamp, source partition, source offset) order; with distinct timestamps, the patterns that stay within one
symbol find what the oracle finds over the whole stream.  An event later than the grace is dead-lettered and
counted."""

from __future__ import annotations

import random
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from tests.support.kafka_helpers import dead_letters, end_offsets, wait_processed
from tests.support.oracles.patterns import OraclePatterns
from tests.pipeline.test_pattern_service import (BASE_TS, PARTITIONS, PER_SYMBOL, RunningPatterns, events, patterns_bootstrap,  # noqa: F401
                                  received, send_subscriptions, stored_events, subscriptions)

from fastpubsub.kafka.broker import child_preexec  # noqa: F401  (the kill test's process group)
from fastpubsub.patterns import parse
from fastpubsub.patterns.reorder import event_id
from fastpubsub.services.patterns.service import repartitioned_notification_id
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.placement import partition_for


@pytest.fixture
def running(patterns_bootstrap, group_id):  # noqa: F811
    from tests.support.kafka_helpers import started_services
    yield from started_services(lambda **kw: RunningPatterns(patterns_bootstrap, group_id, **kw))


def send_scattered(bootstrap: str, evs: list[tuple[int, dict]], seed: int) -> None:
    """On random partitions with random keys (the producers placed nothing), JSON and Avro alternately."""
    rng = random.Random(seed)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (ts, attrs) in enumerate(evs):
        p.produce(topics.EVENTS, codecs.encode_event(attrs, "avro" if i % 2 else "json"), uuid.uuid4().hex.encode(),
                  partition=rng.randrange(PARTITIONS), timestamp=ts)
    assert p.flush(30) == 0


def wait_topic_processed(bootstrap: str, group_id: str, topic: str, timeout: float = 120.0) -> None:
    """Until the group has committed every record of a topic written in transactions (its last offset is the
    last transaction's commit marker)."""
    ends = {p: max(0, e - 1) for p, e in end_offsets(bootstrap, topic).items()}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False})
    try:
        parts = [TopicPartition(topic, p) for p in sorted(ends)]
        deadline = time.monotonic() + timeout
        while True:
            done = [max(tp.offset, 0) for tp in c.committed(parts, timeout=10)]
            if all(d >= ends[tp.partition] for d, tp in zip(done, parts)):
                return
            assert time.monotonic() < deadline, f"{topic} not all processed: committed {done}, ends {ends}"
            time.sleep(0.1)
    finally:
        c.close()


def tail_names() -> list[str]:
    """One name per repartition partition, used by no subscription."""
    names: dict[int, str] = {}
    k = 0
    while len(names) < PARTITIONS:
        names.setdefault(partition_for(f"tail{k}", PARTITIONS), f"tail{k}")
        k += 1
    return [names[q] for q in range(PARTITIONS)]


def test_repartitioned_notifications_equal_the_oracle(running, patterns_bootstrap, group_id):  # noqa: F811
    subs = subscriptions(11, 24)
    evs = events(12, 500, ties=False)
    grace = 3_600_000  # more than the stream spans: whatever the re-keying's interleaving, no event is late
    send_subscriptions(patterns_bootstrap, subs)
    service = running(repartition_by="name", grace_ms=grace)
    send_scattered(patterns_bootstrap, evs, 13)
    wait_processed(patterns_bootstrap, group_id, timeout=120)  # every event re-keyed
    # the watermark releases what is older than the grace: one later event per repartition partition
    tail_ts = evs[-1][0] + grace + 1
    send_scattered(patterns_bootstrap, [(tail_ts, {"name": name, "price": 1.0, "volume": 1}) for name in tail_names()],
                   14)
    wait_processed(patterns_bootstrap, group_id, timeout=60)
    repartition = topics.pattern_repartition_topic(group_id, "name")
    wait_topic_processed(patterns_bootstrap, group_id, repartition)
    stats = service.stop()
    rp = stats["task"]["repartition"]
    assert rp["topic"] == repartition and rp["rekeyed"] == len(evs) + PARTITIONS
    assert rp["late_events"] == 0 and stats["task"]["events"] == len(evs)  # the tails wait for a later watermark
    # the oracle per repartition partition, its events in (timestamp, source partition, source offset) order
    by_q: dict[int, list] = {}
    for p, stored in stored_events(patterns_bootstrap).items():
        for off, ts, attrs in stored:
            if ts < tail_ts:
                by_q.setdefault(partition_for(attrs["name"], PARTITIONS), []).append((ts, p, off, attrs))
    expected = {}
    for q, rows in by_q.items():
        o = OraclePatterns()
        for sid, text, _ in subs:
            o.subscribe(sid, parse(text), BASE_TS)
        for w in o.process([(event_id(p, off), ts, attrs) for ts, p, off, attrs in sorted(rows, key=lambda r: r[:3])]):
            expected[repartitioned_notification_id(w.sid, w.bound)] = w
    raw, got = received(patterns_bootstrap)
    assert len(expected) > 100, "the workload completes too few patterns to say much"
    assert sorted(got) == sorted(expected)
    for nid, n in got.items():
        w = expected[nid]
        assert (n["start_ts"], n["end_ts"]) == (w.start_ts, w.end_ts) and n["aggregates"] == dict(w.aggregates)
        assert [f"{b['partition']}:{b['offset']}" for b in n["events"]] == [b["event_id"] for b in n["events"]]
    # distinct timestamps: the patterns that stay within one symbol find what the oracle finds over the whole stream
    whole = OraclePatterns()
    for sid, text, t in subs:
        if t in PER_SYMBOL:
            whole.subscribe(sid, parse(text), BASE_TS)
    expected_whole = {(w.sid, w.bound) for w in whole.process([(attrs["n"], ts, attrs) for ts, attrs in evs])}
    found = {(n["subscription_id"], tuple((b["event"]["n"], b["iterations"]) for b in n["events"]))
             for n in got.values() if n["subscription_id"] in whole.subscriptions}
    assert len(expected_whole) > 50 and found == expected_whole


def test_an_event_later_than_the_grace_is_dead_lettered_and_counted(running, patterns_bootstrap, group_id):  # noqa: F811
    send_subscriptions(patterns_bootstrap, [(1, "seq a: price > 0 next b: name = a.name where b.price > a.price "
                                                "within 1h", 1)])
    service = running(repartition_by="name", grace_ms=1000)
    # one after the other: on two source partitions, their re-keying could otherwise swap them
    send_scattered(patterns_bootstrap, [(BASE_TS, {"name": "IBM", "price": 1.0})], 1)
    wait_processed(patterns_bootstrap, group_id, timeout=60)
    send_scattered(patterns_bootstrap, [(BASE_TS + 5000, {"name": "IBM", "price": 2.0})], 3)
    wait_processed(patterns_bootstrap, group_id, timeout=60)
    repartition = topics.pattern_repartition_topic(group_id, "name")
    wait_topic_processed(patterns_bootstrap, group_id, repartition)
    send_scattered(patterns_bootstrap, [(BASE_TS + 2000, {"name": "IBM", "price": 3.0})], 2)  # behind 5000 - 1000
    wait_processed(patterns_bootstrap, group_id, timeout=60)
    wait_topic_processed(patterns_bootstrap, group_id, repartition)
    stats = service.stop()
    assert stats["task"]["repartition"]["late_events"] == 1 and stats["task"]["events"] == 1  # the first; the second waits
    late = [d for d in dead_letters(patterns_bootstrap) if "late event" in d.reason]
    assert len(late) == 1 and late[0].source_topic == topics.EVENTS
    assert codecs.decode_event(late[0].value)["price"] == 3.0


def test_kill_9_while_re_keying_and_restart_none_missing_none_unexpected(patterns_bootstrap, group_id):  # noqa: F811
    """The re-keying produce and the events offsets commit together: a killed instance's successor re-keys from the
    committed offsets, restores the held events, drops any repeats of re-keyed records and finds exactly the oracle's
    notifications."""
    import json
    import subprocess
    import sys
    import threading

    from tests.support.kafka_helpers import committed_events

    subs = subscriptions(21, 24)
    evs = events(22, 1200, ties=False)
    grace = 3_600_000
    send_subscriptions(patterns_bootstrap, subs)
    args = [sys.executable, "-m", "fastpubsub", "patterns", "-b", patterns_bootstrap, "--group-id", group_id,
            "--batch-size", "40", "--progress-interval", "60", "--repartition-by", "name", "--grace-ms", str(grace)]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=child_preexec)

    send_scattered(patterns_bootstrap, evs[:50], 0)
    deadline = time.monotonic() + 90
    while committed_events(patterns_bootstrap, group_id) < 50:  # the service runs
        assert time.monotonic() < deadline and first.poll() is None, "the service did not start"
        time.sleep(0.05)

    def write() -> None:
        for k in range(50, len(evs), 50):  # over about 5 s: the kill comes while events still arrive
            send_scattered(patterns_bootstrap, evs[k: k + 50], k)
            time.sleep(0.2)

    writer = threading.Thread(target=write)
    try:
        writer.start()
        deadline = time.monotonic() + 90
        while committed_events(patterns_bootstrap, group_id) < 300:
            assert time.monotonic() < deadline and first.poll() is None, "no progress before the kill"
            time.sleep(0.05)
        time.sleep(0.1)  # likely inside a transaction
    finally:
        first.kill()
        first.wait(10)
        writer.join(60)
    done_at_kill = committed_events(patterns_bootstrap, group_id)
    assert done_at_kill < len(evs), "the kill came after the end: nothing to recover"
    second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=child_preexec)
    try:
        wait_processed(patterns_bootstrap, group_id, timeout=180)
        tail_ts = evs[-1][0] + grace + 1
        send_scattered(patterns_bootstrap, [(tail_ts, {"name": n, "price": 1.0, "volume": 1}) for n in tail_names()], 99)
        wait_processed(patterns_bootstrap, group_id, timeout=60)
        wait_topic_processed(patterns_bootstrap, group_id, topics.pattern_repartition_topic(group_id, "name"))
    finally:
        second.terminate()
        out, err = second.communicate(timeout=60)
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["task"]["events"] == len(evs) and stats["task"]["repartition"]["late_events"] == 0, err[-3000:]
    by_q: dict[int, list] = {}
    for p, stored in stored_events(patterns_bootstrap).items():
        for off, ts, attrs in stored:
            if ts < tail_ts:
                by_q.setdefault(partition_for(attrs["name"], PARTITIONS), []).append((ts, p, off, attrs))
    expected = set()
    for rows in by_q.values():
        o = OraclePatterns()
        for sid, text, _ in subs:
            o.subscribe(sid, parse(text), BASE_TS)
        expected |= {repartitioned_notification_id(w.sid, w.bound) for w in o.process(
            [(event_id(p, off), ts, attrs) for ts, p, off, attrs in sorted(rows, key=lambda r: r[:3])])}
    raw, got = received(patterns_bootstrap)
    print(f"\nkill -9 at {done_at_kill} of {len(evs)} events re-keyed: {len(raw)} notifications read, "
          f"{stats['task']['repartition']['repeated_events']} repeated records dropped, {stats['task']['restores']} restores")
    assert len(expected) > 100
    assert sorted(expected - set(got)) == [], "missing"
    assert sorted(set(got) - expected) == [], "unexpected"
