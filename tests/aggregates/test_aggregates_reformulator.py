"""Range-min/max reformulation (§2.3.1): the paper's worked examples, then every update of random
tables checked against a brute-force recomputation of every subscription."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tests.support.oracles.aggregates import AggregateOracle, matches

from fastpubsub.aggregates import BAD, GOOD, IGNORABLE, AggregateSpec, ExtremumReformulator, Table
from fastpubsub.aggregates.client import RangeExtremumClient

# Figure 1's points, as far as the paper's examples pin them down (design note §2.4)
FIG1 = {"t2": (20, 3), "t3": (30, 8), "t4": (40, 12), "t5": (50, 5), "t6": (70, 6), "t7": (70, 7), "t1": (100, 2)}


def fig1():
    table, ref = Table("stock", "symbol"), ExtremumReformulator("risk", "per")
    for k, (x, y) in FIG1.items():
        ref.apply(table.apply(k, {"symbol": k, "risk": x, "per": y}))
    return table, ref


def update(table, ref, key, x, y):
    return ref.apply(table.apply(key, {"symbol": key, "risk": x, "per": y}))


def test_good_update_of_t4():
    table, ref = fig1()
    r = update(table, ref, "t4", 40, 4)
    assert r.kind == GOOD
    assert r.messages.tolist() == [[4, 40, 40, 20, 100]]


def test_bad_update_of_t5_gives_the_papers_three_messages():
    table, ref = fig1()
    r = update(table, ref, "t5", 50, 9)
    assert r.kind == BAD
    assert r.messages.tolist() == [[9, 50, 50, 30, 70], [8, 30, 50, 20, 70], [6, 50, 70, 20, 100]]
    # the union of the rectangles spans Mar(δ) = (20, 100); t4 (12 > 9) made no empty rectangle
    assert r.messages[:, 3].min() == 20 and r.messages[:, 4].max() == 100


def test_update_of_t7_is_ignorable_because_of_t6():
    table, ref = fig1()
    assert update(table, ref, "t7", 70, 6.5).kind == IGNORABLE
    assert update(table, ref, "t7", 70, 9).kind == IGNORABLE


def test_figure1_subscriptions_affected_as_in_example_1():
    # s3 = [30, 50] and s4 = [40, 60] are affected by t4 dropping below t5; s1, s2 are not (t2 protects)
    table, ref = fig1()
    clients = {s: RangeExtremumClient(lo, hi, ref.answer(lo, hi))
               for s, (lo, hi) in {"s1": (10, 60), "s2": (20, 50), "s3": (30, 50), "s4": (40, 60)}.items()}
    r = update(table, ref, "t4", 40, 4.5)
    changed = {s for s, c in clients.items() if c.apply(r.messages)}
    assert changed == {"s3", "s4"}
    assert clients["s3"].value == clients["s4"].value == 4.5


def test_empty_table_and_delete_to_empty():
    table, ref = Table("t", "k"), ExtremumReformulator("x", "y")
    assert ref.answer(0, 10) is None
    r = ref.apply(table.apply("a", {"x": 5, "y": 1}))
    assert r.kind == GOOD and r.messages.tolist() == [[1, 5, 5, -np.inf, np.inf]]
    r = ref.apply(table.apply("a", None))
    assert r.messages.tolist() == [[np.inf, 5, 5, -np.inf, np.inf]]
    assert ref.answer(0, 10) is None


def test_row_without_the_attributes_is_rejected_not_indexed():
    table, ref = Table("t", "k"), ExtremumReformulator("x", "y")
    r = ref.apply(table.apply("a", {"x": 5}))
    assert r.rejected and r.kind == IGNORABLE and len(ref) == 0
    with pytest.raises(ValueError, match="NaN"):
        ref.apply(table.apply("b", {"x": 5, "y": float("nan")}))
    for bad in ({"x": float("inf"), "y": 1}, {"x": 1, "y": -float("inf")}, {"x": True, "y": 1}, {"x": "5", "y": 1}):
        r = ref.apply(table.apply("c", bad))
        assert r.rejected and len(ref) == 0


# ---- property tests against the oracle ---------------------------------------------------------
XS = [0, 1, 2, 3, 4, 5]
BOUNDS = sorted({b for x in XS for b in (x - 0.5, x)} | {-10, 10})
SUBS = [(lo, hi) for lo, hi in itertools.combinations_with_replacement(BOUNDS, 2)]

row = st.one_of(st.none(), st.tuples(st.sampled_from(XS), st.integers(0, 4)))
updates = st.lists(st.tuples(st.integers(0, 6), row), min_size=1, max_size=40)


def run_against_oracle(fn, initial, ups, subs=SUBS, capacity=1024):
    table, ref, oracle = Table("t", "k"), ExtremumReformulator("x", "y", fn, capacity), AggregateOracle()
    for k, p in initial:
        if p is not None:
            r = {"x": p[0], "y": p[1]}
            ref.apply(table.apply(k, r))
            oracle.apply("t", k, r)
    clients = {}
    for i, (lo, hi) in enumerate(subs):
        spec = AggregateSpec("t", fn, "y", "x", lo, hi)
        init = oracle.subscribe(i, spec)
        assert ref.answer(lo, hi) == init
        clients[i] = RangeExtremumClient(lo, hi, init)
    for k, p in ups:
        r = None if p is None else {"x": p[0], "y": p[1]}
        change = table.apply(k, r)
        res = ref.apply(change)
        expected = oracle.apply("t", k, r)
        got, hit = {}, set()
        for i, c in clients.items():
            if any(matches(m, c.low, c.high) for m in res.messages):
                hit.add(i)
            ch = c.apply(res.messages)
            if ch is not None:
                got[i] = ch[0]
        assert got == expected
        moved = change.old is not None and change.new is not None and change.old["x"] != change.new["x"]
        if not moved:  # Theorems 1-2 are "iff": a single-column update's messages reach only changed answers
            assert hit == set(expected)
        assert (res.kind == IGNORABLE) == (len(res.messages) == 0)
        # an ignorable update affects no subscription whatever the subscriptions (Corollary 1 (1))
        if res.kind == IGNORABLE:
            assert not expected
        # every message affects its own corner subscription [INNER_L, INNER_R]: no empty rectangle
        for m in res.messages:
            assert m[3] < m[1] and m[2] < m[4] and m[1] <= m[2]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), row), max_size=7), updates)
def test_min_matches_oracle(initial, ups):
    run_against_oracle("min", initial, ups)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), row), max_size=7), updates)
def test_max_matches_oracle(initial, ups):
    run_against_oracle("max", initial, ups)


WIDE_SUBS = [(lo, hi) for lo, hi in itertools.combinations_with_replacement([-1, 0, 3.5, 7, 12.5, 20, 33, 40], 2)]
wide_row = st.one_of(st.none(), st.tuples(st.integers(0, 40).map(lambda v: v * 0.5), st.integers(0, 6)))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), wide_row), max_size=12),
       st.lists(st.tuples(st.integers(0, 12), wide_row), min_size=1, max_size=60))
def test_moves_over_many_range_values_match_oracle(initial, ups):
    # most updates move a row to a new range value: columns open and close, slots shift and re-spread
    run_against_oracle("min", initial, ups, WIDE_SUBS, capacity=16)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.tuples(st.integers(0, 200), st.integers(0, 50))), min_size=20,
                max_size=60),
       st.lists(st.tuples(st.integers(0, 40), st.tuples(st.integers(0, 200), st.integers(0, 50))), max_size=30))
def test_many_distinct_range_values_grow_and_rebuild(initial, ups):
    # new range values force re-layouts of the columns; answers must survive them
    table, ref = Table("t", "k"), ExtremumReformulator("x", "y", capacity=16)
    for k, (x, y) in initial + ups:
        ref.apply(table.apply(k, {"x": x, "y": y}))
    rows = [r for _, r in table.items()]
    ranges = [(0, 200), (10, 50), (77, 77), (150, 300), (-5, 3)]
    many = ref.answers(np.array([r[0] for r in ranges], float), np.array([r[1] for r in ranges], float))
    for (lo, hi), m in zip(ranges, many):
        ys = [r["y"] for r in rows if lo <= r["x"] <= hi]
        assert ref.answer(lo, hi) == (min(ys) if ys else None)
        assert m == (min(ys) if ys else np.inf)


def test_classification_on_the_worked_example():
    # Corollary 1: a decrease is good; a rise is good only if it exposes no other value
    table, ref = fig1()
    assert update(table, ref, "t1", 100, 1).kind == GOOD
    assert update(table, ref, "t1", 100, 2.5).kind == GOOD  # rises, but nothing between 1 and 2.5 exposed
    # t7 rising is ignorable (t6 below); t6 rising above t7 makes t7 the answer: not in δ's content, bad
    assert update(table, ref, "t6", 70, 7.5).kind == BAD


@pytest.mark.parametrize("order", ["ascending", "descending", "random", "clustered"])
def test_gapped_column_layout_keeps_its_invariants(order):
    rng = np.random.default_rng(5)
    xs = {"ascending": np.arange(300.0), "descending": np.arange(300.0)[::-1],
          "random": rng.permutation(300).astype(float),
          "clustered": np.concatenate([np.linspace(10, 11, 150), np.linspace(10.001, 10.999, 150)])}[order]
    table, ref = Table("t", "k"), ExtremumReformulator("x", "y", capacity=16)
    for i, x in enumerate(xs):
        ref.apply(table.apply(i, {"x": float(x), "y": float(rng.integers(0, 1000))}))
        if i % 3 == 2:  # and delete some, freeing slots in the middle
            ref.apply(table.apply(int(rng.integers(0, i)), None))
        assert np.all(ref._xs[1:] >= ref._xs[:-1])
        for x_, slot in ref._slot.items():
            assert ref._xs[slot] == x_ and not ref._free[slot]
            assert ref._tree[ref._cap + slot] == ref._cols[x_][0]
        assert ref._free.sum() == ref._cap - len(ref._cols)
    rows = [r for _, r in table.items()]
    for lo, hi in rng.uniform(-5, 305, (50, 2)):
        lo, hi = min(lo, hi), max(lo, hi)
        ys = [r["y"] for r in rows if lo <= r["x"] <= hi]
        assert ref.answer(lo, hi) == (min(ys) if ys else None)


def naive_mar(points, x0, y0):
    """Definition 1 by scanning: the open range around x0 free of points at or below y0 (None = ∅)."""
    if any(x == x0 and y <= y0 for x, y in points):
        return None
    left = max((x for x, y in points if x < x0 and y <= y0), default=-np.inf)
    right = min((x for x, y in points if x > x0 and y <= y0), default=np.inf)
    return left, right


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=2, max_size=12),
       st.randoms(use_true_random=False), st.data())
def test_classification_is_corollary_1_when_values_are_distinct(xs, rnd, data):
    ys = list(range(0, 2 * len(xs) + 2, 2))
    rnd.shuffle(ys)
    table, ref = Table("t", "k"), ExtremumReformulator("x", "y")
    for i, x in enumerate(xs):
        ref.apply(table.apply(i, {"x": x, "y": ys[i]}))
    t = data.draw(st.integers(0, len(xs) - 1))
    y_new = data.draw(st.integers(0, 2 * len(xs) + 2).map(lambda v: v + 0.5))  # distinct from every y
    others = [(xs[i], ys[i]) for i in range(len(xs)) if i != t]
    mar_o, mar_n = naive_mar(others, xs[t], ys[t]), naive_mar(others, xs[t], y_new)
    if mar_o is None and mar_n is None:
        expected = IGNORABLE
    elif mar_o is None or (mar_n is not None and mar_n[0] <= mar_o[0] and mar_o[1] <= mar_n[1]):
        expected = GOOD
    else:
        expected = BAD
    res = ref.apply(table.apply(t, {"x": xs[t], "y": y_new}))
    assert res.kind == expected
    # Theorem 1: the union of the rectangles' outer corners is Mar(δ) = Mar(x, y_o) ∪ Mar(x, y_n)
    if expected != IGNORABLE:
        mars = [m for m in (mar_o, mar_n) if m is not None]
        assert res.messages[:, 3].min() == min(m[0] for m in mars)
        assert res.messages[:, 4].max() == max(m[1] for m in mars)
