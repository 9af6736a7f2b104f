"""The subscription text language of `pubsub subscribe`."""

import math

import pytest

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
        ("a = 1 or b = 2", "column 7: expected 'and' or the end, got 'or'"),
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
