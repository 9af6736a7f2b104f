"""Two-dimensional index of range subscriptions as points (x1, x2), queried by rectangles (§3, S-UN).

A reformulated message selects the subscriptions with ``OUTER_L < x1 <= INNER_L`` and
``INNER_R <= x2 < OUTER_R``: a rectangle in the plane of Figure 2.  Range subscriptions are
pure inequalities, so the Fabret clusters cannot key on them; the paper suggests a kd-tree.
Here: the points sorted by x1 and cut into blocks of ``BLOCK``; inside a block they are sorted
by x2.  A query binary-searches the blocks of its x1 interval; a block lying wholly inside the
interval yields one contiguous x2 run (two binary searches), the two edge blocks are scanned.
Cost O((blocks in the x1 slice) · log BLOCK + answers).  Inserts go to a small unsorted buffer
scanned by every query and deletes clear an ``alive`` flag; the structure is rebuilt when the
buffer or the dead entries grow past a bound.
"""

from __future__ import annotations

from typing import Hashable

import numpy as np
from numba import njit

BLOCK = 128


@njit(cache=True)
def query_rect(bstart, bmin, bmax, ex1, ex2, eid, alive, bx1, bx2, bid, nbuf, ol, il, ir, orr, out, n0):
    """Append to ``out`` from ``n0`` the ids of points with ol < x1 <= il and ir <= x2 < orr;
    returns the new length, or -1 if ``out`` is too small."""
    n = n0
    cap = out.shape[0]
    if ol < il and ir < orr:
        b = np.searchsorted(bmax, ol, side="right")  # the first block whose largest x1 is > ol
        nb = bmin.shape[0]
        while b < nb and bmin[b] <= il:
            s, e = bstart[b], bstart[b + 1]
            if bmin[b] > ol and bmax[b] <= il:
                i = s + np.searchsorted(ex2[s:e], ir)  # the block's first point with x2 >= ir
                while i < e and ex2[i] < orr:
                    if alive[i]:
                        if n >= cap:
                            return -1
                        out[n] = eid[i]
                        n += 1
                    i += 1
            else:
                for i in range(s, e):
                    if alive[i] and ol < ex1[i] <= il and ir <= ex2[i] < orr:
                        if n >= cap:
                            return -1
                        out[n] = eid[i]
                        n += 1
            b += 1
        for i in range(nbuf):
            if ol < bx1[i] <= il and ir <= bx2[i] < orr:
                if n >= cap:
                    return -1
                out[n] = bid[i]
                n += 1
    return n


@njit(cache=True)
def query_many(bstart, bmin, bmax, ex1, ex2, eid, alive, bx1, bx2, bid, nbuf, msgs, out, offsets):
    """All rectangles of ``msgs`` (k, 5: _, INNER_L, INNER_R, OUTER_L, OUTER_R) at once:
    ids of message i are ``out[offsets[i]:offsets[i+1]]``.  Returns total or -1 if out is too small."""
    n = 0
    offsets[0] = 0
    for k in range(msgs.shape[0]):
        n = query_rect(bstart, bmin, bmax, ex1, ex2, eid, alive, bx1, bx2, bid, nbuf,
                       msgs[k, 3], msgs[k, 1], msgs[k, 2], msgs[k, 4], out, n)
        if n < 0:
            return -1
        offsets[k + 1] = n
    return n


class PointIndex:
    """Subscriptions ``[x1, x2]`` under small non-negative integer ids (slots), with rectangle
    queries; inserts and deletes.  Per-id state lives in numpy arrays indexed by id."""

    def __init__(self, block: int = BLOCK, max_buffer: int = 2048) -> None:
        self.block, self.max_buffer = block, max_buffer
        self._x1 = np.empty(0)
        self._x2 = np.empty(0)
        self._has = np.zeros(0, dtype=np.bool_)
        self._pos = np.full(0, -1, dtype=np.int64)  # id -> entry position in the static part, -1 if none
        self._count = 0
        self._buf: dict[int, int] = {}  # id -> position in the buffer
        self._dead = 0
        self._out = np.empty(1024, dtype=np.int64)
        self._build()

    def __len__(self) -> int:
        return self._count

    def __contains__(self, sid: object) -> bool:
        return isinstance(sid, (int, np.integer)) and 0 <= sid < len(self._has) and bool(self._has[sid])

    def _ensure(self, top: int) -> None:
        """Grow the per-id arrays to hold ids below ``top``."""
        n = len(self._has)
        if top <= n:
            return
        m = max(top, 2 * n, 1024)
        self._x1 = np.concatenate([self._x1, np.empty(m - n)])
        self._x2 = np.concatenate([self._x2, np.empty(m - n)])
        self._has = np.concatenate([self._has, np.zeros(m - n, dtype=np.bool_)])
        self._pos = np.concatenate([self._pos, np.full(m - n, -1, dtype=np.int64)])

    def _build(self) -> None:
        ids_a = np.flatnonzero(self._has).astype(np.int64)
        x1, x2 = self._x1[ids_a], self._x2[ids_a]
        order = np.lexsort((x2, x1))
        x1, x2, ids_a = x1[order], x2[order], ids_a[order]
        n = len(ids_a)
        nb = (n + self.block - 1) // self.block
        bstart = np.minimum(np.arange(nb + 1, dtype=np.int64) * self.block, n)
        bmin = x1[bstart[:-1]] if nb else np.empty(0)
        bmax = x1[bstart[1:] - 1] if nb else np.empty(0)
        # inside each block, sort by x2
        blk = np.repeat(np.arange(nb), np.diff(bstart))
        inner = np.lexsort((x2, blk))
        self._ex1, self._ex2, self._eid = x1[inner], x2[inner], ids_a[inner]
        self._bstart, self._bmin, self._bmax = bstart, np.ascontiguousarray(bmin), np.ascontiguousarray(bmax)
        self._alive = np.ones(n, dtype=np.bool_)
        self._pos[:] = -1
        self._pos[self._eid] = np.arange(n)
        self._bx1 = np.empty(self.max_buffer)
        self._bx2 = np.empty(self.max_buffer)
        self._bid = np.empty(self.max_buffer, dtype=np.int64)
        self._buf = {}
        self._dead = 0

    def rebuild(self) -> None:
        self._build()

    def _check_new(self, sid: int) -> None:
        if sid < 0:
            raise ValueError(f"point ids are non-negative integers, not {sid}")
        if sid in self:
            raise ValueError(f"point id {sid} already indexed")

    def add(self, sid: int, x1: float, x2: float) -> None:
        sid = int(sid)
        self._check_new(sid)
        self._ensure(sid + 1)
        self._x1[sid], self._x2[sid], self._has[sid] = x1, x2, True
        self._count += 1
        if len(self._buf) >= self.max_buffer:
            self.rebuild()
            return
        j = len(self._buf)
        self._bx1[j], self._bx2[j], self._bid[j] = x1, x2, sid
        self._buf[sid] = j

    def add_bulk(self, sids: np.ndarray, x1: np.ndarray, x2: np.ndarray) -> None:
        sids = np.asarray(sids, dtype=np.int64)
        if len(sids) == 0:
            return
        if sids.min() < 0 or len(np.unique(sids)) != len(sids):
            raise ValueError("point ids must be distinct non-negative integers")
        self._ensure(int(sids.max()) + 1)
        if self._has[sids].any():
            raise ValueError(f"point id {int(sids[self._has[sids]][0])} already indexed")
        self._x1[sids], self._x2[sids], self._has[sids] = x1, x2, True
        self._count += len(sids)
        self.rebuild()

    def remove(self, sid: int) -> None:
        sid = int(sid)
        if sid not in self:
            raise KeyError(sid)
        self._has[sid] = False
        self._count -= 1
        j = self._buf.pop(sid, None)
        if j is not None:  # move the buffer's last entry into the hole
            last = len(self._buf)
            if j != last:
                self._bx1[j], self._bx2[j], self._bid[j] = self._bx1[last], self._bx2[last], self._bid[last]
                self._buf[int(self._bid[j])] = j
            return
        self._alive[self._pos[sid]] = False
        self._pos[sid] = -1
        self._dead += 1
        if self._dead > 1024 and self._dead * 4 > len(self._alive):
            self.rebuild()

    def query_many(self, msgs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, offsets): the ids inside message i's rectangle are ids[offsets[i]:offsets[i+1]]."""
        msgs = np.ascontiguousarray(msgs, dtype=np.float64).reshape(-1, 5)
        offsets = np.empty(len(msgs) + 1, dtype=np.int64)
        while True:
            n = query_many(self._bstart, self._bmin, self._bmax, self._ex1, self._ex2, self._eid, self._alive,
                           self._bx1, self._bx2, self._bid, len(self._buf), msgs, self._out, offsets)
            if n >= 0:
                return self._out[:n], offsets
            self._out = np.empty(2 * len(self._out), dtype=np.int64)

    def query(self, outer_l: float, inner_l: float, inner_r: float, outer_r: float) -> np.ndarray:
        ids, _ = self.query_many(np.array([[0.0, inner_l, inner_r, outer_l, outer_r]]))
        return ids.copy()
