"""Dense integer ids with recycling: predicate bits, clusters, access keys, handles.

Every per-object array of the engine is indexed by a dense id, so freed ids
must be reused or those arrays grow without bound under insert/delete churn
(section 2.3: "space cost is linear with the number of predicates").
"""

from __future__ import annotations

import numpy as np


class IdPool:
    """Hands out the smallest freed ids first, then fresh ones above a high-water mark."""

    def __init__(self) -> None:
        self.high = 0  # ids ever handed out are < high
        self._free = np.zeros(0, dtype=np.int64)  # sorted
        self._pending: list[np.ndarray] = []

    def __len__(self) -> int:
        """Ids currently in use."""
        return self.high - len(self._free) - sum(len(p) for p in self._pending)

    def take(self, n: int) -> np.ndarray:
        if self._pending:
            self._free = np.sort(np.concatenate([self._free, *self._pending]))
            self._pending = []
        k = min(n, len(self._free))
        reused, self._free = self._free[:k], self._free[k:]
        fresh = np.arange(self.high, self.high + n - k, dtype=np.int64)
        self.high += n - k
        return np.concatenate([reused, fresh])

    def release(self, ids: np.ndarray | list[int]) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids):
            self._pending.append(ids)


def grow(arr: np.ndarray, n: int, fill) -> np.ndarray:
    """``arr`` with at least ``n`` entries (new entries = ``fill``).

    Amortised by a quarter, not doubled: the per-subscription arrays of a load
    in chunks then end at most a quarter above its size (a chunk of a quarter or
    more is fitted exactly) instead of up to twice it, at the cost of copying
    each entry about four times over its growth instead of once.
    """
    if n <= len(arr):
        return arr
    out = np.full(max(n, len(arr) + len(arr) // 4, 64), fill, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def lookup(arr: np.ndarray, ids: np.ndarray, missing) -> np.ndarray:
    """``arr[ids]``, ``missing`` for the ids past its end (per-id arrays grow only as ids are used)."""
    ids = np.asarray(ids, dtype=np.int64)
    inside = ids < len(arr)
    out = np.full(len(ids), missing, dtype=arr.dtype)
    out[inside] = arr[ids[inside]]
    return out
