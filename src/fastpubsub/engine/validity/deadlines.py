"""Validity intervals (Fabret et al., section 1): deadlines kept in event time.

A subscription may carry ``valid_from`` and ``valid_until``; it matches only
inside that interval and is dropped from the engine once it has expired (in
bulk: ``Matcher.remove_bulk``).
:class:`DeadlineQueue` holds one deadline per id and hands back, in bulk, the
ids whose deadline has passed, so that at equilibrium expiry costs one heap
pop per subscription and no scan.  Time is whatever the caller says it is:
the processor passes record timestamps (event time), so replays are
deterministic.
"""

from __future__ import annotations

import heapq
from typing import Iterable

import numpy as np


class DeadlineQueue:
    """``id -> deadline`` with bulk ``pop_due(now)``; replacing or discarding is O(log n).

    Superseded heap entries are skipped lazily; the heap is rebuilt when stale
    entries outnumber live ones, so memory stays proportional to live ids.
    """

    def __init__(self) -> None:
        self._deadline: dict[int, int] = {}
        self._heap: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._deadline)

    def __contains__(self, key: object) -> bool:
        return key in self._deadline

    def get(self, key: int) -> int | None:
        return self._deadline.get(key)

    def set(self, key: int, deadline: int | None) -> None:
        """Schedule ``key`` at ``deadline``; ``None`` removes any schedule."""
        if deadline is None:
            self.discard(key)
            return
        self._deadline[key] = int(deadline)
        heapq.heappush(self._heap, (int(deadline), key))
        self._maybe_rebuild()

    def set_many(self, keys: Iterable[int], deadlines: Iterable[int]) -> None:
        """Bulk schedule (loading millions at start-up): one heapify, not n pushes."""
        for k, d in zip(keys, deadlines):
            self._deadline[int(k)] = int(d)
        self._heap.extend((d, k) for k, d in self._deadline.items())
        heapq.heapify(self._heap)
        self._maybe_rebuild()

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, deadlines) of every scheduled id, ascending by id."""
        keys = np.fromiter(self._deadline, dtype=np.int64, count=len(self._deadline))
        values = np.fromiter(self._deadline.values(), dtype=np.int64, count=len(self._deadline))
        order = np.argsort(keys)
        return keys[order], values[order]

    def discard(self, key: int) -> None:
        self._deadline.pop(key, None)
        self._maybe_rebuild()

    def next_deadline(self) -> int | None:
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> np.ndarray:
        """Ids whose deadline is ``<= now`` (removed from the queue), ascending by deadline."""
        out: list[int] = []
        heap, live = self._heap, self._deadline
        while heap and heap[0][0] <= now:
            d, k = heapq.heappop(heap)
            if live.get(k) == d:
                del live[k]
                out.append(k)
        return np.array(out, dtype=np.int64)

    def _drop_stale_top(self) -> None:
        heap, live = self._heap, self._deadline
        while heap and live.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)

    def _maybe_rebuild(self) -> None:
        if len(self._heap) > 2 * len(self._deadline) + 1024:
            self._heap = [(d, k) for k, d in self._deadline.items()]
            heapq.heapify(self._heap)
