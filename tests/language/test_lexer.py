"""The one lexer of the subscription languages (docs/guide/subscriptions.md, "Names, strings and numbers")."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.aggregates.text import DIALECT as AGGREGATE
from fastpubsub.language.expression import DIALECT as PLAIN
from fastpubsub.language.lexer import Dialect, Token
from fastpubsub.patterns.language import DIALECT as PATTERN


def kinds(dialect: Dialect, text: str) -> list[tuple[str, object]]:
    return [(t.kind, t.value) for t in dialect.tokenize(text)[:-1]]


@pytest.mark.parametrize("dialect, text, expected", [
    (PLAIN, "a.b-c_d größe _x9 x٣", ["a.b-c_d", "größe", "_x9", "x٣"]),
    (AGGREGATE, "o.amount größe", ["o.amount", "größe"]),
    (PATTERN, "größe", ["größe"]),
])
def test_a_name_is_a_letter_or_underscore_then_letters_digits_and_the_dialects_characters(dialect, text, expected):
    assert [t.value for t in dialect.tokenize(text) if t.kind == "name"] == expected


def test_a_pattern_name_holds_no_dot_the_dot_separates_binding_and_attribute():
    assert kinds(PATTERN, "a.price") == [("name", "a"), ("punct", "."), ("name", "price")]


@pytest.mark.parametrize("dialect", [PLAIN, PATTERN, AGGREGATE])
@pytest.mark.parametrize("literal, value", [
    ('"groundhog day"', "groundhog day"), ("'groundhog day'", "groundhog day"), ('"a \\"b\\""', 'a "b"'),
    ("'it\\'s'", "it's"), ("'say \"hi\"'", 'say "hi"'), ('"\\u00e9\\n\\t\\\\"', "é\n\t\\"), ('"é"', "é"), ('""', ""),
])
def test_strings_are_one_rule_in_every_language(dialect, literal, value):
    assert kinds(dialect, literal) == [("string", value)]


@pytest.mark.parametrize("dialect", [PLAIN, PATTERN, AGGREGATE])
@pytest.mark.parametrize("literal, message", [
    ('"\\q"', "column 1: bad escape"), ('"\\x41"', "column 1: bad escape"), ('"it\\\'s"', "column 1: bad escape"),
    ('"open', "column 1: unexpected character '\"' (a string that does not end)"),
])
def test_other_escapes_and_open_strings_are_refused_with_the_column(dialect, literal, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dialect.tokenize(literal)


@pytest.mark.parametrize("dialect, text, expected", [
    (PLAIN, "-3 +3 .5 1. 2.5e3 1E-2", [-3, 3, 0.5, 1.0, 2500.0, 0.01]),
    (AGGREGATE, "-3 .5 2.5e3", [-3, 0.5, 2500.0]),
    (PATTERN, "3 2.5e3", [3, 2500.0]),
])
def test_numbers_are_signed_where_the_dialect_says(dialect, text, expected):
    values = [t.value for t in dialect.tokenize(text)[:-1]]
    assert values == expected and [type(v) for v in values] == [type(v) for v in expected]


def test_a_pattern_has_durations_and_a_minus_operator():
    assert kinds(PATTERN, "-30m 90s 2ms 52w") == [("punct", "-"), ("duration", 1_800_000), ("duration", 90_000),
                                                 ("duration", 2), ("duration", 52 * 604_800_000)]


@pytest.mark.parametrize("dialect, text, column, word", [
    (PLAIN, "a = 12abc", 5, "12abc"), (PLAIN, "a=1and b=2", 3, "1and"), (PATTERN, "within 5min", 8, "5min"),
    (PATTERN, "x > 1.5h", 5, "1.5h"),
])
def test_a_number_may_not_run_into_a_name(dialect, text, column, word):
    with pytest.raises(ValueError, match=f"column {column}: a number runs into a name: '{word}'"):
        dialect.tokenize(text)


def test_except_in_aggregate_subscriptions():
    assert kinds(AGGREGATE, "2and") == [("number", 2), ("name", "and")]


@pytest.mark.parametrize("dialect, text, column, char", [
    (PLAIN, "a ~ 1", 3, "~"), (PLAIN, "  €", 3, "€"), (AGGREGATE, "x = 1 ;", 7, ";"), (PATTERN, "a # b", 3, "#"),
])
def test_a_character_that_starts_no_token_is_refused_with_its_column(dialect, text, column, char):
    with pytest.raises(ValueError, match=f"column {column}: unexpected character '{char}'"):
        dialect.tokenize(text)


def test_operators_are_the_dialects():
    """``==`` is no aggregate operator: two ``=`` there, for the grammar to refuse."""
    assert kinds(PLAIN, "a == 1") == [("name", "a"), ("op", "=="), ("number", 1)]
    assert kinds(AGGREGATE, "a == 1") == [("name", "a"), ("op", "="), ("op", "="), ("number", 1)]


def test_tokens_carry_their_column_and_end_with_an_end_token():
    assert PLAIN.tokenize(' a  <=\t"x"') == [Token("name", "a", "a", 2), Token("op", "<=", "<=", 5),
                                             Token("string", '"x"', "x", 8), Token("end", "", None, 11)]


def test_keywords_are_names_read_in_any_case():
    (t, _end) = PLAIN.tokenize("AnD")
    assert t.kind == "name" and t.is_word("and") and not t.is_word("or")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=8))
def test_is_name_says_what_reads_back_as_one_name(text):
    """The formatter writes an attribute bare exactly when it reads back as that one name."""
    if PLAIN.is_name(text):
        assert PLAIN.tokenize(text)[:-1] == [Token("name", text, text, 1)]
