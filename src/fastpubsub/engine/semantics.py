"""What a predicate means: operators, value kinds, comparability, validation.

Every part of the system (the numba engine, the brute-force oracle, the
processor's decoders) takes its definition of a valid subscription and of
"a predicate holds" from here, so that they cannot drift apart.

Semantics (Fabret et al., section 1.1, made precise for mixed types):

* A predicate ``(attribute, op, value)`` holds for an event only if the event
  carries ``attribute``, the event's value and ``value`` are *comparable* and
  the comparison holds.  A missing attribute fails every predicate, ``!=``
  included.
* Comparable means: both numbers (int or float, never bool), both strings, or
  both booleans.  Numbers compare as IEEE-754 doubles: integers beyond 2**53
  are rounded to the nearest double first.  Strings compare by code point
  (Python's ``str`` order).  Booleans order ``False < True``.
* NaN is not a valid predicate value (``ValueError``).  An event value that is
  NaN is comparable with nothing: every predicate on that attribute fails.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

#: Operator symbols; an operator's code is its index in this tuple.
OPERATORS: tuple[str, ...] = ("=", "!=", "<", "<=", ">", ">=")
OP_CODE: dict[str, int] = {op: i for i, op in enumerate(OPERATORS)}
OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE = range(6)

#: Value kinds; a kind's code is its index in this tuple.
KINDS: tuple[str, ...] = ("number", "string", "bool")
KIND_NUMBER, KIND_STRING, KIND_BOOL = range(3)

Predicate = tuple[str, str, Any]


def value_kind(value: Any) -> int:
    """Kind code of a predicate or event value; ``ValueError`` if unsupported."""
    if isinstance(value, bool):  # before int: bool is a subclass of int
        return KIND_BOOL
    if isinstance(value, (int, float)):
        return KIND_NUMBER
    if isinstance(value, str):
        return KIND_STRING
    raise ValueError(
        f"unsupported value type {type(value).__name__!s} ({value!r}); "
        "expected int, float, str or bool"
    )


def compare(op: str | int, event_value: Any, constant: Any) -> bool:
    """``event_value op constant`` under the semantics above (the reference)."""
    code = OP_CODE[op] if isinstance(op, str) else op
    ek, ck = value_kind(event_value), value_kind(constant)
    if ek != ck:
        return False
    if ek == KIND_NUMBER:
        x, c = float(event_value), float(constant)
        if math.isnan(x) or math.isnan(c):
            return False
    else:
        x, c = event_value, constant
    if code == OP_EQ:
        return x == c
    if code == OP_NE:
        return x != c
    if code == OP_LT:
        return x < c
    if code == OP_LE:
        return x <= c
    if code == OP_GT:
        return x > c
    return x >= c


def validate_subscription_id(sub_id: Any) -> int:
    """Subscription ids are signed 64-bit integers (bool rejected)."""
    if isinstance(sub_id, bool) or not isinstance(sub_id, (int,)) and not hasattr(sub_id, "__index__"):
        raise ValueError(f"subscription id must be an integer, got {sub_id!r}")
    sub_id = int(sub_id)
    if not -(2**63) <= sub_id < 2**63:
        raise ValueError(f"subscription id {sub_id} does not fit in a signed 64-bit integer")
    return sub_id


def validate_predicates(predicates: Iterable[Sequence[Any]]) -> list[Predicate]:
    """Check a subscription's predicates and return them as a list of triples.

    Raises ``ValueError`` with a message naming the offending predicate for an
    empty list, a malformed triple, an empty attribute name, an unknown
    operator, an unsupported value type or a NaN value.
    """
    if isinstance(predicates, (str, bytes)) or predicates is None:
        raise ValueError("predicates must be a list of (attribute, operator, value) triples")
    out: list[Predicate] = []
    for i, p in enumerate(predicates):
        tp = type(p)
        if tp is not tuple and tp is not list:  # (the common cases first: this runs for every single add)
            if isinstance(p, (str, bytes)) or not hasattr(p, "__len__"):
                raise ValueError(f"predicate {i}: expected (attribute, operator, value), got {p!r}")
        if len(p) != 3:
            raise ValueError(f"predicate {i}: expected (attribute, operator, value), got {p!r}")
        attribute, op, value = p
        if type(attribute) is not str and not isinstance(attribute, str) or not attribute:
            raise ValueError(f"predicate {i}: attribute must be a non-empty string, got {attribute!r}")
        if op not in OP_CODE:
            raise ValueError(
                f"predicate {i}: unknown operator {op!r}; expected one of {', '.join(OPERATORS)}"
            )
        tv = type(value)
        if tv is float:
            if value != value:
                raise ValueError(f"predicate {i}: NaN is not a valid predicate value")
        elif tv is not int and tv is not str and tv is not bool:
            kind = value_kind(value)
            if kind == KIND_NUMBER and isinstance(value, float) and math.isnan(value):
                raise ValueError(f"predicate {i}: NaN is not a valid predicate value")
        out.append((attribute, op, value))
    if not out:
        raise ValueError("a subscription needs at least one predicate")
    return out


def validate_event(event: Any) -> dict[str, Any]:
    """Check an event (a mapping attribute -> value) and return it as a dict."""
    if not isinstance(event, dict):
        raise ValueError(f"an event must be a mapping of attribute to value, got {type(event).__name__}")
    for attribute, value in event.items():
        if not isinstance(attribute, str) or not attribute:
            raise ValueError(f"event attribute names must be non-empty strings, got {attribute!r}")
        value_kind(value)
    return event
