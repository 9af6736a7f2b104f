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
* An event may carry an attribute several times (an array of a nested event,
  wire/paths.py; a list of values in a dict event): a predicate on it holds
  when any of its values satisfies it (AWS Event Ruler's rule), ``!=`` and
  ``exists`` included.  ``between`` and a ``not in`` of several values are
  conjunctions of comparisons, each satisfied by any value (:func:`holds`).
* NaN is not a valid predicate value (``ValueError``).  An event value that is
  NaN is comparable with nothing: every predicate on that attribute fails.

Beyond the six comparisons (``OPERATORS``, the engine's kernel operators),
``EXTENDED_OPERATORS`` (same rule: a missing attribute or a NaN value fails
every one of them, the negative ones included):

================= ===================== =============================================
``in``            list of values        equals one of them
``not in``        list of values        is comparable with them and equals none
``between``       ``[lo, hi]``          ``lo <= v <= hi``
``not between``   ``[lo, hi]``          is comparable and ``v < lo`` or ``v > hi``
``prefix``        non-empty string      is a string starting with it
``suffix``        non-empty string      is a string ending with it
``contains``      non-empty string      is a string containing it
``exists``        ``None``              is present (any kind; NaN counts as absent)
``not exists``    ``None``              is absent (the one operator a missing attribute satisfies)
``equals ignore   string                is a string equal to it once both are case-folded
case``                                  (``str.casefold``)
``prefix ignore   non-empty string      is a string whose case-folded form starts with the
case``                                  case-folded constant
``suffix ignore   non-empty string      the same, ending with it
case``
``wildcard``      string pattern        is a string the pattern matches whole: ``*`` stands for
                                        any characters (none included), ``\\*`` for a star,
                                        ``\\\\`` for a backslash
``cidr``          ``"net/len"``         is a string holding an IPv4 or IPv6 address inside that
                                        network (``ipaddress``; same family only)
``not prefix``    non-empty string      is a string not starting with it
``not suffix``    non-empty string      is a string not ending with it
``not wildcard``  string pattern        is a string the pattern does not match
``not equals      string                is a string not equal to it once both are case-folded
ignore case``
``range``         ``[">", lo, "<=", hi]`` is a number above (``>``) or from (``>=``) ``lo`` and
                                        below (``<``) or up to (``<=``) ``hi``: unlike
                                        ``between``, on several values one value must meet both
================= ===================== =============================================

These are Event Ruler's operators (its ``anything-but`` is ``not in`` and the
``not`` forms); on an attribute with several values each holds when one value
satisfies it, except ``not exists``, which holds when there is none.

A list is non-empty, of one kind (``True`` never equals ``1``) and at most
``MAX_LIST`` long; ``between``'s ``lo <= hi``.

A subscription is a conjunction (a list of predicates), a disjunction of
conjunctions (:class:`AnyOf`, DNF) or a conjunction of disjunctions
(:class:`AllOf`, CNF); it is notified at most once per event.  The engine
evaluates every subscription as a set of conjunctions of comparisons
(engine/frontend/lowering.py); :func:`conjunction_count` is their number, at most
``MAX_CONJUNCTIONS`` (``ValueError`` beyond), so that what validates here
always fits the engine.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import re
from typing import Any, Iterable, Sequence

#: Operator symbols; an operator's code is its index in this tuple.
OPERATORS: tuple[str, ...] = ("=", "!=", "<", "<=", ">", ">=")
OP_CODE: dict[str, int] = {op: i for i, op in enumerate(OPERATORS)}
OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE = range(6)

#: Value kinds; a kind's code is its index in this tuple.
KINDS: tuple[str, ...] = ("number", "string", "bool")
KIND_NUMBER, KIND_STRING, KIND_BOOL = range(3)

Predicate = tuple[str, str, Any]

#: Operators beyond the comparisons (module docstring); the engine lowers them onto ``OPERATORS``.
EXTENDED_OPERATORS: tuple[str, ...] = (
    "in", "not in", "between", "not between", "prefix", "suffix", "contains", "exists",
    "not exists", "equals ignore case", "prefix ignore case", "suffix ignore case", "wildcard", "cidr",
    "not prefix", "not suffix", "not wildcard", "not equals ignore case", "range")
ALL_OPERATORS: tuple[str, ...] = OPERATORS + EXTENDED_OPERATORS
_LIST_OPS = frozenset(("in", "not in"))
_RANGE_OPS = frozenset(("between", "not between"))
_STRING_OPS = frozenset(("prefix", "suffix", "contains", "prefix ignore case", "suffix ignore case",
                         "not prefix", "not suffix"))
#: Operators whose value may be any string, the empty one included.
_ANY_STRING_OPS = frozenset(("equals ignore case", "not equals ignore case", "wildcard", "not wildcard"))
_NO_VALUE_OPS = frozenset(("exists", "not exists"))
#: Most values of an ``in`` / ``not in`` list.
MAX_LIST = 10_000
#: Most conjunctions of comparisons a subscription may stand for (see :func:`conjunction_count`).
MAX_CONJUNCTIONS = 10_000
#: Attribute names starting with this character are reserved for the engine's derived attributes.
RESERVED_PREFIX = "\x00"


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


def validate_predicates(predicates: Iterable[Sequence[Any]], *, operators: Sequence[str] = ALL_OPERATORS
                        ) -> list[Predicate]:
    """Check a conjunction's predicates and return them as a list of triples.

    Raises ``ValueError`` with a message naming the offending predicate for an
    empty list, a malformed triple, an empty or reserved attribute name, an
    operator not in ``operators``, an unsupported value type, a NaN value, or
    a value the operator does not take (module docstring).  List values come
    back as lists.
    """
    if isinstance(predicates, (str, bytes)) or predicates is None or isinstance(predicates, (AnyOf, AllOf)):
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
        if attribute[0] == RESERVED_PREFIX:
            raise ValueError(f"predicate {i}: attribute names starting with NUL are reserved, got {attribute!r}")
        if not (isinstance(op, str) and op in OP_CODE):  # (an unhashable operator is a ValueError too)
            if type(op) is not str or op not in operators:
                raise ValueError(
                    f"predicate {i}: unknown operator {op!r}; expected one of {', '.join(operators)}"
                )
            value = _extended_value(i, attribute, op, value)
            out.append((attribute, op, value))
            continue
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


def _scalar(i: int, what: str, value: Any) -> int:
    try:
        kind = value_kind(value)
    except ValueError as exc:
        raise ValueError(f"predicate {i}: {what}: {exc}") from None
    if kind == KIND_NUMBER:
        try:
            if math.isnan(float(value)):
                raise ValueError(f"predicate {i}: {what}: NaN is not a valid predicate value")
        except OverflowError:
            raise ValueError(f"predicate {i}: {what}: integer too large for a double") from None
    return kind


def _extended_value(i: int, attribute: str, op: str, value: Any) -> Any:
    """The checked value of an extended operator (lists as lists); ``ValueError`` naming the predicate."""
    name = f"({attribute!r}, {op!r}, ...)"
    if op in _LIST_OPS or op in _RANGE_OPS:
        if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple)):
            want = "a list of values" if op in _LIST_OPS else "[lo, hi]"
            raise ValueError(f"predicate {i} {name}: expected {want}, got {value!r}"[:300])
        values = list(value)
        if op in _LIST_OPS and not values:
            raise ValueError(f"predicate {i} {name}: the list of values is empty")
        if op in _LIST_OPS and len(values) > MAX_LIST:
            raise ValueError(f"predicate {i} {name}: {len(values)} values, at most {MAX_LIST}")
        if op in _RANGE_OPS and len(values) != 2:
            raise ValueError(f"predicate {i} {name}: expected two values [lo, hi], got {len(values)}")
        kinds = {_scalar(i, name, v) for v in values}
        if len(kinds) > 1:
            raise ValueError(f"predicate {i} {name}: values of more than one kind "
                             f"({', '.join(KINDS[k] for k in sorted(kinds))})")
        if op in _RANGE_OPS:
            lo, hi = values
            if not float(lo) <= float(hi) if KIND_STRING not in kinds else not lo <= hi:
                raise ValueError(f"predicate {i} {name}: lo {lo!r} is above hi {hi!r}"[:300])
        return values
    if op in _STRING_OPS:
        if type(value) is not str and not isinstance(value, str) or not value:
            raise ValueError(f"predicate {i} {name}: expected a non-empty string, got {value!r}"[:300])
        return str(value)
    if op in _ANY_STRING_OPS:
        if not isinstance(value, str):
            raise ValueError(f"predicate {i} {name}: expected a string, got {value!r}"[:300])
        if "wildcard" in op:
            try:
                wildcard_parts(value)
            except ValueError as exc:
                raise ValueError(f"predicate {i} {name}: {exc}") from None
        return str(value)
    if op == "range":
        ok = isinstance(value, (list, tuple)) and len(value) == 4 and value[0] in (">", ">=") \
            and value[2] in ("<", "<=") and all(type(x) in (int, float) for x in value[1::2])
        if not ok:
            raise ValueError(f"predicate {i} {name}: expected [\">\" or \">=\", lo, \"<\" or \"<=\", hi], "
                             f"got {value!r}"[:300])
        for x in value[1::2]:
            _scalar(i, name, x)  # NaN, too large
        lo, hi = value[1], value[3]
        if float(lo) > float(hi):
            raise ValueError(f"predicate {i} {name}: lo {lo!r} is above hi {hi!r}"[:300])
        return list(value)
    if op == "cidr":
        if not isinstance(value, str):
            raise ValueError(f"predicate {i} {name}: expected a network such as \"10.0.0.0/24\", got {value!r}"[:300])
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError as exc:
            raise ValueError(f"predicate {i} {name}: {exc}"[:300]) from None
        return str(value)
    if value is not None:  # exists, not exists
        raise ValueError(f"predicate {i} {name}: {op!r} takes no value (None), got {value!r}"[:300])
    return None


def wildcard_parts(pattern: str) -> list[str]:
    """The literal fragments between the stars of a wildcard pattern (``ValueError`` for a bad escape).

    ``"a*b\\*c"`` -> ``["a", "b*c"]``: a backslash takes the star or backslash after it literally.
    """
    parts, cur, i = [], [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1] not in "*\\":
                raise ValueError(f"wildcard {pattern!r}: a backslash escapes only '*' or a backslash")
            cur.append(pattern[i + 1])
            i += 2
            continue
        if c == "*":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


@functools.lru_cache(maxsize=4096)
def wildcard_regex(pattern: str) -> "re.Pattern[str]":
    """The compiled regular expression a valid wildcard pattern stands for (match it with ``fullmatch``)."""
    return re.compile(".*".join(map(re.escape, wildcard_parts(pattern))), re.DOTALL)


@functools.lru_cache(maxsize=1 << 16)  # an event's address is sliced once per distinct network length
def ip_bits(value: Any) -> str | None:
    """``"4"`` or ``"6"`` and the address's bits as ``0``/``1`` characters; ``None`` if ``value`` is no address."""
    if type(value) is not str or not 2 <= len(value) <= 45:
        return None
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    width = 32 if address.version == 4 else 128
    return str(address.version) + format(int(address), f"0{width}b")


def cidr_bits(network: str) -> str:
    """A valid cidr constant as the leading characters of :func:`ip_bits` of every address inside it."""
    net = ipaddress.ip_network(network, strict=False)
    width = 32 if net.version == 4 else 128
    return str(net.version) + format(int(net.network_address), f"0{width}b")[:net.prefixlen]


class AnyOf:
    """A subscription in disjunctive normal form: holds when any of its conjunctions holds.

    ``AnyOf([[("a", "=", 1), ("b", "<", 2)], [("c", "in", [3, 4])]])``.
    """

    __slots__ = ("disjuncts",)

    def __init__(self, disjuncts: Iterable[Iterable[Sequence[Any]]]) -> None:
        if isinstance(disjuncts, (str, bytes)):
            raise ValueError("AnyOf takes a list of conjunctions (lists of predicates)")
        self.disjuncts = [list(d) if isinstance(d, (list, tuple)) else d for d in disjuncts]  # others: validation says why

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and _canon(self.disjuncts) == _canon(other.disjuncts)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(_canon(self.disjuncts))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.disjuncts!r})"


class AllOf(AnyOf):
    """A subscription in conjunctive normal form: every clause (a list of predicates, any of which holds) holds.

    Evaluated as its expansion into DNF (:func:`to_dnf`), which must stay
    within ``MAX_CONJUNCTIONS`` conjunctions.
    """

    __slots__ = ()

    @property
    def clauses(self) -> list:
        return self.disjuncts


def _canon(groups: list) -> list:
    return [[(a, op, list(v) if isinstance(v, tuple) else v) for a, op, v in g] for g in groups]


def _alternatives(p: Predicate) -> int:
    """How many conjunctions of comparisons the engine needs for one predicate (engine/frontend/lowering.py)."""
    op = p[1]
    if op == "in":
        return len(_distinct(p[2]))
    if op in ("not between", "range"):
        return 2
    if op == "exists":
        return 3
    return 1  # (not exists: one row on its derived attribute)


def _distinct(values: list) -> list:
    """Values without repeats (``0.0`` and ``-0.0``, ``1`` and ``1.0`` are one value; lists are of one kind)."""
    return list(dict.fromkeys(values))


def conjunction_count(conjunction: list[Predicate]) -> int:
    """The number of conjunctions of comparisons a validated conjunction stands for."""
    n = 1
    for p in conjunction:
        n *= _alternatives(p)
        if n > MAX_CONJUNCTIONS:
            return n
    return n


def to_dnf(clauses: list[list[Predicate]]) -> list[list[Predicate]]:
    """The DNF of a CNF (validated clauses), or ``ValueError`` if it needs more than ``MAX_CONJUNCTIONS``."""
    n = 1
    for c in clauses:
        n *= len(c)
        if n > MAX_CONJUNCTIONS:
            raise ValueError(f"the CNF expands to more than {MAX_CONJUNCTIONS} conjunctions")
    out: list[list[Predicate]] = [[]]
    for c in clauses:
        out = [d + [p] for d in out for p in c]
    return out


def validate_subscription(subscription: Any, *, operators: Sequence[str] = ALL_OPERATORS) -> "list[Predicate] | AnyOf":
    """A validated subscription: a list of predicates (a conjunction) or an :class:`AnyOf` (DNF).

    An :class:`AllOf` (CNF) comes back as its :class:`AnyOf` expansion.
    ``ValueError`` if a part is invalid or the whole stands for more than
    ``MAX_CONJUNCTIONS`` conjunctions of comparisons.
    """
    if isinstance(subscription, AnyOf):
        groups = subscription.disjuncts
        what = "clause" if isinstance(subscription, AllOf) else "disjunct"
        if not groups:
            raise ValueError(f"{type(subscription).__name__} needs at least one {what}")
        checked = []
        for j, g in enumerate(groups):
            if not isinstance(g, (list, tuple)):
                raise ValueError(f"{what} {j}: expected a list of predicates, got {g!r}"[:300])
            try:
                checked.append(validate_predicates(g, operators=operators))
            except ValueError as exc:
                raise ValueError(f"{what} {j}: {exc}") from None
        if isinstance(subscription, AllOf):
            checked = to_dnf(checked)
        total = 0
        for g in checked:
            total += conjunction_count(g)
            if total > MAX_CONJUNCTIONS:
                raise ValueError(f"the subscription stands for more than {MAX_CONJUNCTIONS} conjunctions of "
                                 "comparisons (each 'in' value, 'not between' and 'exists' multiply them)")
        return AnyOf(checked)
    preds = validate_predicates(subscription, operators=operators)
    if conjunction_count(preds) > MAX_CONJUNCTIONS:
        raise ValueError(f"the subscription stands for more than {MAX_CONJUNCTIONS} conjunctions of comparisons "
                         "(each 'in' value, 'not between' and 'exists' multiply them)")
    return preds


def holds(predicate: Predicate, event: dict[str, Any]) -> bool:
    """Whether ``predicate`` holds for ``event`` (the reference, for every operator).

    An attribute with several values (a list: an array of a nested event)
    satisfies a predicate when any of its values does; ``between`` and a
    ``not in`` of several values are conjunctions of comparisons
    (engine/frontend/lowering.py), each of which any value may satisfy.
    """
    attribute, op, constant = predicate
    if op == "not exists":
        return not holds((attribute, "exists", None), event)
    if attribute not in event:
        return False
    v = event[attribute]
    if type(v) is list:
        if op == "between":
            return (any(holds((attribute, ">=", constant[0]), {attribute: x}) for x in v)
                    and any(holds((attribute, "<=", constant[1]), {attribute: x}) for x in v))
        if op == "not in":
            return all(any(holds((attribute, "!=", c), {attribute: x}) for x in v) for c in constant)
        return any(holds(predicate, {attribute: x}) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return False
    if op in OP_CODE:
        return compare(op, v, constant)
    if op == "exists":
        return True
    if op == "range":
        return compare(constant[0], v, constant[1]) and compare(constant[2], v, constant[3])
    if op in _STRING_OPS or op in _ANY_STRING_OPS or op == "cidr":
        if not isinstance(v, str):
            return False
        if op == "prefix":
            return v.startswith(constant)
        if op == "suffix":
            return v.endswith(constant)
        if op == "contains":
            return constant in v
        if op == "not prefix":
            return not v.startswith(constant)
        if op == "not suffix":
            return not v.endswith(constant)
        if op == "prefix ignore case":
            return v.casefold().startswith(constant.casefold())
        if op == "suffix ignore case":
            return v.casefold().endswith(constant.casefold())
        if op == "equals ignore case":
            return v.casefold() == constant.casefold()
        if op == "not equals ignore case":
            return v.casefold() != constant.casefold()
        if op == "cidr":
            bits = ip_bits(v)
            return bits is not None and bits.startswith(cidr_bits(constant))
        return (wildcard_regex(constant).fullmatch(v) is not None) == (op == "wildcard")
    kind = value_kind(v)
    if kind != value_kind(constant[0]):
        return False
    if op == "in":
        return any(compare("=", v, c) for c in constant)
    if op == "not in":
        return not any(compare("=", v, c) for c in constant)
    lo, hi = constant
    inside = compare(">=", v, lo) and compare("<=", v, hi)
    return inside if op == "between" else not inside


def subscription_holds(subscription: "list[Predicate] | AnyOf", event: dict[str, Any]) -> bool:
    """Whether a validated subscription holds for ``event``."""
    if isinstance(subscription, AnyOf):
        return any(all(holds(p, event) for p in g) for g in subscription.disjuncts)
    return all(holds(p, event) for p in subscription)


def validate_event(event: Any) -> dict[str, Any]:
    """Check an event (a mapping attribute -> value, or -> list of values) and return it as a dict."""
    if not isinstance(event, dict):
        raise ValueError(f"an event must be a mapping of attribute to value, got {type(event).__name__}")
    for attribute, value in event.items():
        if not isinstance(attribute, str) or not attribute or attribute[0] == RESERVED_PREFIX:
            raise ValueError(f"event attribute names must be non-empty strings not starting with NUL, got {attribute!r}")
        if type(value) is list:  # an attribute with several values (wire/paths.py); an empty list: absent
            for x in value:
                value_kind(x)
        else:
            value_kind(value)
    return event
