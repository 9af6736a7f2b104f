"""Events carrying an attribute several times (arrays of nested events) against the oracle, for every algorithm.

A predicate on a repeated attribute holds when any of its values satisfies
it (engine/semantics.py): ``!=``, ``not in``, ``exists`` and the
multi-attribute hash tables' conjunctions of equalities included.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import ALGORITHMS, Matcher
from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.semantics import ALL_OPERATORS, subscription_holds, validate_subscription
from tests.engine.conformance import add_each, agree
from tests.support.oracles.engine import OracleMatcher

ATTRS = ["a", "b", "c"]
scalars = st.one_of(st.integers(-2, 2), st.sampled_from([0.5, "x", "xy", "y", True, False]))
event_scalars = st.one_of(scalars, st.sampled_from([math.nan, "X", "Xy", "10.1.2.3", "::1"]))


def _predicate(attr: str, op: str):
    if op in ("in", "not in"):
        return st.tuples(st.just(attr), st.just(op), st.lists(st.integers(-2, 2), min_size=1, max_size=3))
    if op in ("between", "not between"):
        return st.tuples(st.just(attr), st.just(op), st.tuples(st.integers(-2, 0), st.integers(0, 2)).map(list))
    if op in ("prefix", "suffix", "contains"):
        return st.tuples(st.just(attr), st.just(op), st.sampled_from(["x", "y", "xy"]))
    if op in ("exists", "not exists"):
        return st.tuples(st.just(attr), st.just(op), st.none())
    if "ignore case" in op or op in ("not prefix", "not suffix"):
        return st.tuples(st.just(attr), st.just(op), st.sampled_from(["x", "Y", "xY"]))
    if "wildcard" in op:
        return st.tuples(st.just(attr), st.just(op), st.sampled_from(["x*", "*y", "*", "x*y"]))
    if op == "range":
        return st.tuples(st.just(attr), st.just(op), st.tuples(st.sampled_from([">", ">="]), st.integers(-2, 0),
                                                               st.sampled_from(["<", "<="]), st.integers(0, 2)).map(list))
    if op == "cidr":
        return st.tuples(st.just(attr), st.just(op), st.sampled_from(["10.0.0.0/8", "::/0"]))
    return st.tuples(st.just(attr), st.just(op), scalars)


predicate = st.tuples(st.sampled_from(ATTRS), st.sampled_from(ALL_OPERATORS)).flatmap(lambda t: _predicate(*t))
subscription = st.lists(predicate, min_size=1, max_size=3)
equalities = st.lists(st.sampled_from(ATTRS), min_size=2, max_size=3, unique=True).flatmap(
    lambda attrs: st.tuples(*[st.tuples(st.just(a), st.just("="), st.integers(-1, 1)) for a in attrs]).map(list))
value_or_values = st.one_of(event_scalars, st.lists(event_scalars, max_size=4))
event = st.dictionaries(st.sampled_from(ATTRS + ["z"]), value_or_values, max_size=4)
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _agree(algorithm: str, subs: dict, events: list[dict]) -> None:
    m, o = Matcher(algorithm), OracleMatcher()
    add_each(m, o, subs)
    agree(m, o, events)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(subs=st.dictionaries(st.integers(0, 40), subscription, max_size=20), events=st.lists(event, min_size=1, max_size=6))
def test_every_operator_on_repeated_attributes_agrees_with_oracle(algorithm, subs, events):
    _agree(algorithm, subs, events)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(subs=st.dictionaries(st.integers(0, 40), equalities, min_size=5, max_size=30),
       events=st.lists(st.dictionaries(st.sampled_from(ATTRS), st.lists(st.integers(-1, 1), max_size=4), max_size=3),
                       min_size=1, max_size=6))
def test_conjunctions_of_equalities_probe_every_combination(algorithm, subs, events):
    """Many subscriptions of equalities on two or three attributes: the multi-attribute hash tables' workload."""
    m = Matcher(algorithm)
    for sid, preds in subs.items():
        m.add(sid, preds)
    if algorithm in ("static", "dynamic"):
        m.reorganize()  # the multi-attribute hash tables, chosen from the statistics
    want = [sorted(sid for sid, p in subs.items() if subscription_holds(validate_subscription(p), e)) for e in events]
    assert [r.tolist() for r in m.match_batch(events)] == want


def test_a_repeated_attribute_holds_when_any_value_does():
    m = Matcher("counting")
    m.add(1, [("tags", "=", "red")])
    m.add(2, [("tags", "!=", "red")])
    m.add(3, [("tags", "not in", ["red"])])
    m.add(4, [("tags", "exists", None)])
    m.add(5, [("tags", "=", "red"), ("tags", "=", "blue")])
    assert m.match({"tags": ["red", "blue"]}).tolist() == [1, 2, 3, 4, 5]
    assert m.match({"tags": ["red"]}).tolist() == [1, 4]
    assert m.match({"tags": []}).tolist() == []


def test_batches_keep_repeated_values():
    events = [{"tags": ["a", "b"], "n": 1}, {"tags": [], "n": [2, 3.5, True]}]
    batch = EventBatch.from_dicts(events)
    assert batch.offsets.tolist() == [0, 3, 6]
    assert batch.to_dicts() == [{"tags": ["a", "b"], "n": 1}, {"n": [2, 3.5, True]}]
