"""Event Ruler's rule semantics evaluated on a JSON event directly, as its README states them: the reference the
rule format (wire/eventruler.py) is checked against.  No paths, no predicates, no engine: a walk of the rule and
the event side by side."""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

OPERATOR_KEYS = {"prefix", "suffix", "equals-ignore-case", "wildcard", "anything-but", "numeric", "exists", "cidr"}


def rule_matches(rule: dict, event: dict) -> bool:
    """Whether every field of ``rule`` matches ``event`` (``$or``: one of its objects does)."""
    for key, want in rule.items():
        if key == "$or" and isinstance(want, list) and len(want) >= 2 and \
                all(isinstance(w, dict) and not OPERATOR_KEYS & w.keys() for w in want):
            if not any(rule_matches(w, event) for w in want):
                return False
        elif isinstance(want, dict):
            if not rule_matches(want, _child(event, key)):
                return False
        elif not _leaf_matches(want, _values(event, key)):
            return False
    return True


def _child(event: Any, key: str) -> dict:
    """The object(s) under ``key``: an array of objects is searched as one object whose fields hold every element's."""
    merged: dict = {}
    for obj in _flat(event.get(key) if isinstance(event, dict) else None):
        if isinstance(obj, dict):
            for k, v in obj.items():
                merged.setdefault(k, []).append(v)
    return merged


def _flat(value: Any) -> list:
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [] if value is None else [value]


def _values(event: dict, key: str) -> list:
    """The leaf values under ``key`` (arrays flattened; nulls and objects are no leaves)."""
    return [v for v in _flat(event.get(key)) if not isinstance(v, dict)]


def _leaf_matches(alternatives: list, values: list) -> bool:
    for alt in alternatives:
        if isinstance(alt, dict) and alt == {"exists": False}:
            if not values:
                return True
        elif any(_value_matches(alt, v) for v in values):
            return True
    return False


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return float(a) == float(b)


def _kind(v: Any) -> str:
    return "bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "num"


def _wildcard(pattern: str, s: str) -> bool:
    regex, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\":
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if pattern[i] == "*" else re.escape(pattern[i]))
        i += 1
    return re.fullmatch("".join(regex), s, re.DOTALL) is not None


def _string_op(name: str, arg: Any, v: str) -> bool:
    if name == "prefix":
        return v.casefold().startswith(arg["equals-ignore-case"].casefold()) if isinstance(arg, dict) else v.startswith(arg)
    if name == "suffix":
        return v.casefold().endswith(arg["equals-ignore-case"].casefold()) if isinstance(arg, dict) else v.endswith(arg)
    if name == "equals-ignore-case":
        return v.casefold() == arg.casefold()
    return _wildcard(arg, v)


def _value_matches(alt: Any, v: Any) -> bool:
    if isinstance(v, float) and math.isnan(v):
        return False
    if not isinstance(alt, dict):
        return _same(alt, v)
    (name, arg), = alt.items()
    if name == "exists":
        return arg is True
    if name in ("prefix", "suffix", "equals-ignore-case", "wildcard"):
        return isinstance(v, str) and _string_op(name, arg, v)
    if name == "cidr":
        if not isinstance(v, str):
            return False
        try:
            address = ipaddress.ip_address(v)
        except ValueError:
            return False
        network = ipaddress.ip_network(arg, strict=False)
        return address.version == network.version and address in network
    if name == "numeric":
        if isinstance(v, (bool, str)):
            return False
        ops = {"=": float.__eq__, "<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}
        return all(ops[op](float(v), float(x)) for op, x in zip(arg[::2], arg[1::2]))
    # anything-but: a value of the listed values' kind that is none of them (our reading: no comparison across kinds)
    if isinstance(arg, dict):
        (inner, x), = arg.items()
        xs = x if isinstance(x, list) else [x]
        return isinstance(v, str) and not any(_string_op(inner, y, v) for y in xs)
    xs = arg if isinstance(arg, list) else [arg]
    return _kind(v) == _kind(xs[0]) and not any(_same(x, v) for x in xs)
