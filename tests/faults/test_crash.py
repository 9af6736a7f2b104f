"""Nothing is lost when a processor is killed mid-stream: a restarted one picks up from the committed offsets.

The kill falls in the middle of a stream of events *and* subscription
changes.  Every subscription carries ``phase = A`` or ``phase = B``: the
changes (adds, removals, replacements) touch only phase-B subscriptions, and
phase-B events are sent once the restarted processor has read every change,
so the oracle's answer does not depend on how the two topics interleave.
The check is on notification ids: transactional, exactly the expected ones,
each once, with no de-duplication; at-least-once, none lost or unexpected, at most twice
(``tests/support/history.py``).  The restarted processor rebuilds its state from the topic,
or loads the snapshot the first one wrote and replays only the later changes.
Sharded (``--shard``): the killed and restarted processor is shard 0 of 2,
while shard 1 runs throughout; both shards' notifications together are checked.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Producer
from tests.support.history import check
from tests.support.kafka_helpers import committed_events, notifications, send, wait_processed
from tests.support.random_workload import expected_matches, random_events, random_subscriptions, send_subscriptions
from tests.pipeline.test_scale_out import ProcessorProcess

from fastpubsub.kafka.broker import free_port
from fastpubsub.services.events.shard import Shard
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription


def in_phase(subs, phase):
    return [(sid, Subscription(s.subscriber, [*s.predicates, ("phase", "=", phase)])) for sid, s in subs]


def send_events(bootstrap, events):
    producer = Producer({"bootstrap.servers": bootstrap})
    for e in events:
        producer.produce(topics.EVENTS, codecs.encode_event(e), f"k{e['n']}", partition=e["n"] % 4)
    assert producer.flush(30) == 0


def wait_for_changes(port: int, shard: Shard, counts: dict[str, int], timeout: float = 60.0) -> None:
    """Until a processor's /metrics shows these subscription change counts (and says which shard it is)."""
    from tests.runtime.test_metrics import get, parse

    deadline = time.monotonic() + timeout
    while True:
        status, text = get(f"http://127.0.0.1:{port}/metrics")
        m = parse(text) if status == 200 else {}
        got = {k: m.get(("pubsub_subscription_changes_total", frozenset({("change", k)}))) for k in counts}
        if got == counts:
            info = next(labels for name, labels in m if name == "pubsub_info")
            assert dict(info)["shard"] == str(shard)
            assert dict(info)["group_id"].endswith(f".shard-{shard.index}-of-{shard.count}")
            return
        assert time.monotonic() < deadline, f"changes applied {got}, expected {counts}"
        time.sleep(0.1)


def expected_ids(subs, events) -> list[str]:
    return sorted(f"k{n}/{sid}" for n, sids in expected_matches(subs, events).items() for sid in sids)


def assert_delivered(name: str, delivery: str, notes: list[dict], expected: list[str], inputs: int, bootstrap: str,
                     groups: list[str]) -> None:
    """Transactional (``auto`` on Apache Kafka): each notification once, read_committed, without de-duplication;
    at-least-once: none lost, none unexpected, at most the one replayed batch again."""
    history = check(name, inputs, expected, [n["notification_id"] for n in notes], bootstrap,
                    {g: [topics.EVENTS] for g in groups}, [topics.NOTIFICATIONS])
    print("\n" + history.report("1 kill -9"))
    assert all(n["notification_id"] == f"{n['event_id']}/{n['subscription_id']}" for n in notes)
    if delivery == "auto":
        history.assert_exactly_once()
    else:
        history.assert_at_least_once(most=2)


#: CI runs three of the five (each delivery, rebuild and snapshot, sharded); ``make test-faults`` all of them.
@pytest.mark.parametrize("delivery, snapshots, sharded", [
    ("auto", False, False), ("at-least-once", False, False), pytest.param("auto", True, False, marks=pytest.mark.long),
    pytest.param("at-least-once", False, True, marks=pytest.mark.long), ("auto", True, True),
], ids=["auto-rebuild", "at-least-once-rebuild", "auto-snapshot", "at-least-once-rebuild-sharded",
        "auto-snapshot-sharded"])
def test_kill_and_restart_loses_nothing(bootstrap, group_id, delivery, snapshots, sharded, tmp_path):
    options = ("--delivery", delivery, *(("--snapshot-dir", str(tmp_path)) if snapshots else ()))
    shard, other = (Shard(0, 2), Shard(1, 2)) if sharded else (Shard(), None)
    options += ("--shard", str(shard))
    group = shard.group(group_id)  # the consumer group of the killed and restarted processor
    phase_a = in_phase(random_subscriptions(200, seed=8), "A")
    phase_b = in_phase([(sid + 1000, s) for sid, s in random_subscriptions(150, seed=10)], "B")
    events_a = [{**e, "phase": "A"} for e in random_events(2000, seed=9)]
    events_b = [{**e, "n": e["n"] + 10_000, "phase": "B"} for e in random_events(500, seed=11)]
    added = in_phase([(sid + 2000, s) for sid, s in random_subscriptions(60, seed=12)], "B")
    removed = [sid for sid, _ in phase_b[:40]]
    replaced = in_phase([(sid, s) for (sid, _), (_, s) in zip(phase_b[40:80], random_subscriptions(40, seed=13))], "B")
    final_b = dict(phase_b) | dict(replaced) | dict(added)
    for sid in removed:
        del final_b[sid]

    send_subscriptions(bootstrap, phase_a + phase_b)
    send_events(bootstrap, events_a)
    first = second = bystander = None
    try:
        if other is not None:
            port = free_port()
            bystander = ProcessorProcess(bootstrap, group_id, *options[:-1], str(other), "--metrics-port", str(port))
        first = ProcessorProcess(bootstrap, group_id, *options, "--batch-size", "10")
        deadline = time.monotonic() + 60
        while committed_events(bootstrap, group) < 50:
            assert time.monotonic() < deadline and first.proc.poll() is None, first.log[-5:]
            time.sleep(0.02)
        send_subscriptions(bootstrap, added[:30] + replaced[:20])  # changes while it works...
        while committed_events(bootstrap, group) < 150:
            assert time.monotonic() < deadline and first.proc.poll() is None, first.log[-5:]
            time.sleep(0.02)
        os.kill(first.proc.pid, signal.SIGKILL)  # ...killed without warning in the middle of both streams
        first.proc.wait(10)
        send(bootstrap, topics.SUBSCRIPTIONS, [(str(sid), None) for sid in removed])  # and after the kill
        send_subscriptions(bootstrap, added[30:] + replaced[20:])

        second = ProcessorProcess(bootstrap, group_id, *options)
        groups = [group] + ([other.group(group_id)] if other else [])
        for g in groups:  # phase A done: the restarted one (and the other shard) have read every change
            wait_processed(bootstrap, g, timeout=120)
        if bystander is not None:  # the other shard has applied every change it owns, live
            owned = lambda sids: sum(1 for sid in sids if other.owns(sid))  # noqa: E731
            wait_for_changes(port, other, {"added": owned([*dict(phase_a), *dict(phase_b), *dict(added)]),
                                           "replaced": owned(dict(replaced)), "removed": owned(removed)})
        send_events(bootstrap, events_b)
        for g in groups:
            wait_processed(bootstrap, g, timeout=120)
        stats = second.stop()
        assert 0 < stats["events"] < len(events_a) + len(events_b)  # the first one did part of the work
        held = [sid for sid in [*dict(phase_a), *final_b] if shard.owns(sid)]
        assert stats["task"]["subscriptions"] == len(held) and stats["task"]["shard"] == str(shard)
        if bystander is not None:
            rest = bystander.stop()
            assert rest["task"]["subscriptions"] == len(phase_a) + len(final_b) - len(held)
            assert rest["events"] == len(events_a) + len(events_b)  # the other shard read every event too
        if snapshots:
            assert any("snapshot written" in line for line in first.log), first.log[-10:]
            assert any("snapshot loaded" in line for line in second.log), second.log[-10:]
    finally:
        for p in (first, second, bystander):
            if p is not None:
                p.kill()

    notes = notifications(bootstrap)
    expected = expected_ids(phase_a, events_a) + expected_ids(list(final_b.items()), events_b)
    assert_delivered(f"crash ({delivery}, {'snapshot' if snapshots else 'rebuild'}{', sharded' if sharded else ''})",
                     delivery, notes, expected, len(events_a) + len(events_b), bootstrap,
                     [group] + ([other.group(group_id)] if other else []))


@pytest.mark.parametrize("delivery", ["auto", pytest.param("at-least-once", marks=pytest.mark.long)])
def test_a_kill_inside_a_transaction_of_several_batches_loses_nothing(bootstrap, group_id, delivery):
    """kill -9 while a transaction holds several batches (a backlog, batches of 10, a 300 ms interval).

    The batches since the last commit are consumed again by the restarted
    processor: every notification is there; transactional, exactly once (the
    killed one's open transaction is aborted by its successor), at least once
    otherwise (at most twice: the replayed batches).
    """
    subs = random_subscriptions(200, seed=18)
    events = random_events(20_000, seed=19)
    send_subscriptions(bootstrap, subs)
    send_events(bootstrap, events)
    first = second = None
    try:
        first = ProcessorProcess(bootstrap, group_id, "--delivery", delivery, "--batch-size", "10",
                                 "--commit-interval-ms", "300")
        deadline = time.monotonic() + 60
        while (done := committed_events(bootstrap, group_id)) < 100:  # a commit of more than a few batches
            assert time.monotonic() < deadline and first.proc.poll() is None, first.log[-5:]
            time.sleep(0.02)
        os.kill(first.proc.pid, signal.SIGKILL)  # the next transaction has been open for less than its interval
        first.proc.wait(10)
        assert done < len(events)
        second = ProcessorProcess(bootstrap, group_id, "--delivery", delivery)
        wait_processed(bootstrap, group_id, timeout=180)
        stats = second.stop()
        assert 0 < stats["events"] <= len(events) - done
    finally:
        for p in (first, second):
            if p is not None:
                p.kill()

    notes = notifications(bootstrap)
    expected = expected_ids(subs, events)
    # transactional: the open transaction was aborted, none of its records reach a read_committed reader
    assert_delivered(f"crash in a transaction of several batches ({delivery})", delivery, notes, expected,
                     len(events), bootstrap, [group_id])
