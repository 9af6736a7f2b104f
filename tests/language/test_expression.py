"""The subscription text language of `pubsub subscribe`."""

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.engine import AnyOf
from fastpubsub.language import ExpressionError, format_predicates, parse


@pytest.mark.parametrize(
    "text, expected",
    [
        ('movie = "groundhog day" and price <= 10', [("movie", "=", "groundhog day"), ("price", "<=", 10)]),
        ("a != 'it''s'".replace("''", "\\'"), [("a", "!=", "it's")]),
        ("x < -2.5e3 AND y >= .5 and z > 7", [("x", "<", -2500.0), ("y", ">=", 0.5), ("z", ">", 7)]),
        ("flag == true and other = FALSE", [("flag", "=", True), ("other", "=", False)]),
        ('"odd name" = "a \\"quoted\\" \\u00e9"', [("odd name", "=", 'a "quoted" \u00e9')]),
        ("a.b-c_d=1", [("a.b-c_d", "=", 1)]),
    ],
)
def test_parse(text, expected):
    assert parse(text) == expected
    assert all(type(v) is type(e) for (_, _, v), (_, _, e) in zip(parse(text), expected))


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "column 1: incomplete predicate"),
        ("a =", "column 1: incomplete predicate"),
        ("a = 1 and", "column 10: incomplete predicate"),
        ("a ~ 1", "column 3: unexpected character '~'"),
        ("a = 1 b = 2", "column 7: expected 'and', 'or' or the end, got 'b'"),
        ("a = b", "column 5: expected a value"),
        ("1 = 1", "column 1: expected an attribute name"),
        ("a 1 1", "column 3: expected an operator"),
        ('a = "open', "column 5: unexpected character"),
        ('a = "bad \\q"', "bad escape"),
        ("a = 1e999 and b = nan", "expected a value"),
    ],
)
def test_errors_say_where_and_why(text, message):
    with pytest.raises(ExpressionError, match=message.replace("(", r"\(")):
        parse(text)


def test_format_round_trips():
    preds = [("a", "=", 1), ("and", "!=", "x'\"y"), ("c", "<", -math.inf), ("d", ">=", 2.5), ("e", "<=", True)]
    assert parse(format_predicates(preds)) == preds


@pytest.mark.parametrize(
    "text, expected",
    [
        ('color in ("red", "blue")', [("color", "in", ["red", "blue"])]),
        ('color NOT IN ("red")', [("color", "not in", ["red"])]),
        ("price between 5 and 10 and x = 1", [("price", "between", [5, 10]), ("x", "=", 1)]),
        ("price not between 5 and 10.5", [("price", "not between", [5, 10.5])]),
        ('title prefix "harry" and title suffix "potter" and title contains "wizard"',
         [("title", "prefix", "harry"), ("title", "suffix", "potter"), ("title", "contains", "wizard")]),
        ("promo exists", [("promo", "exists", None)]),
        ("promo not exists", [("promo", "not exists", None)]),
        ('source equals ignore case "EC2" and arn prefix ignore case "ARN:" and s suffix ignore case "X"',
         [("source", "equals ignore case", "EC2"), ("arn", "prefix ignore case", "ARN:"),
          ("s", "suffix ignore case", "X")]),
        ('name wildcard "Simple*Service" and ip cidr "10.0.0.0/24"',
         [("name", "wildcard", "Simple*Service"), ("ip", "cidr", "10.0.0.0/24")]),
        ('s not prefix "a" and s not suffix "b" and s not wildcard "*c" and s not equals ignore case "D"',
         [("s", "not prefix", "a"), ("s", "not suffix", "b"), ("s", "not wildcard", "*c"),
          ("s", "not equals ignore case", "D")]),
        ('"case" = 1 and ignore = 2', [("case", "=", 1), ("ignore", "=", 2)]),
        ("n range (> 0, <= 5)", [("n", "range", [">", 0, "<=", 5])]),
        ("(a = 1 and b < 2) or c in (3, 4)", AnyOf([[("a", "=", 1), ("b", "<", 2)], [("c", "in", [3, 4])]])),
        ("a = 1 and b < 2 or c = 3", AnyOf([[("a", "=", 1), ("b", "<", 2)], [("c", "=", 3)]])),  # and binds tighter
        ("a = 1 and (b < 2 or c = 3)", AnyOf([[("a", "=", 1), ("b", "<", 2)], [("a", "=", 1), ("c", "=", 3)]])),
        ("((a = 1))", [("a", "=", 1)]),
        ('"in" = 1 or "exists" exists', AnyOf([[("in", "=", 1)], [("exists", "exists", None)]])),
    ],
)
def test_parse_operators_and_or(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("(a = 1", "column 7: expected ')', 'and' or 'or', got the end"),
        ("a = 1 or", "column 9: incomplete predicate"),
        ("a in 3", "column 6: expected '(' and a list of values"),
        ("a in (1, 2", "column 11: expected ',' or ')'"),
        ("a not = 3", "column 7: expected 'in', 'between', 'exists', 'prefix'"),
        ("a equals \"x\"", "column 10: expected 'ignore case'"),
        ("a not contains \"x\"", "column 7: expected 'in', 'between'"),
        ('a wildcard "a\\\\b"', "escapes only"),
        ('a cidr "10.0.0.0/99"', "10.0.0.0/99"),
        ("a range (< 1, > 0)", "column 10: expected > or >="),
        ("a between 1 or 2", "column 13: expected 'and' in 'between lo and hi'"),
        ("a in (1, 'x')", "more than one kind"),
        ("a between 3 and 1", "lo 3 is above hi 1"),
        ('a prefix ""', "expected a non-empty string"),
        ("a like 3", "column 3: expected an operator"),
        ("(a = 1) (b = 2)", "column 9: expected 'and', 'or' or the end"),
    ],
)
def test_operator_errors_say_where_and_why(text, message):
    with pytest.raises(ExpressionError, match=re.escape(message)):
        parse(text)


_names = st.sampled_from(["a", "b.c", "in", "not", "odd name", "é", "Or"])
_scalars = st.one_of(st.integers(-5, 5), st.sampled_from([0.5, -0.0, math.inf, -math.inf, 1e300]),
                     st.text(max_size=4), st.booleans())
_nonempty = st.text(min_size=1, max_size=4)
_pred = st.one_of(
    st.tuples(_names, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), _scalars),
    st.tuples(_names, st.sampled_from(["in", "not in"]),
              st.one_of(st.lists(st.integers(-3, 3), min_size=1, max_size=3), st.lists(_nonempty, min_size=1, max_size=3))),
    st.tuples(_names, st.sampled_from(["between", "not between"]), st.integers(-3, 3).map(lambda x: [x, x + 1])),
    st.tuples(_names, st.sampled_from(["prefix", "suffix", "contains"]), _nonempty),
    st.tuples(_names, st.sampled_from(["exists", "not exists"]), st.none()),
    st.tuples(_names, st.sampled_from(["equals ignore case", "prefix ignore case", "suffix ignore case", "not prefix",
                                       "not suffix", "not equals ignore case"]), _nonempty),
    st.tuples(_names, st.sampled_from(["wildcard", "not wildcard"]), st.sampled_from(["", "*", "a*b", "a\\*", "\\\\"])),
    st.tuples(_names, st.just("cidr"), st.sampled_from(["10.0.0.0/8", "::/0", "2001:db8::/32"])),
    st.tuples(_names, st.just("range"), st.sampled_from([[">", 0, "<=", 5], [">=", -1.5, "<", 1e300]])),
)
_conj = st.lists(_pred, min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(sub=st.one_of(_conj, st.lists(_conj, min_size=2, max_size=3).map(AnyOf)))
def test_format_round_trips_every_operator_and_or(sub):
    assert parse(format_predicates(sub)) == sub
