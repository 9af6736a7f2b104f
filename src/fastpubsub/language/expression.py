"""The subscription text language of ``pubsub subscribe``.

A subscription is predicates joined by ``and`` and ``or`` (``and`` binds
tighter; parentheses group)::

    movie = "groundhog day" and price <= 10 and in_stock = true
    (a = 1 and b < 2) or c in (3, 4)

* attribute: a bare name (``language.lexer``'s rule, with ``.`` and ``-``
  allowed after the first character) or a quoted string;
* predicate: ``attribute op value`` with op one of ``=  !=  <  <=  >  >=``
  (``==`` is accepted as ``=``); ``attribute in (v, ...)``, ``attribute not
  in (v, ...)``, ``attribute between lo and hi``, ``attribute not between lo
  and hi``, ``attribute prefix "s"``, ``attribute suffix "s"``, ``attribute
  contains "s"``, ``attribute exists``, ``attribute not exists``, ``attribute
  equals ignore case "s"``, ``attribute prefix ignore case "s"``, ``attribute
  suffix ignore case "s"``, ``attribute wildcard "a*b"``, ``attribute cidr
  "10.0.0.0/8"``, ``attribute range (> lo, <= hi)`` (``>`` or ``>=``, then ``<`` or
  ``<=``), and ``not`` before ``prefix``, ``suffix``, ``wildcard`` and
  ``equals ignore case`` (meanings in engine/semantics.py);
* value: a string (double- or single-quoted, backslash escapes as in JSON), a
  number (an integer or a decimal/exponent number, with an optional sign),
  ``true`` or ``false``.

Keywords are case-insensitive.  The result is a list of predicates (a
conjunction) or, with ``or``, an ``AnyOf`` of conjunctions (the text's
disjunctive normal form, at most ``MAX_CONJUNCTIONS`` conjunctions of
comparisons).  Errors name the column where parsing failed, so users can fix
the text.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fastpubsub.engine import MAX_CONJUNCTIONS, AnyOf, Predicate, validate_subscription

from .lexer import END_KIND, NAME_KIND, NUMBER_KIND, OP_KIND, PUNCT_KIND, STRING_KIND, Dialect, Token

#: Words with a meaning in the language; an attribute spelled like one is written quoted.
KEYWORDS = frozenset(("and", "or", "not", "in", "between", "prefix", "suffix", "contains", "exists", "true", "false",
                      "equals", "ignore", "case", "wildcard", "cidr", "range"))
#: The language's tokens (language.lexer): names may hold ``.`` and ``-`` and open with ``$`` (a record's metadata,
#: ``wire.metadata``), numbers may be signed.
DIALECT = Dialect(operators=("!=", "<=", ">=", "==", "=", "<", ">"), punctuation="(),", name_chars=".-", signs="+-",
                  keywords=KEYWORDS, sigil="$")
_STRING_OPS = ("prefix", "suffix", "contains")


class ExpressionError(ValueError):
    """Unparseable subscription text; the message says where and why."""


def _value(t: Token) -> Any:
    if t.kind in (STRING_KIND, NUMBER_KIND):
        return t.value
    if t.is_word("true", "false"):
        return t.text.lower() == "true"
    raise ExpressionError(f"column {t.column}: expected a value (string, number, true or false), got {t.text!r}")


class _Parser:
    """Recursive descent over the tokens: or-expression of and-expressions of predicates or groups."""

    def __init__(self, text: str) -> None:
        self.tokens = DIALECT.tokenize(text, ExpressionError)
        self.i = 0

    def peek(self) -> Token:
        return self.tokens[self.i]

    def at_end(self, k: int = 0) -> bool:
        return self.i + k >= len(self.tokens) - 1  # the last token is the end

    def word(self, *words: str) -> bool:
        return self.peek().is_word(*words)

    def punct(self, p: str) -> bool:
        t = self.peek()
        return t.kind == PUNCT_KIND and t.text == p

    def expect_punct(self, p: str, what: str) -> None:
        if not self.punct(p):
            t = self.peek()
            raise ExpressionError(f"column {t.column}: expected {what}, got {repr(t.text) if t.text else 'the end'}")
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
                raise ExpressionError(f"column {self.peek().column}: the expression expands to more than "
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
        if t.kind == END_KIND:
            raise ExpressionError(f"column {t.column}: incomplete predicate; expected a value")
        self.i += 1
        return _value(t)

    def predicate(self) -> Predicate:
        a = self.peek()
        if self.at_end() or self.at_end(1):
            raise ExpressionError(f"column {a.column}: incomplete predicate; expected: attribute operator value")
        if a.kind not in (NAME_KIND, STRING_KIND):
            raise ExpressionError(f"column {a.column}: expected an attribute name, got {a.text!r}")
        attribute = a.value
        self.i += 1
        o = self.peek()
        if o.kind == OP_KIND:
            self.i += 1
            if self.at_end():
                raise ExpressionError(f"column {a.column}: incomplete predicate; expected: attribute operator value")
            return (attribute, "=" if o.text == "==" else o.text, self.value())
        negated = False
        if self.word("not"):
            negated = True
            self.i += 1
            if not self.word("in", "between", "exists", "prefix", "suffix", "wildcard", "equals"):
                raise ExpressionError(f"column {self.peek().column}: expected 'in', 'between', 'exists', 'prefix', "
                                      "'suffix', 'wildcard' or 'equals ignore case' after 'not'")
        no = "not " if negated else ""
        if self.word("in"):
            self.i += 1
            self.expect_punct("(", "'(' and a list of values")
            values = [self.value()]
            while self.punct(","):
                self.i += 1
                values.append(self.value())
            self.expect_punct(")", "',' or ')'")
            return (attribute, no + "in", values)
        if self.word("between"):
            self.i += 1
            lo = self.value()
            if not self.word("and"):
                raise ExpressionError(f"column {self.peek().column}: expected 'and' in 'between lo and hi'")
            self.i += 1
            return (attribute, no + "between", [lo, self.value()])
        if self.word("exists"):
            self.i += 1
            return (attribute, no + "exists", None)
        if not negated and self.word("range"):
            self.i += 1
            self.expect_punct("(", "'(' and '> lo, <= hi'")
            lo_op = self.range_op((">", ">="))
            lo = self.value()
            self.expect_punct(",", "','")
            hi_op = self.range_op(("<", "<="))
            hi = self.value()
            self.expect_punct(")", "')'")
            return (attribute, "range", [lo_op, lo, hi_op, hi])
        if self.word("equals"):
            self.i += 1
            self.ignore_case(required=True)
            return (attribute, no + "equals ignore case", self.value())
        if self.word("prefix", "suffix") or not negated and self.word("contains", "wildcard", "cidr") \
                or negated and self.word("wildcard"):
            op = self.peek().text.lower()
            self.i += 1
            if op in ("prefix", "suffix") and not negated and self.ignore_case(required=False):
                op += " ignore case"
            return (attribute, no + op, self.value())
        raise ExpressionError(f"column {o.column}: expected an operator (= != < <= > >= in, not in, between, not between, "
                              f"prefix, suffix, contains, exists, not exists, equals ignore case, wildcard, cidr, ...), "
                              f"got {o.text!r}")

    def range_op(self, ops: tuple[str, str]) -> str:
        t = self.peek()
        if t.kind != OP_KIND or t.text not in ops:
            raise ExpressionError(f"column {t.column}: expected {' or '.join(ops)} in 'range (> lo, <= hi)'")
        self.i += 1
        return t.text

    def ignore_case(self, required: bool) -> bool:
        """Reads ``ignore case`` if it comes next (and it must where ``required``)."""
        if self.word("ignore") and self.tokens[self.i + 1].is_word("case"):
            self.i += 2
            return True
        if required:
            raise ExpressionError(f"column {self.peek().column}: expected 'ignore case'")
        return False


def parse(text: str) -> "list[Predicate] | AnyOf":
    """``'movie = "groundhog day" and price <= 10'`` -> ``[("movie", "=", ...), ("price", "<=", 10)]``.

    With ``or``: an ``AnyOf`` of the conjunctions (``and`` binds tighter).
    """
    p = _Parser(text)
    if p.at_end():
        raise ExpressionError("column 1: incomplete predicate; expected: attribute operator value")
    dnf = p.disjunction()
    if not p.at_end():
        t = p.peek()
        raise ExpressionError(f"column {t.column}: expected 'and', 'or' or the end, got {t.text!r}")
    try:
        return validate_subscription(dnf[0] if len(dnf) == 1 else AnyOf(dnf))
    except ValueError as exc:
        raise ExpressionError(str(exc)) from None


def _name(attribute: str) -> str:
    return attribute if DIALECT.is_name(attribute) else json.dumps(attribute)


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
    if op in ("exists", "not exists"):
        return f"{name} {op}"
    if op == "range":
        return f"{name} range ({value[0]} {_shown(value[1])}, {value[2]} {_shown(value[3])})"
    return f"{name} {op} {_shown(value)}"


def format_predicates(subscription: "list[Predicate] | AnyOf") -> str:
    """The inverse of :func:`parse` (for display): ``parse(format_predicates(s)) == s``."""
    if isinstance(subscription, AnyOf):
        parts = [" and ".join(map(_predicate, d)) for d in subscription.disjuncts]
        if len(parts) == 1:
            return parts[0]
        return " or ".join(f"({t})" if len(d) > 1 else t for t, d in zip(parts, subscription.disjuncts))
    return " and ".join(map(_predicate, subscription))
