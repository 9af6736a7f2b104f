"""EventStatistics: mu and nu for the cost model, online collection, snapshots."""

import math

import pytest

from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.costmodel.statistics import AttributeStats, EventStatistics, StatisticsCollector
from fastpubsub.workloads.fabret import PRESETS, generate_events


def test_uniform_statistics_before_any_event():
    st = EventStatistics.uniform(default_distinct=35)
    assert st.mu(["a0", "a1"]) == 1.0
    assert st.nu([("a0", 3)]) == pytest.approx(1 / 35)
    assert st.nu([("a0", 3), ("a1", 4)]) == pytest.approx(1 / 35**2)
    assert st.nu([]) == 1.0


def test_collector_learns_w0_and_follows_a_shift_to_w6():
    col = StatisticsCollector(half_life=2000, sample_per_batch=500)
    for seed in range(10):
        col.observe(generate_events(PRESETS["W5"], 500, seed=seed))
    st = col.snapshot()
    assert st.source == "online"
    assert st.presence("a7") == pytest.approx(1.0)
    assert st.attributes["a0"].distinct == 35
    assert st.nu([("a0", 1)]) == pytest.approx(1 / 35, rel=0.35)
    assert st.nu([("a0", 1), ("a1", 2)]) == pytest.approx(1 / 35**2, rel=0.6)
    assert st.attributes["a3"].quantiles[0] == 1 and st.attributes["a3"].quantiles[-1] == 35
    # the stream shifts: a0 now takes 2 values; decay lets the snapshot follow
    for seed in range(40):
        col.observe(generate_events(PRESETS["W6"], 500, seed=100 + seed))
    st = col.snapshot()
    assert st.nu([("a0", 1)]) == pytest.approx(0.5, abs=0.08)
    assert st.nu([("a0", 30)]) < 0.01


def test_collector_handles_strings_booleans_and_missing_attributes():
    col = StatisticsCollector()
    events = [{"movie": "groundhog day", "price": 8}] * 3 + [{"movie": "heat", "vip": True}]
    col.observe(EventBatch.from_dicts(events))
    st = col.snapshot()
    assert st.presence("movie") == 1.0
    assert st.presence("price") == pytest.approx(0.75)
    assert st.presence("unseen") == 0.0
    assert st.nu([("movie", "groundhog day")]) == pytest.approx(0.75)
    assert st.nu([("vip", True)]) == pytest.approx(0.25)
    assert st.nu([("vip", 1)]) == 0.0  # 1 is a number, not a boolean
    assert st.nu([("price", 8.0)]) == pytest.approx(0.75)


def test_values_outside_the_top_list_share_the_remaining_mass():
    st = AttributeStats(presence=1.0, distinct=12, top_values={(0, 1.0): 0.5, (0, 2.0): 0.3})
    assert st.value_probability(1) == 0.5
    assert st.value_probability(7) == pytest.approx(0.2 / 10)


def test_record_round_trip_and_measured_joint_frequencies_win():
    st = EventStatistics(
        event_count=1000,
        attributes={
            "a": AttributeStats(presence=1.0, distinct=2, top_values={(0, 1.0): 0.5, (0, 2.0): 0.5}, quantiles=[1, 2]),
            "b": AttributeStats(presence=0.5, distinct=1, top_values={(1, "x"): 1.0}),
        },
        schemas={frozenset({"a", "b"}): 0.5},
        joint={("a", "b"): {((0, 1.0), (1, "x")): 0.4}},
        source="spark",
    )
    back = EventStatistics.from_record(st.to_record())
    assert back.to_record() == st.to_record()
    assert back.nu([("b", "x"), ("a", 1)]) == pytest.approx(0.4)  # measured, not 0.25
    assert back.nu([("a", 2), ("b", "x")]) == pytest.approx(0.25)  # independence fallback
    assert back.mu(["a", "b"]) == 0.5
    assert math.isclose(back.mu(["a"]), 1.0)


def test_snapshot_round_trips_through_the_avro_schema():
    import io
    import json
    from pathlib import Path

    import fastavro

    schema = fastavro.parse_schema(json.loads((Path(__file__).parents[1] / "src" / "fastpubsub" / "wire" / "schemas" / "statistics.avsc").read_text()))
    col = StatisticsCollector()
    col.observe(generate_events(PRESETS["W0"], 100, seed=1))
    col.observe(EventBatch.from_dicts([{"s": "x", "b": True, "f": 1.5}]))
    st = col.snapshot()
    st.schemas[frozenset({"a0", "a1"})] = 1.0
    st.joint[("a0", "a1")] = {((0, 1.0), (0, 2.0)): 0.01}
    record = st.to_record()
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)
    buf.seek(0)
    back = fastavro.schemaless_reader(buf, schema)
    assert back == record
    assert EventStatistics.from_record(back).nu([("b", True)]) == pytest.approx(st.nu([("b", True)]))
    assert EventStatistics.from_record(back).nu([("a0", 1), ("a1", 2)]) == pytest.approx(0.01)
