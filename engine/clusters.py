"""Columnar subscription clusters in one arena, grouped into per-access-key lists.

Section 2.2 / Figure 1: a cluster holds subscriptions with the same access
key and the same number ``k`` of predicates left to check, stored
column-wise: ``k`` columns of bit-vector references (int32 predicate ids) and
one *line* of entry ids (here int32 subscription handles).  Column ``r`` of
cluster ``c`` is ``arena[base + r*cap : base + r*cap + len]`` and the line is
row ``k``, so every column a kernel streams is contiguous.

An *access key* is just an id: the cluster list of key ``q`` starts at
``key_head[q]`` and follows ``c_next``.  Who owns the keys (a single equality
predicate for propagation, a conjunction of equality predicates reached
through a multi-attribute hash table for the clustering of section 3, key 0
for the catch-all list scanned for every event) is not this module's business.
``(key, k) -> cluster`` is a hash table, so clusters are found in batch.

Each entry's location (cluster, position) is kept so that removal is
O(k): swap the last entry of the cluster into the hole (section 2.3,
"deletions can be made fast by maintaining for each subscription the
identifier of the cluster that contains it").  A full cluster is moved to the
end of the arena with doubled capacity; the holes left behind are reclaimed
by :meth:`ClusterStore.compact` once they outweigh the live data.  The same
store holds the counting algorithm's per-predicate subscription lists.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .hashtable import HashTable
from .idpool import IdPool, grow
from .semantics import OP_EQ, OP_NE


@njit(cache=True, inline="always")
def _move(src, dst, c, c_base, c_cap, c_len, c_k, used, new_cap):
    """Copy cluster ``c``'s rows to ``dst[used:]`` with capacity ``new_cap``; returns the new ``used``."""
    rows = c_k[c] + 1
    ob, oc, n = c_base[c], c_cap[c], c_len[c]
    for r in range(rows):
        dst[used + r * new_cap : used + r * new_cap + n] = src[ob + r * oc : ob + r * oc + n]
    c_base[c] = used
    c_cap[c] = new_cap
    return used + rows * new_cap


@njit(cache=True)
def _relocate(arena, used, c_base, c_cap, c_len, c_k, clusters, new_caps):
    for i in range(clusters.shape[0]):
        used = _move(arena, arena, clusters[i], c_base, c_cap, c_len, c_k, used, new_caps[i])
    return used


@njit(cache=True)
def _append(arena, c_base, c_cap, c_len, c_k, e_cluster, e_pos, clusters, entries, payload, payload_off):
    for i in range(entries.shape[0]):
        c = clusters[i]
        b, cap, p, k = c_base[c], c_cap[c], c_len[c], c_k[c]
        po = payload_off[i]
        for r in range(k):
            arena[b + r * cap + p] = payload[po + r]
        e = entries[i]
        arena[b + k * cap + p] = e
        c_len[c] = p + 1
        e_cluster[e] = c
        e_pos[e] = p


@njit(cache=True)
def _remove(arena, c_base, c_cap, c_len, c_k, e_cluster, e_pos, entries):
    for i in range(entries.shape[0]):
        e = entries[i]
        c = e_cluster[e]
        p = e_pos[e]
        b, cap, k = c_base[c], c_cap[c], c_k[c]
        last = c_len[c] - 1
        if p != last:
            for r in range(k + 1):
                arena[b + r * cap + p] = arena[b + r * cap + last]
            e_pos[arena[b + k * cap + p]] = p
        c_len[c] = last
        e_cluster[e] = -1


@njit(cache=True)
def _payload(arena, c_base, c_cap, c_k, e_cluster, e_pos, entries):
    off = np.zeros(entries.shape[0] + 1, dtype=np.int64)
    for i in range(entries.shape[0]):
        off[i + 1] = off[i] + c_k[e_cluster[entries[i]]]
    out = np.empty(off[-1], dtype=np.int64)
    for i in range(entries.shape[0]):
        e = entries[i]
        c = e_cluster[e]
        b, cap, p = c_base[c], c_cap[c], e_pos[e]
        for r in range(c_k[c]):
            out[off[i] + r] = arena[b + r * cap + p]
    return out, off


@njit(cache=True)
def _compact(arena, new_arena, c_base, c_cap, c_len, c_k, n_clusters, slack):
    used = 0
    for c in range(n_clusters):
        if c_k[c] >= 0:  # (free cluster ids have k = -1)
            n = c_len[c]
            used = _move(arena, new_arena, c, c_base, c_cap, c_len, c_k, used, n + (n >> slack))
    return used


# column order: likely-false tests first (equalities, then ranges, then !=)
OP_RANK = np.ones(6, dtype=np.int64)
OP_RANK[OP_EQ], OP_RANK[OP_NE] = 0, 2


@njit(cache=True)
def order_columns(off, pids, op, access, op_rank):
    """Per subscription: its predicates other than the access ones, as cluster columns.

    ``access[i]`` lists row ``i``'s access predicates (-1 padded).  Columns
    are ordered by ``op_rank`` so that the test most likely to fail is read
    first (section 2.2, "Cache performance").  Returns (k, columns, column offsets).
    """
    n = off.shape[0] - 1
    ks = np.empty(n, dtype=np.int64)
    for i in range(n):
        used = 0
        for m in range(access.shape[1]):
            if access[i, m] >= 0:
                used += 1
        ks[i] = off[i + 1] - off[i] - used
    col_off = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        col_off[i + 1] = col_off[i] + ks[i]
    cols = np.empty(col_off[n], dtype=np.int64)
    for i in range(n):
        w = col_off[i]
        for rank in range(3):
            for j in range(off[i], off[i + 1]):
                p = pids[j]
                if op_rank[op[p]] != rank:
                    continue
                is_access = False
                for m in range(access.shape[1]):
                    if access[i, m] == p:
                        is_access = True
                if not is_access:
                    cols[w] = p
                    w += 1
    return ks, cols, col_off


class ClusterStore:
    """Clusters (key, k) of column-stored entries; see the module docstring."""

    def __init__(self) -> None:
        self.arena = np.zeros(1 << 12, dtype=np.int32)
        self.used = 0  # arena[:used] is allocated to clusters
        self.garbage = 0  # allocated but abandoned by relocations
        self.ids = IdPool()
        self.index = HashTable(width=2)  # (key, k) -> cluster
        self.c_base = np.zeros(0, dtype=np.int64)
        self.c_cap = np.zeros(0, dtype=np.int64)
        self.c_len = np.zeros(0, dtype=np.int64)
        self.c_k = np.full(0, -1, dtype=np.int64)
        self.c_key = np.full(0, -1, dtype=np.int64)
        self.c_next = np.full(0, -1, dtype=np.int64)
        self.key_head = np.full(0, -1, dtype=np.int64)
        self.e_cluster = np.full(0, -1, dtype=np.int32)
        self.e_pos = np.zeros(0, dtype=np.int32)

    # -- clusters --------------------------------------------------------
    def clusters_for(self, keys: np.ndarray, ks: np.ndarray) -> np.ndarray:
        """Cluster of each (key, k), created empty and linked into the key's list if new."""
        rows = np.empty((len(keys), 2), dtype=np.int64)
        rows[:, 0], rows[:, 1] = keys, ks

        def assign(first: np.ndarray) -> np.ndarray:
            ids = self.ids.take(len(first))
            top = self.ids.high
            self.c_base, self.c_cap = grow(self.c_base, top, 0), grow(self.c_cap, top, 0)
            self.c_len, self.c_k = grow(self.c_len, top, 0), grow(self.c_k, top, -1)
            self.c_key, self.c_next = grow(self.c_key, top, -1), grow(self.c_next, top, -1)
            self.key_head = grow(self.key_head, int(keys.max()) + 1, -1)
            nk, nkk = rows[first, 0], rows[first, 1]
            self.c_base[ids], self.c_cap[ids], self.c_len[ids] = self.used, 0, 0
            self.c_k[ids], self.c_key[ids] = nkk, nk
            for c, q in zip(ids.tolist(), nk.tolist()):  # one step per *new cluster*
                self.c_next[c] = self.key_head[q]
                self.key_head[q] = c
            return ids

        return self.index.get_or_add(rows, assign)

    def release_key(self, key: int) -> None:
        """Free every (empty) cluster of an access key that no subscription uses any more."""
        c = int(self.key_head[key]) if key < len(self.key_head) else -1
        freed = []
        while c >= 0:
            freed.append(c)
            c = int(self.c_next[c])
        if not freed:
            return
        f = np.array(freed, dtype=np.int64)
        rows = np.stack([self.c_key[f], self.c_k[f]], axis=1)
        self.index.delete(rows)
        self.garbage += int(np.sum((self.c_k[f] + 1) * self.c_cap[f]))
        self.c_cap[f] = 0
        self.c_len[f] = 0
        self.c_k[f] = -1
        self.c_next[f] = -1
        self.key_head[key] = -1
        self.ids.release(f)

    def reserve(self, clusters: np.ndarray, extra: np.ndarray) -> None:
        """Make room for ``extra[i]`` more entries in distinct ``clusters[i]``."""
        need = self.c_len[clusters] + extra
        small = need > self.c_cap[clusters]
        if not np.any(small):
            return
        cl = clusters[small]
        old_cap = self.c_cap[cl]
        new_cap = np.where(old_cap == 0, need[small], np.maximum(need[small], 2 * old_cap))
        rows = self.c_k[cl] + 1
        total = self.used + int(np.sum(rows * new_cap))
        if self.garbage > max(self.used - self.garbage, 1 << 20):
            self.compact()
            return self.reserve(clusters, extra)
        if total > len(self.arena):
            arena = np.empty(max(total, len(self.arena) + len(self.arena) // 2), dtype=np.int32)
            arena[: self.used] = self.arena[: self.used]
            self.arena = arena
        self.garbage += int(np.sum(rows * old_cap))
        self.used = int(_relocate(self.arena, self.used, self.c_base, self.c_cap, self.c_len, self.c_k,
                                  cl.astype(np.int64), new_cap.astype(np.int64)))

    def compact(self, slack: int = 3) -> None:
        """Rewrite the arena densely (each cluster keeps len + len/2**slack room)."""
        live = self.c_k[: self.ids.high] >= 0
        rows = self.c_k[: self.ids.high][live] + 1
        n = self.c_len[: self.ids.high][live]
        size = int(np.sum(rows * (n + (n >> slack))))
        new = np.empty(max(size, 1 << 12), dtype=np.int32)
        self.used = int(_compact(self.arena, new, self.c_base, self.c_cap, self.c_len, self.c_k, self.ids.high, slack))
        self.arena = new
        self.garbage = 0

    # -- entries ---------------------------------------------------------
    def append(self, clusters: np.ndarray, entries: np.ndarray, payload: np.ndarray, payload_off: np.ndarray) -> None:
        """Add entry ``entries[i]`` with columns ``payload[payload_off[i]:payload_off[i+1]]`` to ``clusters[i]``."""
        uc, counts = np.unique(clusters, return_counts=True)
        self.reserve(uc, counts)
        top = int(entries.max()) + 1 if len(entries) else 0
        self.e_cluster, self.e_pos = grow(self.e_cluster, top, -1), grow(self.e_pos, top, 0)
        _append(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.e_cluster, self.e_pos,
                clusters.astype(np.int64), entries.astype(np.int64), payload.astype(np.int32), payload_off.astype(np.int64))

    def payload(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(flat columns, offsets) of entries, e.g. to drop their predicate references."""
        return _payload(self.arena, self.c_base, self.c_cap, self.c_k, self.e_cluster, self.e_pos, entries.astype(np.int64))

    def remove(self, entries: np.ndarray) -> None:
        """Swap-remove entries (O(k) each)."""
        _remove(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.e_cluster, self.e_pos, entries.astype(np.int64))

    def key_of(self, entries: np.ndarray) -> np.ndarray:
        return self.c_key[self.e_cluster[entries]]

    def scan_args(self) -> tuple:
        return (self.key_head, self.c_next, self.c_base, self.c_cap, self.c_len, self.c_k, self.arena)

    def stats(self) -> dict:
        live = self.c_k[: self.ids.high] >= 0
        sizes = self.c_len[: self.ids.high][live]
        return {
            "clusters": int(np.count_nonzero(live)),
            "nonempty_clusters": int(np.count_nonzero(sizes)),
            "largest_cluster": int(sizes.max()) if len(sizes) else 0,
            "arena_used": self.used,
            "arena_garbage": self.garbage,
            "cluster_hash_slots": len(self.index.vals),
            "memory_bytes": int(self.arena.nbytes + self.index.nbytes + self.e_cluster.nbytes + self.e_pos.nbytes
                                + 6 * 8 * len(self.c_base) + self.key_head.nbytes),
        }
