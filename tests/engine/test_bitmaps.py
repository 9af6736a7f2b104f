"""The bit-parallel path (engine/algorithms/bitmaps.py) and the catch-all on it (engine/algorithms/catchall.py): its
kernels against naive ones, its price, its options, and range-only subscriptions mixed with others.

Range-heavy subscriptions (open and closed bounds, equal bounds, values on the cell boundaries, floats, negative
numbers, infinities, strings and booleans on the same attributes, events lacking attributes or carrying NaN) with adds,
removes and forced rebuilds interleaved are the conformance suite's (test_conformance.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.naive import fold_intervals as naive_fold, holds, merge_matches as naive_merge

from fastpubsub.engine import Matcher
from tests.engine.conformance import RANGE_ATTRS, RANGES, numbers, refuses_options
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.algorithms.bitmaps import BitmapArrays, field_samples, fold_intervals, range_only
from fastpubsub.engine.frontend.encoding import N_KINDS
from fastpubsub.engine.semantics import KIND_NUMBER
from fastpubsub.engine.kernels.sorting import merge_matches
from fastpubsub.engine.columnar import SubscriptionBatch
from fastpubsub.engine.costmodel.bitmaps import BITMAP_COST, MIN_SUBSCRIPTIONS, prefer_bitmaps
from fastpubsub.workloads.intervals import (IntervalSpec, WuYuSpec, interval_events, interval_subscriptions, wuyu_events,
                                         wuyu_subscriptions)
from fastpubsub.workloads.fabret import PRESETS

ATTRS = RANGE_ATTRS
subscription, event = RANGES.subscription, RANGES.event
SETTINGS = RANGES.settings


def _check(m: Matcher, o: OracleMatcher, events: list[dict]) -> None:
    RANGES.check(m, o, events)


@pytest.mark.parametrize("block_words, event_chunk", [(1, 5), (3, 7), (2, 1024)])
def test_survivors_beyond_the_first_room_are_kept_when_it_grows_mid_chunk(block_words, event_chunk):
    """With one cell every subscription survives every event: thousands of survivors per chunk, more than the
    kernel's first room, found block by block; the matches are still the counting matcher's."""
    spec = IntervalSpec(n_attributes=4, n_ranges=2, width=0.5, domain=(0, 100))
    subs, events = interval_subscriptions(spec, 600, seed=5), interval_events(spec, 40, seed=6)
    m, c = Matcher("bitmaps", cells=1, block_words=block_words, event_chunk=event_chunk), Matcher("counting")
    m.add_bulk(subs)
    c.add_bulk(subs)
    got, want = m.match_encoded(events), c.match_encoded(events)
    assert len(want.ids) > 0
    assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.ids, want.ids)


def test_bitmap_predicates_stay_out_of_phase_1_unless_a_keyed_subscription_shares_them():
    m = Matcher("dynamic", catch_all="bitmaps")
    m.add(1, [("x", ">=", 3), ("x", "<=", 9)])
    m.add(2, [("k", "=", 1), ("x", ">=", 3)])  # keyed: its ">= 3" must still reach its cluster through phase 1
    m.match({"x": 5})
    listed = set(m.preds.g_pids.tolist())
    assert len(listed) == 1 and m.preds.op[list(listed)[0]] == 5  # ">= 3" only
    assert m.match({"x": 5, "k": 1}).tolist() == [1, 2] and m.match({"x": 10, "k": 1}).tolist() == [2]
    m.remove(2)
    m.flush()
    assert m.preds.n_live == 0  # subscription 1 is range-only: held as intervals, its predicates never interned
    b = Matcher("bitmaps")
    b.add(1, [("x", ">", 1)])
    b.add(2, [("x", "<", 5), ("x", "!=", 3)])  # not range-only: interned, and kept out of phase 1
    assert b.match({"x": 2}).tolist() == [1, 2] and b.match({"x": 3}).tolist() == [1]
    b.flush()
    assert len(b.preds.g_pids) == 0 and b.preds.n_live == 2


def test_dynamic_puts_a_range_catch_all_on_the_bit_parallel_path_by_price_and_takes_it_back():
    spec = IntervalSpec(n_attributes=6, n_ranges=3, domain=(0, 1000))
    n = 4 * MIN_SUBSCRIPTIONS
    subs = interval_subscriptions(spec, n, seed=3)
    events = interval_events(spec, 200, seed=4)
    m, c = Matcher("dynamic"), Matcher("counting")
    m.add_bulk(subs)
    c.add_bulk(subs)
    s = m.stats()["catch_all"]
    assert s["active"] and s["mode"] == "auto" and s["price_ns"]["bitmaps"] < s["price_ns"]["scan"]
    # every event carries every field: a presence key would prune nothing, so the catch-all takes them all
    assert m.stats()["hash_tables"]["presence_subscriptions"] == 0
    want = c.match_encoded(events)
    got = m.match_encoded(events)
    assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.ids, want.ids)
    gone = np.arange(n - MIN_SUBSCRIPTIONS // 2)  # below MIN_SUBSCRIPTIONS: back to the scan
    m.remove_bulk(gone)
    c.remove_bulk(gone)
    assert not m.stats()["catch_all"]["active"]
    want, got = c.match_encoded(events), m.match_encoded(events)
    assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.ids, want.ids)
    forced = Matcher("dynamic", catch_all="scan")
    forced.add_bulk(subs)
    assert not forced.stats()["catch_all"]["active"]
    with pytest.raises(ValueError, match="catch_all"):
        Matcher("dynamic", catch_all="sometimes")


def test_the_price_prefers_the_scan_for_small_or_wide_catch_alls():
    k_c = 0.5
    assert not prefer_bitmaps(BITMAP_COST, k_c, MIN_SUBSCRIPTIONS - 1, 2, 10**6, False)
    assert prefer_bitmaps(BITMAP_COST, k_c, 100_000, 20, 2_000_000, False)
    # thousands of fields (OpIndex-like): one row per field per event costs more than the checks
    assert not prefer_bitmaps(BITMAP_COST, k_c, 200_000, 20_000, 0, False)
    # hysteresis: a list between the two thresholds keeps the path it is on
    n, f = 100_000, 20
    b = BITMAP_COST.bitmaps(n, f)
    r = int((1.5 * b - k_c * n) / (BITMAP_COST.K_p * 0.5))
    assert prefer_bitmaps(BITMAP_COST, k_c, n, f, r, True) and not prefer_bitmaps(BITMAP_COST, k_c, n, f, r, False)


@given(a=st.lists(st.lists(st.integers(0, 20), max_size=5).map(sorted), min_size=1, max_size=6), data=st.data())
@settings(max_examples=50, deadline=None)
def test_merge_matches_equals_naive(a, data):
    b = [data.draw(st.lists(st.integers(0, 20), max_size=5).map(sorted)) for _ in a]

    def csr(lists):
        off = np.zeros(len(lists) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(x) for x in lists])
        return off, np.array([i for x in lists for i in x], dtype=np.int64)

    got = merge_matches(*csr(a), *csr(b))
    want = naive_merge(*csr(a), *csr(b))
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def _samples(slots, pfield, pop, pcode, sample):
    """``field_samples`` of slots given as lists of predicate ids (visited last first) over 3 fields."""
    start = np.cumsum([0] + [len(s) for s in slots])[:-1]
    flat = np.array([p for s in slots for p in s], dtype=np.int32)
    order = np.arange(len(slots))[::-1].copy()
    none = np.zeros(len(slots), np.int64)
    bm = BitmapArrays(np.zeros((1, 1), np.uint64), np.array([0, -1, -1, 1, -1, -1, 2]), np.zeros(3, np.int64),
                      np.zeros(3, np.int64), np.zeros((3, 1)), start, np.array([len(s) for s in slots]), none, flat,
                      pfield, pop, pcode.view(np.int64), pcode, np.zeros(0, np.int64), none, none,
                      np.zeros(0, np.int32), np.zeros(0), np.zeros(0))
    return order, field_samples(order, bm, 3, sample)


def _is_subsequence(part: list, whole: list) -> bool:
    it = iter(whole)
    return all(any(x == y for y in it) for x in part)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 89), min_size=1, max_size=4), min_size=1, max_size=30), st.integers(1, 6))
def test_field_samples_take_ceil_n_over_k_constants_in_slot_order(slots, sample):
    """The constants cell boundaries are placed from: per field, all of them, or ``ceil(n / k)`` of its ``n``
    (``k = n // sample``) in slot order, the first always, ``!=`` constants left out."""
    pfield, pop, pcode = np.arange(90) // 30 * 3, (np.arange(90) % 6).astype(np.int8), np.arange(90.0) * 0.5
    order, (off, codes) = _samples(slots, pfield, pop, pcode, sample)
    for fa in range(3):
        consts = [pcode[p] for s in order for p in slots[s] if pfield[p] == 3 * fa and pop[p] != 1]
        got = codes[off[fa] : off[fa + 1]].tolist()
        k = max(len(consts) // sample, 1)
        assert len(got) == -(-len(consts) // k) and _is_subsequence(got, consts)
        assert got[:1] == consts[:1]


@pytest.mark.parametrize("n_slots, sample", [(64, 4), (96, 6), (1000, 16), (4096, 32)])
def test_field_samples_take_both_ends_of_intervals_in_equal_numbers(n_slots, sample):
    """Slots of one interval ``[lo, hi]`` each: their constants alternate lower and upper ends, and the sample takes
    as many of each (within one) whatever ``k`` is, even ones included (every ``k``-th would take only lower ends)."""
    lows, highs = np.arange(n_slots) * 1.0, 1e6 + np.arange(n_slots)
    pcode = np.stack([lows, highs], axis=1).ravel()
    pfield, pop = np.zeros(2 * n_slots, np.int64), np.tile(np.array([5, 3], np.int8), n_slots)  # >=, <=
    slots = [[2 * i, 2 * i + 1] for i in range(n_slots)]
    _, (off, codes) = _samples(slots, pfield, pop, pcode, sample)
    got = codes[off[0] : off[1]]
    assert sample <= len(got) <= 2 * sample
    assert abs(int((got < 1e6).sum()) - int((got >= 1e6).sum())) <= 1


def test_bitmaps_option_errors():
    refuses_options("bitmaps", [({"cells": 0}, "cells"), ({"prefetch_columns": 2}, "no option"),
                                ({"runs": 256}, "runs")])


def test_interval_workload_is_deterministic_and_shaped_as_specified():
    spec = IntervalSpec()
    s1, s2 = interval_subscriptions(spec, 500, seed=7), interval_subscriptions(spec, 500, seed=7)
    assert np.array_equal(s1.numbers, s2.numbers) and np.array_equal(s1.attributes, s2.attributes)
    assert np.all(np.diff(s1.offsets) == 20)
    lo, hi = s1.numbers[0::2], s1.numbers[1::2]
    assert np.all(hi - lo == 300_000) and lo.min() >= 0 and hi.max() <= 1_000_000
    attrs = s1.attributes[0::2].reshape(500, 10)
    assert all(len(set(r)) == 10 for r in attrs.tolist())
    ev = interval_events(spec, 50, seed=1)
    assert np.all(np.diff(ev.offsets) == 20) and ev.numbers.min() >= 0 and ev.numbers.max() <= 1_000_000
    with pytest.raises(ValueError):
        IntervalSpec(n_ranges=21)


def test_wu_yu_workload_has_the_papers_clauses():
    spec = WuYuSpec(x=35)
    s = wuyu_subscriptions(spec, 4000, seed=2)
    a = s.attributes.reshape(-1, 3)
    ops = s.operators.reshape(-1, 3)
    assert np.all(a[:, 0] == 0) and np.all((a[:, 1] >= 1) & (a[:, 1] <= 9)) and np.all(a[:, 2] == 10)
    assert np.all(ops[:, :2] == 0) and 0.45 < np.mean(ops[:, 2] == 0) < 0.55
    assert set(np.unique(ops[:, 2]).tolist()) == {0, 2, 4}
    assert s.numbers.min() >= 6 and s.numbers.max() <= 35
    e = wuyu_events(spec, 100, seed=3)
    assert np.all(np.diff(e.offsets) == 20) and e.numbers.min() >= 6 and e.numbers.max() <= 95


def test_fabrets_w1_and_w2_are_presets():
    assert PRESETS["W1"].n_predicates == 4 and PRESETS["W1"].fixed == ("=", "=", "<=")
    assert PRESETS["W2"].n_predicates == 9 and PRESETS["W2"].fixed == ("=", "=") + ("<=",) * 5 + (">=",)


order_predicate = st.tuples(st.integers(0, 3), st.sampled_from([2, 3, 4, 5]), numbers.map(float))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(order_predicate, min_size=1, max_size=6), min_size=1, max_size=8), data=st.data())
def test_fold_intervals_equals_naive_and_accepts_what_the_predicates_accept(rows, data):
    """One closed interval of doubles per row and field; ``lo <= x <= hi`` exactly when every predicate holds."""
    off = np.cumsum([0] + [len(r) for r in rows])
    field, op, value = (np.array([p[i] for r in rows for p in r], dtype=dt) for i, dt in
                        enumerate((np.int64, np.int8, np.float64)))
    take = np.array(sorted(data.draw(st.sets(st.integers(0, len(rows) - 1), min_size=1))), dtype=np.int64)
    ioff, ifield, lo, hi = fold_intervals(off, take, field, op, value)
    want = naive_fold([rows[r] for r in take.tolist()])
    for i, w in enumerate(want):
        got = {int(f): (float(a), float(b)) for f, a, b in zip(*(x[ioff[i] : ioff[i + 1]] for x in (ifield, lo, hi)))}
        assert got == w
        assert list(got) == list(dict.fromkeys(f for f, _, _ in rows[take[i]]))  # fields in order of appearance
    for x in [math.nan, -0.0, math.inf, -math.inf] + [float(np.nextafter(v, d)) for v in value for d in (-np.inf, np.inf)]:
        for i, r in enumerate(take.tolist()):
            for f, (a, b) in want[i].items():
                assert (a <= x <= b) == all(holds(o, x, v) for g, o, v in rows[r] if g == f)


@given(ops=st.lists(st.sampled_from([0, 1, 2, 3, 4, 5]), min_size=0, max_size=4),
       kinds=st.lists(st.sampled_from([0, 1, 2]), min_size=4, max_size=4))
def test_range_only_rows_are_order_comparisons_with_numbers(ops, kinds):
    field = np.array([4 * N_KINDS + k for k in kinds[: len(ops)]], dtype=np.int64)
    got = range_only(np.array([0, len(ops)]), field, np.array(ops, dtype=np.int8))
    want = len(ops) > 0 and all(o >= 2 and k == KIND_NUMBER for o, k in zip(ops, kinds))
    assert got.tolist() == [want]


range_only_subscription = st.lists(st.tuples(st.sampled_from(ATTRS[:3]), st.sampled_from(["<", "<=", ">", ">="]),
                                             numbers), min_size=1, max_size=4)
mixed = st.lists(st.tuples(st.integers(0, 40), st.one_of(range_only_subscription, subscription)), max_size=12)
mixed_operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), mixed),
        st.tuples(st.just("remove"), st.lists(st.integers(0, 40), max_size=10)),
        st.tuples(st.just("match"), st.lists(event, min_size=1, max_size=3)),
    ),
    max_size=15,
)


@pytest.mark.parametrize("algorithm, options", [("dynamic", {}), ("static", {}), ("dynamic", {"catch_all": "scan"}),
                                                ("bitmaps", {})], ids=["dynamic", "static", "dynamic-scan", "bitmaps"])
@SETTINGS
@given(ops=mixed_operations)
def test_range_only_and_other_subscriptions_mixed_agree_with_oracle(algorithm, options, ops):
    """Range-only subscriptions held as intervals (the price prefers the bit-parallel path once a range catch-all
    of ``4 * MIN_SUBSCRIPTIONS`` is loaded) next to keyed and mixed ones, through bulk adds, removes and matches;
    none of their predicates is interned."""
    m, o = Matcher(algorithm, **options), OracleMatcher()
    rng = np.random.default_rng(5)
    base = {1000 + i: [(a, op, float(v)) for a, op, v in zip(rng.choice(ATTRS[:3], 2, replace=False),
                                                             ("<=", ">"), rng.integers(-4, 5, 2) * 0.5 + [1, -1])]
            for i in range(4 * MIN_SUBSCRIPTIONS)}
    m.add_bulk(SubscriptionBatch.from_lists(base.items()))
    for sid, preds in base.items():
        o.add(sid, preds)
    on_path = options.get("catch_all") != "scan"
    held = m.stats()["catch_all"]["range_only"] if algorithm != "bitmaps" else len(m.index.bitmaps)
    assert held == (len(base) if on_path else 0)
    assert (m.preds.n_live == 0) == on_path  # held as intervals: no predicate interned
    for op in ops:
        if op[0] == "add":
            fresh = dict((sid, preds) for sid, preds in op[1] if sid not in o)
            m.add_bulk(SubscriptionBatch.from_lists(fresh.items()))
            for sid, preds in fresh.items():
                o.add(sid, preds)
        elif op[0] == "remove":
            gone = sorted({i for i in op[1] if i in o})
            m.remove_bulk(np.array(gone, dtype=np.int64))
            for i in gone:
                o.remove(i)
        else:
            _check(m, o, op[1])
    _check(m, o, [{"x": 0, "y": 0.5, "z": -1, "s": "a"}, {"x": -4, "y": 4, "z": 0}, {}])
    if on_path:
        held = m.stats()["catch_all"]["range_only"] if algorithm != "bitmaps" else len(m.index.bitmaps)
        assert held >= len(base)  # the loaded ones are still held as intervals
