"""Statistics snapshots of tens of thousands of attributes travel as several records under Kafka's 1 MB limit."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import AttributeStats, EventStatistics, Matcher, SnapshotParts, split_record
from fastpubsub.engine.costmodel.statistics import PartitionOffsets, SourceWindow
from fastpubsub.kafka.statistics_topic import ensure_statistics_topic, latest_snapshot, publish_snapshot
from fastpubsub.wire.codecs import decode_statistics, encode_statistics


def size_of(record) -> int:
    return len(encode_statistics(record))


def snapshot(n_attributes: int, top: int = 5, computed_at: int = 1000, joint: bool = True,
             source_topic: str = "pubsub.events") -> EventStatistics:
    attributes = {f"a{i}": AttributeStats(presence=min(1.0, 1.0 / (i + 1)), distinct=top + 3,
                                          top_values={(0, float(v)): 0.1 for v in range(top)},
                                          quantiles=[float(q) for q in range(top)], value_types={"number": 1.0})
                  for i in range(n_attributes)}
    schemas = {frozenset(("a0", "a1")): 0.4} if joint else {}
    joint_values = {("a0", "a1"): {((0, 1.0), (0, 2.0)): 0.05}} if joint else {}
    return EventStatistics(event_count=5000, attributes=attributes, schemas=schemas, joint=joint_values, source="spark",
                           window=SourceWindow(source_topic, [PartitionOffsets(0, 0, 5000)], computed_at))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 400), st.integers(0, 6), st.sampled_from([3_000, 8_000, 40_000, 10**9]))
@example(178, 0, 3_000)  # the run sizes' sum undercounted a part by a few bytes of its numbers
def test_split_parts_fit_the_bound_and_put_back_together_losslessly(n, top, max_bytes):
    s = snapshot(n, top)
    record = s.to_record()
    parts = split_record(record, size_of, max_bytes)
    assert all(size_of(p) <= max_bytes for p in parts)
    if len(parts) == 1:
        assert parts[0]["part"] is None  # a snapshot that fits stays one record, as before
    else:
        assert [p["part"]["index"] for p in parts] == list(range(len(parts)))
        assert all(p["window"] == record["window"] and p["event_count"] == 5000 for p in parts)
        assert parts[0]["schemas"] and not any(p["schemas"] for p in parts[1:])
    assembler = SnapshotParts()
    out = [assembler.add(decode_statistics(encode_statistics(p))) for p in parts]
    assert all(o is None for o in out[:-1])
    back = EventStatistics.from_record(out[-1])
    assert back.attributes == s.attributes and back.schemas == s.schemas and back.joint == s.joint


def test_parts_of_an_older_snapshot_and_incomplete_ones_are_never_assembled():
    old = split_record(snapshot(300, computed_at=1).to_record(), size_of, 6_000)
    new = split_record(snapshot(300, computed_at=2).to_record(), size_of, 6_000)
    assert len(old) == len(new) > 2
    a = SnapshotParts()
    assert a.add(new[0]) is None
    assert all(a.add(p) is None for p in old)  # stale: an older snapshot's parts
    assert [a.add(p) for p in new[1:-1]] == [None] * (len(new) - 2)
    assert a.add(new[-1])["window"]["computed_at_ms"] == 2
    b = SnapshotParts()
    assert all(b.add(p) is None for p in old[:-1])  # one part missing: nothing comes out
    assert b.add(new[-1]) is None  # a newer snapshot's part drops the older incomplete one


def test_a_snapshot_whose_attribute_sets_alone_are_too_large_is_refused():
    s = snapshot(50)
    s.schemas = {frozenset((f"a{i}", f"a{i + 1}")): 0.1 for i in range(49)}
    with pytest.raises(ValueError, match="attribute sets"):
        split_record(s.to_record(), size_of, 800)


@pytest.mark.broker
def test_sixty_thousand_attributes_are_published_and_read_back_through_the_broker(bootstrap):
    """The job's publish path and the two readers (the job's own last-run state, the processor's feed)."""
    from fastpubsub.kafka import ClientFactory
    from fastpubsub.services.events.statistics_feed import StatisticsFeed
    from fastpubsub.wire import topics

    s = snapshot(60_000, top=1, source_topic="sparse.events", joint=False)
    assert size_of(s.to_record()) > 2**20  # over Kafka's default record limit as one record
    ensure_statistics_topic(bootstrap)
    publish_snapshot(bootstrap, s)
    back = latest_snapshot(bootstrap, "sparse.events")
    assert back is not None and back.attributes == s.attributes
    m = Matcher("dynamic")
    m.add(1, [("a59999", "<", 3), ("a3", ">", 1)])
    feed = StatisticsFeed(ClientFactory(bootstrap), lambda: m, source_topic="sparse.events", topic=topics.STATISTICS)
    try:
        assert feed.adopted == 1 and feed.bad == 0
        assert m.statistics.presence("a59999") == pytest.approx(1 / 60_000)
        assert m.stats()["hash_tables"]["presence_subscriptions"] == 1  # filed under its rarest attribute
    finally:
        feed.close()
