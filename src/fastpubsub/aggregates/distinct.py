"""Range-DISTINCT (§4): Mar of an insertion/deletion of (x, y) is the largest X range holding x and
no other row with the same y.  Only the first row of a value at a position, or the last one to
leave it, produces a message ⟨sign, y, x, L, R⟩; a subscription [x1, x2] is affected iff
x ∈ [x1, x2] ⊆ (L, R), i.e. OUTER_L=L < x1 <= x and x <= x2 < R.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Hashable

from .reformulator import point_of
from .table import Row, TableChange


def distinct_point(row: Row | None, range_attr: str, value_attr: str) -> tuple[float, Any] | None:
    if row is None or value_attr not in row:
        return None
    p = point_of(row, range_attr, None)
    if p is None:
        return None
    y = row[value_attr]
    if isinstance(y, float) and math.isnan(y):
        raise ValueError(f"NaN in row {row!r} (attribute {value_attr!r})")
    if not isinstance(y, (int, float, str, bool)):
        return None
    return p[0], y


class DistinctReformulator:
    def __init__(self, range_attr: str, value_attr: str) -> None:
        self.range_attr, self.value_attr = range_attr, value_attr
        self._points: dict[Hashable, tuple[float, Any]] = {}
        self._xs: dict[Any, list[float]] = {}  # y -> sorted x positions (with repeats)

    def _mar(self, xs: list[float], x: float) -> tuple[float, float]:
        i = bisect.bisect_left(xs, x)
        j = bisect.bisect_right(xs, x)
        return (xs[i - 1] if i > 0 else -math.inf), (xs[j] if j < len(xs) else math.inf)

    def _delete(self, x: float, y: Any, out: list) -> None:
        xs = self._xs[y]
        del xs[bisect.bisect_left(xs, x)]
        if x not in xs[bisect.bisect_left(xs, x):bisect.bisect_left(xs, x) + 1]:
            lo, hi = self._mar(xs, x)
            out.append((-1, y, x, lo, hi))
        if not xs:
            del self._xs[y]

    def _insert(self, x: float, y: Any, out: list) -> None:
        xs = self._xs.setdefault(y, [])
        i = bisect.bisect_left(xs, x)
        present = i < len(xs) and xs[i] == x
        if not present:
            lo, hi = self._mar(xs, x)
            out.append((1, y, x, lo, hi))
        xs.insert(i, x)

    def apply(self, change: TableChange) -> tuple[list[tuple[int, Any, float, float, float]], bool]:
        """(messages, rejected): a delete message then an insert message at most."""
        new = distinct_point(change.new, self.range_attr, self.value_attr)
        old = self._points.pop(change.key, None)
        if new is not None:
            self._points[change.key] = new
        out: list = []
        if old != new:
            if old is not None:
                self._delete(*old, out)
            if new is not None:
                self._insert(*new, out)
        return out, change.new is not None and new is None

    def answer(self, low: float, high: float) -> frozenset:
        out = set()
        for y, xs in self._xs.items():
            i = bisect.bisect_left(xs, low)
            if i < len(xs) and xs[i] <= high:
                out.add(y)
        return frozenset(out)
