"""Subscriptions parse as they did before the three languages shared one lexer.

The oracle is tests/support/legacy_parsers (the three parsers as they were).  Every
text of the corpus (the docs' code, every string of the tests, generated
subscriptions and their near misses) goes through the three languages: what
the old parser of a language accepted, the new one accepts with the same
result; what it refused, the new one refuses.  The deliberate changes are
spelled out at the end, each with its own test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.aggregates import parse_subscription
from fastpubsub.language import ExpressionError, parse as parse_expression
from fastpubsub.patterns import PatternError, parse as parse_pattern, to_json
from tests.support.legacy_parsers import aggregate_text as old_aggregates, expression as old_expression
from tests.support.legacy_parsers import pattern_language as old_patterns

#: the old aggregate parser read strings with Python's escapes, warning about unknown ones
pytestmark = pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
QUOTED = re.compile(r"'([^']+)'")

#: language -> (old, new): a parser giving its result as comparable text, and the error it refuses a text with
PARSERS = {
    "plain": ((lambda t: repr(old_expression.parse(t)), old_expression.ExpressionError),
              (lambda t: repr(parse_expression(t)), ExpressionError)),
    "pattern": ((lambda t: repr(old_patterns.to_json(old_patterns.parse(t))), old_patterns.PatternError),
                (lambda t: repr(to_json(parse_pattern(t))), PatternError)),
    "aggregate": ((lambda t: repr(old_aggregates.parse_subscription(t)), ValueError),
                  (lambda t: repr(parse_subscription(t)), ValueError)),
}


def _outcome(language: str, which: int, text: str) -> str | None:
    """The result of the old (0) or new (1) parser of ``language``, or None if it refuses ``text``."""
    parse, error = PARSERS[language][which]
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


def check(text: str) -> None:
    for language in PARSERS:
        old, new = _outcome(language, 0, text), _outcome(language, 1, text)
        if old is None and language == "plain" and _NEW_OPERATORS.search(text):
            continue
        if old != new and not _deliberate(language, text):
            raise AssertionError(f"{language}: {text!r} was {old or 'refused'}, is {new or 'refused'}")


# -- the corpus: the docs and the tests ------------------------------------------


def _doc_texts() -> set[str]:
    out: set[str] = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        spans = re.findall(r"`([^`\n]+)`", FENCE.sub("", text)) + [line for block in FENCE.findall(text)
                                                                    for line in block.splitlines()]
        for span in spans:
            out.add(span)
            out.update(QUOTED.findall(span))  # pubsub subscribe ... 'TEXT'
    return out


def _test_strings() -> set[str]:
    out: set[str] = set()
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 400:
                out.add(node.value)
    return out


DOCS = sorted(_doc_texts())
TESTS = sorted(_test_strings())
#: Corners of the lexers: signs, dots, exponents, numbers against names, quotes and escapes, keywords as names.
EDGES = [
    "a=-1", "a = +5", "a = .5", "a = 1.", "a = 1e5", "a = 1e", "a=1and b=2", "a = 12abc", "a-1 = 2", "a = 1.2.3",
    "a = 1..2", "x in (1,2)", '"odd" = 1', "a = 'it\\'s'", "a = \"it\\'s\"", "a = 'say \"hi\"'", 'a = "\\u00e9"',
    'a = "tab\there"', 'a = "\\/"', "and = 1", "in exists", "A = TRUE", "a = 1_000", "a = ٣",
    "seq a: x > .5 within 1h", "seq a: x > 1.5h within 1h", "seq a: x > 0 within 90", "seq a: x > 0 within 1.5h",
    "seq a: x > -1 within 1h", "seq a: x > 1e3 within 5min", "seq a: x > 1 within 1h5m", "seq true: x > 1 within 1h",
    'seq a: x = "a\\"b" within 1ms', "seq a: x > 0 next b: price > a.price*2-.5 within 1h", "seq a: x>0 within 1h ",
    "seq a: x > 0 next b: y = a.x within 1m1", "seq a: x > 1. within 1h", "seq a: x > 1.e3 within 1h",
    "min(p) over t where r between 1and 2", "min(p) over t where r between 1 and 2and x = 1",
    "min(p) over t where r between -1 and +2", "count(*) over t where r between 1 and 2 and x == 1",
    "min(p)over t where r between.5and 2", "join o a, s b on a.x = b.y where a.z > 1e3",
    "min(p) over t where r between 1 and 2 and x = 1e", "  min(p) over t where r between 1 and 2  ",
    "min(p) over t where r between 1 and 2 and x = 5abc",
]


def test_the_corpus_holds_every_language():
    """The docs show each language, so the corpus reaches each parser's success path."""
    for language in PARSERS:
        accepted = [t for t in DOCS if _outcome(language, 0, t) is not None]
        assert len(accepted) >= 3, (language, accepted)


def test_the_docs_examples_parse_as_before():
    for text in DOCS:
        check(text)


def test_the_corners_parse_as_before():
    for text in EDGES:
        check(text)


def test_the_tests_inputs_parse_as_before():
    for text in TESTS:
        check(text)


# -- generated subscriptions and their near misses -------------------------------

def _mostly(good: list[str], odd: list[str]) -> st.SearchStrategy[str]:
    """One of ``good`` seven times in eight, else one of ``odd``."""
    return st.integers(0, 7).flatmap(lambda k: st.sampled_from(odd if k == 0 else good))


_names = _mostly(["a", "price", "b.c", "x-y", "_z9", "name"], ["AND", "in", "or", "exists", "dur", "true", "a.last.p",
                                                                "1a", "é", "a..b"])
_values = _mostly(["1", "-2", "1.5", ".5", "2e3", "0", '"s"', "'t'", '"a\\"b"', "true", "FALSE"],
                  ["+3", "1.", "-1E-2", "007", "'it\\'s'", '"\\u00e9"', '"\\q"', '"x\'y"', "12abc", "1and", "5m",
                   "90s", "1h", "3ms", "1.5h", "2w", "nan", '"open'])
_ops = _mostly(["=", "!=", "<", "<=", ">", ">="], ["==", "~", "in", "between", "=>"])


@st.composite
def _plain(draw):
    preds = []
    for _ in range(draw(st.integers(1, 3))):
        form = draw(st.integers(0, 4))
        name = draw(_names)
        if form == 0:
            preds.append(f"{name} {draw(_ops)} {draw(_values)}")
        elif form == 1:
            preds.append(f"{name} {draw(st.sampled_from(['in', 'not in', 'NOT IN']))} "
                         f"({', '.join(draw(st.lists(_values, min_size=1, max_size=3)))})")
        elif form == 2:
            preds.append(f"{name} {draw(st.sampled_from(['between', 'not between']))} {draw(_values)} and "
                         f"{draw(_values)}")
        elif form == 3:
            preds.append(f"{name} {draw(st.sampled_from(['prefix', 'suffix', 'contains', 'exists']))} {draw(_values)}")
        else:
            preds.append(f"({name} = {draw(_values)} or {draw(_names)} exists)")
    return draw(st.sampled_from([" and ", " or ", " AND "])).join(preds)


@st.composite
def _pattern(draw):
    def operand():
        return draw(_mostly(["price", "a.price", "b.name", "r.last.price", "r.lo", "dur", "-a.price", "2 * a.price + 1",
                             "(a.price - 1) / 2", "a . price", "1.05 * a.price", "'x'", '"IBM"', "100", "30m"],
                            ["n", "r.n", "a.dur", "a.", "(price", "2 ** a.price", "-'x'", "true + 1"]) | _values)

    def conj():
        return " and ".join(f"{operand()} {draw(_ops)} {operand()}" for _ in range(draw(st.integers(1, 2))))

    text = f"seq a: {draw(_mostly(['price', 'name', 'x_1'], ['a.price', 'dur', 'agg']))} {draw(_ops)} {draw(_values)}"
    for name in draw(st.lists(st.sampled_from(["b", "r"]), max_size=2, unique=True)):
        if name == "b":
            text += f" next b: {conj()}" + (f" where {conj()}" if draw(st.booleans()) else "")
        else:
            text += (f" fold r: {conj()} while {conj()} agg n = count(), "
                     f"lo = {draw(_mostly(['min', 'avg', 'sum'], ['x', 'count']))}(price)")
            text += f" until {conj()}" if draw(st.booleans()) else ""
    return text + f" within {draw(_mostly(['1h', '30m', '90', '52w'], ['1.5h', '0ms', 'x', '5min', '1h next']))}"


@st.composite
def _aggregate(draw):
    preds = " and ".join(f"{draw(_names)} {draw(_ops)} {draw(_values)}" for _ in range(draw(st.integers(0, 2))))
    if draw(st.booleans()):
        text = (f"join orders o, shipments s on o.{draw(_mostly(['id', 'order_id'], ['1', 'and']))} "
                f"{draw(_mostly(['='], ['<', '==']))} s.id"
                + (f" where {preds}" if preds else ""))
    else:
        text = (f"{draw(_mostly(['min', 'MAX', 'count', 'avg', 'distinct'], ['median', 'join']))}"
                f"({draw(_mostly(['per', '*', 'a.b'], ['1', ')']))}) over stock where risk between {draw(_values)} and "
                f"{draw(_values)}" + (f" and {preds}" if preds else ""))
    return text


@st.composite
def _near_miss(draw, texts):
    """A text, or the text with one token dropped, doubled or glued to the next."""
    words = draw(texts).split(" ")
    i = draw(st.integers(0, len(words) - 1))
    edit = draw(st.sampled_from(["keep", "keep", "keep", "drop", "double", "glue"]))
    if edit == "drop":
        words = words[:i] + words[i + 1:]
    elif edit == "double":
        words = words[:i + 1] + words[i:]
    elif edit == "glue" and i + 1 < len(words):
        words = words[:i] + [words[i] + words[i + 1]] + words[i + 2:]
    return " ".join(words)


@settings(max_examples=600, deadline=None)
@given(text=_near_miss(st.one_of(_plain(), _pattern(), _aggregate())))
def test_generated_subscriptions_parse_as_before(text):
    check(text)


_PIECES = [*"ab.-_ 019eE+=<>!(),:*/'\"\\~é", "and ", "in ", "seq a: ", " within 1h", "5m", "x = ", "min(p) over t where "]


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(_PIECES), max_size=20).map("".join))
def test_any_text_parses_as_before(text):
    check(text)


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
