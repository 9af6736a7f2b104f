"""Range-min/max reformulation (§2.3.1): table updates in, 0..k stateless messages out.

Each message is ⟨NEW_MIN, INNER_L, INNER_R, OUTER_L, OUTER_R⟩; a subscription ``[x1, x2]``
matches it iff ``OUTER_L < x1 <= INNER_L and INNER_R <= x2 < OUTER_R`` and then takes NEW_MIN as
its answer (+inf: no row in range).  Nothing here knows any subscription: the cost is
O(k log N) per update whatever their number (§3).  ``max`` stores negated values and flips the
sign of NEW_MIN on the way out.  Tie and empty-rectangle rules: docs/aggregates.md.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np

from . import segtree
from .table import Row, TableChange

IGNORABLE, GOOD, BAD = 0, 1, 2
KIND_NAMES = ("ignorable", "good", "bad")
#: Columns of a message array.
NEW_MIN, INNER_L, INNER_R, OUTER_L, OUTER_R = range(5)
_EMPTY = np.empty((0, 5))


@dataclass(frozen=True)
class Reformulation:
    """The messages of one update, with Corollary 1's class (a move takes the worse of its two steps)."""

    kind: int
    messages: np.ndarray  # (k, 5) float64
    rejected: bool = False  # the new row lacks a numeric range or value attribute


def point_of(row: Row | None, range_attr: str, value_attr: str | None) -> tuple[float, float] | None:
    """(x, y) of a row, or None if it lacks a finite numeric range (or value) attribute (±inf
    would collide with the open ends of a Mar); NaN is an error."""
    if row is None:
        return None
    x = row.get(range_attr)
    y = row.get(value_attr) if value_attr is not None else 0.0
    if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
        return None
    x, y = float(x), float(y)
    if math.isnan(x) or math.isnan(y):
        raise ValueError(f"NaN in row {row!r} (attribute {range_attr!r} or {value_attr!r})")
    if math.isinf(x) or math.isinf(y):
        return None
    return x, y


class ExtremumReformulator:
    """Mar/Hull/EMar reformulator for ``min``/``max(value_attr)`` over ranges of ``range_attr``."""

    def __init__(self, range_attr: str, value_attr: str, fn: str = "min", capacity: int = 1024) -> None:
        if fn not in ("min", "max"):
            raise ValueError(f"extremum function must be 'min' or 'max', not {fn!r}")
        self.range_attr, self.value_attr, self.fn = range_attr, value_attr, fn
        self._sign = 1.0 if fn == "min" else -1.0
        self._points: dict[Hashable, tuple[float, float]] = {}  # key -> (x, signed y)
        self._cols: dict[float, list[float]] = {}  # x -> sorted signed ys
        self._slot: dict[float, int] = {}
        self._alloc(max(16, capacity))
        self.counts = np.zeros(3, dtype=np.int64)
        self._step_kind = IGNORABLE

    # -- storage ------------------------------------------------------------------------------
    # Columns live in slots of a gapped sorted array (a packed memory array): ``xs`` is
    # non-decreasing over all slots, free slots hold +inf leaves, and a new range value moves
    # the few columns between its place and the nearest free slot.  When no free slot is near,
    # the columns are re-spread evenly at half density (O(N), amortised over Θ(N) inserts).
    WINDOW = 64

    def _alloc(self, cap: int) -> None:
        cap = 1 << max(4, (cap - 1).bit_length())
        self._cap = cap
        self._tree = np.full(2 * cap, np.inf)
        self._xs = np.full(cap, np.inf)
        self._free = np.ones(cap, dtype=np.bool_)
        self._out = np.empty((2 * cap + 2, 5))
        self._scratch = np.empty((4, cap))

    def _respread(self, extra: int = 0) -> None:
        """Lay the live columns out evenly over at least twice their number of slots: O(N)."""
        xs = sorted(self._cols)
        n = len(xs)
        if 2 * (n + extra) > self._cap or self._cap > 8 * max(n + extra, 16):
            self._alloc(2 * (n + extra) + 16)
        cap = self._cap
        pos = (np.arange(n, dtype=np.int64) * cap) // max(n, 1)
        self._free[:] = True
        self._free[pos] = False
        self._tree[:] = np.inf
        self._tree[cap + pos] = [self._cols[x][0] for x in xs]
        segtree.build(self._tree, cap)
        # free slots repeat the previous live value (-inf before the first): xs stays sorted
        fill = np.full(cap, -np.inf)
        fill[pos] = xs
        self._xs[:] = np.maximum.accumulate(fill)
        self._slot = {x: int(p) for x, p in zip(xs, pos.tolist())}

    def _place(self, x: float) -> int:
        """A slot for the new column ``x``, keeping ``xs`` sorted."""
        for _ in range(2):
            xs, free = self._xs, self._free
            p = int(np.searchsorted(xs, x, "left"))  # xs[p-1] < x <= xs[p]
            if p < self._cap and free[p]:
                hole = gap = p
            elif p > 0 and free[p - 1]:
                hole = gap = p - 1
            else:
                right = np.flatnonzero(free[p:p + self.WINDOW])
                left = np.flatnonzero(free[max(0, p - 1 - self.WINDOW):max(0, p - 1)])
                gr = p + int(right[0]) if len(right) else None
                gl = max(0, p - 1 - self.WINDOW) + int(left[-1]) if len(left) else None
                if gr is None and gl is None:
                    self._respread(extra=1)
                    continue
                if gl is None or (gr is not None and gr - p <= p - 1 - gl):
                    hole, gap = p, gr
                else:
                    hole, gap = p - 1, gl
            segtree.open_slot(self._tree, self._cap, self._xs, self._free, hole, gap, x)
            lo, hi = min(hole, gap), max(hole, gap)
            for j in range(lo, hi + 1):  # moved live columns get their new slots
                if j != hole and not self._free[j]:
                    self._slot[float(self._xs[j])] = j
            self._slot[x] = hole
            return hole
        raise AssertionError("no free slot after a re-spread")

    def load(self, rows: list[tuple[Hashable, Row]]) -> None:
        """Bulk-load an initial table (no messages)."""
        for key, row in rows:
            p = point_of(row, self.range_attr, self.value_attr)
            if p is None:
                continue
            x, y = p[0], self._sign * p[1]
            self._points[key] = (x, y)
            bisect.insort(self._cols.setdefault(x, []), y)
        self._respread()

    # -- updates ------------------------------------------------------------------------------
    def _column_change(self, x: float, remove: float | None, add: float | None) -> int:
        """Apply one column's change and write its messages into ``self._out`` from row 0."""
        ys = self._cols.get(x)
        if ys is None:
            slot = self._place(x)
            ys = self._cols[x] = []
        else:
            slot = self._slot[x]
        c_old = ys[0] if ys else np.inf
        if remove is not None:
            del ys[bisect.bisect_left(ys, remove)]
        if add is not None:
            bisect.insort(ys, add)
        c_new = ys[0] if ys else np.inf
        if not ys:  # the column is gone: its slot becomes free (xs keeps its value, still sorted)
            del self._cols[x], self._slot[x]
            self._free[slot] = True
        if c_new == c_old:
            return 0
        segtree.set_leaf(self._tree, self._cap, slot, c_new)
        k = segtree.reformulate(self._tree, self._cap, self._xs, slot, c_old, c_new, self._out, self._scratch)
        # Corollary 1: good iff the update's own content tells every affected subscription its new
        # answer: one message whose NEW_MIN is the row's new value (+inf for a delete)
        own = add if add is not None else np.inf
        self._step_kind = max(self._step_kind, GOOD if k == 1 and self._out[0, 0] == own else BAD)
        return k

    def apply(self, change: TableChange) -> Reformulation:
        """Reformulate one row change (insert, update, delete, or a move = delete + insert)."""
        new = point_of(change.new, self.range_attr, self.value_attr)
        rejected = change.new is not None and new is None
        old = self._points.pop(change.key, None)
        if new is not None:
            new = (new[0], self._sign * new[1])
            self._points[change.key] = new
        if old is None and new is None:
            self.counts[IGNORABLE] += 1
            return Reformulation(IGNORABLE, _EMPTY, rejected)
        self._step_kind = IGNORABLE
        if old is not None and new is not None and old[0] == new[0]:
            k = self._column_change(new[0], old[1], new[1])
            msgs = self._out[:k].copy()
        else:
            parts = []
            if old is not None:
                k = self._column_change(old[0], old[1], None)
                parts.append(self._out[:k].copy())
            if new is not None:
                k = self._column_change(new[0], None, new[1])
                parts.append(self._out[:k].copy())
            msgs = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if self._sign < 0 and len(msgs):
            msgs[:, NEW_MIN] = -msgs[:, NEW_MIN]
        kind = self._step_kind
        self.counts[kind] += 1
        return Reformulation(kind, msgs, rejected)

    # -- queries ------------------------------------------------------------------------------
    def answer(self, low: float, high: float) -> float | None:
        """The current answer over ``[low, high]`` (the value owed at subscription time): O(log N)."""
        xs = self._xs
        lo = int(np.searchsorted(xs, low, "left"))
        hi = int(np.searchsorted(xs, high, "right"))
        m = segtree.range_min(self._tree, self._cap, lo, hi)
        return None if m == np.inf else self._sign * m

    def answers(self, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
        """Answers for many ranges at once, as NEW_MIN values (+inf, or -inf for max: no row)."""
        xs = self._xs
        lo = np.searchsorted(xs, lows, "left").astype(np.int64)
        hi = np.searchsorted(xs, highs, "right").astype(np.int64)
        out = np.empty(len(lows))
        segtree.range_min_many(self._tree, self._cap, lo, hi, out)
        return self._sign * out

    def __len__(self) -> int:
        return len(self._points)

    def points(self) -> dict[Hashable, tuple[float, float]]:
        """key -> (x, y) of the indexed rows (y unsigned)."""
        return {k: (x, self._sign * y) for k, (x, y) in self._points.items()}
