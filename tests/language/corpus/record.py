"""Re-records parsers.jsonl: every text of the language corpus with what the parsers before the shared lexer made
of it, in each of the three languages.

The corpus is the docs' code (README.md, docs/**/*.md: inline code, fenced lines, quoted subscriptions), every string
constant of the test modules, the lexers' corners (``EDGES``), and a fixed sample of generated subscriptions and
their near misses (hypothesis, derandomized: ``GENERATED`` texts of the three languages with a token dropped, doubled
or glued; ``ANY_TEXT`` strings of lexer pieces).  A line is ``{"text": ..., "from": ..., "plain": OUTCOME,
"pattern": OUTCOME, "aggregate": OUTCOME}`` where OUTCOME is ``{"ok": repr of the result}`` or ``{"error": the
exception's class name}``; the results are what ``language.parse``, ``patterns.to_json`` of
``patterns.parse`` and ``aggregates.parse_subscription`` give, printed by ``repr``.

The old parsers (the three modules as they were before the languages shared one lexer) are no longer in the tree:
restore them from the commit that removed them, record, and remove them again::

    C=$(git log -1 --format=%H --diff-filter=D -- tests/support/legacy_parsers)   # the commit that removed them
    git checkout "$C~1" -- tests/support/legacy_parsers
    PYTHONPATH=src:. python -m tests.language.corpus.record
    git rm -r -q tests/support/legacy_parsers
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[3]
CORPUS = Path(__file__).with_name("parsers.jsonl")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
QUOTED = re.compile(r"'([^']+)'")
GENERATED = 4000
ANY_TEXT = 2000

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


def doc_texts() -> set[str]:
    out: set[str] = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        spans = re.findall(r"`([^`\n]+)`", FENCE.sub("", text)) + [line for block in FENCE.findall(text)
                                                                    for line in block.splitlines()]
        for span in spans:
            out.add(span)
            out.update(QUOTED.findall(span))  # pubsub subscribe ... 'TEXT'
    return out


def test_strings() -> set[str]:
    out: set[str] = set()
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 400:
                out.add(node.value)
    return out




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


_PIECES = [*"ab.-_ 019eE+=<>!(),:*/'\"\\~é", "and ", "in ", "seq a: ", " within 1h", "5m", "x = ", "min(p) over t where "]


def sample(strategy: st.SearchStrategy[str], n: int) -> list[str]:
    """``n`` examples of ``strategy``, the same on every run (derandomized, no example database)."""
    out: list[str] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(text=strategy)
    def draw(text):
        out.append(text)

    draw()
    return out


def outcome(parse, text: str) -> dict[str, str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the old aggregate parser's escapes
            return {"ok": repr(parse(text))}
    except Exception as e:  # noqa: BLE001 - the kind is recorded
        return {"error": type(e).__name__}


def main() -> None:
    from tests.support.legacy_parsers import aggregate_text, expression, pattern_language

    parsers = {"plain": expression.parse,
               "pattern": lambda t: pattern_language.to_json(pattern_language.parse(t)),
               "aggregate": aggregate_text.parse_subscription}
    texts: dict[str, str] = {}
    for source, found in (("docs", sorted(doc_texts())), ("edges", EDGES), ("tests", sorted(test_strings())),
                          ("generated", sample(_near_miss(st.one_of(_plain(), _pattern(), _aggregate())), GENERATED)),
                          ("any", sample(st.lists(st.sampled_from(_PIECES), max_size=20).map("".join), ANY_TEXT))):
        for text in found:
            texts.setdefault(text, source)
    with CORPUS.open("w", encoding="utf-8") as f:
        for text, source in texts.items():
            line = {"text": text, "from": source} | {lang: outcome(p, text) for lang, p in parsers.items()}
            f.write(json.dumps(line) + "\n")
    print(f"{len(texts)} texts -> {CORPUS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
