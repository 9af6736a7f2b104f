"""Event Ruler's JSON rules as subscriptions: decoded from a subscription record, matched by every algorithm on
JSON events decoded as the processor decodes them, against an oracle that evaluates the rule on the JSON event
itself (tests/oracles/eventruler.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import ALGORITHMS, Matcher
from fastpubsub.wire import codecs
from fastpubsub.wire.codecs import events as event_codecs
from fastpubsub.wire.eventruler import RuleError, rule_to_subscription
from oracles.eventruler import rule_matches

KEYS = ["a", "b", "c.d"]
STRINGS = ["", "x", "X", "xy", "Xy", "yx", "10.0.0.1", "10.1.0.1", "2001:db8::1", "a*b", "straße", "STRASSE"]
NUMBERS = [-1, 0, 1, 2.5, 5, 10]
string = st.sampled_from(STRINGS)
nonempty = st.sampled_from([s for s in STRINGS if s])
number = st.sampled_from(NUMBERS)
scalar = st.one_of(string, number, st.booleans())


@st.composite
def numeric(draw, ranges: bool):
    if ranges and draw(st.booleans()):
        lo, hi = sorted((draw(number), draw(number)))
        return {"numeric": [draw(st.sampled_from([">", ">="])), lo, draw(st.sampled_from(["<", "<="])), hi]}
    return {"numeric": [draw(st.sampled_from(["=", "<", "<=", ">", ">="])), draw(number)]}


def operator(ranges: bool):
    """Operator objects; ``ranges``: also anything-but lists, whose values are predicates of their own on an
    array."""
    ops = [
        st.builds(lambda s: {"prefix": s}, nonempty), st.builds(lambda s: {"suffix": s}, nonempty),
        st.builds(lambda s: {"prefix": {"equals-ignore-case": s}}, nonempty),
        st.builds(lambda s: {"suffix": {"equals-ignore-case": s}}, nonempty),
        st.builds(lambda s: {"equals-ignore-case": s}, string),
        st.builds(lambda s: {"wildcard": s}, st.sampled_from(["*", "x*", "*y", "X*y", "a\\*b", "1*0*1", ""])),
        st.builds(lambda s: {"cidr": s}, st.sampled_from(["10.0.0.0/24", "10.0.0.0/8", "2001:db8::/32"])),
        st.builds(lambda b: {"exists": b}, st.booleans()),
        st.builds(lambda s: {"anything-but": s}, st.one_of(string, number)),
        st.builds(lambda k, s: {"anything-but": {k: s}}, st.sampled_from(["prefix", "suffix"]), nonempty),
        st.builds(lambda s: {"anything-but": {"equals-ignore-case": s}}, string),
        st.builds(lambda s: {"anything-but": {"wildcard": s}}, st.sampled_from(["x*", "*"])),
        numeric(True),
    ]
    if ranges:
        ops.append(st.builds(lambda xs: {"anything-but": xs}, st.one_of(st.lists(string, min_size=2, max_size=3),
                                                                         st.lists(number, min_size=2, max_size=3))))
    return st.one_of(*ops)


def leaf(ranges: bool):
    return st.lists(st.one_of(scalar, operator(ranges)), min_size=1, max_size=3)


def rules(ranges: bool):
    def extend(inner):
        return st.one_of(
            st.dictionaries(st.sampled_from(KEYS), st.one_of(leaf(ranges), inner), min_size=1, max_size=2),
            st.builds(lambda a, b: {"$or": [a, b]}, inner, inner))
    return st.recursive(st.dictionaries(st.sampled_from(KEYS), leaf(ranges), min_size=1, max_size=2), extend,
                        max_leaves=4).filter(lambda r: all(v for v in r.values()))


def events(arrays: bool):
    value = scalar if not arrays else st.one_of(scalar, st.lists(scalar, max_size=3))
    return st.recursive(st.dictionaries(st.sampled_from(KEYS), value, max_size=3),
                        lambda inner: st.dictionaries(st.sampled_from(KEYS), st.one_of(
                            value, inner, *([st.lists(inner, max_size=2)] if arrays else [])), max_size=3),
                        max_leaves=6)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _agree(algorithm, rules_, events_):
    m, subs = Matcher(algorithm), {}
    for i, rule in enumerate(rules_):
        value = json.dumps({"subscriber": "s", "rule": rule}).encode()
        try:
            subs[i] = codecs.decode_any_subscription(value).predicates
        except codecs.DecodeError as exc:
            assert "invalid rule" in str(exc)  # e.g. more conjunctions than a subscription may stand for
            continue
        m.add(i, subs[i])
    decoded = [event_codecs._as_dict(codecs.decode_json_event(json.dumps(e).encode())) for e in events_]
    want = [[i for i in subs if rule_matches(rules_[i], e)] for e in events_]
    assert [r.tolist() for r in m.match_batch(decoded)] == want


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(rules_=st.lists(rules(ranges=True), min_size=1, max_size=6), events_=st.lists(events(arrays=False), max_size=6))
def test_rules_mean_what_event_ruler_says_on_events_without_arrays(algorithm, rules_, events_):
    _agree(algorithm, rules_, events_)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(rules_=st.lists(rules(ranges=False), min_size=1, max_size=6), events_=st.lists(events(arrays=True), max_size=6))
def test_rules_mean_what_event_ruler_says_on_arrays(algorithm, rules_, events_):
    """Every operator holds on an array when one element satisfies it, a numeric range included (anything-but
    lists aside)."""
    _agree(algorithm, rules_, events_)


def test_a_range_needs_one_element_within_it_an_anything_but_list_is_checked_per_value():
    """A numeric range on an array holds when one element is within it, as in Event Ruler; the known difference:
    each value of an anything-but list may be differed from by a different element."""
    rng = rule_to_subscription({"n": [{"numeric": [">", 0, "<=", 5]}]})
    ab = rule_to_subscription({"s": [{"anything-but": ["x", "y"]}]})
    for algorithm in ALGORITHMS:
        m = Matcher(algorithm)
        m.add(1, rng)
        m.add(2, ab)
        assert m.match({"n": [-1, 10]}).tolist() == []
        assert m.match({"n": [-1, 10, 5]}).tolist() == [1]
        assert m.match({"s": ["x", "y"]}).tolist() == [2]
        assert m.match({"n": 3, "s": "z"}).tolist() == [1, 2]
    assert rule_matches({"s": [{"anything-but": ["x", "y"]}]}, {"s": ["x", "y"]}) is False


def test_the_issue_example_is_taken_as_it_is():
    rule = {"detail": {"state": [{"anything-but": "x"}], "price": [{"numeric": [">", 10]}]}}
    assert rule_to_subscription(rule) == [("detail.state", "not in", ["x"]), ("detail.price", ">", 10)]


@pytest.mark.parametrize("rule, reason", [
    ({}, "non-empty JSON object"),
    ({"a": "x"}, "values in a rule are lists"),
    ({"a": []}, "empty list"),
    ({"a": [None]}, "null"),
    ({"a": [{"numeric": [">", "1"]}]}, "'numeric' compares"),
    ({"a": [{"numeric": ["<", 5, ">", 1]}]}, "numeric range"),
    ({"a": [{"numeric": [">", 5, "<", 1]}]}, "lo 5 is above hi 1"),
    ({"a": [{"contains": "x"}]}, "unknown operator 'contains'"),
    ({"a": [{"prefix": "x", "suffix": "y"}]}, "exactly one key"),
    ({"a": [{"anything-but": {"numeric": [">", 1]}}]}, "'anything-but' takes"),
    ({"a": [{"cidr": "10.0.0.0/40"}]}, "10.0.0.0/40"),
    ({"a": [{"wildcard": "a\\b"}]}, "escapes only"),
    ({"a": [{"exists": 1}]}, "true or false"),
    ({"a": {}}, "empty object"),
])
def test_a_rule_we_cannot_take_is_refused_with_the_reason(rule, reason):
    with pytest.raises(RuleError, match=reason.replace("(", r"\(").replace(".", r"\.")):
        rule_to_subscription(rule)
    value = json.dumps({"subscriber": "s", "rule": rule}).encode()
    with pytest.raises(codecs.DecodeError, match="invalid rule"):
        codecs.decode_any_subscription(value)


def test_or_is_a_field_name_where_event_ruler_says_so():
    """``$or`` with fewer than two objects, or objects naming an operator, is a field like any other."""
    assert rule_to_subscription({"$or": {"a": ["x"]}}) == [("\\$or.a", "in", ["x"])]
