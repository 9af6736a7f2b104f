"""Event Ruler's operators (case-insensitive, wildcard, cidr, the negated forms, not exists): every algorithm
against the oracle, on hostile values (case folds that change length, stars, both address families, arrays)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import ALGORITHMS, AnyOf, Matcher, validate_subscription
from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.semantics import holds
from tests.engine.conformance import add_each, agree
from tests.support.oracles.engine import OracleMatcher

ATTRS = ["a", "b"]
STRINGS = ["", "a", "A", "ab", "Ab", "aB", "abc", "ABC", "ß", "SS", "ss", "straße", "STRASSE", "a*b", "a\\b",
           "10.0.0.1", "10.0.1.7", "10.1.2.3", "192.168.0.1", "::1", "2001:db8::1", "2001:db9::", "fe80::1",
           "10.0.0", "x1y2z", "12017", "2x0x1x7"]
PATTERNS = ["*", "a*", "*b", "a*b", "A*", "a\\*b", "a\\\\b", "*0*1*", "2*0*1*7", "**", "", "x*y*z"]
NETWORKS = ["10.0.0.0/24", "10.0.0.0/8", "0.0.0.0/0", "10.0.0.1/32", "2001:db8::/32", "::/0", "::1/128", "fe80::/10"]
nonempty = st.sampled_from([s for s in STRINGS if s])
attr = st.sampled_from(ATTRS)
predicate = st.one_of(
    st.tuples(attr, st.sampled_from(["equals ignore case", "not equals ignore case"]), st.sampled_from(STRINGS)),
    st.tuples(attr, st.sampled_from(["prefix ignore case", "suffix ignore case", "not prefix", "not suffix",
                                     "prefix", "suffix"]), nonempty),
    st.tuples(attr, st.sampled_from(["wildcard", "not wildcard"]), st.sampled_from(PATTERNS)),
    st.tuples(attr, st.just("cidr"), st.sampled_from(NETWORKS)),
    st.tuples(attr, st.sampled_from(["not exists", "exists"]), st.none()),
    st.tuples(attr, st.sampled_from(["=", "!=", "<"]), st.sampled_from(STRINGS + [1, 2.5])),
    st.tuples(attr, st.just("range"), st.tuples(st.sampled_from([">", ">="]), st.sampled_from([0, 1, 2.5]),
                                                 st.sampled_from(["<", "<="]), st.sampled_from([2.5, 3])).map(list)),
)
conjunction = st.lists(predicate, min_size=1, max_size=3)
subscription = st.one_of(conjunction, st.lists(conjunction, min_size=1, max_size=3).map(AnyOf))
value = st.one_of(st.sampled_from(STRINGS), st.sampled_from([0, 1, 2.5, 3, 4, True, math.nan]))
event = st.dictionaries(st.sampled_from(ATTRS + ["x"]), st.one_of(value, st.lists(value, max_size=3)), max_size=3)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(subs=st.dictionaries(st.integers(-20, 20), subscription, max_size=12),
       events=st.lists(event, min_size=1, max_size=8))
def test_every_algorithm_agrees_with_the_oracle(algorithm, subs, events):
    m, o = Matcher(algorithm), OracleMatcher()
    add_each(m, o, subs)
    agree(m, o, events)


@pytest.mark.parametrize("p, event, expected", [
    (("s", "equals ignore case", "EC2"), {"s": "ec2"}, True),
    (("s", "equals ignore case", "straße"), {"s": "STRASSE"}, True),
    (("s", "not equals ignore case", "EC2"), {"s": "Ec2"}, False),
    (("s", "not equals ignore case", "EC2"), {"s": 2}, False),
    (("s", "prefix ignore case", "ARN:"), {"s": "arn:aws"}, True),
    (("s", "suffix ignore case", "EC2"), {"s": "aws.ec2"}, True),
    (("s", "wildcard", "Simple*Service"), {"s": "SimpleQueueService"}, True),
    (("s", "wildcard", "Simple*Service"), {"s": "SimpleService"}, True),
    (("s", "wildcard", "Simple*Service"), {"s": "SimpleServices"}, False),
    (("s", "wildcard", "a\\*b"), {"s": "a*b"}, True),
    (("s", "wildcard", "a\\*b"), {"s": "axb"}, False),
    (("s", "not wildcard", "a*"), {"s": "ba"}, True),
    (("s", "not wildcard", "a*"), {"s": 1}, False),
    (("ip", "cidr", "10.0.0.0/24"), {"ip": "10.0.0.33"}, True),
    (("ip", "cidr", "10.0.0.0/24"), {"ip": "10.0.1.33"}, False),
    (("ip", "cidr", "2001:db8::/32"), {"ip": "2001:db8:1::7"}, True),
    (("ip", "cidr", "2001:db8::/32"), {"ip": "10.0.0.1"}, False),
    (("ip", "cidr", "10.0.0.0/24"), {"ip": ["1.2.3.4", "10.0.0.9"]}, True),
    (("s", "not prefix", "init"), {"s": "running"}, True),
    (("s", "not prefix", "init"), {"s": "initializing"}, False),
    (("s", "not prefix", "init"), {"s": "in"}, True),
    (("s", "not suffix", "ing"), {"s": "ng"}, True),
    (("s", "not exists", None), {"t": 1}, True),
    (("s", "not exists", None), {"s": math.nan}, True),
    (("s", "not exists", None), {"s": []}, True),
    (("s", "not exists", None), {"s": 0}, False),
    (("n", "range", [">", 0, "<=", 5]), {"n": 5}, True),
    (("n", "range", [">", 0, "<=", 5]), {"n": 0}, False),
    (("n", "range", [">", 0, "<=", 5]), {"n": [-1, 10]}, False),
    (("n", "range", [">", 0, "<=", 5]), {"n": [-1, 10, 2]}, True),
    (("n", "range", [">", 0, "<=", 5]), {"n": ["3", 1]}, True),
    (("n", "range", [">", 0, "<=", 5]), {"n": "3"}, False),
])
def test_the_operators_mean_what_event_ruler_documents(p, event, expected):
    assert holds(p, event) is expected
    for algorithm in ALGORITHMS:
        m = Matcher(algorithm)
        m.add(1, [p])
        assert m.match(event).tolist() == ([1] if expected else []), algorithm


@pytest.mark.parametrize("sub, message", [
    ([("a", "wildcard", "a\\b")], "escapes only"),
    ([("a", "wildcard", 3)], "expected a string"),
    ([("a", "cidr", "10.0.0.0/33")], "10.0.0.0/33"),
    ([("a", "cidr", "nonsense")], "nonsense"),
    ([("a", "not prefix", "")], "non-empty string"),
    ([("a", "prefix ignore case", 1)], "non-empty string"),
    ([("a", "not exists", 1)], "takes no value"),
    ([("a", "range", ["<", 1, ">", 2])], "expected"),
    ([("a", "range", [">", 3, "<", 2])], "lo 3 is above hi 2"),
    ([("a", "range", [">", "a", "<", "b"])], "expected"),
])
def test_bad_values_are_refused_with_the_reason(sub, message):
    with pytest.raises(ValueError, match=message.replace("\\", "\\\\").replace("*", "\\*").replace(".", "\\.")):
        validate_subscription(sub)


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_the_operators_travel_in_both_subscription_formats(fmt):
    """Schema id 7 and JSON carry every operator; the batch decoder of a rebuild hands them to the engine as they are."""
    from fastpubsub.wire import codecs
    from fastpubsub.wire.subscription_decoder import decode_subscriptions

    preds = [("s", "equals ignore case", "EC2"), ("s", "not wildcard", "a\\*b*"), ("ip", "cidr", "2001:db8::/32"),
             ("t", "not exists", None), ("s", "not suffix", "x"), ("s", "prefix ignore case", "e")]
    value = codecs.encode_subscription(codecs.Subscription("alice", preds), fmt)
    assert codecs.decode_any_subscription(value).predicates == preds
    decoded = decode_subscriptions([b"7"], [value])
    assert decoded.valid.tolist() == [True] and decoded.predicates(0) == preds
    m = Matcher()
    m.add(7, decoded.predicates(0))
    assert m.match({"s": "ec2", "ip": "2001:db8::5"}).tolist() == [7]
    assert m.match({"s": "ec2", "ip": "2001:db8::5", "t": 0}).tolist() == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.lists(st.one_of(subscription, st.tuples(attr, st.just("contains"), nonempty).map(lambda p: [p])),
                     min_size=1, max_size=16),
       events=st.lists(event, min_size=1, max_size=40))
@example(subs=[[("b", "suffix ignore case", "ab")], [("b", "prefix ignore case", "STRASSE")]],
         events=[{"b": "Ab"}, {"b": ["straße", "a"]}])
@example(subs=[[("a", "wildcard", "a*b")], [("a", "wildcard", "*b")], [("a", "wildcard", "A*")],
               [("a", "not wildcard", "*0*1*")], [("a", "contains", "b")]],
         events=[{"a": ["ab", "Ab", "a*b"]}, {"a": "x"}, {"a": "aB"}, {"a": "12017"}])
def test_derived_pairs_equal_derived_value_per_string(subs, events):
    """``derive_events`` (C-level passes per derived attribute, wildcard literals probed per length) adds to each
    event the pairs that ``derived_value`` per string value gives (tests/support/naive.py)."""
    from tests.support import naive
    from fastpubsub.engine.semantics import RESERVED_PREFIX

    m = Matcher("dynamic")
    for sid, sub in enumerate(subs):
        m.add(sid, sub)
    m.flush()
    batch = EventBatch.from_dicts(events)
    got = naive.event_pairs(m.derived.derive_events(batch, m.strings.ids))
    derived = [sorted((p for p in pairs if p[0][0] == RESERVED_PREFIX), key=repr) for pairs in got]
    assert derived == naive.derived_pairs(m.derived, batch, m.strings.ids)
    kept = [[p for p in pairs if p[0][0] != RESERVED_PREFIX] for pairs in got]
    assert repr(kept) == repr(naive.event_pairs(batch))
