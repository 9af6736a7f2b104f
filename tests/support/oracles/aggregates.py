"""Brute-force oracle: recompute every subscription's answer from the whole table after each update.

The reference the reformulator, the stateless stage and the client are tested against.  O(rows ×
subscriptions) per update, on purpose.
"""

from __future__ import annotations

import math
from typing import Any, Hashable

import numpy as np

from fastpubsub.aggregates import AggregateSpec, JoinSpec
from fastpubsub.aggregates.join import key_kind
from fastpubsub.aggregates.table import Row
from .engine import OracleMatcher


def _number(v: Any) -> float | None:
    """A finite number, or None (rows with anything else stay out of aggregates)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isinf(v):
        return None
    return float(v)


def same_join_key(a: Any, b: Any) -> bool:
    ka = key_kind(a)
    return ka is not None and ka == key_kind(b) and a == b


def _passes(row: Row, where: tuple) -> bool:
    if not where:
        return True
    m = OracleMatcher()
    m.add(0, list(where))
    return len(m.match(row)) == 1


def in_aggregate(row: Row, spec: AggregateSpec) -> bool:
    """Whether a row takes part in the aggregate: numeric range value inside, value present, filter passes."""
    x = _number(row.get(spec.range_attr))
    if x is None or not spec.low <= x <= spec.high:
        return False
    if spec.fn in ("min", "max", "sum", "avg") and _number(row.get(spec.value)) is None:
        return False
    if spec.fn == "distinct" and spec.value not in row:
        return False
    return _passes(row, spec.where)


def brute_answer(rows: list[Row], spec: AggregateSpec) -> Any:
    """The answer of ``spec`` over ``rows`` (docs/aggregates.md: None for an empty min/max/avg)."""
    sel = [r for r in rows if in_aggregate(r, spec)]
    if spec.fn == "count":
        return len(sel)
    if spec.fn == "distinct":
        return frozenset(r[spec.value] for r in sel)
    ys = [float(r[spec.value]) for r in sel]
    if spec.fn == "sum":
        return math.fsum(ys)
    if not ys:
        return None
    return {"min": min, "max": max}[spec.fn](ys) if spec.fn != "avg" else math.fsum(ys) / len(ys)


def brute_join(left: dict[Hashable, Row], right: dict[Hashable, Row], spec: JoinSpec) -> frozenset:
    """The set of (left key, right key) pairs of the select-join."""
    (_, la), (_, ra) = spec.left, spec.right
    out = set()
    for lk, lr in left.items():
        for rk, rr in right.items():
            if not same_join_key(lr.get(spec.on[0]), rr.get(spec.on[1])):
                continue
            joined = {f"{la}.{k}": v for k, v in lr.items()} | {f"{ra}.{k}": v for k, v in rr.items()}
            if _passes(joined, spec.where):
                out.add((lk, rk))
    return frozenset(out)


class AggregateOracle:
    """Tables plus subscriptions; ``apply`` returns {sid: new answer} for the subscriptions it changed."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[Hashable, Row]] = {}
        self.subs: dict[Any, AggregateSpec | JoinSpec] = {}
        self.answers: dict[Any, Any] = {}

    def _answer(self, spec: AggregateSpec | JoinSpec) -> Any:
        if isinstance(spec, JoinSpec):
            return brute_join(self.tables.get(spec.left[0], {}), self.tables.get(spec.right[0], {}), spec)
        return brute_answer(list(self.tables.get(spec.table, {}).values()), spec)

    def subscribe(self, sid: Any, spec: AggregateSpec | JoinSpec) -> Any:
        self.subs[sid] = spec
        self.answers[sid] = self._answer(spec)
        return self.answers[sid]

    def unsubscribe(self, sid: Any) -> None:
        del self.subs[sid], self.answers[sid]

    def apply(self, table: str, key: Hashable, row: Row | None) -> dict[Any, Any]:
        t = self.tables.setdefault(table, {})
        if row is None:
            t.pop(key, None)
        else:
            t[key] = dict(row)
        changed = {}
        for sid, spec in self.subs.items():
            a = self._answer(spec)
            if a != self.answers[sid]:
                self.answers[sid] = a
                changed[sid] = a
        return changed


def matches(message: np.ndarray, x1: float, x2: float) -> bool:
    """The reformulated subscription predicate of §2.3.1: OUTER_L < x1 <= INNER_L and INNER_R <= x2 < OUTER_R."""
    return bool(message[3] < x1 <= message[1] and message[2] <= x2 < message[4])
