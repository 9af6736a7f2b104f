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

from .spec import _number


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
