"""The single-add path: the subscription builder, the id filter and the id table's scalar probe, each against a naive
version."""

from __future__ import annotations

import enum
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import Matcher
from fastpubsub.engine.columnar import SubscriptionBuilder
from fastpubsub.engine.frontend.lowering import lower
from fastpubsub.engine.semantics import ALL_OPERATORS, KIND_BOOL, KIND_NUMBER, KIND_STRING, OP_CODE, AnyOf, \
    validate_subscription
from fastpubsub.engine.costmodel.maintenance import Thresholds
from fastpubsub.engine.structures.hashtable import IdTable
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions
from fastpubsub.engine.structures.id_filter import IdFilter

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Level(enum.IntEnum):
    HIGH = 7


scalars = st.one_of(
    st.integers(-3, 3), st.sampled_from([0.5, -0.0, 1e300, math.inf, -math.inf, 2**53 + 1, -(2**63), 2**1100,
                                         Level.HIGH]),
    st.sampled_from(["", "a", "zz", "é"]), st.booleans(),
)
attributes = st.sampled_from(["a", "b", "c", "", "\x00a"])
comparison = st.tuples(attributes, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), scalars)
extended = st.one_of(
    st.tuples(attributes, st.sampled_from(["in", "not in"]), st.lists(st.integers(0, 3), min_size=1, max_size=3)),
    st.tuples(attributes, st.sampled_from(["prefix", "suffix", "contains"]), st.sampled_from(["ab", "b", ""])),
    st.tuples(attributes, st.just("exists"), st.none()),
    st.tuples(attributes, st.sampled_from(["~", 3]), scalars),
)
predicate = st.one_of(comparison, comparison, comparison.map(list), extended)
conjunction = st.lists(predicate, max_size=4)
subscription = st.one_of(conjunction, conjunction, st.lists(conjunction, min_size=1, max_size=3).map(AnyOf),
                         st.just("a = 1"), st.just([("a", "=", 1, 2)]), st.just([(["a"], "=", 1)]),
                         st.just([("a", ["="], 1)]))


def naive_columns(subs: list[tuple[int, object]]) -> dict:
    """Every subscription validated, lowered and encoded one predicate at a time."""
    cols: dict = {k: [] for k in ("ids", "disjunct", "lengths", "names", "operators", "kinds", "numbers", "strings")}
    for sid, sub in subs:
        for r, row in enumerate(lower(validate_subscription(sub))):
            cols["ids"].append(sid)
            cols["disjunct"].append(1 if r else 0)
            cols["lengths"].append(len(row))
            for a, op, v in row:
                cols["names"].append(a)
                cols["operators"].append(OP_CODE[op])
                if isinstance(v, bool):
                    cols["kinds"].append(KIND_BOOL)
                    cols["numbers"].append(float(v))
                elif isinstance(v, str):
                    cols["kinds"].append(KIND_STRING)
                    cols["numbers"].append(math.nan)
                    cols["strings"].append(v)
                else:
                    cols["kinds"].append(KIND_NUMBER)
                    cols["numbers"].append(float(v))
    return cols


def _valid(sub: object) -> bool:
    try:
        for row in lower(validate_subscription(sub)):
            for _, _, v in row:
                if not isinstance(v, str):
                    float(v)
        return True
    except (ValueError, OverflowError):
        return False


@SETTINGS
@given(st.lists(subscription, max_size=12))
def test_the_builder_files_what_validating_and_lowering_each_predicate_gives(subs):
    """Plain conjunctions take the fast path, the rest validate_subscription: the columns are the naive ones, and an
    invalid subscription is a ValueError (the same as validate_subscription's) that appends nothing."""
    b = SubscriptionBuilder()
    valid = []
    for sid, sub in enumerate(subs):
        before = (len(b.ids), len(b.preds), len(b.later))
        if _valid(sub):
            assert b.append(sid, sub) == before[0]
            valid.append((sid, sub))
        else:
            with pytest.raises(ValueError) as raised:
                b.append(sid, sub)
            try:
                validate_subscription(sub)
            except ValueError as exc:
                assert str(raised.value) == str(exc)
            assert (len(b.ids), len(b.preds), len(b.later)) == before
    batch, want = b.batch(), naive_columns(valid)
    batch.validate()
    assert batch.ids.tolist() == want["ids"]
    assert batch.disjunct_flags().tolist() == want["disjunct"]
    assert np.diff(batch.offsets).tolist() == want["lengths"]
    assert [batch.attribute_names[a] for a in batch.attributes.tolist()] == want["names"]
    assert batch.operators.tolist() == want["operators"] and batch.kinds.tolist() == want["kinds"]
    np.testing.assert_array_equal(batch.numbers, np.array(want["numbers"], dtype=np.float64))
    assert list(batch.strings) == want["strings"]


def test_a_value_too_large_for_a_double_is_refused_at_the_add():
    m = Matcher("dynamic")
    for sub in ([("a", "=", 2**1100)], AnyOf([[("a", "=", 1)], [("b", "in", [2**1100])]])):
        with pytest.raises(ValueError, match="too large for a double"):
            m.add(1, sub)
    assert len(m) == 0 and 1 not in m
    m.add(1, [("a", "=", 2**1000)])
    assert m.match({"a": float(2**1000)}).tolist() == [1]


@SETTINGS
@given(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-50, 50),
                          st.integers(0, 40).map(lambda k: k << 40)), max_size=300),
       st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50))
def test_the_id_filter_never_forgets_an_inserted_id(inserted, others):
    """Inserted in batches (with rebuilds from the live ids between): may_hold is true for every id held."""
    f, held = IdFilter(), set()
    for start in range(0, len(inserted), 37):
        chunk = np.unique(np.array(inserted[start:start + 37], dtype=np.int64))
        held.update(chunk.tolist())
        f.insert(chunk, lambda: np.array(sorted(held), dtype=np.int64))
        assert all(f.may_hold(s) for s in held)
    assert all(f.may_hold(s) for s in others if s in held)


def test_the_id_filter_sends_few_new_ids_to_the_table():
    """About one slot in eight is set: of new consecutive ids, far fewer than half may be held."""
    f = IdFilter()
    ids = np.arange(300_000, dtype=np.int64)
    for start in range(0, len(ids), 16_384):
        f.insert(ids[start:start + 16_384], lambda: ids[:start + 16_384])
    assert sum(f.may_hold(s) for s in range(300_000, 400_000)) < 15_000


@SETTINGS
@given(st.sets(st.integers(-(2**63), 2**63 - 1), max_size=200), st.lists(st.integers(-(2**63), 2**63 - 1),
                                                                          max_size=50))
def test_the_scalar_probe_agrees_with_a_set(keys, probes):
    t = IdTable(capacity=8)
    hid = np.array(sorted(keys), dtype=np.int64)
    t.insert(np.arange(len(hid)), hid)
    for k in list(keys) + probes:
        assert t.has(k, hid) == (k in keys)


def test_once_changes_stop_their_tails_join_the_runs_and_matches_stay_exact():
    """A spell of single adds leaves entries in unsorted tails, checked one by one by every event; once
    ``settle_events`` events pass with no change, a maintenance round merges every list's tails, hot or not, and
    the matcher holds what a bulk load of the same subscriptions holds."""
    subs = generate_subscriptions(PRESETS["W0"], n=60_000, seed=5)  # lists of about 50: runs from 32
    events = generate_events(PRESETS["W0"], 300, seed=6)
    single = Matcher("dynamic", runs=32, thresholds=Thresholds(settle_events=600))
    for sid, preds in subs.to_lists():
        single.add(sid, preds)
    bulk = Matcher("dynamic", runs=32)
    bulk.add_bulk(subs)
    want = bulk.match_encoded(events)
    before = single.stats()
    assert before["sorted_entries"] < before["subscriptions"]  # the last adds wait in tails
    for _ in range(3):  # 900 events: a round once 600 have passed
        got = single.match_encoded(events)
        assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.ids, want.ids)
    after = single.stats()
    assert after["maintenance"]["refreshes"] > before["maintenance"]["refreshes"]
    assert after["subscriptions"] - after["sorted_entries"] < (before["subscriptions"] - before["sorted_entries"]) / 4
    single.add(10**9, [("a0", "=", 1)])  # a change starts a new spell: the next round waits for quiet again
    single.flush()
    assert single._index.maintenance.unsettled
