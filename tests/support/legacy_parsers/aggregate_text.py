"""The text form of aggregate and select-join subscriptions (docs/aggregates.md), compiled to specs.

    min(per) over stock where risk between 20 and 60 and sector = "tech"
    join orders o, shipments s on o.order_id = s.order_id where o.amount > 100 and s.carrier = "ups"
"""

from __future__ import annotations

import math
import re
from typing import Any

from fastpubsub.aggregates.spec import FUNCTIONS, AggregateSpec, JoinSpec

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)'
                    r'|(?P<op><=|>=|!=|=|<|>)|(?P<punct>[(),*])|(?P<name>[A-Za-z_][\w.]*))')


def _tokens(text: str) -> list[tuple[str, Any]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"unexpected character at position {pos}: {text[pos:pos + 10]!r}")
        kind = m.lastgroup
        v = m.group(kind)
        if kind == "str":
            v = bytes(v[1:-1], "utf-8").decode("unicode_escape")
        elif kind == "num":
            v = float(v) if any(c in v for c in ".eE") else int(v)
        out.append((kind, v))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks, self.i, self.text = _tokens(text), 0, text

    def peek(self) -> tuple[str, Any] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, kind: str | None = None, value: Any = None, what: str = "") -> Any:
        t = self.peek()
        if t is None or (kind and t[0] != kind) or (value is not None and str(t[1]).lower() != value):
            got = "end of text" if t is None else repr(t[1])
            raise ValueError(f"expected {what or value or kind}, got {got} in {self.text!r}")
        self.i += 1
        return t[1]

    def keyword(self, word: str) -> bool:
        t = self.peek()
        if t is not None and t[0] == "name" and t[1].lower() == word:
            self.i += 1
            return True
        return False

    def value(self) -> Any:
        t = self.peek()
        if t is None:
            raise ValueError(f"expected a value, got end of text in {self.text!r}")
        if t[0] in ("str", "num"):
            self.i += 1
            return t[1]
        if t[0] == "name" and t[1].lower() in ("true", "false"):
            self.i += 1
            return t[1].lower() == "true"
        raise ValueError(f"expected a number, a \"string\", true or false, got {t[1]!r} in {self.text!r}")

    def predicate(self) -> tuple[str, str, Any]:
        attr = self.take("name", what="an attribute")
        op = self.take("op", what="an operator (=, !=, <, <=, >, >=)")
        return attr, op, self.value()

    def conjunction(self) -> list[tuple[str, str, Any]]:
        preds = [self.predicate()]
        while self.keyword("and"):
            preds.append(self.predicate())
        return preds

    def end(self) -> None:
        if self.peek() is not None:
            raise ValueError(f"unexpected {self.peek()[1]!r} after the end of the subscription in {self.text!r}")


def parse_subscription(text: str) -> AggregateSpec | JoinSpec:
    """Compile the text form to a spec; ``ValueError`` names the offending piece."""
    p = _Parser(text)
    if p.keyword("join"):
        lt = p.take("name", what="a table name")
        la = p.take("name", what=f"an alias for {lt}")
        p.take("punct", ",", what="','")
        rt = p.take("name", what="a table name")
        ra = p.take("name", what=f"an alias for {rt}")
        p.take("name", "on", what="'on'")
        a = p.take("name", what="a join attribute")
        p.take("op", "=", what="'=' (joins are equi-joins)")
        b = p.take("name", what="a join attribute")
        where = p.conjunction() if p.keyword("where") else []
        p.end()
        return JoinSpec.from_json({"kind": "join", "tables": [[lt, la], [rt, ra]], "on": [[a, b]], "where": where})
    fn = p.take("name", what="an aggregate function or 'join'").lower()
    if fn not in FUNCTIONS:
        raise ValueError(f"unknown aggregate function {fn!r}; expected one of {', '.join(FUNCTIONS)} or 'join'")
    p.take("punct", "(", what="'('")
    t = p.peek()
    value = p.take("punct", "*") if t is not None and t[1] == "*" else p.take("name", what="an attribute")
    p.take("punct", ")", what="')'")
    p.take("name", "over", what="'over'")
    table = p.take("name", what="a table name")
    p.take("name", "where", what="'where'")
    rattr = p.take("name", what="the range attribute")
    p.take("name", "between", what="'between'")
    low = p.value()
    p.take("name", "and", what="'and'")
    high = p.value()
    for what, v in (("range low", low), ("range high", high)):
        if isinstance(v, float) and math.isnan(v):
            raise ValueError(f"{what} is NaN")
    where = p.conjunction() if p.keyword("and") else []
    p.end()
    return AggregateSpec(table, fn, None if value == "*" else value, rattr, low, high, tuple(where))
