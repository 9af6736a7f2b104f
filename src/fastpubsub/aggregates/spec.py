"""Aggregate and select-join subscription definitions (the JSON form of docs/aggregates.md).

Validation here raises ``ValueError`` naming the offending piece, so that a bad subscription is
refused at ``pubsub subscribe`` and dead-lettered with that reason by the processor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fastpubsub.engine import OPERATORS, Predicate, validate_predicates

FUNCTIONS = ("min", "max", "count", "sum", "avg", "distinct")


def _number(what: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{what} must be a number, not {v!r}")
    v = float(v)
    if math.isnan(v):
        raise ValueError(f"{what} is NaN")
    return v


@dataclass(frozen=True)
class AggregateSpec:
    """``fn(value) over table where range_attr between low and high [and where...]``."""

    table: str
    fn: str
    value: str | None
    range_attr: str
    low: float
    high: float
    where: tuple[Predicate, ...] = ()

    def __post_init__(self) -> None:
        if not self.table:
            raise ValueError("aggregate subscription: empty table name")
        if self.fn not in FUNCTIONS:
            raise ValueError(f"unknown aggregate function {self.fn!r}; expected one of {', '.join(FUNCTIONS)}")
        if self.fn == "count":
            if self.value not in (None, "*"):
                raise ValueError(f"count takes '*', not {self.value!r}")
            object.__setattr__(self, "value", None)
        elif not self.value or self.value == "*":
            raise ValueError(f"{self.fn} needs an attribute, not {self.value!r}")
        if not self.range_attr:
            raise ValueError("aggregate subscription: empty range attribute")
        low, high = _number("range low", self.low), _number("range high", self.high)
        if low > high:
            raise ValueError(f"range low {low} is above range high {high}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        where = tuple(tuple(p) for p in self.where)
        if where:
            validate_predicates(list(where), operators=OPERATORS)
        object.__setattr__(self, "where", where)

    @property
    def group(self) -> tuple:
        """Subscriptions sharing this key share one reformulator: same table, attributes, row filter."""
        return (self.table, self.fn, self.value, self.range_attr, tuple(sorted(self.where, key=repr)))

    def to_json(self) -> dict:
        return {"kind": "aggregate", "table": self.table, "fn": self.fn, "value": self.value or "*",
                "range": {"attribute": self.range_attr, "low": self.low, "high": self.high},
                "where": [list(p) for p in self.where]}

    @staticmethod
    def from_json(d: dict) -> "AggregateSpec":
        if d.get("kind") != "aggregate":
            raise ValueError(f"not an aggregate subscription: kind={d.get('kind')!r}")
        try:
            r = d["range"]
            return AggregateSpec(d["table"], d["fn"], d.get("value"), r["attribute"], r["low"], r["high"],
                                 tuple(tuple(p) for p in d.get("where") or ()))
        except KeyError as e:
            raise ValueError(f"aggregate subscription lacks field {e.args[0]!r}") from None


@dataclass(frozen=True)
class JoinSpec:
    """``join R a, S b on a.k = b.k where ...`` (§4 select-join); predicates name ``alias.attribute``."""

    left: tuple[str, str]  # (table, alias)
    right: tuple[str, str]
    on: tuple[str, str]  # (left attribute, right attribute), without aliases
    where: tuple[Predicate, ...] = field(default=())

    def __post_init__(self) -> None:
        (lt, la), (rt, ra) = self.left, self.right
        if not lt or not rt or not la or not ra:
            raise ValueError(f"join needs two named tables with aliases, got {self.left!r}, {self.right!r}")
        if la == ra:
            raise ValueError(f"join aliases must differ (both {la!r})")
        if lt == rt:
            raise ValueError(f"self-joins are not supported (table {lt!r} twice)")
        where = tuple(tuple(p) for p in self.where)
        if where:
            validate_predicates(list(where), operators=OPERATORS)
        for attr, _, _ in where:
            alias = attr.split(".", 1)[0]
            if "." not in attr or alias not in (la, ra):
                raise ValueError(f"join predicate attribute {attr!r} must be prefixed by {la!r}. or {ra!r}.")
        object.__setattr__(self, "where", where)

    @property
    def group(self) -> tuple:
        return ("join", self.left, self.right, self.on)

    def to_json(self) -> dict:
        (lt, la), (rt, ra) = self.left, self.right
        return {"kind": "join", "tables": [[lt, la], [rt, ra]],
                "on": [[f"{la}.{self.on[0]}", f"{ra}.{self.on[1]}"]], "where": [list(p) for p in self.where]}

    @staticmethod
    def from_json(d: dict) -> "JoinSpec":
        if d.get("kind") != "join":
            raise ValueError(f"not a join subscription: kind={d.get('kind')!r}")
        try:
            (lt, la), (rt, ra) = d["tables"]
            (a, b), = d["on"]
        except (KeyError, ValueError, TypeError):
            raise ValueError(f"join subscription needs two [table, alias] pairs and one [a, b] 'on' pair: {d!r}") from None
        pa, _, fa = a.partition(".")
        pb, _, fb = b.partition(".")
        if pa == ra and pb == la:
            pa, fa, pb, fb = pb, fb, pa, fa
        if pa != la or pb != ra:
            raise ValueError(f"join 'on' must compare {la}.x with {ra}.y, got {a!r} = {b!r}")
        return JoinSpec((lt, la), (rt, ra), (fa, fb), tuple(tuple(p) for p in d.get("where") or ()))


def spec_from_json(d: dict) -> AggregateSpec | JoinSpec:
    kind = d.get("kind") if isinstance(d, dict) else None
    if kind == "aggregate":
        return AggregateSpec.from_json(d)
    if kind == "join":
        return JoinSpec.from_json(d)
    raise ValueError(f"unknown stateful subscription kind {kind!r}; expected 'aggregate' or 'join'")
