"""A running processor adopts the statistics snapshots of pubsub.statistics (issue 4).

Subscriptions like Fabret's W0 (equalities on a0 and a1 in every one) make the
dynamic clustering build an (a0, a1) hash table under uniform statistics.
The events that then flow never carry a1: once the Spark job's snapshot says
so, the table is worth nothing and maintenance drops it.
"""

from __future__ import annotations

import time

import pytest
from kafka_helpers import dead_letters, send

from engine.encoding import batch_from_dicts
from engine.statistics import EventStatistics, PartitionOffsets, SourceWindow, StatisticsCollector
from engine.workload import PRESETS, generate_events, generate_subscriptions
from processor import codecs, topics
from processor.statistics_feed import describe_change
from processor.statistics_topic import publish_snapshot

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

N_SUBSCRIPTIONS = 20_000


def w0_subscriptions(bootstrap: str, n: int = N_SUBSCRIPTIONS) -> None:
    records = [(str(sid).encode(), codecs.encode_subscription(codecs.Subscription(f"u{sid % 7}", preds)))
               for sid, preds in generate_subscriptions(PRESETS["W0"], n, seed=1).to_lists()]
    send(bootstrap, topics.SUBSCRIPTIONS, records)


def events_without_a1(n: int, seed: int = 2) -> list[dict]:
    events = generate_events(PRESETS["W0"], n, seed).to_dicts()
    for e in events:
        del e["a1"]
    return events


def snapshot_of(events: list[dict], offsets: int) -> EventStatistics:
    """A snapshot as the job would publish it, computed online (no Spark needed)."""
    collector = StatisticsCollector(sample_per_batch=len(events))
    collector.observe(batch_from_dicts(events))
    stats = collector.snapshot()
    stats.source = "spark"
    stats.window = SourceWindow(topics.EVENTS, [PartitionOffsets(0, 0, offsets)], computed_at_ms=1)
    return stats


def test_the_spark_job_snapshot_reaches_a_running_processor_and_the_clustering_reacts(bootstrap, start_processor, group_id, tmp_path):
    from spark_jobs.statistics_job import run_statistics_job, spark_session

    w0_subscriptions(bootstrap)
    p = start_processor()
    matcher = p.state.matcher
    assert len(matcher) == N_SUBSCRIPTIONS
    assert "a0,a1" in _tables(p), "uniform statistics: W0's two fixed equalities call for an (a0, a1) table"
    assert p.processor.statistics_feed.adopted == 0 and matcher.statistics.source != "spark"

    events = events_without_a1(1500)  # under 2000: too few for the online statistics to take over (engine.matcher)
    bad = [b"garbage", b'{"a0": [1]}']
    send(bootstrap, topics.EVENTS, [(f"e{i}", codecs.encode_event(e)) for i, e in enumerate(events)]
         + [(None, b) for b in bad])
    p.wait_for(lambda: p.processor.events == len(events), timeout=60, what="the events matched")

    spark = spark_session("local[2]", driver_memory="1g")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        job = run_statistics_job(bootstrap, output=tmp_path / "statistics.json", spark=spark)
    finally:
        spark.stop()
    assert job.records == len(events) + len(bad) and job.statistics.bad_records == len(bad)
    assert job.published is not None

    feed = p.processor.statistics_feed
    p.wait_for(lambda: feed.adopted == 1, what="the snapshot adopted by the running processor")
    assert matcher.statistics.source == "spark" and matcher.statistics.event_count == len(events)
    assert matcher.statistics.presence("a1") == 0.0 and matcher.statistics.presence("a0") == 1.0
    last = feed.last
    assert last["event_count"] == len(events) and last["at"] == f"{topics.STATISTICS}[0]@{job.published[1]}"
    assert "a0,a1" in last["tables_before"] and "a0,a1" not in last["tables_after"]
    assert last["tables_dropped"] >= 1 and "a0,a1" not in _tables(p)
    stats = p.stop()
    assert stats["statistics"]["snapshots_adopted"] == 1 and stats["statistics"]["bad_snapshots"] == 0
    assert stats["dead_letters"] == {topics.EVENTS: len(bad)}  # the processor's own verdict on the bad events


def test_bad_snapshots_are_dead_lettered_and_a_restart_starts_from_the_latest(bootstrap, start_processor):
    w0_subscriptions(bootstrap, 5_000)
    first = snapshot_of(events_without_a1(500), 500)
    publish_snapshot(bootstrap, first)
    p = start_processor()
    feed = p.processor.statistics_feed
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
    assert p.stop()["statistics"]["bad_snapshots"] == 2
    reasons = [d.reason for d in dead_letters(bootstrap) if d.source_topic == topics.STATISTICS]
    assert len(reasons) == 2 and all(r.startswith("statistics snapshot not adopted") for r in reasons)

    again = start_processor()  # reads the topic from the beginning: the latest good snapshot wins
    assert again.processor.statistics_feed.adopted == 1 and again.processor.statistics_feed.last["event_count"] == 700
    again.stop()


def test_the_processor_runs_without_the_statistics_topic(bootstrap, start_processor):
    client = topics.admin(bootstrap)
    client.delete_topics([topics.STATISTICS])[topics.STATISTICS].result(10)
    while topics.STATISTICS in client.list_topics(timeout=10).topics:
        time.sleep(0.1)
    p = start_processor()
    assert p.processor.statistics_feed.adopted == 0 and not p.processor.statistics_feed.poll()
    assert topics.STATISTICS not in client.list_topics(timeout=10).topics  # not auto-created by looking for it
    p.stop()


def test_configuration_changes_read_as_created_and_dropped_tables():
    assert describe_change({"a0,a1": 5}, {"a0,a1": 5}) == "unchanged (1 tables)"
    assert describe_change({"a0,a1": 5, "a2,a3": 1}, {"a2,a3": 6, "a4,a5:string": 2}) == "+a4,a5:string -a0,a1 (1 kept)"


def _tables(p) -> dict[str, int]:
    from processor.statistics_feed import hash_tables

    return hash_tables(p.state.matcher)
