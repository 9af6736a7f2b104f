"""The numba engine's behaviours beyond plain matching (test_conformance.py): bulk loads onto existing ones,
churn, errors, renumbering, buffered changes, the cache, memory; matches against the brute-force oracle.

Property tests draw the general workload of conformance.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import ALGORITHMS, Matcher
from tests.engine.conformance import GENERAL, LONG, agree, bulk_load, remove_each, strings_that_renumber
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.columnar import EventBatch, SubscriptionBatch
from fastpubsub.engine.frontend.encoding import SPACING, batch_from_dicts

subscription, event = GENERAL.subscription, GENERAL.event
subscription_sets = GENERAL.subscription_sets()
SETTINGS = GENERAL.settings


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(subs=subscription_sets, more=subscription_sets, events=st.lists(event, min_size=1, max_size=8))
def test_add_bulk_agrees_with_oracle(algorithm, subs, more, events):
    m, o = Matcher(algorithm), OracleMatcher()
    bulk_load(m, o, subs)
    bulk_load(m, o, {k: v for k, v in more.items() if k not in subs})  # onto existing predicates and clusters
    agree(m, o, events)


@pytest.mark.parametrize("algorithm", ["counting", "propagation-wp", "opindex"])
def test_churn_at_scale_reclaims_space(algorithm):
    """Thousands of inserts and deletes: clusters shrink, predicates are freed, results stay right."""
    rng = np.random.default_rng(3)
    m, o = Matcher(algorithm), OracleMatcher()
    live = {}
    for sid in range(3000):
        preds = [(f"a{rng.integers(4)}", "=", int(rng.integers(5))), (f"b{rng.integers(3)}", "<=", int(rng.integers(5)))]
        if rng.random() < 0.3:
            preds.append(("s", "!=", str(rng.integers(4))))
        live[sid] = preds
    bulk_load(m, o, live)
    remove_each(m, o, rng.permutation(3000)[:2500].tolist())
    events = [{**{f"a{i}": int(rng.integers(5)) for i in range(4)}, **{f"b{i}": int(rng.integers(5)) for i in range(3)},
               "s": str(rng.integers(4))} for _ in range(50)]
    agree(m, o, events)
    before = m.stats()["predicates"]
    remove_each(m, o, list(o._subs))
    assert len(m) == 0 and before > 0 and m.stats()["predicates"] == 0
    assert m.stats()["nonempty_clusters"] == 0
    m.add(1, [("a0", "=", 1)])
    assert m.match({"a0": 1}).tolist() == [1]


def test_edge_cases():
    for algorithm in ALGORITHMS:
        m = Matcher(algorithm)
        assert m.match({}).tolist() == [] and m.match({"x": 1}).tolist() == [] and len(m) == 0
        assert m.match_batch([]) == []
        m.add(2**63 - 1, [("a", "=", 1)])
        m.add(-(2**63), [("a", "!=", 2)])
        m.add(-1, [("s", ">", LONG)])
        m.add(5, [("a", ">=", 1), ("a", "<=", 1), ("a", "=", 1)])
        assert m.match({}).tolist() == []
        assert m.match({"unknown": 3}).tolist() == []
        assert m.match({"a": 1}).tolist() == [-(2**63), 5, 2**63 - 1]
        assert m.match({"a": math.nan}).tolist() == []  # NaN is comparable with nothing, != included
        assert m.match({"a": True}).tolist() == []  # booleans are not numbers
        assert m.match({"s": LONG + "a"}).tolist() == [-1]
        assert m.match({"s": LONG}).tolist() == []
        assert 5 in m and 6 not in m and "x" not in m


@pytest.mark.parametrize(
    "preds, message",
    [([], "at least one predicate"), ([("a", "~", 1)], "unknown operator"), ([("a", "=", None)], "unsupported value type"),
     ([("a", "=", math.nan)], "NaN")],
)
def test_invalid_subscriptions_leave_nothing_behind(preds, message):
    m = Matcher("propagation-wp")
    m.add(1, [("a", "=", 1)])
    before = m.stats()
    with pytest.raises(ValueError, match=message):
        m.add(2, preds)
    with pytest.raises(ValueError, match="duplicate"):
        m.add(1, [("b", "=", 2)])
    assert m.stats() == before and len(m) == 1 and 2 not in m


def test_add_bulk_validates_before_mutating():
    m = Matcher("propagation")
    m.add(7, [("a", "=", 1)])
    before = m.stats()
    bad = SubscriptionBatch.from_lists([(1, [("a", "=", 1)]), (7, [("b", "<", 3)])])
    with pytest.raises(ValueError, match="duplicate subscription id 7"):
        m.add_bulk(bad)
    dup_in_batch = SubscriptionBatch.from_lists([(1, [("a", "=", 1)]), (2, [("b", "<", 3)])])
    dup_in_batch.ids[1] = 1
    with pytest.raises(ValueError, match="duplicate"):
        m.add_bulk(dup_in_batch)
    bad_op = SubscriptionBatch.from_lists([(3, [("a", "=", 1)])])
    bad_op.operators[0] = 9
    with pytest.raises(ValueError, match="operator"):
        m.add_bulk(bad_op)
    assert m.stats() == before and m.match({"a": 1, "b": 0}).tolist() == [7]


def test_invalid_events():
    m = Matcher("counting")
    m.add(1, [("a", "=", 1)])
    with pytest.raises(ValueError, match="unsupported value type"):
        m.match({"a": None})
    with pytest.raises(ValueError, match="non-empty strings"):
        m.match({1: 2})
    with pytest.raises(ValueError, match="mapping"):
        m.match_batch([[("a", 1)]])
    # an attribute carried twice is an attribute with two values (engine/semantics.py), by index or by name
    twice = EventBatch(("a",), np.array([0, 2]), np.array([0, 0], np.int32), np.zeros(2, np.int8), np.array([0., 1.]))
    assert m.match_encoded(twice).split()[0].tolist() == [1]
    twice_by_name = EventBatch(("a", "a"), np.array([0, 2]), np.array([0, 1], np.int32), np.zeros(2, np.int8),
                               np.array([1., 0.]))
    assert m.match_encoded(twice_by_name).split()[0].tolist() == [1]
    bad_kind = EventBatch(("a",), np.array([0, 1]), np.array([0], np.int32), np.array([7], np.int8), np.ones(1))
    with pytest.raises(ValueError, match="kind"):
        m.match_encoded(bad_kind)
    same_name = EventBatch(("a", "a"), np.array([0, 1, 2]), np.array([0, 1], np.int32), np.zeros(2, np.int8), np.ones(2))
    assert [r.tolist() for r in m.match_encoded(same_name).split()] == [[1], [1]]


def test_string_codes_renumber_when_gaps_run_out():
    """Each new constant lands between the previous one and "b": the gap halves until renumbering."""
    m, o = Matcher("propagation-wp"), OracleMatcher()
    m.add(0, [("s", "<", "b")])
    o.add(0, [("s", "<", "b")])
    for i in range(1, 30):
        s = "a" + "z" * i
        for sid, p in ((2 * i, [("s", ">=", s)]), (2 * i + 1, [("s", "=", s)])):
            m.add(sid, p)
            o.add(sid, p)
    assert 29 > math.log2(SPACING)  # the loop above must have exhausted a gap
    events = [{"s": "a" + "z" * i + t} for i in range(0, 31, 3) for t in ("", "a", "{")] + [{"s": "b"}, {"s": "a"}]
    agree(m, o, events)


def test_stats():
    for algorithm in ALGORITHMS:
        m = Matcher(algorithm)
        m.add(1, [("a", "=", 1), ("b", "<", 2)])
        s = m.stats()
        assert s["algorithm"] == algorithm
        assert s["predicates"] == 2 and s["subscriptions"] == 1 and s["memory_bytes"] > 0
        if algorithm == "bitmaps":  # no clusters: one slot per subscription in bitmaps over value cells
            assert s["bitmaps"]["subscriptions"] == 1 and s["bitmaps"]["constrained_fields"] == 2
        elif algorithm == "amkh":  # no clusters: one chained record per subscription in one hash table
            assert s["configuration"]["equality"] == ["a"] and s["configuration"]["shapes"] == 1
        else:
            assert s["clusters"] >= 1
    with pytest.raises(ValueError, match="unknown algorithm"):
        Matcher("rete")


@pytest.mark.parametrize("algorithm, options, reason", [
    ("propagation", {"runs": 256}, "option of static and dynamic"),
    ("counting", {"runs": 256}, "option of static and dynamic"),
    ("dynamic", {"runs": -1}, "non-negative integer"),
    ("static", {"runs": 2.5}, "non-negative integer"),
    ("counting", {"prefetch_columns": 2}, "counting has no scan options"),
])
def test_scan_options_an_algorithm_does_not_have_are_refused(algorithm, options, reason):
    with pytest.raises(ValueError, match=reason):
        Matcher(algorithm, **options)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_runs_off_is_accepted_by_every_algorithm(algorithm):
    """``runs=0`` (plain clusters) is accepted everywhere; static and dynamic keep runs by default (test_costmodel_runs.py)."""
    m = Matcher(algorithm, runs=0)
    m.add(1, [("a", "=", 1)])
    assert m.match({"a": 1}).tolist() == [1]


def test_batch_from_dicts_equals_columnar_from_dicts():
    events = [{"a": 1, "b": "x", "c": True}, {}, {"d": 2.5, "a": -7, "e": np.float64(1.5)}, {"s": LONG}]
    fast, ref = batch_from_dicts(events), EventBatch.from_dicts(events)
    assert fast.to_dicts() == ref.to_dicts()
    assert fast.kinds.tolist() == ref.kinds.tolist() and fast.strings == ref.strings


@pytest.mark.parametrize("algorithm", ["counting", "propagation", "opindex"])
def test_bulk_strings_renumber_existing_codes(algorithm):
    """A bulk load of many new strings renumbers the codes of strings already in predicates."""
    m, o = Matcher(algorithm), OracleMatcher()
    words, more = strings_that_renumber()
    for batch in ([(0, [("s", "<", "m")]), (1, [("s", ">=", "m5")])], more):
        bulk_load(m, o, batch)
    assert len(words) > 64
    agree(m, o, [{"s": w} for w in ["", "m", "m5", "a", "zz", "m4", "b"] + words[::17]])


@pytest.mark.parametrize("algorithm", ["propagation-wp", "dynamic"])
def test_a_warm_process_loads_every_kernel_from_numbas_cache(algorithm):
    """The named kernel containers must not defeat ``cache=True``: a second process compiles nothing.

    The first process fills the cache if needed; the second builds, changes
    and matches the same way and must find every kernel it runs in the cache
    (``benchmarks/engine/warm_start.py`` also times it).
    """
    from benchmarks.engine.warm_start import run_process

    run_process(algorithm, 500)
    warm = run_process(algorithm, 500)
    assert warm["compiled"] == [] and warm["events"] == 200
    assert any(k.endswith("_kernel.<locals>.kernel") for k in warm["loaded"])  # the matching entry, from the cache


change = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 12), subscription),
    st.tuples(st.just("remove"), st.integers(0, 12), st.none()),
    st.tuples(st.just("match"), st.none(), event),
    st.tuples(st.just("bad"), st.integers(0, 12), st.sampled_from([[], [("a", "~", 1)], [("", "=", 1)],
                                                                  [("a", "=", math.nan)], [("a", "=", None)]])),
)


@pytest.mark.parametrize("algorithm", ["propagation", "dynamic"])
@pytest.mark.parametrize("pending_max", [1, 3, 4096])
@SETTINGS
@given(changes=st.lists(change, max_size=40))
def test_single_changes_are_buffered_without_anyone_noticing(algorithm, pending_max, changes):
    """Single adds and removes are applied in bulk later (engine.matcher.PENDING_MAX); every answer is as if at once.

    Errors come at the call: a duplicate id or an invalid subscription is a
    ValueError, an unknown id a KeyError, and nothing of it is inserted or
    removed; ``len``, ``in``, matching and ``stats`` see every change made.
    """
    from unittest import mock

    with mock.patch("fastpubsub.engine.matcher.PENDING_MAX", pending_max):
        _replay_single_changes(Matcher(algorithm), changes)


def _replay_single_changes(m: Matcher, changes) -> None:
    o = OracleMatcher()
    live: set[int] = set()
    for op, sid, arg in changes:
        if op in ("add", "bad"):
            if op == "add" and sid not in live:
                m.add(sid, arg)
                o.add(sid, arg)
                live.add(sid)
            else:
                with pytest.raises(ValueError):
                    m.add(sid, arg)
        elif op == "remove":
            if sid in live:
                m.remove(sid)
                o.remove(sid)
                live.discard(sid)
            else:
                with pytest.raises(KeyError):
                    m.remove(sid)
        else:
            assert m.match(arg).tolist() == o.match(arg).tolist()
        assert len(m) == len(live) and all((s in m) == (s in live) for s in range(13))
    assert m.stats()["subscriptions"] == len(live)
    m.add_bulk(SubscriptionBatch.from_lists([(100, [("a", "=", 1)])]))
    o.add(100, [("a", "=", 1)])
    assert m.match({"a": 1}).tolist() == o.match({"a": 1}).tolist()


def test_an_algorithm_registered_from_outside_is_built_by_matcher_and_listed():
    """engine/algorithms/index.py: a factory registered under a new name; nothing else in the engine changes."""
    from fastpubsub.engine import IndexContext, register
    from fastpubsub.engine.algorithms.index import REGISTRY, Index
    from fastpubsub.engine.algorithms.propagation import PropagationIndex

    built = []

    def make(ctx: IndexContext, **options) -> PropagationIndex:
        built.append(options)
        return PropagationIndex(ctx.preds, prefetch=False, **options)

    register("plain-propagation", make)
    try:
        assert "plain-propagation" in ALGORITHMS and list(ALGORITHMS)[-1] == "plain-propagation"
        m, o = Matcher("plain-propagation", unfold=4), OracleMatcher()
        assert built == [{"unfold": 4}] and isinstance(m.index, Index)
        for sid, preds in [(1, [("a", "=", 1), ("b", "<", 3)]), (2, [("a", "=", 1)]), (3, [("b", ">", 0)])]:
            m.add(sid, preds)
            o.add(sid, preds)
        agree(m, o, [{"a": 1, "b": 2}, {"a": 1, "b": 5}, {"b": 1}, {}])
        with pytest.raises(ValueError, match="already registered"):
            register("plain-propagation", make)
    finally:
        REGISTRY.unregister("plain-propagation")
    assert "plain-propagation" not in ALGORITHMS
    with pytest.raises(ValueError, match="unknown algorithm"):
        Matcher("plain-propagation")


@pytest.mark.parametrize("algorithm, options", [(a, {}) for a in ALGORITHMS] + [("dynamic", {"lists": "packed"})])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1200, 2500), seed=st.integers(0, 2**31), n_events=st.integers(4, 12))
def test_matches_beyond_the_first_output_buffer_agree_with_oracle(algorithm, options, n, seed, n_events):
    """Hundreds of matches per event: the batch loops' output fills (1,024 ids at first) in the middle of an event,
    is grown by the caller and the event scanned again (``lists="packed"``: the packed lists and direct scans)."""
    rng = np.random.default_rng(seed)
    subs = {}
    for sid in range(n):
        preds = [("a", "=", int(rng.integers(0, 2)))]
        if rng.random() < 0.5:
            preds.append(("b", str(rng.choice(["<", ">=", "!="])), int(rng.integers(0, 10))))
        if rng.random() < 0.3:
            preds.append(("c", "=", str(rng.choice(["x", "y"]))))
        subs[sid] = preds
    events = [{"a": int(rng.integers(0, 2)), "b": int(rng.integers(0, 10)), "c": str(rng.choice(["x", "y"]))}
              for _ in range(n_events)]
    m, o = Matcher(algorithm, **options), OracleMatcher()
    m.add_bulk(SubscriptionBatch.from_lists(subs.items()))
    for sid, preds in subs.items():
        o.add(sid, preds)
    assert sum(len(o.match(e)) for e in events) > 1024
    agree(m, o, events)


@pytest.mark.parametrize("algorithm", ["dynamic", "static", "counting", "opindex"])
def test_memory_by_structure_adds_up_to_memory_bytes(algorithm):
    """``/metrics`` shows the engine's bytes by structure: the parts sum to ``memory_bytes`` and name the shared ones."""
    from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_subscriptions
    m = Matcher(algorithm)
    m.add_bulk(generate_sparse_subscriptions(SPARSE_PRESETS["opindex"], 3000, seed=5))
    by = m.memory_by_structure()
    assert {"predicates", "ids", "prefix_groups"} <= set(by) and all(v >= 0 for v in by.values())
    assert sum(by.values()) == m.memory_bytes() == m.stats()["memory_bytes"]
    assert m.stats()["memory"] == by
    if algorithm == "dynamic":
        assert {"clusters", "access_keys", "maintenance"} <= set(by)
