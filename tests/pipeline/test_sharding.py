"""Two shards of two instances each: together they notify exactly what one unsharded instance would.

Every shard reads every event partition in its own consumer group
(``<group>.shard-I-of-K``) and holds only the subscriptions whose id hashes
to it; within a shard, the two instances share the event partitions.  The
check is the oracle's answer, by notification id.
"""

from __future__ import annotations

import time

from tests.support.kafka_helpers import committed_events, notifications, wait_processed
from tests.support.random_workload import random_events, random_subscriptions, send_subscriptions
from tests.support.history import check
from tests.faults.test_crash import expected_ids, send_events
from tests.pipeline.test_scale_out import ProcessorProcess

from fastpubsub.services.events.shard import Shard
from fastpubsub.wire.dedup import deduplicate

SHARDS = 2


def start_shards(bootstrap: str, group_id: str, per_shard: int, *options: str) -> dict[int, list[ProcessorProcess]]:
    """``per_shard`` instances of every shard, once each shard's instances share all four event partitions."""
    procs = {i: [ProcessorProcess(bootstrap, group_id, "--shard", f"{i}/{SHARDS}", *options) for _ in range(per_shard)]
             for i in range(SHARDS)}
    every = [p for ps in procs.values() for p in ps]
    deadline = time.monotonic() + 90
    while not all(all(p.assigned for p in ps) and sum(p.assigned for p in ps) == 4 for ps in procs.values()):
        assert time.monotonic() < deadline and all(p.proc.poll() is None for p in every), [p.log[-5:] for p in every]
        time.sleep(0.1)
    return procs


def shard_group(group_id: str, i: int) -> str:
    return Shard(i, SHARDS).group(group_id)


def check_shard_stats(stats: dict[int, list[dict]], subs) -> None:
    for i, ss in stats.items():
        held = sum(1 for sid, _ in subs if Shard(i, SHARDS).owns(sid))
        assert 0 < held < len(subs)
        assert all(s["task"]["subscriptions"] == held and s["task"]["shard"] == f"{i}/{SHARDS}" for s in ss)  # the shard's, not all
        assert all(s["task"]["group"].endswith(f".shard-{i}-of-{SHARDS}") for s in ss)


def test_two_shards_of_two_instances_notify_exactly_what_one_instance_would(bootstrap, group_id):
    subs = random_subscriptions(600, seed=61)
    events = random_events(600, seed=62)
    send_subscriptions(bootstrap, subs)
    procs = start_shards(bootstrap, group_id, 2)
    try:
        send_events(bootstrap, events)
        for i in procs:
            wait_processed(bootstrap, shard_group(group_id, i), timeout=90)
        stats = {i: [p.stop() for p in ps] for i, ps in procs.items()}
    finally:
        for ps in procs.values():
            for p in ps:
                p.kill()

    check_shard_stats(stats, subs)
    for ss in stats.values():  # every shard read every event, shared between its two instances
        assert all(s["events"] > 0 for s in ss) and sum(s["events"] for s in ss) == len(events)
    notes = notifications(bootstrap)
    expected = expected_ids(subs, events)
    history = check("2 shards x 2 instances (transactional)", len(events), expected,
                    [n["notification_id"] for n in notes])
    print("\n" + history.report())
    history.assert_exactly_once()  # each once, no de-duplication needed


def test_killing_an_instance_of_one_shard_loses_nothing(bootstrap, group_id):
    """kill -9 one instance of shard 0 mid-stream: its shard-mate takes its partitions; shard 1 is untouched.

    At-least-once, as in test_scale_out.py: a killed transactional producer's
    transaction holds readers until its transactional.id is reused or it times out.
    """
    subs = random_subscriptions(400, seed=63)
    events = random_events(1500, seed=64)
    send_subscriptions(bootstrap, subs)
    procs = start_shards(bootstrap, group_id, 2, "--delivery", "at-least-once", "--batch-size", "10")
    try:
        send_events(bootstrap, events)
        deadline = time.monotonic() + 60
        while committed_events(bootstrap, shard_group(group_id, 0)) < 200:
            assert time.monotonic() < deadline, [p.log[-5:] for p in procs[0]]
            time.sleep(0.02)
        victim, survivor = procs[0]
        victim.kill()  # SIGKILL
        for i in procs:
            wait_processed(bootstrap, shard_group(group_id, i), timeout=120)
        # the victim may have committed its partitions before the kill: the survivor takes them once the group
        # notices the death (session.timeout.ms), which wait_processed need not wait for
        rebalanced = time.monotonic() + 60
        while survivor.assigned != 4:
            assert time.monotonic() < rebalanced, survivor.log[-5:]
            time.sleep(0.1)
        stats = {0: [survivor.stop()], 1: [p.stop() for p in procs[1]]}
    finally:
        for ps in procs.values():
            for p in ps:
                p.kill()

    check_shard_stats(stats, subs)
    assert 0 < stats[0][0]["events"] < len(events) + 10 * 4  # the victim did part of shard 0's work
    assert sum(s["events"] for s in stats[1]) == len(events)
    notes = notifications(bootstrap)
    expected = expected_ids(subs, events)
    history = check("2 shards x 2 instances, one killed (at-least-once)", len(events), expected,
                    [n["notification_id"] for n in notes])
    print("\n" + history.report("1 kill -9"))
    assert not (history.lost or history.unexpected), history.report()  # the victim's batches may come twice
    assert sorted(n["notification_id"] for n in deduplicate(notes)) == expected


def test_new_shards_take_over_from_the_unsharded_group_without_notifying_twice(bootstrap, group_id, start_processor):
    """One unsharded processor, then two shards started with --start-from-group: each event notified once."""
    subs = random_subscriptions(300, seed=65)
    before, after = random_events(300, seed=66), [{**e, "n": e["n"] + 1000} for e in random_events(300, seed=67)]
    send_subscriptions(bootstrap, subs)
    send_events(bootstrap, before)
    unsharded = start_processor()
    wait_processed(bootstrap, group_id)
    unsharded.stop()
    shards = [start_processor(shard=Shard(i, SHARDS), start_from_groups=(group_id,)) for i in range(SHARDS)]
    send_events(bootstrap, after)
    for i in range(SHARDS):
        wait_processed(bootstrap, shard_group(group_id, i))
    stats = [p.stop() for p in shards]

    assert all(s["events"] == len(after) for s in stats)  # the shards started where the unsharded group stopped
    notes = notifications(bootstrap)
    expected = sorted(expected_ids(subs, before) + expected_ids(subs, after))
    assert sorted(n["notification_id"] for n in notes) == expected  # nothing twice, nothing lost


def test_without_start_from_group_new_shards_read_the_retained_events(bootstrap, group_id, start_processor):
    """The default a new group starts at: the earliest event (what --start-from-group exists to avoid)."""
    subs = random_subscriptions(100, seed=68)
    events = random_events(100, seed=69)
    send_subscriptions(bootstrap, subs)
    send_events(bootstrap, events)
    start_processor()
    wait_processed(bootstrap, group_id)
    p = start_processor(shard=Shard(1, SHARDS))
    wait_processed(bootstrap, shard_group(group_id, 1))
    assert p.stop()["events"] == len(events)
