"""The text form of aggregate and select-join subscriptions (docs/aggregates.md), compiled to specs.

    min(per) over stock where risk between 20 and 60 and sector = "tech"
    join orders o, shipments s on o.order_id = s.order_id where o.amount > 100 and s.carrier = "ups"
"""

from __future__ import annotations

import math
from typing import Any

from fastpubsub.language.lexer import END_KIND, NAME_KIND, NUMBER_KIND, OP_KIND, PUNCT_KIND, STRING_KIND, Dialect, Token

from .spec import FUNCTIONS, AggregateSpec, JoinSpec

#: The language's tokens (language.lexer): names may hold ``.`` (``o.amount``, an alias and an attribute), numbers
#: may have a minus sign and run straight into a name (``2and``).  Its words are read where the grammar expects
#: them, so none is reserved.
DIALECT = Dialect(operators=("<=", ">=", "!=", "=", "<", ">"), punctuation="(),*", name_chars=".", signs="-",
                  glued_numbers=True)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks, self.i, self.text = DIALECT.tokenize(text), 0, text

    def peek(self) -> Token:
        return self.toks[self.i]

    def take(self, kind: str | None = None, value: Any = None, what: str = "") -> Any:
        t = self.peek()
        if t.kind == END_KIND or (kind and t.kind != kind) or (value is not None and str(t.value).lower() != value):
            got = "end of text" if t.kind == END_KIND else repr(t.value)
            raise ValueError(f"expected {what or value or kind}, got {got} in {self.text!r}")
        self.i += 1
        return t.value

    def keyword(self, word: str) -> bool:
        if self.peek().is_word(word):
            self.i += 1
            return True
        return False

    def value(self) -> Any:
        t = self.peek()
        if t.kind == END_KIND:
            raise ValueError(f"expected a value, got end of text in {self.text!r}")
        if t.kind in (STRING_KIND, NUMBER_KIND):
            self.i += 1
            return t.value
        if t.is_word("true", "false"):
            self.i += 1
            return t.text.lower() == "true"
        raise ValueError(f"expected a number, a \"string\", true or false, got {t.value!r} in {self.text!r}")

    def predicate(self) -> tuple[str, str, Any]:
        attr = self.take(NAME_KIND, what="an attribute")
        op = self.take(OP_KIND, what="an operator (=, !=, <, <=, >, >=)")
        return attr, op, self.value()

    def conjunction(self) -> list[tuple[str, str, Any]]:
        preds = [self.predicate()]
        while self.keyword("and"):
            preds.append(self.predicate())
        return preds

    def end(self) -> None:
        if self.peek().kind != END_KIND:
            raise ValueError(f"unexpected {self.peek().value!r} after the end of the subscription in {self.text!r}")


def parse_subscription(text: str) -> AggregateSpec | JoinSpec:
    """Compile the text form to a spec; ``ValueError`` names the offending piece."""
    p = _Parser(text)
    if p.keyword("join"):
        lt = p.take(NAME_KIND, what="a table name")
        la = p.take(NAME_KIND, what=f"an alias for {lt}")
        p.take(PUNCT_KIND, ",", what="','")
        rt = p.take(NAME_KIND, what="a table name")
        ra = p.take(NAME_KIND, what=f"an alias for {rt}")
        p.take(NAME_KIND, "on", what="'on'")
        a = p.take(NAME_KIND, what="a join attribute")
        p.take(OP_KIND, "=", what="'=' (joins are equi-joins)")
        b = p.take(NAME_KIND, what="a join attribute")
        where = p.conjunction() if p.keyword("where") else []
        p.end()
        return JoinSpec.from_json({"kind": "join", "tables": [[lt, la], [rt, ra]], "on": [[a, b]], "where": where})
    fn = p.take(NAME_KIND, what="an aggregate function or 'join'").lower()
    if fn not in FUNCTIONS:
        raise ValueError(f"unknown aggregate function {fn!r}; expected one of {', '.join(FUNCTIONS)} or 'join'")
    p.take(PUNCT_KIND, "(", what="'('")
    value = p.take(PUNCT_KIND, "*") if p.peek().text == "*" else p.take(NAME_KIND, what="an attribute")
    p.take(PUNCT_KIND, ")", what="')'")
    p.take(NAME_KIND, "over", what="'over'")
    table = p.take(NAME_KIND, what="a table name")
    p.take(NAME_KIND, "where", what="'where'")
    rattr = p.take(NAME_KIND, what="the range attribute")
    p.take(NAME_KIND, "between", what="'between'")
    low = p.value()
    p.take(NAME_KIND, "and", what="'and'")
    high = p.value()
    for what, v in (("range low", low), ("range high", high)):
        if isinstance(v, float) and math.isnan(v):
            raise ValueError(f"{what} is NaN")
    where = p.conjunction() if p.keyword("and") else []
    p.end()
    return AggregateSpec(table, fn, None if value == "*" else value, rattr, low, high, tuple(where))
