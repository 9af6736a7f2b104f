"""AWS Event Ruler's (EventBridge's) JSON rules as subscriptions, unchanged.

A rule is an object whose nested objects are paths (``{"detail": {"state":
[...]}}`` is the attribute ``detail.state``, each key escaped as in
wire/paths.py) and whose leaves are lists of alternatives: a value (equality;
the values of one list make an ``in``) or an operator object.  The fields of an
object must all hold; ``"$or": [{...}, {...}]`` at any level holds when one of
its objects does.  :func:`rule_to_subscription` turns a rule into the
predicates of engine/semantics.py:

=============================================== ====================================
``["a", "b"]``, ``[1, 2]``, ``[true]``           ``in``
``{"prefix": "p"}``, ``{"suffix": "s"}``         ``prefix``, ``suffix``
``{"prefix": {"equals-ignore-case": "p"}}``      ``prefix ignore case`` (suffix alike)
``{"equals-ignore-case": "x"}``                  ``equals ignore case``
``{"wildcard": "a*b"}``                          ``wildcard``
``{"anything-but": x or [x, ...]}``              ``not in``
``{"anything-but": {"prefix": "p"}}``            ``not prefix`` (suffix, wildcard and
                                                 equals-ignore-case alike; a list of
                                                 them: each must hold)
``{"numeric": [">", 0, "<=", 5]}``               ``range``; ``{"numeric": ["<", 5]}``: ``<``
``{"exists": true}`` / ``false``                 ``exists`` / ``not exists``
``{"cidr": "10.0.0.0/24"}``                      ``cidr``
=============================================== ====================================

A rule we cannot take (a ``null`` value, which we do not keep as a value; a
bare value instead of a list; an unknown operator) raises ``ValueError`` with
the reason.  On an attribute with several values (an array) each predicate
holds when one value satisfies it, as in Event Ruler (a numeric range too:
one value within it); the values of an ``anything-but`` list are predicates
of their own (engine/semantics.py), each of which any value may satisfy.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fastpubsub.engine import MAX_CONJUNCTIONS, AnyOf, Predicate, validate_subscription

from .paths import join

_NUMERIC_OPS = ("=", "<", "<=", ">", ">=")
_STRING_MATCHES = {"prefix": "prefix", "suffix": "suffix", "wildcard": "wildcard",
                   "equals-ignore-case": "equals ignore case"}
_NEGATED = {"prefix": "not prefix", "suffix": "not suffix", "wildcard": "not wildcard",
            "equals-ignore-case": "not equals ignore case"}
#: Keys that make an object an operator, not a field (Event Ruler's reserved names).
OPERATOR_KEYS = frozenset(("prefix", "suffix", "equals-ignore-case", "wildcard", "anything-but", "numeric", "exists",
                           "cidr"))

Dnf = list[list[Predicate]]


class RuleError(ValueError):
    """A rule we cannot take; the message says where and why."""


def rule_to_subscription(rule: Any) -> "list[Predicate] | AnyOf":
    """The validated subscription a rule stands for; :class:`RuleError` naming the field for one we cannot take."""
    if not isinstance(rule, dict) or not rule:
        raise RuleError("a rule is a non-empty JSON object of fields")
    dnf = _object(rule, ())
    try:
        return validate_subscription(dnf[0] if len(dnf) == 1 else AnyOf(dnf))
    except ValueError as exc:
        raise RuleError(str(exc)) from None


def _and(a: Dnf, b: Dnf, where: str) -> Dnf:
    if len(a) * len(b) > MAX_CONJUNCTIONS:
        raise RuleError(f"{where}: the rule expands to more than {MAX_CONJUNCTIONS} conjunctions")
    return [x + y for x in a for y in b]


def _where(path: tuple[str, ...]) -> str:
    return join(*path) if path else "the rule"


def _is_or(key: str, value: Any) -> bool:
    """Event Ruler's test for ``$or``: a list of at least two objects none of which uses an operator's name."""
    return (key == "$or" and isinstance(value, list) and len(value) >= 2
            and all(isinstance(v, dict) and not (OPERATOR_KEYS & v.keys()) for v in value))


def _object(obj: dict, path: tuple[str, ...]) -> Dnf:
    out: Dnf = [[]]
    for key, value in obj.items():
        if not isinstance(key, str) or not key:
            raise RuleError(f"{_where(path)}: field names are non-empty strings")
        if _is_or(key, value):
            alternatives: Dnf = []
            for branch in value:
                if not branch:
                    raise RuleError(f"{_where(path)}: an empty object in '$or'")
                alternatives.extend(_object(branch, path))
            out = _and(out, alternatives, _where(path))
        elif isinstance(value, dict):
            if not value:
                raise RuleError(f"{_where(path + (key,))}: an empty object matches nothing")
            out = _and(out, _object(value, path + (key,)), _where(path + (key,)))
        elif isinstance(value, list):
            out = _and(out, _field(join(*path, key), value), join(*path, key))
        else:
            raise RuleError(f"{join(*path, key)}: values in a rule are lists (write [{_json(value)}])")
    return out


def _json(value: Any) -> str:
    return json.dumps(value)[:80]


def _field(attribute: str, alternatives: list) -> Dnf:
    """A leaf: any of its alternatives holds."""
    if not alternatives:
        raise RuleError(f"{attribute}: an empty list matches nothing")
    by_kind: dict[type, list] = {}
    out: Dnf = []
    for alt in alternatives:
        if isinstance(alt, dict):
            out.extend(_operator(attribute, alt))
        elif alt is None:
            raise RuleError(f"{attribute}: null is not matched here (a null field counts as absent; "
                            "use {\"exists\": false})")
        elif isinstance(alt, (bool, int, float, str)):
            _finite(attribute, alt)
            by_kind.setdefault(bool if isinstance(alt, bool) else str if isinstance(alt, str) else float,
                               []).append(alt)
        else:
            raise RuleError(f"{attribute}: a value must be a string, number, boolean or operator object, "
                            f"got {_json(alt)}")
    return [[(attribute, "in", values)] for values in by_kind.values()] + out


def _finite(attribute: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise RuleError(f"{attribute}: {value!r} is not a number a rule may hold")


def _string(attribute: str, name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise RuleError(f"{attribute}: {name!r} takes a string, got {_json(value)}")
    return value


def _operator(attribute: str, obj: dict) -> Dnf:
    if len(obj) != 1:
        raise RuleError(f"{attribute}: an operator object has exactly one key, got {_json(obj)}")
    (name, arg), = obj.items()
    if name in ("prefix", "suffix") and isinstance(arg, dict):
        if set(arg) != {"equals-ignore-case"}:
            raise RuleError(f"{attribute}: {name!r} takes a string or {{\"equals-ignore-case\": string}}")
        return [[(attribute, f"{name} ignore case", _string(attribute, name, arg["equals-ignore-case"]))]]
    if name in _STRING_MATCHES:
        return [[(attribute, _STRING_MATCHES[name], _string(attribute, name, arg))]]
    if name == "cidr":
        return [[(attribute, "cidr", _string(attribute, name, arg))]]
    if name == "exists":
        if not isinstance(arg, bool):
            raise RuleError(f"{attribute}: 'exists' takes true or false, got {_json(arg)}")
        return [[(attribute, "exists" if arg else "not exists", None)]]
    if name == "numeric":
        return [_numeric(attribute, arg)]
    if name == "anything-but":
        return [_anything_but(attribute, arg)]
    raise RuleError(f"{attribute}: unknown operator {name!r} (known: {', '.join(sorted(OPERATOR_KEYS))})")


def _numeric(attribute: str, arg: Any) -> list[Predicate]:
    if not isinstance(arg, list) or len(arg) not in (2, 4):
        raise RuleError(f"{attribute}: 'numeric' takes [op, number] or [op, number, op, number], got {_json(arg)}")
    out = []
    for op, x in zip(arg[::2], arg[1::2]):
        if op not in _NUMERIC_OPS or isinstance(x, bool) or not isinstance(x, (int, float)):
            raise RuleError(f"{attribute}: 'numeric' compares with one of {' '.join(_NUMERIC_OPS)} and a number, "
                            f"got {_json([op, x])}")
        _finite(attribute, x)
        out.append((attribute, op, x))
    if len(out) == 2:
        if out[0][1] not in (">", ">=") or out[1][1] not in ("<", "<="):
            raise RuleError(f"{attribute}: a numeric range is [\">\" or \">=\", low, \"<\" or \"<=\", high], "
                            f"got {_json(arg)}")
        return [(attribute, "range", list(arg))]
    return out


def _anything_but(attribute: str, arg: Any) -> list[Predicate]:
    if isinstance(arg, dict):
        if len(arg) != 1 or next(iter(arg)) not in _NEGATED:
            raise RuleError(f"{attribute}: 'anything-but' takes values or one of "
                            f"{', '.join(_NEGATED)}, got {_json(arg)}")
        (name, inner), = arg.items()
        values = inner if isinstance(inner, list) else [inner]
        if not values:
            raise RuleError(f"{attribute}: an empty list in 'anything-but'")
        return [(attribute, _NEGATED[name], _string(attribute, name, v)) for v in values]
    values = arg if isinstance(arg, list) else [arg]
    if not values:
        raise RuleError(f"{attribute}: an empty list in 'anything-but'")
    for v in values:
        if v is None or isinstance(v, (dict, list)):
            raise RuleError(f"{attribute}: 'anything-but' takes strings or numbers, got {_json(v)}")
        _finite(attribute, v)
    return [(attribute, "not in", values)]
