"""Range count/sum/avg (§4): no reformulation; each relevant update is one message
⟨x_old, y_old, x_new, y_new⟩ (NaN where the row is absent from the aggregate).

Subscriptions are plain range subscriptions over it: affected iff their range holds x_old or x_new
and the aggregate's value changes.
"""

from __future__ import annotations

from typing import Hashable

import numpy as np

from .reformulator import point_of
from .table import TableChange

_NONE = np.empty((0, 4))


class CountReformulator:
    """Forwards relevant updates of (range attribute, value attribute); ``value_attr`` None = count(*)."""

    def __init__(self, range_attr: str, value_attr: str | None) -> None:
        self.range_attr, self.value_attr = range_attr, value_attr
        self._points: dict[Hashable, tuple[float, float]] = {}

    def apply(self, change: TableChange) -> tuple[np.ndarray, bool]:
        """(messages (0 or 1, 4), rejected)."""
        new = point_of(change.new, self.range_attr, self.value_attr)
        old = self._points.pop(change.key, None)
        if new is not None:
            self._points[change.key] = new
        rejected = change.new is not None and new is None
        if old == new:
            return _NONE, rejected
        nan = (np.nan, np.nan)
        return np.array([[*(old or nan), *(new or nan)]]), rejected

    def answer(self, low: float, high: float) -> tuple[int, float]:
        """(count, sum) over [low, high] now: O(N), paid once per new subscription."""
        if not self._points:
            return 0, 0.0
        p = np.array(list(self._points.values()))
        sel = (p[:, 0] >= low) & (p[:, 0] <= high)
        return int(sel.sum()), float(p[sel, 1].sum())
