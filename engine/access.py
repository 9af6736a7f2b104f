"""Access keys: the ids under which cluster lists are filed.

Section 2.2: a predicate p is an *access predicate* for the subscriptions of a
cluster list when they can only match events satisfying p.  Section 3
generalises p to a conjunction of equality predicates with distinct
attributes.  The cluster layer only knows key ids; this table says what a key
stands for and counts the subscriptions filed under it, so that keys (and
their empty clusters) are released when unused.

Key 0 is the catch-all list (subscriptions without an equality predicate),
scanned for every event.  Single-predicate keys are reached from the
predicate phase through ``pred_key`` (predicate id -> key id, -1 if the
predicate is no access predicate); multi-attribute keys will be reached
through per-schema hash tables (issue #3) and record their predicates in
``members``.
"""

from __future__ import annotations

import numpy as np

from .idpool import IdPool, grow

CATCH_ALL = 0


class AccessKeys:
    def __init__(self) -> None:
        self.ids = IdPool()
        self.ids.take(1)  # key 0: catch-all
        self.refs = np.zeros(64, dtype=np.int64)  # subscriptions filed under each key
        self.pred = np.full(64, -1, dtype=np.int64)  # single-predicate key -> predicate id
        self.pred_key = np.full(64, -1, dtype=np.int64)  # predicate id -> its single-predicate key

    def __len__(self) -> int:
        return len(self.ids)

    def for_predicates(self, pids: np.ndarray) -> np.ndarray:
        """Single-predicate key of each predicate id, creating missing ones."""
        self.pred_key = grow(self.pred_key, int(pids.max()) + 1 if len(pids) else 0, -1)
        keys = self.pred_key[pids]
        missing = np.unique(pids[keys < 0])
        if len(missing):
            new = self.ids.take(len(missing))
            self.refs = grow(self.refs, self.ids.high, 0)
            self.pred = grow(self.pred, self.ids.high, -1)
            self.pred_key[missing] = new
            self.pred[new] = missing
            self.refs[new] = 0
            keys = self.pred_key[pids]
        return keys

    def incref(self, keys: np.ndarray) -> None:
        self.refs[: self.ids.high] += np.bincount(keys, minlength=self.ids.high)[: self.ids.high]

    def decref(self, keys: np.ndarray) -> np.ndarray:
        """Drop references; returns the keys (never the catch-all) no subscription uses any more."""
        np.subtract.at(self.refs, keys, 1)
        dead = np.unique(keys[(self.refs[keys] == 0) & (keys != CATCH_ALL)])
        if len(dead):
            p = self.pred[dead]
            self.pred_key[p[p >= 0]] = -1
            self.pred[dead] = -1
            self.ids.release(dead)
        return dead

    def predicates_of(self, keys: np.ndarray) -> np.ndarray:
        """The access predicates implied by keys (the catch-all implies none)."""
        p = self.pred[keys]
        return p[p >= 0]

    def stats(self) -> dict:
        return {"access_keys": len(self.ids), "memory_bytes": int(self.refs.nbytes + self.pred.nbytes + self.pred_key.nbytes)}
