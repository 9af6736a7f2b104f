"""The subscription text language of ``pubsub subscribe``.

A subscription is predicates joined by ``and`` and ``or`` (``and`` binds
tighter; parentheses group)::

    movie = "groundhog day" and price <= 10 and in_stock = true
    (a = 1 and b < 2) or c in (3, 4)

* attribute: a bare name (letters, digits, ``_``, ``.``, ``-``; not starting
  with a digit) or a double-quoted string;
* predicate: ``attribute op value`` with op one of ``=  !=  <  <=  >  >=``
  (``==`` is accepted as ``=``); ``attribute in (v, ...)``, ``attribute not
  in (v, ...)``, ``attribute between lo and hi``, ``attribute not between lo
  and hi``, ``attribute prefix "s"``, ``attribute suffix "s"``, ``attribute
  contains "s"``, ``attribute exists`` (meanings in engine/semantics.py);
* value: a double- or single-quoted string (backslash escapes as in JSON), an
  integer, a decimal/exponent number, ``true`` or ``false``.

Keywords are case-insensitive.  The result is a list of predicates (a
conjunction) or, with ``or``, an ``AnyOf`` of conjunctions (the text's
disjunctive normal form, at most ``MAX_CONJUNCTIONS`` conjunctions of
comparisons).  Errors name the column where parsing failed, so users can fix
the text.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fastpubsub.engine import MAX_CONJUNCTIONS, AnyOf, Predicate, validate_subscription

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<op>!=|<=|>=|==|=|<|>)
  | (?P<punct>[(),])
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![A-Za-z_]))
  | (?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)
    """,
    re.VERBOSE,
)
#: Words with a meaning in the language; an attribute spelled like one is written quoted.
KEYWORDS = frozenset(("and", "or", "not", "in", "between", "prefix", "suffix", "contains", "exists", "true", "false"))
_STRING_OPS = ("prefix", "suffix", "contains")


class ExpressionError(ValueError):
    """Unparseable subscription text; the message says where and why."""


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ExpressionError(f"column {pos + 1}: unexpected character {text[pos]!r}")
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group(), pos + 1))
        pos = m.end()
    return out


def _unquote(token: str, column: int) -> str:
    body = token[1:-1]
    if token[0] == "'":  # reuse JSON escapes for single-quoted strings too
        body = body.replace("\\'", "'").replace('"', '\\"')
    try:
        return json.loads(f'"{body}"')
    except json.JSONDecodeError as exc:
        raise ExpressionError(f"column {column}: bad escape in string {token}: {exc.msg}") from None


def _value(kind: str, token: str, column: int) -> Any:
    if kind == "string":
        return _unquote(token, column)
    if kind == "number":
        return float(token) if any(c in token for c in ".eE") else int(token)
    if kind == "name" and token.lower() in ("true", "false"):
        return token.lower() == "true"
    raise ExpressionError(f"column {column}: expected a value (string, number, true or false), got {token!r}")


class _Parser:
    """Recursive descent over the tokens: or-expression of and-expressions of predicates or groups."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.i = 0
        self.end = len(text) + 1

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def column(self) -> int:
        t = self.peek()
        return t[2] if t else self.end

    def word(self, *words: str) -> bool:
        t = self.peek()
        return t is not None and t[0] == "name" and t[1].lower() in words

    def punct(self, p: str) -> bool:
        t = self.peek()
        return t is not None and t[0] == "punct" and t[1] == p

    def expect_punct(self, p: str, what: str) -> None:
        if not self.punct(p):
            t = self.peek()
            raise ExpressionError(f"column {self.column()}: expected {what}, got {repr(t[1]) if t else 'the end'}")
        self.i += 1

    def disjunction(self) -> list[list[list[Predicate]]]:
        """A list of alternatives, each a list of conjunct groups (every group is itself a DNF)."""
        terms = [self.conjunction()]
        while self.word("or"):
            self.i += 1
            terms.append(self.conjunction())
        return [d for t in terms for d in t]

    def conjunction(self) -> list[list[Predicate]]:
        dnf = self.factor()
        while self.word("and"):
            self.i += 1
            right = self.factor()
            if len(dnf) * len(right) > MAX_CONJUNCTIONS:
                raise ExpressionError(f"column {self.column()}: the expression expands to more than "
                                      f"{MAX_CONJUNCTIONS} conjunctions")
            dnf = [a + b for a in dnf for b in right]
        return dnf

    def factor(self) -> list[list[Predicate]]:
        if self.punct("("):
            self.i += 1
            inner = self.disjunction()
            self.expect_punct(")", "')', 'and' or 'or'")
            return inner
        return [[self.predicate()]]

    def value(self) -> Any:
        t = self.peek()
        if t is None:
            raise ExpressionError(f"column {self.end}: incomplete predicate; expected a value")
        self.i += 1
        return _value(*t)

    def predicate(self) -> Predicate:
        t = self.peek()
        if t is None or self.i + 1 >= len(self.tokens):
            raise ExpressionError(f"column {self.column()}: incomplete predicate; expected: attribute operator value")
        ak, at, ac = t
        if ak == "string":
            attribute = _unquote(at, ac)
        elif ak == "name":
            attribute = at
        else:
            raise ExpressionError(f"column {ac}: expected an attribute name, got {at!r}")
        self.i += 1
        ok, ot, oc = self.peek()  # type: ignore[misc]
        if ok == "op":
            self.i += 1
            if self.peek() is None:
                raise ExpressionError(f"column {ac}: incomplete predicate; expected: attribute operator value")
            return (attribute, "=" if ot == "==" else ot, self.value())
        negated = False
        if self.word("not"):
            negated = True
            self.i += 1
            if not self.word("in", "between"):
                raise ExpressionError(f"column {self.column()}: expected 'in' or 'between' after 'not'")
        if self.word("in"):
            self.i += 1
            self.expect_punct("(", "'(' and a list of values")
            values = [self.value()]
            while self.punct(","):
                self.i += 1
                values.append(self.value())
            self.expect_punct(")", "',' or ')'")
            return (attribute, "not in" if negated else "in", values)
        if self.word("between"):
            self.i += 1
            lo = self.value()
            if not self.word("and"):
                raise ExpressionError(f"column {self.column()}: expected 'and' in 'between lo and hi'")
            self.i += 1
            return (attribute, "not between" if negated else "between", [lo, self.value()])
        if self.word(*_STRING_OPS):
            self.i += 1
            return (attribute, ot.lower(), self.value())
        if self.word("exists"):
            self.i += 1
            return (attribute, "exists", None)
        raise ExpressionError(f"column {oc}: expected an operator (= != < <= > >= in, not in, between, not between, "
                              f"prefix, suffix, contains, exists), got {ot!r}")


def parse(text: str) -> "list[Predicate] | AnyOf":
    """``'movie = "groundhog day" and price <= 10'`` -> ``[("movie", "=", ...), ("price", "<=", 10)]``.

    With ``or``: an ``AnyOf`` of the conjunctions (``and`` binds tighter).
    """
    p = _Parser(text)
    if not p.tokens:
        raise ExpressionError("column 1: incomplete predicate; expected: attribute operator value")
    dnf = p.disjunction()
    if p.peek() is not None:
        kind, token, column = p.peek()  # type: ignore[misc]
        raise ExpressionError(f"column {column}: expected 'and', 'or' or the end, got {token!r}")
    try:
        return validate_subscription(dnf[0] if len(dnf) == 1 else AnyOf(dnf))
    except ValueError as exc:
        raise ExpressionError(str(exc)) from None


def _name(attribute: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", attribute) and attribute.lower() not in KEYWORDS:
        return attribute
    return json.dumps(attribute)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float) and math.isinf(value):
        return "1e999" if value > 0 else "-1e999"  # parses back to +-inf
    return repr(value)


def _predicate(p: Predicate) -> str:
    attribute, op, value = p
    name = _name(attribute)
    if op in ("in", "not in"):
        return f"{name} {op} ({', '.join(map(_shown, value))})"
    if op in ("between", "not between"):
        return f"{name} {op} {_shown(value[0])} and {_shown(value[1])}"
    if op == "exists":
        return f"{name} exists"
    return f"{name} {op} {_shown(value)}"


def format_predicates(subscription: "list[Predicate] | AnyOf") -> str:
    """The inverse of :func:`parse` (for display): ``parse(format_predicates(s)) == s``."""
    if isinstance(subscription, AnyOf):
        parts = [" and ".join(map(_predicate, d)) for d in subscription.disjuncts]
        if len(parts) == 1:
            return parts[0]
        return " or ".join(f"({t})" if len(d) > 1 else t for t, d in zip(parts, subscription.disjuncts))
    return " and ".join(map(_predicate, subscription))
