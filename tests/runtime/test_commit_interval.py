"""Adaptive batches: a transaction (at-least-once: a commit) holds the batches of up to --commit-interval-ms.

A batch is what has arrived, up to --batch-size; the open transaction is
committed when the interval has passed since its first batch, or at once
when a batch comes back short (the input is drained), so a quiet input waits
for one batch and one commit while a backlog goes through in few commits.
Nothing may be lost or duplicated by holding several batches in one
transaction (the kill -9 case is in test_crash.py).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from click.testing import CliRunner
from tests.support.kafka_helpers import committed_events, notifications, producer, send, wait_processed
from tests.support.random_workload import by_event, expected_matches, random_events, random_subscriptions, send_events, send_subscriptions

from fastpubsub.cli import main
from fastpubsub.runtime import HostConfig
from fastpubsub.kafka.delivery import DeliveryError
from fastpubsub.runtime.checkpoint import MAX_COMMIT_INTERVAL_MS, PACE, Checkpoint, InFlight, Uncommitted
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

# --- when a commit is due (no broker) ---------------------------------------------------


def test_nothing_open_is_never_due():
    assert not Uncommitted(0.1).due(drained=True)
    assert not Uncommitted(0.0).due(drained=False)


def test_a_drained_input_commits_at_once_a_backlog_waits_for_the_interval():
    u = Uncommitted(0.1)
    u.add({("e", 0): 10}, events=10, notifications=3)
    opened = u.since
    assert u and not u.due(drained=False, now=opened + 0.099)
    assert u.due(drained=False, now=opened + 0.101)  # the interval has passed since the first batch
    assert u.due(drained=True, now=opened)  # a short batch: nothing more is waiting


def test_with_a_linger_a_drained_input_stays_open_until_the_linger_has_passed():
    u = Uncommitted(0.1, linger=0.02)
    assert u.lingering() == 0.0  # nothing open: nothing to wait for
    u.add({("e", 0): 10}, events=10, notifications=3)
    opened = u.since
    assert not u.due(drained=True, now=opened + 0.019)
    assert u.lingering(now=opened + 0.005) == pytest.approx(0.015)
    assert u.due(drained=True, now=opened + 0.021) and u.lingering(now=opened + 0.021) == 0.0
    assert not u.due(drained=False, now=opened + 0.05)  # a backlog still waits for the interval
    assert Uncommitted(0.01, linger=0.5).linger == 0.01  # never longer than the interval


def test_a_drained_input_waits_after_a_commit_pace_times_what_that_commit_took_but_never_past_the_interval():
    cp = Checkpoint(100)
    cp.uncommitted.add({("e", 0): 1}, 1, 0)
    assert cp.uncommitted.due(drained=True)  # nothing committed yet: a quiet input commits at once
    cp.uncommitted.clear()
    ended = time.monotonic()
    cp.pace(0.01, ended)  # a commit that took 10 ms ended just now: the next waits PACE x 10 ms
    wait = PACE * 0.01
    assert PACE >= 1 and wait < 0.1  # (the interval below bounds it)
    u = cp.uncommitted
    u.add({("e", 0): 2}, 1, 0)
    assert not u.due(drained=True, now=ended + wait - 0.001)
    assert u.lingering(now=ended + 0.004) == pytest.approx(wait - 0.004)  # the loop waits for input meanwhile
    assert u.due(drained=True, now=ended + wait + 0.0001)
    assert cp.new_uncommitted().paced == u.paced == pytest.approx(ended + wait)  # and the next transaction too
    cp.pace(5.0, ended)  # a commit slower than the interval: the interval still bounds the wait
    assert u.due(drained=True, now=u.since + 0.1001) and u.lingering(now=u.since + 0.05) == pytest.approx(0.05)


def test_a_quiet_input_is_committed_at_once_after_a_pause_longer_than_the_last_commit():
    u = Uncommitted(0.1, paced=time.monotonic() - 1.0)
    u.add({("e", 0): 1}, 1, 0)
    assert u.due(drained=True) and u.lingering() == 0.0


def test_the_linger_is_checked_against_the_interval():
    with pytest.raises(ValueError, match="commit_linger_ms must be .* from 0 to the commit interval"):
        HostConfig("localhost:9092", "g", commit_interval_ms=50, commit_linger_ms=60)
    result = CliRunner().invoke(main, ["run", "-b", "localhost:1", "--commit-linger-ms", "-1"])
    assert result.exit_code != 0 and "--commit-linger-ms" in result.output


def test_interval_zero_commits_every_batch():
    u = Uncommitted(0.0)
    u.add({("e", 0): 1}, 1, 0)
    assert u.due(drained=False, now=u.since)


def test_the_offsets_of_every_batch_go_with_the_commit_the_latest_per_partition():
    u = Uncommitted(10.0)
    u.add({("e", 0): 10, ("e", 1): 4}, 12, 2)
    first = u.since
    u.add({("e", 0): 20, ("e", 2): 7}, 15, 1)
    assert u.since == first  # the interval runs from the first batch
    assert sorted((tp.partition, tp.offset) for tp in u.topic_partitions()) == [(0, 20), (1, 4), (2, 7)]
    assert (u.events, u.notifications, u.batches) == (27, 3, 2)
    u.clear()
    assert not u and u.topic_partitions() == [] and (u.events, u.notifications, u.batches) == (0, 0, 0)


# --- bad settings ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, MAX_COMMIT_INTERVAL_MS + 1, 2.5, None])
def test_config_refuses_a_commit_interval_out_of_range(value):
    with pytest.raises(ValueError, match=f"commit_interval_ms must be a whole number of milliseconds from 0 .* to "
                                         f"{MAX_COMMIT_INTERVAL_MS} .*got {value!r}"):
        HostConfig("127.0.0.1:1", "g", commit_interval_ms=value)


@pytest.mark.parametrize("value", [0, -5, 1.5])
def test_config_refuses_a_batch_size_below_one(value):
    with pytest.raises(ValueError, match=f"batch_size must be a whole number of records, at least 1, got {value!r}"):
        HostConfig("127.0.0.1:1", "g", batch_size=value)


@pytest.mark.parametrize("args, message", [
    (["--commit-interval-ms", "-1"], "Invalid value for '--commit-interval-ms': -1 is not in the range 0<=x<=30000"),
    (["--commit-interval-ms", "30001"], "30001 is not in the range 0<=x<=30000"),
    (["--commit-interval-ms", "0.5"], "Invalid value for '--commit-interval-ms': '0.5' is not a valid integer"),
    (["--batch-size", "0"], "Invalid value for '--batch-size': 0 is not in the range x>=1"),
])
def test_run_refuses_bad_batching_flags(args, message):
    result = CliRunner().invoke(main, ["run", "-b", "127.0.0.1:1", *args])
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize("args, message", [
    (["--commit-interval-ms", "-1"], "Invalid value for '--commit-interval-ms'"),
    (["--delivery", "sometimes"], "Invalid value for '--delivery'"),
])
def test_bench_refuses_bad_processor_flags(args, message):
    from benchmarks.suite import bench_cmd

    result = CliRunner().invoke(bench_cmd, ["e2e", *args])
    assert result.exit_code == 2 and message in result.output, result.output


# --- through the broker ------------------------------------------------------------------


@pytest.mark.broker
@pytest.mark.parametrize("delivery", ["auto", "at-least-once"])
def test_a_backlog_goes_through_in_transactions_of_several_batches(bootstrap, group_id, start_processor, delivery):
    """Full batches wait for the interval: fewer commits than batches, and every notification exactly once."""
    subs = random_subscriptions(300, seed=31)
    events = random_events(3000, seed=32)
    send_subscriptions(bootstrap, subs)
    send_events(bootstrap, events)  # a backlog before the start: batches come full
    p = start_processor(batch_size=20, commit_interval_ms=2000, delivery=delivery)
    wait_processed(bootstrap, group_id, timeout=120)
    stats = p.stop()

    notes = notifications(bootstrap)
    assert by_event(notes) == {n: s for n, s in expected_matches(subs, events).items() if s}
    assert max(Counter(n["notification_id"] for n in notes).values()) == 1
    assert stats["events"] == len(events) and stats["notifications"] == len(notes)
    assert stats["batches"] >= len(events) // 20
    assert stats["commits"] < stats["batches"] / 3, stats  # several batches per transaction
    assert stats["replays"] == 0


@pytest.mark.broker
def test_with_a_linger_a_trickle_shares_commits_and_a_lone_event_waits_for_the_linger_not_the_interval(
        bootstrap, group_id, start_processor):
    send_subscriptions(bootstrap, [(1, Subscription("alice", [("price", "<", 1000)]))])
    p = start_processor(commit_interval_ms=MAX_COMMIT_INTERVAL_MS, commit_linger_ms=300)
    send(bootstrap, topics.EVENTS, [("lone", codecs.encode_event({"price": 1}))])
    deadline = time.monotonic() + MAX_COMMIT_INTERVAL_MS / 1000 / 3  # far below the interval
    while committed_events(bootstrap, group_id) < 1:
        assert time.monotonic() < deadline, "a lone event waited for the interval, not the linger"
        time.sleep(0.05)
    out = producer(bootstrap)
    for i in range(40):  # a trickle: each batch comes back short (drained)
        out.produce(topics.EVENTS, codecs.encode_event({"price": i}), f"t{i}")
        out.flush(10)
        time.sleep(0.01)
    wait_processed(bootstrap, group_id, timeout=60)
    stats = p.stop()
    ids = Counter(n["event_id"] for n in notifications(bootstrap))
    assert ids == Counter(["lone"] + [f"t{i}" for i in range(40)])  # each notified once
    assert stats["events"] == 41 and stats["commits"] < stats["batches"], stats  # batches shared commits


@pytest.mark.broker
@pytest.mark.parametrize("delivery", ["auto", "at-least-once"])
def test_a_quiet_input_is_committed_at_once_not_after_the_interval(bootstrap, group_id, start_processor, delivery):
    """With the longest interval, one event alone is still committed (and notified) as soon as it is processed."""
    send_subscriptions(bootstrap, [(1, Subscription("alice", [("price", "<", 10)]))])
    p = start_processor(commit_interval_ms=MAX_COMMIT_INTERVAL_MS, delivery=delivery)
    for i in range(3):
        send(bootstrap, topics.EVENTS, [(f"q{i}", codecs.encode_event({"price": i}))])
        deadline = time.monotonic() + MAX_COMMIT_INTERVAL_MS / 1000 / 3  # far below the interval
        while committed_events(bootstrap, group_id) < i + 1:
            assert time.monotonic() < deadline, f"event q{i} not committed well within the interval"
            time.sleep(0.05)
    stats = p.stop()
    assert sorted(n["event_id"] for n in notifications(bootstrap)) == ["q0", "q1", "q2"]
    assert stats["commits"] >= 3 and stats["events"] == 3


@pytest.mark.broker
def test_a_clean_stop_commits_the_open_transaction(bootstrap, group_id, start_processor):
    """SIGTERM / stop() while a transaction holds batches: they are committed, not aborted and replayed."""
    subs = random_subscriptions(100, seed=41)
    events = random_events(20_000, seed=42)
    send_subscriptions(bootstrap, subs)
    send_events(bootstrap, events)
    p = start_processor(batch_size=10, commit_interval_ms=MAX_COMMIT_INTERVAL_MS)
    p.wait_for(lambda: p.processor.checkpoint.uncommitted.events > 0, what="an open transaction")
    stats = p.stop()
    done = committed_events(bootstrap, group_id)
    assert done == stats["events"] > 0  # every event it processed is committed, and counted once committed
    again = start_processor()  # what is left is processed by the next one, nothing twice
    wait_processed(bootstrap, group_id, timeout=120)
    rest = again.stop()
    assert rest["events"] > 0 and stats["events"] + rest["events"] == len(events)
    notes = notifications(bootstrap)
    assert max(Counter(n["notification_id"] for n in notes).values()) == 1
    assert by_event(notes) == {n: s for n, s in expected_matches(subs, events).items() if s}


# --- commits overlapped with the next batch -----------------------------------------------


def test_a_commit_in_flight_gives_its_batches_once_settled_or_its_error():
    flight = InFlight()
    try:
        assert not flight and not flight.done()
        held = Uncommitted(0.1)
        held.add({("e", 0): 5}, 5, 1)
        gate = threading.Event()
        flight.start(gate.wait, held)
        assert flight and not flight.done()  # the loop goes on meanwhile
        gate.set()
        assert flight.result() is held and not flight
        flight.start(lambda: (_ for _ in ()).throw(DeliveryError("broker gone")), held)
        with pytest.raises(DeliveryError, match="broker gone"):
            flight.result()
        assert not flight  # a failed commit is not in flight any more: its batches are replayed by the caller
    finally:
        flight.close()


@pytest.mark.broker
@pytest.mark.parametrize("overlap", [True, False])
def test_batches_taken_while_a_commit_is_in_flight_are_delivered_once(bootstrap, group_id, start_processor, overlap):
    """Events arriving in bursts: with --overlap-commits the next batch is decoded and matched while the previous
    transaction commits; every notification exactly once either way."""
    subs = random_subscriptions(300, seed=51)
    events = random_events(2000, seed=52)
    send_subscriptions(bootstrap, subs)
    p = start_processor(batch_size=50, overlap_commits=overlap)
    for i in range(0, len(events), 100):
        send_events(bootstrap, events[i:i + 100])
        time.sleep(0.02)
    wait_processed(bootstrap, group_id, timeout=120)
    stats = p.stop()
    notes = notifications(bootstrap)
    assert by_event(notes) == {n: s for n, s in expected_matches(subs, events).items() if s}
    assert max(Counter(n["notification_id"] for n in notes).values()) == 1
    assert stats["events"] == len(events) and stats["notifications"] == len(notes) and stats["replays"] == 0
    assert (stats["overlapped_batches"] > 0) == overlap, stats


@pytest.mark.broker
def test_a_commit_that_fails_in_flight_is_replayed(bootstrap, group_id, start_processor):
    """The commit thread's failure comes out when the loop settles it: every batch since the last successful
    commit is consumed again, so each event is counted once and notified (a replay may repeat a notification id)."""
    subs = random_subscriptions(200, seed=61)
    events = random_events(1500, seed=62)
    send_subscriptions(bootstrap, subs)
    p = start_processor(batch_size=50, delivery="at-least-once", overlap_commits=True)
    p.wait_for(lambda: p.processor.ready.is_set(), what="ready")
    commit, failed = p.processor.sink.commit, []

    def failing_once(*args, **kwargs):
        if not failed and threading.current_thread().name.startswith("pubsub-commit"):
            failed.append(True)
            raise DeliveryError("injected: the broker did not answer")
        return commit(*args, **kwargs)

    p.processor.sink.commit = failing_once
    send_events(bootstrap, events)
    wait_processed(bootstrap, group_id, timeout=120)
    stats = p.stop()
    assert failed and stats["replays"] >= 1
    assert stats["events"] == len(events)  # counted once committed: the failed commit's batches once, on the replay
    assert by_event(notifications(bootstrap)) == {n: s for n, s in expected_matches(subs, events).items() if s}
