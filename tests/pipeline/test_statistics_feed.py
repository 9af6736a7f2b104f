"""A running processor adopts the statistics snapshots of pubsub.statistics (issue 4).

Subscriptions like Fabret's W0 (equalities on a0 and a1 in every one) make the
dynamic clustering build an (a0, a1) hash table under uniform statistics; a
snapshot of events without a1 makes it worthless.  The same through the Spark
job itself, end to end, is in tests/stats_job/test_spark_statistics.py (it shares that
module's SparkSession).
"""

from __future__ import annotations

import time

import pytest
from tests.support.kafka_helpers import dead_letters, send
from tests.support.statistics_helpers import events_without_a1, snapshot_of, w0_subscriptions

from fastpubsub.workloads.fabret import PRESETS, generate_events
from fastpubsub.kafka import ClientFactory
from fastpubsub.wire import codecs, topics
from fastpubsub.services.events.statistics_feed import describe_change
from fastpubsub.kafka.statistics_topic import publish_snapshot

pytestmark = pytest.mark.timeout(300)


def test_bad_snapshots_are_dead_lettered_and_a_restart_starts_from_the_latest(bootstrap, start_processor):
    w0_subscriptions(bootstrap, 5_000)
    first = snapshot_of(events_without_a1(500), 500)
    publish_snapshot(bootstrap, first)
    p = start_processor()
    feed = p.processor.task.statistics_feed
    assert feed.adopted == 1 and feed.last["event_count"] == 500  # read at startup, before the rebuild
    assert p.state.matcher.statistics.presence("a1") == 0.0

    other = codecs.encode_statistics(snapshot_of(events_without_a1(10), 10).to_record())
    send(bootstrap, topics.STATISTICS, [
        (topics.EVENTS, b"not a snapshot"),
        (topics.EVENTS, other[:-30]),  # truncated Avro
        ("other.events", other),  # a snapshot of another topic: not for this processor
    ])
    p.wait_for(lambda: feed.bad == 2, what="two bad snapshots")
    second = snapshot_of(generate_events(PRESETS["W0"], 700, 3).to_dicts(), 700)
    publish_snapshot(bootstrap, second)
    p.wait_for(lambda: feed.adopted == 2, what="the good snapshot after the bad ones")
    assert feed.last["event_count"] == 700 and p.state.matcher.statistics.presence("a1") == 1.0
    assert p.stop()["task"]["statistics"]["bad_snapshots"] == 2
    reasons = [d.reason for d in dead_letters(bootstrap) if d.source_topic == topics.STATISTICS]
    assert len(reasons) == 2 and all(r.startswith("statistics snapshot not adopted") for r in reasons)

    again = start_processor()  # reads the topic from the beginning: the latest good snapshot wins
    assert again.processor.task.statistics_feed.adopted == 1 and again.processor.task.statistics_feed.last["event_count"] == 700
    again.stop()


def test_the_processor_runs_without_the_statistics_topic(bootstrap, start_processor):
    client = ClientFactory(bootstrap).admin()
    client.delete_topics([topics.STATISTICS])[topics.STATISTICS].result(10)
    while topics.STATISTICS in client.list_topics(timeout=10).topics:
        time.sleep(0.1)
    p = start_processor()
    assert p.processor.task.statistics_feed.adopted == 0 and not p.processor.task.statistics_feed.poll()
    assert topics.STATISTICS not in client.list_topics(timeout=10).topics  # not auto-created by looking for it
    p.stop()


def test_configuration_changes_read_as_created_and_dropped_tables():
    assert describe_change({"a0,a1": 5}, {"a0,a1": 5}) == "unchanged (1 tables)"
    assert describe_change({"a0,a1": 5, "a2,a3": 1}, {"a2,a3": 6, "a4,a5:string": 2}) == "+a4,a5:string -a0,a1 (1 kept)"


def test_a_state_restored_from_a_processor_snapshot_gets_the_adopted_statistics(bootstrap, start_processor, tmp_path):
    w0_subscriptions(bootstrap, 2_000)
    publish_snapshot(bootstrap, snapshot_of(events_without_a1(300), 300))
    first = start_processor(snapshot_dir=str(tmp_path))
    first.stop()  # a clean stop writes a processor snapshot
    again = start_processor(snapshot_dir=str(tmp_path))
    assert again.processor.task.rebuild_records == 0  # the state came from the snapshot, not the topic
    assert again.state.matcher.statistics.presence("a1") == 0.0
    again.stop()
