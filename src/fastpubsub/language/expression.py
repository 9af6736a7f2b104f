"""The subscription text language of ``pubsub subscribe``.

A subscription is a conjunction of predicates joined by ``and``::

    movie = "groundhog day" and price <= 10 and in_stock = true

* attribute: a bare name (letters, digits, ``_``, ``.``, ``-``; not starting
  with a digit) or a double-quoted string;
* operator: ``=  !=  <  <=  >  >=`` (``==`` is accepted as ``=``);
* value: a double- or single-quoted string (backslash escapes as in JSON), an
  integer, a decimal/exponent number, ``true`` or ``false``.

Errors name the column where parsing failed, so users can fix the text.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fastpubsub.engine import OPERATORS, Predicate, validate_predicates

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<op>!=|<=|>=|==|=|<|>)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![A-Za-z_]))
  | (?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)
    """,
    re.VERBOSE,
)


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


def parse(text: str) -> list[Predicate]:
    """``'movie = "groundhog day" and price <= 10'`` -> ``[("movie", "=", ...), ("price", "<=", 10)]``."""
    tokens = _tokens(text)
    predicates: list[Predicate] = []
    i = 0
    end = len(text) + 1
    while True:
        if i + 3 > len(tokens):
            column = tokens[i][2] if i < len(tokens) else end
            raise ExpressionError(f"column {column}: incomplete predicate; expected: attribute operator value")
        (ak, at, ac), (ok, ot, oc), (vk, vt, vc) = tokens[i : i + 3]
        if ak == "string":
            attribute = _unquote(at, ac)
        elif ak == "name":
            attribute = at
        else:
            raise ExpressionError(f"column {ac}: expected an attribute name, got {at!r}")
        if ok != "op":
            raise ExpressionError(f"column {oc}: expected an operator (= != < <= > >=), got {ot!r}")
        predicates.append((attribute, "=" if ot == "==" else ot, _value(vk, vt, vc)))
        i += 3
        if i == len(tokens):
            break
        kind, token, column = tokens[i]
        if not (kind == "name" and token.lower() == "and"):
            raise ExpressionError(f"column {column}: expected 'and' or the end, got {token!r}")
        i += 1
    try:
        return validate_predicates(predicates, operators=OPERATORS)
    except ValueError as exc:
        raise ExpressionError(str(exc)) from None


def format_predicates(predicates: list[Predicate]) -> str:
    """The inverse of :func:`parse` (for display): ``parse(format_predicates(p)) == p``."""
    parts = []
    for attribute, op, value in predicates:
        name = attribute if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", attribute) and attribute.lower() not in (
            "and", "true", "false") else json.dumps(attribute)
        if isinstance(value, bool):
            shown = "true" if value else "false"
        elif isinstance(value, str):
            shown = json.dumps(value)
        elif isinstance(value, float) and math.isinf(value):
            shown = "1e999" if value > 0 else "-1e999"  # parses back to +-inf
        else:
            shown = repr(value)
        parts.append(f"{name} {op} {shown}")
    return " and ".join(parts)
