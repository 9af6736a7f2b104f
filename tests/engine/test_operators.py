"""The operators beyond the comparisons and OR: semantics, validation, and every algorithm against the oracle.

Values are hostile on purpose: empty strings, ``True`` against ``1``, NaN,
mixed kinds, prefixes longer than the value, unicode, -0.0 against 0.0.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import (
    ALGORITHMS, MAX_CONJUNCTIONS, MAX_LIST, AllOf, AnyOf, Matcher, SubscriptionBatch, validate_subscription,
)
from tests.engine.conformance import add_each, agree, bulk_load, bulk_remove, remove_each
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.columnar import EventBatch, concat_subscriptions, take_subscription_groups
from fastpubsub.engine.semantics import OPERATORS, holds

ATTRS = ["a", "b", "t"]
STRINGS = ["", "a", "ab", "abc", "b", "ba", "é", "éa", "aé", "\U0001f600", "a\U0001f600b", "zz"]
numbers = st.sampled_from([-1, 0, 1, 2, 1.5, -0.0, 0.0, 3, 2**53, float("inf"), float("-inf")])
scalars = st.one_of(numbers, st.sampled_from(STRINGS), st.booleans())
nonempty = st.sampled_from([s for s in STRINGS if s])


def _lists(kind_values):
    return st.lists(kind_values, min_size=1, max_size=4)


one_kind_list = st.one_of(_lists(numbers), _lists(st.sampled_from(STRINGS)), _lists(st.booleans()))


@st.composite
def ranges(draw):
    kind = draw(st.sampled_from([numbers, st.sampled_from(STRINGS), st.booleans()]))
    lo, hi = draw(kind), draw(kind)
    return [lo, hi] if not hi < lo else [hi, lo]


attr = st.sampled_from(ATTRS)
predicate = st.one_of(
    st.tuples(attr, st.sampled_from(OPERATORS), scalars),
    st.tuples(attr, st.sampled_from(["in", "not in"]), one_kind_list),
    st.tuples(attr, st.sampled_from(["between", "not between"]), ranges()),
    st.tuples(attr, st.sampled_from(["prefix", "suffix", "contains"]), nonempty),
    st.tuples(attr, st.just("exists"), st.none()),
)
conjunction = st.lists(predicate, min_size=1, max_size=3)
subscription = st.one_of(
    conjunction,
    st.lists(conjunction, min_size=1, max_size=3).map(AnyOf),
    st.lists(st.lists(predicate, min_size=1, max_size=2), min_size=1, max_size=3).map(AllOf),
)
event_values = st.one_of(scalars, st.just(math.nan), st.sampled_from(["abcd", "éab", "b\U0001f600", "zzz"]))
event = st.dictionaries(st.sampled_from(ATTRS + ["x"]), event_values, max_size=4)
subscription_sets = st.dictionaries(st.integers(-20, 20), subscription, max_size=15)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(subs=subscription_sets, events=st.lists(event, min_size=1, max_size=8), gone=st.sets(st.integers(-20, 20)))
def test_every_algorithm_agrees_with_the_oracle(algorithm, subs, events, gone):
    m, o = Matcher(algorithm), OracleMatcher()
    add_each(m, o, subs)
    assert len(m) == len(o)
    agree(m, o, events)
    remove_each(m, o, sorted(gone & set(subs)))
    assert len(m) == len(o) and all((sid in m) == (sid in o) for sid in subs)
    agree(m, o, events)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(subs=subscription_sets, more=subscription_sets, events=st.lists(event, min_size=1, max_size=6))
def test_bulk_loads_and_bulk_removes_agree_with_the_oracle(algorithm, subs, more, events):
    m, o = Matcher(algorithm), OracleMatcher()
    bulk_load(m, o, subs)
    bulk_load(m, o, {sid + 100: s for sid, s in more.items()})
    agree(m, o, events)
    bulk_remove(m, o, sorted(subs)[::2])
    agree(m, o, events)


def test_the_issue_examples_hold_as_specified():
    cases = [
        (("color", "in", ["red", "blue"]), {"color": "blue"}, True),
        (("color", "in", ["red", "blue"]), {"color": "green"}, False),
        (("color", "not in", ["red"]), {"color": "green"}, True),
        (("color", "not in", ["red"]), {"color": 3}, False),  # not comparable with the values
        (("color", "not in", ["red"]), {}, False),  # missing fails the negative ones too
        (("price", "between", [5, 10]), {"price": 5}, True),
        (("price", "between", [5, 10]), {"price": 10.0}, True),
        (("price", "between", [5, 10]), {"price": 10.5}, False),
        (("price", "not between", [5, 10]), {"price": 4}, True),
        (("price", "not between", [5, 10]), {"price": "4"}, False),
        (("price", "not between", [5, 10]), {"price": math.nan}, False),
        (("title", "prefix", "harry"), {"title": "harry potter"}, True),
        (("title", "prefix", "harry"), {"title": "harr"}, False),  # prefix longer than the value
        (("title", "prefix", "harry"), {"title": "Harry"}, False),  # case-sensitive
        (("title", "suffix", "potter"), {"title": "harry potter"}, True),
        (("title", "contains", "wizard"), {"title": "the wizard of oz"}, True),
        (("title", "contains", "1"), {"title": 1}, False),
        (("promo", "exists", None), {"promo": False}, True),
        (("promo", "exists", None), {"promo": ""}, True),
        (("promo", "exists", None), {"promo": math.nan}, False),
        (("promo", "exists", None), {"other": 1}, False),
        (("flag", "in", [True]), {"flag": 1}, False),  # True never equals 1
        (("n", "in", [1]), {"n": True}, False),
        (("n", "in", [0]), {"n": -0.0}, True),
    ]
    for p, e, want in cases:
        assert holds(p, e) is want, (p, e)
        for algorithm in ALGORITHMS:
            m = Matcher(algorithm)
            m.add(1, [p])
            assert m.match(e).tolist() == ([1] if want else []), (algorithm, p, e)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_dnf_subscription_is_notified_once_per_event(algorithm):
    m = Matcher(algorithm)
    m.add(42, AnyOf([[("a", "=", 1), ("b", "<", 2)], [("c", "in", [3, 4])], [("a", "exists", None)]]))
    m.add(7, [("c", "in", [3, 4, 5])])
    assert m.match({"a": 1, "b": 1, "c": 3}).tolist() == [7, 42]
    assert m.match({"a": 2, "b": 5}).tolist() == [42]
    assert m.match({"c": 5}).tolist() == [7]
    assert len(m) == 2 and 42 in m
    m.remove(42)
    assert m.match({"a": 1, "b": 1, "c": 3}).tolist() == [7] and len(m) == 1
    m.add(42, [("c", "=", 3)])  # the id is free again
    assert m.match({"c": 3}).tolist() == [7, 42]


@pytest.mark.parametrize(
    "sub, message",
    [
        ([("a", "in", [])], r"predicate 0 \('a', 'in', \.\.\.\): the list of values is empty"),
        ([("a", "in", [1, "x"])], "more than one kind"),
        ([("a", "in", [True, 1])], "more than one kind"),
        ([("a", "in", "abc")], "expected a list of values"),
        ([("a", "in", [math.nan])], "NaN"),
        ([("a", "not in", [None])], "unsupported value type"),
        ([("a", "in", list(range(MAX_LIST + 1)))], f"at most {MAX_LIST}"),
        ([("a", "between", [10, 5])], "lo 10 is above hi 5"),
        ([("a", "between", ["b", "a"])], "lo 'b' is above hi 'a'"),
        ([("a", "between", [1])], "expected two values"),
        ([("a", "not between", [1, "2"])], "more than one kind"),
        ([("b", "=", 1), ("a", "prefix", "")], r"predicate 1 \('a', 'prefix', \.\.\.\): expected a non-empty string"),
        ([("a", "contains", 3)], "expected a non-empty string"),
        ([("a", "exists", 1)], "takes no value"),
        ([("a", "like", "x")], "unknown operator 'like'"),
        ([("\x00a", "=", 1)], "reserved"),
        (AnyOf([]), "at least one disjunct"),
        (AnyOf([[("a", "=", 1)], None]), "disjunct 1: expected a list of predicates, got None"),
        (AllOf([3]), "clause 0: expected a list of predicates"),
        (AnyOf([[("a", "=", 1)], []]), "disjunct 1: a subscription needs at least one predicate"),
        (AllOf([[("a", "in", list(range(200)))], [("b", "in", list(range(200)))]]), "more than"),
        ([("a", "in", list(range(200))), ("b", "in", list(range(200)))], f"more than {MAX_CONJUNCTIONS}"),
    ],
)
def test_invalid_subscriptions_are_value_errors_naming_the_predicate(sub, message):
    with pytest.raises(ValueError, match=message):
        validate_subscription(sub)
    for algorithm in ("counting", "dynamic"):
        m = Matcher(algorithm)
        with pytest.raises(ValueError, match=message):
            m.add(1, sub)
        assert len(m) == 0
    with pytest.raises(ValueError, match=message):
        OracleMatcher().add(1, sub)


def test_cnf_is_accepted_by_expansion_to_dnf():
    cnf = AllOf([[("a", "=", 1), ("b", "=", 2)], [("c", "prefix", "x")]])
    assert validate_subscription(cnf) == AnyOf([[("a", "=", 1), ("c", "prefix", "x")], [("b", "=", 2), ("c", "prefix", "x")]])
    m = Matcher("dynamic")
    m.add(1, cnf)
    assert m.match_batch([{"b": 2, "c": "xy"}, {"a": 1, "c": "y"}, {"a": 2, "b": 3, "c": "x"}]) [0].tolist() == [1]


def test_events_may_not_use_reserved_attribute_names():
    m = Matcher("propagation")
    m.add(1, [("t", "prefix", "ab")])
    with pytest.raises(ValueError, match="NUL"):
        m.match({"\x00[\"prefix\", \"t\", 2]": "ab"})
    with pytest.raises(ValueError, match="NUL"):
        m.match_encoded(EventBatch.from_dicts([{"a": 1}]).__class__(("\x00x",), np.array([0, 1]), np.array([0], np.int32),
                                                                     np.array([0], np.int8), np.array([1.0])))


def test_batches_keep_the_rows_of_a_subscription_together():
    subs = [(1, [("a", "in", [1, 2])]), (2, [("a", "=", 3)]), (3, AnyOf([[("t", "prefix", "ab")], [("a", "exists", None)]]))]
    batch = SubscriptionBatch.from_lists(subs)
    assert len(batch) == 2 + 1 + 4 and batch.n_subscriptions == 3  # rows: in (2), =, prefix | exists (1 + 3)
    back = batch.to_lists()
    assert [sid for sid, _ in back] == [1, 2, 3]
    assert back[0][1] == AnyOf([[("a", "=", 1)], [("a", "=", 2)]])
    assert back[2][1].disjuncts[0] == [("t", "prefix", "ab")]  # derived predicates are written back
    again = SubscriptionBatch.from_lists(back)
    assert again.to_lists() == back
    both = concat_subscriptions([batch, again])
    assert both.n_subscriptions == 6
    only = take_subscription_groups(batch, np.array([0, 3]))
    assert [sid for sid, _ in only.to_lists()] == [1, 3] and len(only) == 2 + 4
    bad = SubscriptionBatch.from_lists(subs)
    bad.ids[1] = 5  # a disjunct row under another id
    with pytest.raises(ValueError, match="repeat the id"):
        bad.validate()


def test_the_operator_benchmarks_run_and_check_their_matches():
    """benchmarks/workloads/operators.py at a small size: its ``in`` batch equals ``from_lists``' lowering, its prefix
    matches equal a ``str.startswith`` scan (no timing is asserted)."""
    from benchmarks.workloads import operators

    row = operators.run_in(3000, 200, "dynamic", repeat=1)
    assert row["in_matches_per_event"] >= row["plain_matches_per_event"] and row["in_events_per_s"] > 0
    row = operators.run_prefix(2000, 2000, 300, "propagation", repeat=1, floor_events=100)
    assert row["matches_per_event"] > 1 and row["startswith_scan_events_per_s"] > 0
    for operator in operators.RULER_OPERATORS:  # each checks its matches against engine.semantics.holds
        row = operators.run_ruler(operator, 300, 200, 100, "dynamic", repeat=1, floor_events=50,
                                  array=operator == "range")
        assert row["matches_per_event"] > 0, row


def test_derived_attributes_take_only_what_the_lowering_makes():
    name = '\x00["prefix", "t", 2]'
    m = Matcher("counting")
    ok = SubscriptionBatch.from_lists([(1, [("t", "prefix", "ab")])])
    assert name in ok.attribute_names
    m.add_bulk(ok)
    b = SubscriptionBatch.from_lists([(2, [("x", "=", 1)])])
    b.attribute_names = (name,)
    with pytest.raises(ValueError, match="derived attribute"):
        m.add_bulk(b)  # "= 1" on a prefix attribute
    b = SubscriptionBatch.from_lists([(3, [("x", "<", "ab")])])
    b.attribute_names = (name,)
    with pytest.raises(ValueError, match="derived attribute"):
        m.add_bulk(b)
    b = SubscriptionBatch.from_lists([(4, [("x", "=", "abc")])])
    b.attribute_names = (name,)
    with pytest.raises(ValueError, match="derived attribute"):
        m.add_bulk(b)  # a prefix of length 3 under the length-2 attribute
    b.attribute_names = ("\x00nonsense",)
    with pytest.raises(ValueError, match="unknown reserved attribute name"):
        m.add_bulk(b)
    assert len(m) == 1 and m.match({"t": "abz"}).tolist() == [1]
