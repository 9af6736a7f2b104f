"""Attribute paths (wire/paths.py): nested events as flat pairs, the escape, and every language taking paths."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.engine import Matcher
from fastpubsub.language.expression import format_predicates, parse
from fastpubsub.wire import codecs
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.paths import MAX_DEPTH, SIGIL, escape, flatten, join, split

keys = st.text(st.sampled_from("ab.\\$é"), min_size=1, max_size=4)
scalars = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=3), st.booleans())
nested = st.recursive(st.one_of(scalars, st.none()),
                      lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
                      max_leaves=12)


def _leaves(value, segments=()):
    """Every (segments, scalar) of a nested value, naively: the specification of flatten."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, segments + (k,))
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, segments)
    elif value is not None:
        yield segments, value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, nested, max_size=4))
def test_flatten_names_every_scalar_by_its_path_and_the_path_splits_back(event):
    got = flatten(event)
    assert got == [(join(*s), v) for s, v in _leaves(event)]
    assert [tuple(split(p)) for p, _ in got] == [s for s, _ in _leaves(event)]


@given(st.lists(keys, min_size=1, max_size=4))
def test_the_escape_is_unambiguous(segments):
    path = join(*segments)
    assert split(path) == segments
    assert not path.startswith(SIGIL)  # a payload field never reads as metadata


def test_the_rule_on_an_example():
    event = {"customer": {"address": {"country": "FR"}}, "tags": ["a", "b"], "items": [{"sku": "A", "qty": 2},
             {"sku": "B", "opts": [[1], [2]]}], "none": None, "empty": [], "rec": {}, "k.v": {"$x": True}}
    assert flatten(event) == [("customer.address.country", "FR"), ("tags", "a"), ("tags", "b"), ("items.sku", "A"),
                              ("items.qty", 2), ("items.sku", "B"), ("items.opts", 1), ("items.opts", 2),
                              ("k\\.v.\\$x", True)]
    assert escape("a.b\\c") == "a\\.b\\\\c"
    with pytest.raises(ValueError, match="ends with a backslash"):
        split("a\\")


@pytest.mark.parametrize("value, reason", [
    ({"a": {"b": b"x"}}, "a.b: a bytes value cannot be compared"),
    ({"a": {"": 1}}, "non-empty strings"),
    ({"a": {1: 1}}, "a field name must be a string"),
    ([1], "must be a record or map"),
])
def test_what_cannot_be_flattened_is_refused_naming_its_path(value, reason):
    with pytest.raises(ValueError, match=reason):
        flatten(value)


def test_nesting_deeper_than_the_bound_is_refused():
    deep: dict = {"x": 1}
    for _ in range(MAX_DEPTH):
        deep = {"a": deep}
    with pytest.raises(ValueError, match="levels deep"):
        flatten(deep)


def test_the_text_language_takes_paths_and_the_escape_and_writes_them_back():
    sub = parse(r'customer.address.country = "FR" and tags.app\.io = 1 and "items.sku" exists and \$topic = 2')
    assert sub == [("customer.address.country", "=", "FR"), ("tags.app\\.io", "=", 1), ("items.sku", "exists", None),
                   ("\\$topic", "=", 2)]
    assert parse(format_predicates(sub)) == sub


def test_a_pattern_names_a_path_after_its_binding():
    from fastpubsub.patterns import from_json, parse as parse_pattern, to_json

    p = parse_pattern('seq a: a.customer.id > 0 next b: b.customer.id = a.customer.id within 1h')
    assert p.start == (("customer.id", ">", 0),)
    assert p.steps[0].correlate[0].right.ref.attr == "customer.id"
    assert from_json(json.loads(json.dumps(to_json(p)))) == p


def test_an_aggregate_and_a_join_take_paths():
    from fastpubsub.aggregates import parse_subscription

    spec = parse_subscription("sum(order.total) over orders where customer.score between 1 and 5")
    assert "order.total" in json.dumps(spec.to_json()) and "customer.score" in json.dumps(spec.to_json())
    join = parse_subscription("join orders o, shipments s on o.customer.id = s.customer.id where o.order.total > 100")
    assert "customer.id" in json.dumps(join.to_json()) and "order.total" in json.dumps(join.to_json())


def test_nested_json_events_match_on_paths_and_array_elements():
    m = Matcher("dynamic")
    m.add(1, parse('customer.address.country = "FR"'))
    m.add(2, parse('items.sku = "B" and items.qty > 1'))  # each field independently: some item B, some qty above 1
    m.add(3, parse('tags exists'))
    value = b'{"customer": {"address": {"country": "FR"}}, "items": [{"sku": "A", "qty": 2}, {"sku": "B"}], "tags": []}'
    batch = decode_events([value, b'{"items": [{"sku": "B", "qty": 1}], "tags": ["x"]}']).event_batch()
    assert [r.tolist() for r in m.match_encoded(batch).split()] == [[1, 2], [3]]
    assert codecs.decode_event(value)["items.sku"] == ["A", "B"]


def test_the_statistics_count_an_event_once_per_distinct_value_of_an_array():
    pytest.importorskip("pyarrow")
    from fastpubsub.stats_job.partial_counts import value_counts

    decoded = decode_events([b'{"t": ["x", "x", "y"], "n": {"a": 1}}', b'{"t": "x"}'])
    rows = value_counts(decoded).to_pydict()
    got = {(a, s if s is not None else n): c for a, n, s, c in zip(rows["attribute"], rows["number"], rows["string"],
                                                                     rows["count"])}
    assert got == {("t", "x"): 2, ("t", "y"): 1, ("n.a", 1.0): 1}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, scalars, min_size=1, max_size=4))
def test_a_flat_event_published_as_avro_has_the_attributes_it_has_as_json(event):
    """`pubsub publish --format avro`: the JSON event's attributes by path go into the Avro map as their raw names,
    which the decoder escapes back: the same attribute names either way, escaped once."""
    as_json = json.dumps(event).encode()
    attributes = codecs.decode_event(as_json)
    as_avro = codecs.encode_event(codecs.native_attributes(attributes), "avro")
    assert codecs.decode_event_pairs(as_avro) == codecs.decode_event_pairs(as_json)


def test_a_nested_field_has_no_place_in_the_flat_avro_event():
    with pytest.raises(ValueError, match="'a.b' is a nested field"):
        codecs.native_attributes(codecs.decode_event(b'{"a": {"b": 1}}'))
