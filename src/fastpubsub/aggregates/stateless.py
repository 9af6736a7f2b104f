"""The stateless stage in S-UN mode (§2.1.1, §3): reformulated messages in, affected subscriptions out.

Knows subscriptions (as points of a ``PointIndex``) and their current answers, never the table.
Messages of one update are applied together and only final changes are reported, so a row
moving inside a range it keeps the minimum of notifies nobody.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .points import PointIndex


@njit(cache=True)
def apply_extremum(ids, offsets, msgs, answer, stamp, epoch, before, last, changed):
    """Set answer[id] = NEW_MIN for every id in message i's rectangle, in message order; write
    the ids whose final answer differs from the one before into ``changed``; return their count."""
    touched = 0
    for i in range(msgs.shape[0]):
        v = msgs[i, 0]
        for j in range(offsets[i], offsets[i + 1]):
            s = ids[j]
            if stamp[s] != epoch:
                stamp[s] = epoch
                before[s] = answer[s]
                changed[touched] = s
                touched += 1
            answer[s] = v
            last[s] = i
    n = 0
    for t in range(touched):
        s = changed[t]
        if answer[s] != before[s]:
            changed[n] = s
            n += 1
    return n


class _Slots:
    """Growable per-subscription arrays addressed by small integer slots."""

    def __init__(self) -> None:
        self.free: list[int] = []
        self.next = 0

    def take(self) -> int:
        return self.free.pop() if self.free else self._new()

    def _new(self) -> int:
        self.next += 1
        return self.next - 1


class ExtremumGroup:
    """min or max subscriptions of one reformulator: answers kept as NEW_MIN values (±inf = none)."""

    def __init__(self, fn: str) -> None:
        self.fn = fn
        self.empty = np.inf if fn == "min" else -np.inf
        self.index = PointIndex()
        self._slots = _Slots()
        self._grow(1024)
        self._epoch = 0

    def _grow(self, n: int) -> None:
        old = getattr(self, "answer", np.empty(0))
        k = len(old)
        self.answer = np.concatenate([old, np.full(n - k, self.empty)])
        self.stamp = np.concatenate([getattr(self, "stamp", np.empty(0, np.int64)), np.zeros(n - k, np.int64)])
        self.before = np.empty(n)
        self.last = np.zeros(n, np.int64)
        self.changed = np.empty(n, np.int64)

    def add(self, low: float, high: float, initial: float | None) -> int:
        slot = self._slots.take()
        if slot >= len(self.answer):
            self._grow(2 * len(self.answer))
        self.answer[slot] = self.empty if initial is None else initial
        self.index.add(slot, low, high)
        return slot

    def add_bulk(self, lows: np.ndarray, highs: np.ndarray, initial: np.ndarray) -> np.ndarray:
        n = len(lows)
        slots = np.arange(self._slots.next, self._slots.next + n)
        self._slots.next += n
        if self._slots.next > len(self.answer):
            self._grow(max(2 * len(self.answer), self._slots.next))
        self.answer[slots] = initial
        self.index.add_bulk(slots, lows, highs)
        return slots

    def remove(self, slot: int) -> None:
        self.index.remove(slot)
        self._slots.free.append(slot)

    def apply(self, msgs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slots changed, their new answers (±inf = none), index of the deciding message)."""
        if len(msgs) == 0:
            return np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64)
        ids, offsets = self.index.query_many(msgs)
        self._epoch += 1
        n = apply_extremum(ids, offsets, msgs, self.answer, self.stamp, self._epoch, self.before, self.last,
                           self.changed)
        ch = self.changed[:n].copy()
        return ch, self.answer[ch], self.last[ch]

    def value(self, slot: int) -> float | None:
        v = float(self.answer[slot])
        return None if np.isinf(v) else v


class CountGroup:
    """count/sum/avg subscriptions: count and sum per slot, updated by quadrant queries."""

    def __init__(self, fn: str) -> None:
        self.fn = fn
        self.index = PointIndex()
        self._slots = _Slots()
        self.count = np.zeros(1024, np.int64)
        self.total = np.zeros(1024)

    def add(self, low: float, high: float, count: int, total: float) -> int:
        slot = self._slots.take()
        if slot >= len(self.count):
            self.count = np.concatenate([self.count, np.zeros(len(self.count), np.int64)])
            self.total = np.concatenate([self.total, np.zeros(len(self.total))])
        self.count[slot], self.total[slot] = count, total
        self.index.add(slot, low, high)
        return slot

    def remove(self, slot: int) -> None:
        self.index.remove(slot)
        self._slots.free.append(slot)

    def values(self, slots: np.ndarray) -> np.ndarray:
        c, t = self.count[slots], self.total[slots]
        if self.fn == "count":
            return c.astype(np.float64)
        if self.fn == "sum":
            return t.copy()
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(c > 0, t / np.maximum(c, 1), np.nan)

    def value(self, slot: int) -> Any:
        v = self.values(np.array([slot]))[0]
        return int(v) if self.fn == "count" else (None if np.isnan(v) else float(v))

    def apply(self, msg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slots whose answer changed, new answers (NaN = none for avg))."""
        xo, yo, xn, yn = msg
        quad = np.array([[0, xo, xo, -np.inf, np.inf], [0, xn, xn, -np.inf, np.inf]])
        quad[np.isnan(quad[:, 1]), 1] = -np.inf  # an absent side selects nobody
        ids, off = self.index.query_many(quad)
        old_ids, new_ids = ids[off[0]:off[1]].copy(), ids[off[1]:off[2]].copy()
        touched = np.union1d(old_ids, new_ids)
        if len(touched) == 0:
            return touched, np.empty(0)
        before = self.values(touched)
        self.count[old_ids] -= 1
        self.total[old_ids] -= yo
        self.count[new_ids] += 1
        self.total[new_ids] += yn
        after = self.values(touched)
        diff = ~((before == after) | (np.isnan(before) & np.isnan(after)))
        return touched[diff], after[diff]


class DistinctGroup:
    """distinct subscriptions: the current set per slot, changed by ⟨sign, y, x, L, R⟩ messages."""

    def __init__(self) -> None:
        self.index = PointIndex()
        self._slots = _Slots()
        self.sets: dict[int, set] = {}

    def add(self, low: float, high: float, initial: frozenset) -> int:
        slot = self._slots.take()
        self.sets[slot] = set(initial)
        self.index.add(slot, low, high)
        return slot

    def remove(self, slot: int) -> None:
        self.index.remove(slot)
        del self.sets[slot]
        self._slots.free.append(slot)

    def value(self, slot: int) -> frozenset:
        return frozenset(self.sets[slot])

    def apply(self, msgs: list) -> list[tuple[int, frozenset, frozenset, int]]:
        """[(slot, values added, values removed, index of the last message that touched it)]."""
        if not msgs:
            return []
        rect = np.array([[0, x, x, lo, hi] for _, _, x, lo, hi in msgs], dtype=np.float64)
        ids, off = self.index.query_many(rect)
        return [(s, frozenset(a), frozenset(r), i) for s, a, r, i in
                net_changes(ids, off, [m[0] for m in msgs], [m[1] for m in msgs], self.sets)]


def net_changes(ids: np.ndarray, offsets: np.ndarray, signs: list[int], values: list, sets: dict) -> list:
    """Apply ±value messages to per-subscription sets, netting them per (subscription, value) so
    that a value removed and added back by one update changes nothing.  Vectorised over the
    matched ids; only the net changes (the output) are visited one by one.
    Returns [(slot, added values, removed values, last message index)]."""
    if len(ids) == 0:
        return []
    k = len(signs)
    msg_of = np.repeat(np.arange(k), np.diff(offsets[:k + 1]))
    codes: dict = {}
    vcode = np.array([codes.setdefault(v, len(codes)) for v in values], dtype=np.int64)
    nv = len(codes)
    pair = ids.astype(np.int64) * nv + vcode[msg_of]
    uniq, inv = np.unique(pair, return_inverse=True)
    net = np.bincount(inv, weights=np.asarray(signs, dtype=np.float64)[msg_of], minlength=len(uniq))
    last = np.zeros(len(uniq), dtype=np.int64)
    np.maximum.at(last, inv, msg_of)
    keep = np.flatnonzero(net != 0)
    if len(keep) == 0:
        return []
    decoded = list(codes)
    out: dict[int, list] = {}
    for p, d, i in zip(uniq[keep].tolist(), net[keep].tolist(), last[keep].tolist()):
        s, v = divmod(p, nv)
        entry = out.setdefault(s, [set(), set(), i])
        value = decoded[v]
        if d > 0:
            sets[s].add(value)
            entry[0].add(value)
        else:
            sets[s].discard(value)
            entry[1].add(value)
        entry[2] = max(entry[2], i)
    return [(s, a, r, i) for s, (a, r, i) in out.items()]
