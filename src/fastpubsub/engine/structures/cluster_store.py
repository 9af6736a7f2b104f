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

*Runs* (ours, not in the paper; ``ClusterStore(runs=RUN_MIN)``, the default of
static and dynamic; ``runs=0`` gives the paper's plain clusters).  A cluster's first ``c_sorted`` entries are kept sorted by
their first column, and two more rows list the distinct first-column
predicates of that prefix and where each run of equal ones starts.  The scan
then tests one bit per run instead of one per entry, which bounds the cost
of a long cluster by the number of distinct predicates its first column can
hold (30 x 35 for W0's (a0, a1) lists) rather than by its size, the growth
the paper's dynamic algorithm answers with more hash tables
(docs/clustering.md, "Runs").  New entries go to an unsorted tail, scanned
entry by entry, which is merged in once it outgrows ``c_sorted / 8``; a
removal from the sorted prefix shifts one entry per later run so the runs
stay contiguous.  Every entry keeps all its columns, so scanning the whole
cluster entry by entry stays correct whatever its order.

A third extra row, the *run index*, maps a predicate id to its run without
reading the run row: ``[lo, W, W bitmap words, W ranks]``, bit ``p - lo`` set
iff a run has first column ``p``, rank = runs before the word.  An event
then looks up its own satisfied predicates (a few dozen) instead of
streaming a thousand runs.  It is built when the runs are sorted (``W = 0``
when the ids span more than the row holds) and kept by removals.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .hashtable import HashTable
from .idpool import IdPool, grow
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


class RunArrays(NamedTuple):
    """The run bookkeeping of sorted clusters (both empty in a store without runs: nothing to read per cluster).

    Cluster ``c``'s first ``sorted[c]`` entries are sorted by column 0 into
    ``runs[c]`` runs, listed by its extra rows (:func:`run_row`).
    """

    sorted: np.ndarray  # int64 [clusters]: entries in the sorted prefix
    runs: np.ndarray  # int64 [clusters]: runs in the sorted prefix


#: Clusters shorter than this are not sorted into runs (the value to pass as ``runs``).  Below it a
#: sorted cluster is scanned plainly anyway (``engine.kernels.scan.run_path``), so sorting smaller clusters (W3's pair
#: tables hold 64-255 entries) would only cost (docs/clustering.md, "Why `RUN_MIN` is 256").
RUN_MIN = 256
#: Arena rows a cluster with runs has beyond its columns and line: first predicates, run starts, run index.
RUN_ROWS = 3
#: Those rows, as offsets past row ``k`` (the line); see :func:`run_row`.
PIDS_ROW, STARTS_ROW, INDEX_ROW = 1, 2, 3
#: The unsorted tail is merged into the runs once longer than max(run_min / 4, c_sorted >> RUN_TAIL_SHIFT).
RUN_TAIL_SHIFT = 3
#: Room a compaction leaves a cluster is at most this many entries or an eighth of its length, whichever is
#: more: inserts at equilibrium (tens per round) relocate a cluster of thousands rarely either way, and half the
#: length of the long clusters of a large load is a third of the arena.
ROOM_MAX = 1024
#: The dynamic maintenance merges a hot list's tail at a round once it holds a 64th of its cluster
#: (:meth:`ClusterStore.sort_tails`): at most 64 entries moved per insert, against 8 for RUN_TAIL_SHIFT.
TAIL_MERGE_SHIFT = 6


@njit(cache=True, inline="always")
def n_rows(k, run_rows):
    """Arena rows of a cluster with ``k`` columns: the columns, the line, and the run rows if it can have runs."""
    return k + 1 + (run_rows if k >= 1 else 0)


@njit(cache=True, inline="always")
def run_row(base, cap, k, which):
    """Where run row ``which`` (``PIDS_ROW``, ``STARTS_ROW``, ``INDEX_ROW``) of a cluster at ``base`` starts."""
    return base + (k + which) * cap


@njit(cache=True, inline="always")
def _index_len(arena, ir, nr):
    """Used length of a run index row at ``ir`` (nothing if there are no runs)."""
    return 2 + 2 * arena[ir + 1] if nr > 0 else 0


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
            n = _index_len(src, ob + r * oc, c_runs[c])
        dst[used + r * new_cap : used + r * new_cap + n] = src[ob + r * oc : ob + r * oc + n]
    c_base[c] = used
    c_cap[c] = new_cap
    return used + rows * new_cap


@njit(cache=True)
def _relocate(arena, used, c_base, c_cap, c_len, c_k, c_runs, run_rows, clusters, new_caps):
    for i in range(clusters.shape[0]):
        used = _move(arena, arena, clusters[i], c_base, c_cap, c_len, c_k, c_runs, run_rows, used, new_caps[i])
    return used


@njit(cache=True, inline="always")
def _copy_entry(arena, b, cap, k, src, dst, e_pos):
    """Move the entry at position ``src`` of a cluster to position ``dst`` (rows 0..k) and record where it went."""
    for r in range(k + 1):
        arena[b + r * cap + dst] = arena[b + r * cap + src]
    e_pos[arena[b + k * cap + dst]] = dst


@njit(cache=True)
def _sort_runs(arena, c, c_base, c_cap, c_len, c_k, c_sorted, c_runs, e_pos):
    """Merge cluster ``c``'s unsorted tail into its sorted prefix and rebuild the run rows."""
    b, cap, k = c_base[c], c_cap[c], c_k[c]
    n, ns = c_len[c], c_sorted[c]
    t = n - ns
    tkeys = np.empty(t, dtype=np.int64)
    for j in range(t):
        tkeys[j] = arena[b + ns + j]
    order = np.argsort(tkeys)
    perm = np.empty(n, dtype=np.int64)
    i = 0
    j = 0
    for w in range(n):
        if j >= t or (i < ns and arena[b + i] <= tkeys[order[j]]):
            perm[w] = i
            i += 1
        else:
            perm[w] = ns + order[j]
            j += 1
    buf = np.empty(n, dtype=arena.dtype)
    for r in range(k + 1):
        row = b + r * cap
        for w in range(n):
            buf[w] = arena[row + perm[w]]
        arena[row : row + n] = buf
    line = b + k * cap
    for w in range(n):
        e_pos[arena[line + w]] = w
    pr, sr = run_row(b, cap, k, PIDS_ROW), run_row(b, cap, k, STARTS_ROW)
    nr = 0
    for w in range(n):
        p = arena[b + w]
        if w == 0 or p != arena[pr + nr - 1]:
            arena[pr + nr] = p
            arena[sr + nr] = w
            nr += 1
    c_sorted[c] = n
    c_runs[c] = nr
    _build_index(arena, run_row(b, cap, k, INDEX_ROW), cap, arena[pr], arena[pr + nr - 1], arena[pr : pr + nr])


@njit(cache=True, inline="always")
def _build_index(arena, ir, cap, lo, hi, pids):
    """Write the run index of sorted distinct ``pids`` (``lo`` .. ``hi``) at row ``ir``; ``W = 0`` if it does not fit."""
    w = ((hi - lo) >> 5) + 1
    if 2 + 2 * w > cap:
        arena[ir], arena[ir + 1] = lo, 0
        return
    arena[ir], arena[ir + 1] = lo, w
    arena[ir + 2 : ir + 2 + 2 * w] = 0
    for r in range(pids.shape[0]):
        o = pids[r] - lo
        word = ir + 2 + (o >> 5)
        arena[word] = np.int32(_word(arena[word]) | (np.int64(1) << (o & 31)))
    for j in range(1, w):
        arena[ir + 2 + w + j] = arena[ir + 2 + w + j - 1] + popcount32(_word(arena[ir + 2 + j - 1]))


@njit(cache=True, inline="always")
def _word(x):
    """An int32 bitmap word as its 32 bits in a non-negative int64."""
    return np.int64(x) & 0xFFFFFFFF


@njit(cache=True, inline="always")
def popcount32(v):
    """Set bits of a 32-bit word held in a non-negative int64 (SWAR)."""
    v = v - ((v >> 1) & 0x55555555)
    v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
    v = (v + (v >> 4)) & 0x0F0F0F0F
    return ((v * 0x01010101) >> 24) & 0xFF


@njit(cache=True, inline="always")
def _unindex(arena, ir, p):
    """Drop predicate ``p``'s run from the run index at ``ir`` (its bit, and one from the later ranks)."""
    w = arena[ir + 1]
    if w == 0:
        return
    o = p - arena[ir]
    word = ir + 2 + (o >> 5)
    arena[word] = np.int32(_word(arena[word]) & ~(np.int64(1) << (o & 31)))
    for j in range((o >> 5) + 1, w):
        arena[ir + 2 + w + j] -= 1


@njit(cache=True, inline="always")
def index_run(arena, ir, p):
    """The run whose first column is predicate ``p``, from the run index at ``ir``; -1 if none (or no index)."""
    w = arena[ir + 1]
    o = p - arena[ir]
    if o < 0 or o >= w * 32:
        return -1
    word = _word(arena[ir + 2 + (o >> 5)])
    bit = np.int64(1) << (o & 31)
    if word & bit == 0:
        return -1
    return arena[ir + 2 + w + (o >> 5)] + popcount32(word & (bit - 1))


@njit(cache=True)
def _settle(arena, c_base, c_cap, c_len, c_k, c_sorted, c_runs, e_pos, clusters, run_min):
    """Sort the unsorted tails of the given clusters that have outgrown their limit (see the module docstring)."""
    for i in range(clusters.shape[0]):
        c = clusters[i]
        if c_k[c] < 1 or c_len[c] < run_min:
            continue
        if c_len[c] - c_sorted[c] > max(run_min >> 2, c_sorted[c] >> RUN_TAIL_SHIFT):
            _sort_runs(arena, c, c_base, c_cap, c_len, c_k, c_sorted, c_runs, e_pos)


@njit(cache=True)
def _sort_tails(arena, key_head, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, e_pos, keys, run_min, shift):
    """Merge the unsorted tail of every cluster with runs in the lists of ``keys`` once it holds at least
    ``c_len >> shift`` entries; returns the entries merged."""
    merged = 0
    for i in range(keys.shape[0]):
        c = key_head[keys[i]]
        while c >= 0:
            tail = c_len[c] - c_sorted[c]
            if c_k[c] >= 1 and c_len[c] >= run_min and tail > 0 and tail >= (c_len[c] >> shift):
                merged += c_len[c] - c_sorted[c]
                _sort_runs(arena, c, c_base, c_cap, c_len, c_k, c_sorted, c_runs, e_pos)
            c = c_next[c]
    return merged


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
def _remove(arena, c_base, c_cap, c_len, c_k, c_sorted, c_runs, e_cluster, e_pos, entries):
    for i in range(entries.shape[0]):
        e = entries[i]
        c = e_cluster[e]
        p = e_pos[e]
        b, cap, k = c_base[c], c_cap[c], c_k[c]
        hole = p
        ns = c_sorted[c]
        if p < ns:
            # close the hole run by run: each later run gives up its last entry to the slot before it
            pr, sr = run_row(b, cap, k, PIDS_ROW), run_row(b, cap, k, STARTS_ROW)
            nr = c_runs[c]
            lo, hi = 0, nr - 1
            while lo < hi:  # the run holding p: the last one starting at or before it
                mid = (lo + hi + 1) >> 1
                if arena[sr + mid] <= p:
                    lo = mid
                else:
                    hi = mid - 1
            r = lo
            end = arena[sr + r + 1] if r + 1 < nr else ns
            d = 1 if end - arena[sr + r] == 1 else 0  # run r empties
            gone = arena[pr + r]
            if end - 1 != hole:
                _copy_entry(arena, b, cap, k, end - 1, hole, e_pos)
            hole = end - 1
            for r2 in range(r + 1, nr):
                e2 = arena[sr + r2 + 1] if r2 + 1 < nr else ns
                if e2 - 1 != hole:
                    _copy_entry(arena, b, cap, k, e2 - 1, hole, e_pos)
                arena[sr + r2 - d] = arena[sr + r2] - 1
                arena[pr + r2 - d] = arena[pr + r2]
                hole = e2 - 1
            c_runs[c] = nr - d
            c_sorted[c] = ns - 1  # == hole: the first slot of the tail
            if d == 1:
                _unindex(arena, run_row(b, cap, k, INDEX_ROW), gone)
        last = c_len[c] - 1
        if hole != last:
            _copy_entry(arena, b, cap, k, last, hole, e_pos)
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
def _compact_caps(arena, c_base, c_cap, c_len, c_k, c_runs, run_rows, n_clusters, slack):
    """Capacity of each cluster after compaction: len + len/2**slack (at most ``ROOM_MAX`` or an eighth of len,
    whichever is more), and room for its run index."""
    caps = np.zeros(n_clusters, dtype=np.int64)
    for c in range(n_clusters):
        if c_k[c] >= 0:  # (free cluster ids have k = -1)
            n = c_len[c]
            caps[c] = n + min(n >> slack, max(n >> 3, ROOM_MAX))
            if run_rows and c_k[c] >= 1:
                caps[c] = max(caps[c], _index_len(arena, run_row(c_base[c], c_cap[c], c_k[c], INDEX_ROW), c_runs[c]))
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
    """

    def __init__(self, runs: int = 0) -> None:
        self.run_min = int(runs)
        self.run_rows = RUN_ROWS if runs else 0
        self._no_runs = np.zeros(0, dtype=np.int64)  # what scan_args hands the kernels without runs
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
            self.key_head = grow(self.key_head, int(keys.max()) + 1, -1)
            nk, nkk = rows[first, 0], rows[first, 1]
            self.c_base[ids], self.c_cap[ids], self.c_len[ids] = self.used, 0, 0
            self.c_sorted[ids], self.c_runs[ids] = 0, 0
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
        self._log_keys(np.array([key], dtype=np.int64))
        f = np.array(freed, dtype=np.int64)
        rows = np.stack([self.c_key[f], self.c_k[f]], axis=1)
        self.index.delete(rows)
        self.garbage += int(np.sum(self.rows(self.c_k[f]) * self.c_cap[f]))
        self.c_cap[f] = 0
        self.c_len[f] = 0
        self.c_sorted[f] = 0
        self.c_runs[f] = 0
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
            _settle(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.c_sorted, self.c_runs, self.e_pos,
                    uc.astype(np.int64), self.run_min)

    def sort_tails(self, keys: np.ndarray, shift: int = TAIL_MERGE_SHIFT) -> int:
        """Merge the tails of the lists of ``keys`` that hold at least ``len >> shift`` entries into their runs.

        Inserts wait in a tail scanned entry by entry until it outgrows an
        eighth of the sorted prefix; at equilibrium a long list then carries a
        tail of about a sixteenth of its size on average.  The dynamic
        maintenance merges the tails of the hot lists at each round once they
        hold a 64th of the list, which bounds the merging to 64 entries moved
        per insert (docs/clustering.md, "Runs").  Returns the entries merged.
        """
        if not self.run_rows:
            return 0
        keys = np.asarray(keys, dtype=np.int64)
        keys = keys[(keys >= 0) & (keys < len(self.key_head))]
        if len(keys) == 0:
            return 0
        self._log_keys(keys)
        return int(_sort_tails(self.arena, self.key_head, self.c_next, self.c_base, self.c_cap, self.c_len, self.c_k,
                               self.c_sorted, self.c_runs, self.e_pos, keys, self.run_min, int(shift)))

    def payload(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(flat columns, offsets) of entries, e.g. to drop their predicate references."""
        return _payload(self.arena, self.c_base, self.c_cap, self.c_k, self.e_cluster, self.e_pos, entries.astype(np.int64))

    def remove(self, entries: np.ndarray) -> None:
        """Swap-remove entries (O(k) each; O(k x runs) from a sorted prefix).

        A cluster losing many entries at once is unsorted first (its entries
        all become tail, removed in O(k) each) and sorted again afterwards.
        """
        entries = entries.astype(np.int64)
        self._log_keys(self.c_key[self.e_cluster[entries]])
        heavy = self._no_runs
        if self.run_rows and len(entries) > 1:
            uc, counts = np.unique(self.e_cluster[entries], return_counts=True)
            heavy = uc[counts > np.maximum(4, self.c_sorted[uc] >> 4)]
            self.c_sorted[heavy] = 0
            self.c_runs[heavy] = 0
        _remove(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.c_sorted, self.c_runs,
                self.e_cluster, self.e_pos, entries)
        if len(heavy):
            _settle(self.arena, self.c_base, self.c_cap, self.c_len, self.c_k, self.c_sorted, self.c_runs, self.e_pos,
                    heavy, self.run_min)

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
            return RunArrays(self.c_sorted, self.c_runs)
        return RunArrays(self._no_runs, self._no_runs)

    def stats(self) -> dict:
        live = self.c_k[: self.ids.high] >= 0
        sizes = self.c_len[: self.ids.high][live]
        return {
            "clusters": int(np.count_nonzero(live)),
            "nonempty_clusters": int(np.count_nonzero(sizes)),
            "sorted_entries": int(self.c_sorted[: self.ids.high][live].sum()),
            "runs": int(self.c_runs[: self.ids.high][live].sum()),
            "largest_cluster": int(sizes.max()) if len(sizes) else 0,
            "arena_used": self.used,
            "arena_garbage": self.garbage,
            "cluster_hash_slots": len(self.index.vals),
            "memory_bytes": int(self.arena.nbytes + self.index.nbytes + self.e_cluster.nbytes + self.e_pos.nbytes
                                + 8 * 8 * len(self.c_base) + self.key_head.nbytes),
        }
