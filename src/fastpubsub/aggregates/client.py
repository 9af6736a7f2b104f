"""S-CN subscriber library (§2.3.1): keep your own answer from the public reformulated messages.

The server publishes every reformulated message and never learns who subscribes (subscriber
anonymity); a client that knows only its own range and current answer applies the stateless
predicate ``OUTER_L < x1 <= INNER_L and INNER_R <= x2 < OUTER_R`` to each message of an update.
The messages of one update are applied together so that the client sees one change per update,
as the S-UN stage does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .service import ReformulatedRecord, group_name
from .spec import AggregateSpec, JoinSpec, _number


def _value(v: float) -> float | None:
    return None if math.isinf(v) else float(v)


class RangeExtremumClient:
    """A ``min``/``max`` subscription over ``[low, high]``, kept from reformulated messages."""

    def __init__(self, low: float, high: float, initial: float | None) -> None:
        self.low, self.high = _number("range low", low), _number("range high", high)
        if self.low > self.high:
            raise ValueError(f"range low {self.low} is above range high {self.high}")
        self.value = initial

    def apply(self, messages: np.ndarray) -> tuple[Any, int] | None:
        """Apply one update's messages; return (new answer, index of the deciding message) if it changed."""
        before, last = self.value, -1
        m = np.asarray(messages, dtype=np.float64).reshape(-1, 5)
        hit = (m[:, 3] < self.low) & (self.low <= m[:, 1]) & (m[:, 2] <= self.high) & (self.high < m[:, 4])
        for i in np.flatnonzero(hit):
            self.value, last = _value(m[i, 0]), int(i)
        return None if self.value == before else (self.value, last)


class RangeCountClient:
    """A ``count``/``sum``/``avg`` subscription over ``[low, high]``, kept from update messages
    ⟨x_old, y_old, x_new, y_new⟩ (NaN where the row is absent; §4: no reformulation needed)."""

    def __init__(self, fn: str, low: float, high: float, count: int, total: float) -> None:
        if fn not in ("count", "sum", "avg"):
            raise ValueError(f"RangeCountClient serves count, sum and avg, not {fn!r}")
        self.fn, self.low, self.high = fn, _number("range low", low), _number("range high", high)
        self.count, self.total = count, total

    @property
    def value(self) -> Any:
        if self.fn == "count":
            return self.count
        if self.fn == "sum":
            return self.total
        return self.total / self.count if self.count else None

    def apply(self, message: np.ndarray) -> tuple[Any, int] | None:
        before = self.value
        xo, yo, xn, yn = (float(v) for v in message)
        if self.low <= xo <= self.high:
            self.count -= 1
            self.total -= yo
        if self.low <= xn <= self.high:
            self.count += 1
            self.total += yn
        after = self.value
        return None if after == before else (after, 0)


class RangeDistinctClient:
    """A ``distinct`` subscription: applies ⟨sign, x, L, R⟩ messages tagged with their value."""

    def __init__(self, low: float, high: float, initial: frozenset) -> None:
        self.low, self.high = _number("range low", low), _number("range high", high)
        self.value = frozenset(initial)

    def apply(self, messages: list[tuple[int, Any, float, float, float]]) -> tuple[frozenset, int] | None:
        """``messages``: (sign, y, x, L, R); a subscription is affected iff x ∈ [low, high] ⊆ (L, R)."""
        before, cur, last = self.value, set(self.value), -1
        for i, (sign, y, x, lo, hi) in enumerate(messages):
            if lo < self.low <= x <= self.high < hi:
                (cur.add if sign > 0 else cur.discard)(y)
                last = i
        self.value = frozenset(cur)
        return None if self.value == before else (self.value, last)


class Follower:
    """One subscription kept from the S-CN topic (``pubsub.reformulated``), from its initial notification on.

    ``init`` is the subscription's initial notification (a dict: ``value``, ``position`` — the next offset of
    each table partition the answer reflects — and, for count/sum/avg, ``count`` and ``sum``).  Feed
    :meth:`apply` the records of one table update at a time, in the order of the table's partition (records
    of other groups are ignored); it returns ``(new answer, notification id)`` when the answer changes, the
    same id the S-UN notification would carry.  Select-joins have no S-CN client (their messages carry pair
    keys, not the joined rows the subscription's predicates need).
    """

    def __init__(self, sid: Any, spec: AggregateSpec | JoinSpec, init: dict[str, Any]) -> None:
        if isinstance(spec, JoinSpec):
            raise ValueError("select-join subscriptions have no S-CN client: use S-UN")
        self.sid, self.spec, self.group = sid, spec, group_name(spec.group)
        self.position = dict(init.get("position") or {})
        self.fn = spec.fn
        if spec.fn in ("min", "max"):
            self.client: Any = RangeExtremumClient(spec.low, spec.high, init["value"])
        elif spec.fn == "distinct":
            self.client = RangeDistinctClient(spec.low, spec.high, frozenset(init["value"]))
        else:
            self.client = RangeCountClient(spec.fn, spec.low, spec.high, int(init["count"]), float(init["sum"]))

    @property
    def value(self) -> Any:
        return self.client.value

    def _after_start(self, update_id: str) -> bool:
        where, _, offset = update_id.rpartition(":")
        return int(offset) >= self.position.get(where, 0)

    def apply(self, records: list[ReformulatedRecord]) -> tuple[Any, str] | None:
        mine = [r for r in records if r.group == self.group]
        if not mine or not self._after_start(mine[0].update_id):
            return None
        update_id = mine[0].update_id
        if self.fn in ("count", "sum", "avg"):
            before = self.client.value
            for r in mine:
                self.client.apply(np.array(r.payload, np.float64))
            after = self.client.value
            return None if after == before else (after, f"{self.sid}/{update_id}/0")
        if self.fn == "distinct":
            change = self.client.apply([tuple(r.payload) for r in mine])
        else:
            change = self.client.apply(np.array([r.payload for r in mine], np.float64))
        return None if change is None else (change[0], f"{self.sid}/{update_id}/{mine[change[1]].index}")
