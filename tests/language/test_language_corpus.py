"""Subscriptions parse as they did before the three languages shared one lexer.

The oracle is a recorded corpus (corpus/parsers.jsonl, made by corpus/record.py from the three parsers as they
were): every text of it (the docs' code, every string of the tests, the lexers' corners, a fixed sample of
generated subscriptions and their near misses, strings of lexer pieces) with what the old parser of each language
made of it.  What the old parser accepted, the new one accepts with the same result; what it refused, the new one
refuses with the language's error.  The deliberate changes are spelled out at the end, each with its own test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fastpubsub.aggregates import parse_subscription
from fastpubsub.language import ExpressionError, parse as parse_expression
from fastpubsub.patterns import PatternError, parse as parse_pattern, to_json

CORPUS = [json.loads(line) for line in
          (Path(__file__).with_name("corpus") / "parsers.jsonl").read_text(encoding="utf-8").splitlines()]

#: language -> a parser giving its result as comparable text, the error it refuses a text with, and the name the
#: corpus gives that error
PARSERS = {
    "plain": (lambda t: repr(parse_expression(t)), ExpressionError, "ExpressionError"),
    "pattern": (lambda t: repr(to_json(parse_pattern(t))), PatternError, "PatternError"),
    "aggregate": (lambda t: repr(parse_subscription(t)), ValueError, "ValueError"),
}


def _outcome(language: str, text: str) -> str | None:
    """The result of the parser of ``language``, or None if it refuses ``text``."""
    parse, error, _ = PARSERS[language]
    try:
        return parse(text)
    except error:
        return None


def _deliberate(language: str, text: str) -> bool:
    """Whether ``text`` may fare differently by design: a name with a letter beyond ASCII (names are one rule
    now), in an aggregate subscription a quote or a backslash (strings are one rule now), in a plain
    subscription a ``$`` (names of record metadata, ``$topic``: tests/wire/test_metadata.py), or in any a backslash in a
    name or a path after a pattern's binding (attribute paths, ``a.customer.id``: tests/wire/test_paths.py)."""
    return not text.isascii() or (language == "aggregate" and ("'" in text or "\\" in text)) or (
        language == "plain" and "$" in text) or "\\" in text or (language == "pattern" and _bound_path(text))


def _bound_path(text: str) -> bool:
    """Whether a pattern names a path behind a binding (``a.customer.id``), which the old parser refused."""
    return re.search(r"\b[A-Za-z_]\w*\.[A-Za-z_]\w*\.[A-Za-z_]", text) is not None


#: Event Ruler's operators, new in plain subscriptions: a text the old parser refused may parse now.
_NEW_OPERATORS = re.compile(r"\b(not exists|equals ignore case|(prefix|suffix) ignore case|wildcard|cidr|range|"
                            r"not (prefix|suffix|wildcard|equals ignore case))\b", re.IGNORECASE)


def check(entry: dict) -> None:
    text = entry["text"]
    for language, (_, _, error) in PARSERS.items():
        was = entry[language]
        old = was.get("ok")
        assert old is not None or was["error"] == error, f"the corpus refuses {text!r} with {was}, not {error}"
        new = _outcome(language, text)
        if old is None and language == "plain" and _NEW_OPERATORS.search(text):
            continue
        if old != new and not _deliberate(language, text):
            raise AssertionError(f"{language}: {text!r} was {old or 'refused'}, is {new or 'refused'}")


def _from(source: str) -> list[dict]:
    return [entry for entry in CORPUS if entry["from"] == source]


def test_the_corpus_holds_every_language():
    """The docs show each language, so the corpus reaches each parser's success path; it holds every source, and a
    large sample of generated texts, refused ones among them."""
    for language in PARSERS:
        accepted = [e["text"] for e in _from("docs") if "ok" in e[language]]
        assert len(accepted) >= 3, (language, accepted)
    assert len(_from("edges")) >= 40 and len(_from("tests")) >= 1000
    assert len(_from("generated")) >= 2500 and len(_from("any")) >= 1500
    for language in PARSERS:
        outcomes = {"ok" in e[language] for e in _from("generated")}
        assert outcomes == {True, False}, language


@pytest.mark.parametrize("source", ["docs", "edges", "tests", "generated", "any"])
def test_the_corpus_parses_as_before(source):
    """The docs' examples, the lexers' corners, the tests' inputs, generated subscriptions and their near misses,
    strings of lexer pieces."""
    for entry in _from(source):
        check(entry)


# -- the deliberate changes ------------------------------------------------------


@pytest.mark.parametrize("language, text, expected", [
    ("plain", "größe = 1 and prix_€ exists", None),  # € is no letter: refused as before
    ("plain", "größe = 1", [("größe", "=", 1)]),
    ("pattern", "seq a: größe > 1 within 1h", {"start": {"bind": "a", "predicates": [["größe", ">", 1]]},
                                                "steps": [], "within_ms": 3_600_000}),
])
def test_names_follow_one_rule_in_every_language(language, text, expected):
    """A name may hold any letter or digit, as aggregate subscriptions always allowed after the first character."""
    parse = {"plain": parse_expression, "pattern": lambda t: to_json(parse_pattern(t))}[language]
    if expected is None:
        with pytest.raises(ValueError):
            parse(text)
    else:
        assert parse(text) == expected


def test_aggregate_strings_follow_the_one_quoting_rule():
    """Aggregate subscriptions read strings as the other languages do: non-ASCII text as written (it was
    mangled), single quotes, JSON's escapes; Python's other escapes are refused with the column."""
    assert parse_subscription('min(p) over t where r between 1 and 2 and s = "é"').where == (("s", "=", "é"),)
    assert parse_subscription("min(p) over t where r between 1 and 2 and s = 'it\\'s'").where == (("s", "=", "it's"),)
    assert parse_subscription('min(p) over t where r between 1 and 2 and s = "\\u00e9\\n"').where == (("s", "=", "é\n"),)
    with pytest.raises(ValueError, match="column 47: bad escape"):
        parse_subscription('min(p) over t where r between 1 and 2 and s = "\\x41"')
