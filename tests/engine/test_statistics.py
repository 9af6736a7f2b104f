"""EventStatistics: mu and nu for the cost model, online collection, snapshots."""

import math
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.naive import DictStatisticsCollector

from fastpubsub.engine import Matcher
from fastpubsub.engine.columnar import EventBatch, take_events
from fastpubsub.engine.costmodel.probabilities import EventProbabilities
from fastpubsub.engine.costmodel.statistics import AttributeStats, AttributeTable, EventStatistics, StatisticsCollector
from fastpubsub.engine.semantics import OP_EQ
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

    schema = fastavro.parse_schema(json.loads((Path(__file__).parents[2] / "src" / "fastpubsub" / "wire" / "schemas" / "statistics.avsc").read_text()))
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


# --- the array collector against the dict one (tests/support/naive.py) ------------------------------

NAMES = ["a", "b", "c", "d", "e"]
value = st.one_of(st.integers(0, 4), st.sampled_from([0.5, -0.0, 2.0, float("nan")]), st.booleans(),
                  st.sampled_from(["x", "y", "z", "w", ""]), st.text(max_size=2))
event = st.dictionaries(st.sampled_from(NAMES), st.one_of(value, st.lists(value, max_size=3)), max_size=4)
batches = st.lists(st.lists(event, max_size=8), min_size=1, max_size=12)


def same_snapshot(got: EventStatistics, want: EventStatistics) -> None:
    assert (got.source, got.event_count) == (want.source, want.event_count)
    assert sorted(got.attributes) == sorted(want.attributes) and len(got.attributes) == len(want.attributes)
    for name, w in want.attributes.items():
        g = got.attributes[name]
        assert g.presence == pytest.approx(w.presence, rel=1e-12) and g.distinct == w.distinct
        assert g.top_values.keys() == w.top_values.keys()
        assert list(g.top_values.values()) == pytest.approx([w.top_values[k] for k in g.top_values], rel=1e-12)
        assert g.quantiles == w.quantiles and g.value_types == w.value_types == {}


def queries(events: list[list[dict]]) -> list[tuple[str, object]]:
    """Every (attribute, value) the events carried, values they never carried and an attribute never seen."""
    seen = {(a, v) for b in events for e in b for a, vs in e.items() for v in (vs if isinstance(vs, list) else [vs])
            if not (isinstance(v, float) and math.isnan(v))}
    return sorted(seen | {(a, v) for a in NAMES + ["never"] for v in (3, 9.5, True, False, "x", "unseen")}, key=repr)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.integers(1, 4), st.integers(1, 12), st.integers(1, 6), st.sampled_from([0.5, 1.0, 2.0]),
       st.integers(0, 2))
def test_array_collector_gives_the_dict_collectors_snapshots(events, top_k, half_life, sample, min_count, compact):
    """Same sampling, decay boundaries, ties of the top list (the first seen wins), dropped and returning values,
    repeated attributes, NaN (counted present, no value), -0.0 as 0.0; dictionaries compacted as they go."""
    options = dict(top_k=top_k, half_life=half_life, sample_per_batch=sample, min_count=min_count)
    col, naive = StatisticsCollector(**options, compact_after=compact), DictStatisticsCollector(**options)
    for b in events:
        batch = EventBatch.from_dicts(b)
        col.observe(batch)
        naive.observe(batch)
        same_snapshot(col.snapshot(), naive.snapshot())
    got, want = col.snapshot(), naive.snapshot()
    asked = queries(events)
    for name, v in asked:
        assert got.value_probability(name, v) == pytest.approx(want.value_probability(name, v), rel=1e-12, abs=1e-300)
        assert got.presence(name) == pytest.approx(want.presence(name), rel=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.integers(1, 4), st.integers(2, 12))
def test_nu_and_presence_of_live_predicates_agree_with_the_dict_snapshot(events, top_k, half_life):
    """EventProbabilities over the arrays (all predicates at once) gives the per-predicate floats of the same
    snapshot exactly, and the dict collector's up to rounding."""
    options = dict(top_k=top_k, half_life=half_life, sample_per_batch=5)
    col, naive = StatisticsCollector(**options, compact_after=0), DictStatisticsCollector(**options)
    for b in events:
        col.observe(EventBatch.from_dicts(b))
        naive.observe(EventBatch.from_dicts(b))
    m = Matcher("static")
    for sid, (name, v) in enumerate(queries(events)):
        m.add(sid, [(name, "=", v)])
    m.flush()
    top = m.preds.n_ids
    live = np.flatnonzero((m.preds.refcount[:top] > 0) & (m.preds.op[:top] == OP_EQ))
    fields = m.preds.field[live]
    probs: EventProbabilities = m.probabilities
    probs.statistics = want = naive.snapshot()
    nu_want, presence_want = probs.nu(live), probs.presence(fields)
    probs.statistics = got = col.snapshot()
    assert got.source == want.source
    if want.source == "uniform":
        return
    assert isinstance(got.attributes, AttributeTable)
    nu_got, presence_got = probs.nu(live), probs.presence(fields)
    np.testing.assert_allclose(nu_got, nu_want, rtol=1e-12)
    np.testing.assert_allclose(presence_got, presence_want, rtol=1e-12)
    # the vectorised path against the per-predicate one on the same snapshot: the same floats
    got.attributes._built.clear()
    probs.statistics = type(got)(event_count=got.event_count, attributes=dict(got.attributes.items()), source="online")
    assert probs.nu(live).tolist() == nu_got.tolist()
    assert probs.presence(fields).tolist() == presence_got.tolist()


def test_strings_of_a_high_cardinality_attribute_leave_the_dictionary_as_they_decay():
    col = StatisticsCollector(half_life=100, sample_per_batch=100, compact_after=64)
    for i in range(200):
        col.observe(EventBatch.from_dicts([{"id": f"user-{i}-{j}", f"k{i}": 1} for j in range(50)]))
    assert len(col._strings) <= 2 * 64 + 2 * 200  # compacted: not the 10,000 ever seen
    assert len(col._names) <= 2 * 64 + 2 * 10
    st = col.snapshot()
    assert st.presence("id") == 1.0 and st.attributes["id"].top_values
    assert st.attributes["id"].distinct <= 200 and "user-0-0" not in col._string_ids  # the last batches' only


def test_a_snapshot_does_not_change_as_the_collector_goes_on():
    col = StatisticsCollector(half_life=50, sample_per_batch=50, compact_after=0)
    col.observe(EventBatch.from_dicts([{"s": "old", "n": 1}] * 50))
    before = col.snapshot()
    record = before.to_record()
    for i in range(20):
        col.observe(EventBatch.from_dicts([{"s": f"new{i}", f"m{i}": 2}] * 50))
    assert "old" not in col._string_ids and "s" in col.snapshot().attributes
    assert type(before).from_record(record).to_record() == before.to_record() == record
    assert before.attributes["s"].top_values == {(1, "old"): 1.0} and "m3" not in before.attributes


def test_a_snapshot_at_20000_attributes_is_arrays_not_objects():
    """The sparse processor's load (benchmarks.processor.churn_memory's): 20,000 attributes, 40 per event, values 0..49."""
    from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_events

    col = StatisticsCollector()
    events = generate_sparse_events(SPARSE_PRESETS["opindex"], 20_000, seed=3)
    for i in range(0, 20_000, 256):
        col.observe(take_events(events, np.arange(i, min(i + 256, 20_000))))
    blocks = sys.getallocatedblocks()
    snap = col.snapshot()
    assert sys.getallocatedblocks() - blocks < 100  # no AttributeStats, no dict per attribute: built when asked
    assert len(snap.attributes) > 15_000
    name = next(iter(snap.attributes))
    assert snap.attributes[name].distinct <= 50 and snap.presence(name) > 0
