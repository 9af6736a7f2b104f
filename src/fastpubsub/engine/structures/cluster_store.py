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
by :meth:`ClusterStore.compact` once they would outweigh the live data (a
bulk that would leave them compacts at once, its clusters fitted to it).  The same
store holds the counting algorithm's per-predicate subscription lists.

*Runs* (ours, not in the paper; ``ClusterStore(runs=RUN_MIN)``, the default
of static and dynamic; ``runs=0`` gives the paper's plain clusters): a long
cluster keeps its entries sorted by their first column, with rows that list
the runs of equal ones, their index and a second level
(engine/structures/sorted_runs.py, which writes them).  The store calls
those kernels as entries come and go, and holds their bookkeeping
(``c_sorted``, ``c_runs``, ``c_dead``, ``c_sub``, ``sub``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .hashtable import HashTable
from .idpool import IdPool, grow
from .sorted_runs import (DEAD, DEAD_SHIFT, INDEX_ROW, RUN_ROWS, SUB_BUILD, SUB_NONE, TAIL_MERGE_SHIFT, RunArrays,
                          copy_entry, copy_sub_blocks, index_len, merge_tails, purge_dead, run_row, settle_tails,
                          sub_blocks)
from ..semantics import OP_EQ, OP_NE


class ClusterArrays(NamedTuple):
    """The clusters as the scan kernels read them (:meth:`ClusterStore.arrays`).

    Cluster ``c`` holds ``length[c]`` entries with ``k[c]`` columns; column
    ``r`` is ``arena[base[c] + r * cap[c]:][:length[c]]`` and the line of
    handles is row ``k[c]``.  The clusters of access key ``q`` form the list
    ``key_head[q]``, ``next[...]`` (-1 ends it).
    """

    key_head: np.ndarray  # int64 [keys]: first cluster of each access key's list (-1: none)
    next: np.ndarray  # int64 [clusters]: the next cluster of the same list (-1: last)
    base: np.ndarray  # int64 [clusters]: arena offset of row 0
    cap: np.ndarray  # int64 [clusters]: row length (capacity)
    length: np.ndarray  # int64 [clusters]: entries in use
    k: np.ndarray  # int64 [clusters]: columns (-1: free cluster id)
    arena: np.ndarray  # int32: every cluster's rows


#: Room a compaction leaves a cluster is at most this many entries or an eighth of its length, whichever is
#: more: inserts at equilibrium (tens per round) relocate a cluster of thousands rarely either way, and half the
#: length of the long clusters of a large load is a third of the arena.
ROOM_MAX = 1024


@njit(cache=True, inline="always")
def n_rows(k, run_rows):
    """Arena rows of a cluster with ``k`` columns: the columns, the line, and the run rows if it can have runs."""
    return k + 1 + (run_rows if k >= 1 else 0)


@njit(cache=True, inline="always")
def _move(src, dst, c, c_base, c_cap, c_len, c_k, c_runs, run_rows, used, new_cap):
    """Copy cluster ``c``'s rows to ``dst[used:]`` with capacity ``new_cap``; returns the new ``used``."""
    k = c_k[c]
    rows = n_rows(k, run_rows)
    ob, oc = c_base[c], c_cap[c]
    for r in range(rows):
        if r <= k:
            n = c_len[c]
        elif r < k + INDEX_ROW:
            n = c_runs[c]
        else:
            n = index_len(src, ob + r * oc, c_runs[c])
        dst[used + r * new_cap : used + r * new_cap + n] = src[ob + r * oc : ob + r * oc + n]
    c_base[c] = used
    c_cap[c] = new_cap
    return used + rows * new_cap


@njit(cache=True)
def _relocate(arena, used, c_base, c_cap, c_len, c_k, c_runs, run_rows, clusters, new_caps):
    for i in range(clusters.shape[0]):
        used = _move(arena, arena, clusters[i], c_base, c_cap, c_len, c_k, c_runs, run_rows, used, new_caps[i])
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
def _remove(arena, c_base, c_cap, c_len, c_k, c_sorted, c_runs, c_dead, e_cluster, e_pos, entries, run_rows, sub_min,
            c_sub, sub, sub_gc):
    """Take ``entries`` out: a tombstone in a sorted prefix, else the cluster's last entry swapped into the hole;
    then purge the clusters whose dead entries passed ``c_len >> DEAD_SHIFT`` (engine/structures/sorted_runs.py)."""
    gone = np.empty(entries.shape[0], dtype=np.int64)
    for i in range(entries.shape[0]):
        e = entries[i]
        c = e_cluster[e]
        gone[i] = c
        p = e_pos[e]
        b, cap, k = c_base[c], c_cap[c], c_k[c]
        if p < c_sorted[c]:
            arena[b + k * cap + p] = DEAD
            c_dead[c] += 1
        else:  # (the tail holds no dead entry: its last one is live)
            last = c_len[c] - 1
            if p != last:
                copy_entry(arena, b, cap, k, last, p, e_pos)
            c_len[c] = last
        e_cluster[e] = -1
    if run_rows:
        for i in range(gone.shape[0]):
            c = gone[i]
            if c_dead[c] > (c_len[c] >> DEAD_SHIFT):
                purge_dead(arena, c, c_base, c_cap, c_len, c_k, c_sorted, c_runs, c_dead, e_pos, sub_min, c_sub, sub,
                           sub_gc)


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
def _compact_caps(arena, c_base, c_cap, c_len, c_k, c_runs, run_rows, n_clusters, slack):
    """Capacity of each cluster after compaction: len + len/2**slack (at most ``ROOM_MAX`` or an eighth of len,
    whichever is more), and room for its run index."""
    caps = np.zeros(n_clusters, dtype=np.int64)
    for c in range(n_clusters):
        if c_k[c] >= 0:  # (free cluster ids have k = -1)
            n = c_len[c]
            caps[c] = n + min(n >> slack, max(n >> 3, ROOM_MAX))
            if run_rows and c_k[c] >= 1:
                caps[c] = max(caps[c], index_len(arena, run_row(c_base[c], c_cap[c], c_k[c], INDEX_ROW), c_runs[c]))
    return caps


@njit(cache=True)
def _compact(arena, new_arena, c_base, c_cap, c_len, c_k, c_runs, run_rows, caps):
    used = 0
    for c in range(caps.shape[0]):
        if c_k[c] >= 0:
            used = _move(arena, new_arena, c, c_base, c_cap, c_len, c_k, c_runs, run_rows, used, caps[c])
    return used


# column order: likely-false tests first (equalities, then ranges, then !=)
OP_RANK = np.ones(6, dtype=np.int64)
OP_RANK[OP_EQ], OP_RANK[OP_NE] = 0, 2


@njit(cache=True)
def order_columns(off, pids, op, access, op_rank, prob):
    """Per subscription: its predicates other than the access ones, as cluster columns.

    ``access[i]`` lists row ``i``'s access predicates (-1 padded).  Columns
    are ordered by ``op_rank``, then, within a rank, by ``prob[p]`` (the
    probability that an event satisfies ``p``; empty: keep the given order),
    so that the test most likely to fail is read first (section 2.2, "Cache
    performance"): fewer entries reach the second column, and with runs the
    first column, which the run index reads, is the most selective one.
    Ties keep the given order.  Returns (k, columns, column offsets).
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
    by_prob = prob.shape[0] > 0
    for i in range(n):
        w = col_off[i]
        for rank in range(3):
            first = w
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
            if by_prob:  # insertion sort of this rank's few columns, stable
                for a in range(first + 1, w):
                    p = cols[a]
                    b = a
                    while b > first and prob[cols[b - 1]] > prob[p]:
                        cols[b] = cols[b - 1]
                        b -= 1
                    cols[b] = p
    return ks, cols, col_off


#: ``order_columns``' ``prob`` when no probabilities are known: columns keep the given order within a rank.
NO_PROBABILITIES = np.zeros(0, dtype=np.float64)


class ClusterStore:
    """Clusters (key, k) of column-stored entries; see the module docstring.

    ``runs``: clusters of at least this many entries keep sorted runs (0: none, the paper's plain clusters).
    ``level2``: runs of at least this many entries get a second level (0: none; with runs only); the owner may
    change it (:attr:`sub_min`), which takes effect as runs are sorted again.
    """

    def __init__(self, runs: int = 0, level2: int = 0) -> None:
        self.run_min = int(runs)
        self.run_rows = RUN_ROWS if runs else 0
        self.sub_min = int(level2) if runs else 0
        self._no_runs = np.zeros(0, dtype=np.int64)  # what scan_args hands the kernels without runs
        self._no_sub = np.zeros(0, dtype=np.int32)
        self.sub = np.zeros(1 << 10, dtype=np.int32)  # the second-level blocks (sub_blocks)
        self.sub_used = 0
        self.sub_gc = np.zeros(1, dtype=np.int64)  # of sub[:sub_used], the blocks no cluster points to any more
        self.c_sub = np.full(0, SUB_NONE, dtype=np.int64)  # block offset, or SUB_NONE / SUB_BUILD
        self.arena = np.zeros(1 << 12, dtype=np.int32)
        self.used = 0  # arena[:used] is allocated to clusters
        self.garbage = 0  # allocated but abandoned by relocations
        self.ids = IdPool()
        self.index = HashTable(width=2)  # (key, k) -> cluster
        self.c_base = np.zeros(0, dtype=np.int64)
        self.c_cap = np.zeros(0, dtype=np.int64)
        self.c_len = np.zeros(0, dtype=np.int64)
        self.c_k = np.full(0, -1, dtype=np.int64)
        self.c_sorted = np.zeros(0, dtype=np.int64)  # entries in the sorted prefix (0 without runs)
        self.c_runs = np.zeros(0, dtype=np.int64)  # runs in the sorted prefix
        self.c_dead = np.zeros(0, dtype=np.int64)  # dead entries (tombstones) in the sorted prefix
        self.c_key = np.full(0, -1, dtype=np.int64)
        self.c_next = np.full(0, -1, dtype=np.int64)
        self.key_head = np.full(0, -1, dtype=np.int64)
        self.e_cluster = np.full(0, -1, dtype=np.int32)
        self.e_pos = np.zeros(0, dtype=np.int32)
        # keys whose entries changed, logged once someone keeps copies of the lists (engine/algorithms/packed.py)
        self.track_keys = False
        self.changed_keys: list[np.ndarray] = []

    def _log_keys(self, keys: np.ndarray) -> None:
        if self.track_keys:
            self.changed_keys.append(keys)
            if len(self.changed_keys) > 4096:
                self.changed_keys = [np.unique(np.concatenate(self.changed_keys))]

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
            self.c_sorted, self.c_runs = grow(self.c_sorted, top, 0), grow(self.c_runs, top, 0)
            self.c_sub = grow(self.c_sub, top, SUB_NONE)
            self.c_dead = grow(self.c_dead, top, 0)
            self.key_head = grow(self.key_head, int(keys.max()) + 1, -1)
            nk, nkk = rows[first, 0], rows[first, 1]
            self.c_base[ids], self.c_cap[ids], self.c_len[ids] = self.used, 0, 0
            self.c_sorted[ids], self.c_runs[ids], self.c_dead[ids] = 0, 0, 0
            self._drop_sub(ids)
            self.c_k[ids], self.c_key[ids] = nkk, nk
            for c, q in zip(ids.tolist(), nk.tolist()):  # one step per *new cluster*
                self.c_next[c] = self.key_head[q]
                self.key_head[q] = c
            return ids

        return self.index.get_or_add(rows, assign)

    def release_key(self, key: int) -> None:
        """Free every cluster of an access key that no subscription uses any more (empty, or holding dead entries)."""
        c = int(self.key_head[key]) if key < len(self.key_head) else -1
        freed = []
        while c >= 0:
            freed.append(c)
            c = int(self.c_next[c])
        if not freed:
            return
        self._log_keys(np.array([key], dtype=np.int64))
        f = np.array(freed, dtype=np.int64)
        rows = np.stack([self.c_key[f], self.c_k[f]], axis=1)
        self.index.delete(rows)
        self.garbage += int(np.sum(self.rows(self.c_k[f]) * self.c_cap[f]))
        self.c_cap[f] = 0
        self.c_len[f] = 0
        self.c_sorted[f] = 0
        self.c_runs[f] = 0
        self._drop_sub(f)
        self.c_dead[f] = 0
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
        rows = self.rows(self.c_k[cl])
        total = self.used + int(np.sum(rows * new_cap))
        abandoned = int(np.sum(rows * old_cap))
        if self.garbage + abandoned > max(self.used - self.garbage - abandoned, 1 << 20):
            # relocating would leave more behind than stays (a bulk load into clusters that hold much already):
            # one compaction that fits the growing clusters to what they need (as a relocation would), not a
            # relocation and a compaction later
            caps, _ = self._compact_plan(3)
            caps[clusters] = np.maximum(caps[clusters], need)  # (every cluster of the bulk: one with room now
            # may be given less by the compaction than the bulk needs)
            live = np.flatnonzero(self.c_k[: len(caps)] >= 0)
            self.compact(plan=(caps, int(np.sum(self.rows(self.c_k[live]) * caps[live]))))
            return
        if total > len(self.arena):
            arena = np.empty(max(total, len(self.arena) + len(self.arena) // 2), dtype=np.int32)
            arena[: self.used] = self.arena[: self.used]
            self.arena = arena
        self.garbage += int(np.sum(rows * old_cap))
        self.used = int(_relocate(self.arena, self.used, self.c_base, self.c_cap, self.c_len, self.c_k, self.c_runs,
                                  self.run_rows, cl.astype(np.int64), new_cap.astype(np.int64)))

    def _compact_plan(self, slack: int) -> tuple[np.ndarray, int]:
        """Each cluster's capacity after a compaction with ``slack`` (see :func:`_compact_caps`), and the arena size."""
        top = self.ids.high
        caps = _compact_caps(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.c_runs, self.run_rows, top, slack)
        live = self.c_k[:top] >= 0
        return caps, int(np.sum(self.rows(self.c_k[:top][live]) * caps[live]))

    def compact(self, slack: int = 3, plan: tuple[np.ndarray, int] | None = None) -> None:
        """Rewrite the arena densely (each cluster keeps len + len/2**slack room, see :func:`_compact_caps`)."""
        caps, size = plan if plan is not None else self._compact_plan(slack)
        new = np.empty(max(size, 1 << 12), dtype=np.int32)
        self.used = int(_compact(self.arena, new, self.c_base, self.c_cap, self.c_len, self.c_k, self.c_runs, self.run_rows,
                                 caps))
        self.arena = new
        self.garbage = 0

    def trim(self) -> None:
        """Compact when the arena holds over a quarter more than compacting would leave (O(clusters) test).

        A bulk load leaves relocated clusters' old rows and the doubled
        capacity of the clusters it filled behind.  Clusters keep half their
        length as room (up to ``ROOM_MAX``): with an eighth, the inserts that
        follow (W3 at equilibrium, 50 per tick) relocated clusters so often
        that matching slowed by a quarter (docs/benchmarks.md, "How much
        memory does it need?").
        """
        if self.used <= (1 << 20):
            return
        plan = self._compact_plan(1)
        if 4 * self.used > 5 * plan[1]:
            self.compact(plan=plan)

    # -- entries ---------------------------------------------------------
    def append(self, clusters: np.ndarray, entries: np.ndarray, payload: np.ndarray, payload_off: np.ndarray) -> None:
        """Add entry ``entries[i]`` with columns ``payload[payload_off[i]:payload_off[i+1]]`` to ``clusters[i]``."""
        uc, counts = np.unique(clusters, return_counts=True)
        self._log_keys(self.c_key[uc])
        self.reserve(uc, counts)
        top = int(entries.max()) + 1 if len(entries) else 0
        self.e_cluster, self.e_pos = grow(self.e_cluster, top, -1), grow(self.e_pos, top, 0)
        _append(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.e_cluster, self.e_pos,
                clusters.astype(np.int64), entries.astype(np.int64), payload.astype(np.int32), payload_off.astype(np.int64))
        if self.run_rows:
            settle_tails(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.c_sorted, self.c_runs,
                         self.c_dead, self.e_pos, uc.astype(np.int64), self.run_min, self.sub_min, self.c_sub, self.sub,
                         self.sub_gc)
            self._build_sub()

    def sort_tails(self, keys: np.ndarray, shift: int = TAIL_MERGE_SHIFT) -> int:
        """Merge the tails of the lists of ``keys`` that hold at least ``len >> shift`` entries into their runs.

        Inserts wait in a tail scanned entry by entry until it outgrows an
        eighth of the sorted prefix; at equilibrium a long list then carries a
        tail of about a sixteenth of its size on average.  The dynamic
        maintenance merges the tails of the hot lists at each round once they
        hold a 64th of the list, which bounds the merging to 64 entries moved
        per insert (docs/design/clustering.md, "Runs").  Returns the entries merged.
        """
        if not self.run_rows:
            return 0
        keys = np.asarray(keys, dtype=np.int64)
        keys = keys[(keys >= 0) & (keys < len(self.key_head))]
        if len(keys) == 0:
            return 0
        self._log_keys(keys)
        merged = int(merge_tails(self.arena, self.key_head, self.c_next, self.c_base, self.c_cap, self.c_len, self.c_k,
                                 self.c_sorted, self.c_runs, self.c_dead, self.e_pos, keys, self.run_min, int(shift),
                                 self.sub_min, self.c_sub, self.sub, self.sub_gc))
        self._build_sub()
        return merged

    def payload(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(flat columns, offsets) of entries, e.g. to drop their predicate references."""
        return _payload(self.arena, self.c_base, self.c_cap, self.c_k, self.e_cluster, self.e_pos, entries.astype(np.int64))

    def remove(self, entries: np.ndarray) -> None:
        """Take entries out: O(k) each from an unsorted tail or a plain cluster, O(1) from a sorted prefix (a
        tombstone, which keeps the second level too), then a pass over each cluster whose dead entries passed an
        eighth of it (engine/structures/sorted_runs.py)."""
        entries = entries.astype(np.int64)
        self._log_keys(self.c_key[self.e_cluster[entries]])
        _remove(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.c_sorted, self.c_runs, self.c_dead,
                self.e_cluster, self.e_pos, entries, self.run_rows, self.sub_min, self.c_sub, self.sub, self.sub_gc)
        self._build_sub()

    # -- the second level --------------------------------------------------
    def _drop_sub(self, clusters: np.ndarray) -> None:
        """Drop the second level of ``clusters`` (new or freed ones), their blocks counted as garbage."""
        if len(clusters) == 0:
            return
        had = self.c_sub[clusters]
        had = had[had >= 0]
        if len(had):
            self.sub_gc[0] += int(self.sub[had].sum())
        self.c_sub[clusters] = SUB_NONE

    def _build_sub(self) -> None:
        """Write the blocks of the clusters whose runs were just sorted (``SUB_BUILD``) at the end of ``sub``."""
        if not self.sub_min:
            return
        clusters = np.flatnonzero(self.c_sub[: self.ids.high] == SUB_BUILD).astype(np.int64)
        if len(clusters) == 0:
            return
        if int(self.sub_gc[0]) > max(self.sub_used - int(self.sub_gc[0]), 1 << 16):
            self._compact_sub()
        def blocks(offsets, write):
            return sub_blocks(self.arena, self.sub, self.c_base, self.c_cap, self.c_k, self.c_sorted, self.c_runs,
                              clusters, offsets, self.sub_min, write)

        sizes = blocks(clusters, False)  # (offsets unread)
        offsets = self.sub_used + np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
        total = self.sub_used + int(sizes.sum())
        if total > len(self.sub):
            self.sub = grow(self.sub, max(total, len(self.sub) + len(self.sub) // 2), 0)
        blocks(offsets, True)
        built = sizes > 1 + 2 * self.c_runs[clusters]  # (a header alone: no run qualified)
        self.c_sub[clusters] = np.where(built, offsets, SUB_NONE)
        self.sub_gc[0] += int(sizes[~built].sum())
        self.sub_used = total

    def _compact_sub(self) -> None:
        """Rewrite ``sub`` densely: the blocks of the clusters that have one, in cluster order."""
        live = np.flatnonzero(self.c_sub[: self.ids.high] >= 0).astype(np.int64)
        size = int(self.sub[self.c_sub[live]].sum()) if len(live) else 0
        new = np.zeros(max(size + size // 2, 1 << 10), dtype=np.int32)
        self.sub_used = int(copy_sub_blocks(self.sub, new, self.c_sub, live))
        self.sub = new
        self.sub_gc[0] = 0

    def rows(self, k: np.ndarray) -> np.ndarray:
        """Arena rows of clusters with ``k`` columns (see :func:`n_rows`)."""
        return k + 1 + np.where(k >= 1, self.run_rows, 0)

    def key_of(self, entries: np.ndarray) -> np.ndarray:
        return self.c_key[self.e_cluster[entries]]

    def arrays(self) -> ClusterArrays:
        """The clusters as the scan kernels read them."""
        return ClusterArrays(self.key_head, self.c_next, self.c_base, self.c_cap, self.c_len, self.c_k, self.arena)

    def run_arrays(self) -> RunArrays:
        """The run bookkeeping (empty without runs: the kernels then read nothing of it, engine.kernels.scan.run_path)."""
        if self.run_rows:
            return RunArrays(self.c_sorted, self.c_runs, self.c_sub, self.sub)
        return RunArrays(self._no_runs, self._no_runs, self._no_runs, self._no_sub)

    def stats(self) -> dict:
        """Sizes; ``nonempty_clusters`` and ``largest_cluster`` count live entries, ``dead_entries`` the tombstones
        the scans still read, ``sorted_entries`` the sorted prefixes with their tombstones."""
        live = self.c_k[: self.ids.high] >= 0
        dead = self.c_dead[: self.ids.high][live]
        sizes = self.c_len[: self.ids.high][live] - dead
        return {
            "clusters": int(np.count_nonzero(live)),
            "nonempty_clusters": int(np.count_nonzero(sizes)),
            "sorted_entries": int(self.c_sorted[: self.ids.high][live].sum()),
            "dead_entries": int(dead.sum()),
            "runs": int(self.c_runs[: self.ids.high][live].sum()),
            "level2_min": self.sub_min,
            "level2_clusters": int(np.count_nonzero(self.c_sub[: self.ids.high][live] >= 0)),
            "level2_ints": self.sub_used - int(self.sub_gc[0]),
            "largest_cluster": int(sizes.max()) if len(sizes) else 0,
            "arena_used": self.used,
            "arena_garbage": self.garbage,
            "cluster_hash_slots": len(self.index.vals),
            "memory_bytes": self.memory_bytes(),
        }

    def memory_bytes(self) -> int:
        return int(self.arena.nbytes + self.index.nbytes + self.e_cluster.nbytes + self.e_pos.nbytes
                   + 8 * 9 * len(self.c_base) + self.key_head.nbytes + self.sub.nbytes)
