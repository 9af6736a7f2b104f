"""Sorted runs of a cluster: their rows, run index and second level, and the kernels that write them.

*Runs* (ours, not in the paper; ``ClusterStore(runs=RUN_MIN)``, the default
of static and dynamic; ``runs=0`` gives the paper's plain clusters).  A
cluster's first ``c_sorted`` entries are kept sorted by their first column,
and two more rows list the distinct first-column predicates of that prefix
and where each run of equal ones starts.  The scan then tests one bit per run
instead of one per entry, which bounds the cost of a long cluster by the
number of distinct predicates its first column can hold (30 x 35 for W0's
(a0, a1) lists) rather than by its size, the growth the paper's dynamic
algorithm answers with more hash tables (docs/design/clustering.md, "Runs").  New
entries go to an unsorted tail, scanned entry by entry, which is merged in
once it outgrows ``c_sorted / 8``.  Every entry keeps all its columns, so
scanning the whole cluster entry by entry stays correct whatever its order.

A removal from the sorted prefix leaves a *tombstone*: the entry stays
where it is, its handle replaced by ``DEAD`` (O(1); closing the hole would
shift one entry through each later run).  The kernels test a dead entry like
any other and drop it where they would report it (:func:`put_live`), so no
run, no run row and no column changes.  A cluster whose dead entries
outnumber ``c_len >> DEAD_SHIFT`` is purged at the end of the removal
(:func:`purge_dead`: its live entries closed up in order, the run rows built
again), and every tail merge drops them too.  ``c_len`` and ``c_sorted``
count the dead entries (they are the extents the kernels read), ``c_dead``
counts them apart.

A third extra row, the *run index*, maps a predicate id to its run without
reading the run row: ``[lo, W, W bitmap words, W ranks]``, bit ``p - lo`` set
iff a run has first column ``p``, rank = runs before the word.  An event
then looks up its own satisfied predicates (a few dozen) instead of
streaming a thousand runs.  It is built with the run rows (``W = 0`` when
the ids span more than the row holds).

A *second level* (``ClusterStore(runs=..., level2=L)``; ``L`` is chosen by
the cost model, engine/costmodel/runs.py): each run of at least ``L``
entries is kept sorted by its second column, and gets an index of its own
in a side array (``sub``): the same layout as the run index over the run's
distinct second-column predicates, followed by where each sub-run of equal
ones starts.  An event then looks its satisfied predicates up in it instead
of testing every entry of the run (docs/design/clustering.md, "The second level").
A cluster's block is built again whenever its runs are (a tail merged, a
purge); a removal keeps it, since a tombstone moves no entry, and the
kernels drop a dead entry of a sub-run where they report it.

The kernels here write the runs: a tail merged in (:func:`settle_tails`,
:func:`merge_tails`), tombstones purged (:func:`purge_dead`), the run rows,
the index and the second-level blocks built again.  The lookups that decode
them (:func:`index_run`, :func:`sub_index`, :func:`sub_lookup`) stand beside
the layout they read, as ``hashtable.py``'s do; the scans that read the runs
are engine/kernels/scan.py (one event) and engine/kernels/run_lookups.py (a
group of events).  :class:`~engine.structures.cluster_store.ClusterStore`
calls the writers as entries come and go.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit


class RunArrays(NamedTuple):
    """The run bookkeeping of sorted clusters (both empty in a store without runs: nothing to read per cluster).

    Cluster ``c``'s first ``sorted[c]`` entries are sorted by column 0 into
    ``runs[c]`` runs, listed by its extra rows (:func:`run_row`).
    """

    sorted: np.ndarray  # int64 [clusters]: entries in the sorted prefix
    runs: np.ndarray  # int64 [clusters]: runs in the sorted prefix
    sub_off: np.ndarray  # int64 [clusters]: offset of the cluster's second-level block in ``sub`` (< 0: none)
    sub: np.ndarray  # int32: the second-level blocks (:func:`sub_index`)


#: Clusters shorter than this are not sorted into runs (the value to pass as ``runs``).  Below it a
#: sorted cluster is scanned plainly anyway (``engine.kernels.scan.run_path``), so sorting smaller clusters (W3's pair
#: tables hold 64-255 entries) would only cost (docs/design/clustering.md, "Why `RUN_MIN` is 256").
RUN_MIN = 256
#: Arena rows a cluster with runs has beyond its columns and line: first predicates, run starts, run index.
RUN_ROWS = 3
#: Those rows, as offsets past row ``k`` (the line); see :func:`run_row`.
PIDS_ROW, STARTS_ROW, INDEX_ROW = 1, 2, 3
#: The unsorted tail is merged into the runs once longer than max(run_min / 4, c_sorted >> RUN_TAIL_SHIFT).
RUN_TAIL_SHIFT = 3
#: The dynamic maintenance merges a hot list's tail at a round once it holds a 64th of its cluster
#: (:meth:`ClusterStore.sort_tails`): at most 64 entries moved per insert, against 8 for RUN_TAIL_SHIFT.
TAIL_MERGE_SHIFT = 6
#: ``c_sub`` of a cluster without a second-level block; of one whose runs are sorted and whose block is to be
#: built (:meth:`ClusterStore._build_sub`).
SUB_NONE, SUB_BUILD = -2, -1
#: The line entry (handle) of a removed entry of a sorted prefix: a tombstone (handles are >= 0).
DEAD = -1
#: A cluster is purged of its dead entries once they outnumber ``c_len >> DEAD_SHIFT``: at most an eighth of what
#: a scan reads is dead, and a purge (one pass over the cluster) comes after an eighth of its entries were removed.
DEAD_SHIFT = 3


@njit(cache=True, inline="always")
def run_row(base, cap, k, which):
    """Where run row ``which`` (``PIDS_ROW``, ``STARTS_ROW``, ``INDEX_ROW``) of a cluster at ``base`` starts."""
    return base + (k + which) * cap


@njit(cache=True, inline="always")
def put_live(out, nout, h):
    """Append handle ``h`` (a matching entry's) to ``out`` unless it is ``DEAD``; returns the new count.

    Without a branch: the slot is written either way and the count moves
    only for a live handle, so a scan pays one comparison per match for the
    tombstones (module docstring).
    """
    out[nout] = h
    return nout + (h >= 0)


@njit(cache=True, inline="always")
def index_len(arena, ir, nr):
    """Used length of a run index row at ``ir`` (nothing if there are no runs)."""
    return 2 + 2 * arena[ir + 1] if nr > 0 else 0


@njit(cache=True, inline="always")
def copy_entry(arena, b, cap, k, src, dst, e_pos):
    """Move the entry at position ``src`` of a cluster to position ``dst`` (rows 0..k) and record where it went."""
    for r in range(k + 1):
        arena[b + r * cap + dst] = arena[b + r * cap + src]
    e_pos[arena[b + k * cap + dst]] = dst


@njit(cache=True, inline="always")
def _sort_key(arena, b, cap, j, lex):
    """The order of the sorted prefix: the first column, then (``lex``: with a second level) the second."""
    if lex:
        return (np.int64(arena[b + j]) << 32) + arena[b + cap + j]
    return np.int64(arena[b + j])


@njit(cache=True)
def _sort_runs(arena, c, c_base, c_cap, c_len, c_k, c_sorted, c_runs, c_dead, e_pos, sub_min, c_sub, sub, sub_gc):
    """Merge cluster ``c``'s unsorted tail into its sorted prefix, dropping the dead entries, and rebuild the run
    rows; with a second level (``sub_min`` > 0), entries are ordered by their first two columns
    (:func:`_mark_level2`)."""
    b, cap, k = c_base[c], c_cap[c], c_k[c]
    n, ns = c_len[c], c_sorted[c]
    line = b + k * cap
    lex = sub_min > 0 and k >= 2
    t = n - ns
    tkeys = np.empty(t, dtype=np.int64)
    for j in range(t):
        tkeys[j] = _sort_key(arena, b, cap, ns + j, lex)
    order = np.argsort(tkeys, kind="mergesort")
    perm = np.empty(n, dtype=np.int64)
    i = 0
    j = 0
    w = 0
    while i < ns or j < t:
        if i < ns and arena[line + i] == DEAD:
            i += 1
        elif j >= t or (i < ns and _sort_key(arena, b, cap, i, lex) <= tkeys[order[j]]):
            perm[w] = i
            i += 1
            w += 1
        else:
            perm[w] = ns + order[j]
            j += 1
            w += 1
    buf = np.empty(w, dtype=arena.dtype)
    for r in range(k + 1):
        row = b + r * cap
        for v in range(w):
            buf[v] = arena[row + perm[v]]
        arena[row : row + w] = buf
    for v in range(w):
        e_pos[arena[line + v]] = v
    c_len[c] = w
    c_sorted[c] = w
    c_dead[c] = 0
    _build_runs(arena, c, c_base, c_cap, c_k, c_sorted, c_runs)
    _mark_level2(arena, c, c_base, c_cap, c_k, c_sorted, c_runs, e_pos, sub_min, c_sub, sub, sub_gc)


@njit(cache=True)
def purge_dead(arena, c, c_base, c_cap, c_len, c_k, c_sorted, c_runs, c_dead, e_pos, sub_min, c_sub, sub, sub_gc):
    """Close up cluster ``c``'s live entries in their order (the dead ones are in its sorted prefix) and rebuild
    the run rows of what is left of the prefix, and its second level (the entries moved)."""
    b, cap, k = c_base[c], c_cap[c], c_k[c]
    n = c_len[c]
    line = b + k * cap
    w = 0
    for j in range(n):
        if arena[line + j] == DEAD:
            continue
        if w != j:
            copy_entry(arena, b, cap, k, j, w, e_pos)
        w += 1
    c_len[c] = w
    c_sorted[c] -= n - w
    c_dead[c] = 0
    _build_runs(arena, c, c_base, c_cap, c_k, c_sorted, c_runs)
    _mark_level2(arena, c, c_base, c_cap, c_k, c_sorted, c_runs, e_pos, sub_min, c_sub, sub, sub_gc)


@njit(cache=True, inline="always")
def _build_runs(arena, c, c_base, c_cap, c_k, c_sorted, c_runs):
    """Write the run rows (first predicates, starts, index) of cluster ``c``'s sorted prefix."""
    b, cap, k, ns = c_base[c], c_cap[c], c_k[c], c_sorted[c]
    pr, sr = run_row(b, cap, k, PIDS_ROW), run_row(b, cap, k, STARTS_ROW)
    nr = 0
    for w in range(ns):
        p = arena[b + w]
        if w == 0 or p != arena[pr + nr - 1]:
            arena[pr + nr] = p
            arena[sr + nr] = w
            nr += 1
    c_runs[c] = nr
    if nr > 0:
        _build_index(arena, run_row(b, cap, k, INDEX_ROW), cap, arena[pr], arena[pr + nr - 1], arena[pr : pr + nr])


@njit(cache=True)
def _mark_level2(arena, c, c_base, c_cap, c_k, c_sorted, c_runs, e_pos, sub_min, c_sub, sub, sub_gc):
    """After cluster ``c``'s run rows were built: every run of at least ``sub_min`` entries is checked to be
    sorted by its second column (a run sorted before the threshold fell may not be), and the cluster's block
    is marked to be built (``SUB_BUILD``; the old one, its size ``sub[c_sub[c]]``, counted in ``sub_gc[0]`` as
    garbage)."""
    if c_sub[c] >= 0:
        sub_gc[0] += sub[c_sub[c]]
    c_sub[c] = SUB_NONE
    b, cap, k, ns, nr = c_base[c], c_cap[c], c_k[c], c_sorted[c], c_runs[c]
    if sub_min <= 0 or k < 2:
        return
    sr = run_row(b, cap, k, STARTS_ROW)
    for r in range(nr):
        s0 = arena[sr + r]
        s1 = arena[sr + r + 1] if r + 1 < nr else ns
        if s1 - s0 >= sub_min:
            _sort_run_by_second(arena, b, cap, k, s0, s1, e_pos)
            c_sub[c] = SUB_BUILD


@njit(cache=True)
def _sort_run_by_second(arena, b, cap, k, s0, s1, e_pos):
    """Order entries ``s0:s1`` (one run) by their second column, if they are not already."""
    col = b + cap
    ordered = True
    for j in range(s0 + 1, s1):
        if arena[col + j] < arena[col + j - 1]:
            ordered = False
            break
    if ordered:
        return
    order = np.argsort(arena[col + s0 : col + s1], kind="mergesort")
    m = s1 - s0
    buf = np.empty(m, dtype=arena.dtype)
    for r in range(k + 1):
        row = b + r * cap + s0
        for w in range(m):
            buf[w] = arena[row + order[w]]
        arena[row : row + m] = buf
    line = b + k * cap
    for w in range(s0, s1):
        h = arena[line + w]
        if h != DEAD:
            e_pos[h] = w


@njit(cache=True, inline="always")
def sub_index_size(w, d):
    """Ints of a second-level index of ``w`` bitmap words over ``d`` distinct predicates (:func:`write_sub_index`)."""
    return 3 + w + ((w + 1) >> 1) + ((d + 2) >> 1)


@njit(cache=True, inline="always")
def sub_half(sub, at, j):
    """The ``j``-th 16-bit half of the ints of ``sub`` from ``at`` (low half first)."""
    return (np.int64(sub[at + (j >> 1)]) >> (16 * (j & 1))) & 0xFFFF


@njit(cache=True)
def _put_halves(sub, at, values):
    """Write ``values`` (each below 2**16) two to an int from ``sub[at]``."""
    for j in range(0, values.shape[0], 2):
        v = values[j] | ((values[j + 1] << 16) if j + 1 < values.shape[0] else 0)
        sub[at + (j >> 1)] = np.int32(v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v)


@njit(cache=True)
def write_sub_index(sub, x, lo, w, s0, pids, bounds):
    """The second-level index of one run at ``sub[x]``: ``[lo, w, s0]``, a bitmap of ``w`` words over the run's
    distinct second-column predicates ``pids`` (sorted; bit ``p - lo``, ``lo`` a multiple of 32 so that word ``q``
    lines up with word ``lo / 32 + q`` of an event's satisfied predicates), then, 16 bits each, the sub-runs
    before each word (its rank) and the ``D + 1`` bounds of the ``D`` sub-runs (entry positions less ``s0``)."""
    sub[x], sub[x + 1], sub[x + 2] = lo, w, s0
    words = np.zeros(w, dtype=np.int64)
    for q in range(pids.shape[0]):
        o = pids[q] - lo
        words[o >> 5] |= np.int64(1) << (o & 31)
    ranks = np.zeros(w, dtype=np.int64)
    for q in range(w):
        v = words[q]
        sub[x + 3 + q] = np.int32(v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v)
        if q + 1 < w:
            ranks[q + 1] = ranks[q] + popcount32(v)
    _put_halves(sub, x + 3 + w, ranks)
    _put_halves(sub, x + 3 + w + ((w + 1) >> 1), bounds)


@njit(cache=True, inline="always")
def sub_lookup(sub, x, p):
    """Entries ``(start, end)`` of predicate ``p``'s sub-run in the second-level index at ``x``; ``(-1, -1)`` if none."""
    w = sub[x + 1]
    o = p - sub[x]
    if o < 0 or o >= 32 * w:
        return -1, -1
    word = np.int64(sub[x + 3 + (o >> 5)]) & 0xFFFFFFFF
    bit = np.int64(1) << (o & 31)
    if word & bit == 0:
        return -1, -1
    d = sub_half(sub, x + 3 + w, o >> 5) + popcount32(word & (bit - 1))
    bounds = x + 3 + w + ((w + 1) >> 1)
    return sub[x + 2] + sub_half(sub, bounds, d), sub[x + 2] + sub_half(sub, bounds, d + 1)


@njit(cache=True)
def sub_blocks(arena, sub, c_base, c_cap, c_k, c_sorted, c_runs, clusters, offsets, sub_min, write):
    """The second-level blocks of ``clusters``: their sizes, or (``write``) the blocks themselves at ``offsets``.

    A block at ``o``: its size, then per run the offsets (from ``o``) where
    the run's index (:func:`write_sub_index`) starts and ends, or -1 for a
    run shorter than ``sub_min``, of 2**16 entries or more, or whose
    second-column ids span more words than it has entries (the end is there
    so that the kernel prefetches the index without reading it first).
    Returns the sizes.
    """
    sizes = np.zeros(clusters.shape[0], dtype=np.int64)
    for i in range(clusters.shape[0]):
        c = clusters[i]
        b, cap, k, ns, nr = c_base[c], c_cap[c], c_k[c], c_sorted[c], c_runs[c]
        sr = run_row(b, cap, k, STARTS_ROW)
        o = offsets[i] if write else 0
        size = 1 + 2 * nr
        for r in range(nr):
            s0 = arena[sr + r]
            s1 = arena[sr + r + 1] if r + 1 < nr else ns
            m = s1 - s0
            lo, hi = (arena[b + cap + s0] >> 5) << 5, arena[b + cap + s1 - 1]
            w = ((hi - lo) >> 5) + 1
            if m < sub_min or w > m or m >= (1 << 16):
                if write:
                    sub[o + 1 + 2 * r] = sub[o + 2 + 2 * r] = -1
                continue
            d = 1
            for j in range(s0 + 1, s1):
                if arena[b + cap + j] != arena[b + cap + j - 1]:
                    d += 1
            n_ints = sub_index_size(w, d)
            if write:
                sub[o + 1 + 2 * r] = size
                sub[o + 2 + 2 * r] = size + n_ints
                pids = np.empty(d, dtype=np.int64)
                bounds = np.empty(d + 1, dtype=np.int64)
                q = 0
                for j in range(s0, s1):
                    p = arena[b + cap + j]
                    if j == s0 or p != arena[b + cap + j - 1]:
                        pids[q] = p
                        bounds[q] = j - s0
                        q += 1
                bounds[d] = m
                write_sub_index(sub, o + size, lo, w, s0, pids, bounds)
            size += n_ints
        if write:
            sub[o] = size
        sizes[i] = size
    return sizes


@njit(cache=True, inline="always")
def sub_pointer(sub_off, c, r):
    """Where ``sub`` says where run ``r`` of cluster ``c``'s second-level index starts (and, next, ends); -1: no
    block."""
    o = sub_off[c]
    return o + 1 + 2 * r if o >= 0 else -1


@njit(cache=True, inline="always")
def sub_index(sub, sub_off, c, r):
    """(start, end) of the second-level index of run ``r`` of cluster ``c`` in ``sub``; (-1, -1) if none."""
    t = sub_pointer(sub_off, c, r)
    if t < 0 or sub[t] < 0:
        return -1, -1
    o = sub_off[c]
    return o + sub[t], o + sub[t + 1]


@njit(cache=True)
def copy_sub_blocks(sub, new, c_sub, clusters):
    """Copy the blocks of ``clusters`` densely into ``new`` (their offsets updated); returns the size used."""
    used = 0
    for i in range(clusters.shape[0]):
        c = clusters[i]
        o = c_sub[c]
        size = sub[o]
        new[used : used + size] = sub[o : o + size]
        c_sub[c] = used
        used += size
    return used


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
def settle_tails(arena, c_base, c_cap, c_len, c_k, c_sorted, c_runs, c_dead, e_pos, clusters, run_min, sub_min, c_sub,
                 sub, sub_gc):
    """Sort the unsorted tails of the given clusters that have outgrown their limit (see the module docstring)."""
    for i in range(clusters.shape[0]):
        c = clusters[i]
        if c_k[c] < 1 or c_len[c] < run_min:
            continue
        if c_len[c] - c_sorted[c] > max(run_min >> 2, c_sorted[c] >> RUN_TAIL_SHIFT):
            _sort_runs(arena, c, c_base, c_cap, c_len, c_k, c_sorted, c_runs, c_dead, e_pos, sub_min, c_sub, sub, sub_gc)


@njit(cache=True)
def merge_tails(arena, key_head, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, c_dead, e_pos, keys, run_min,
                shift, sub_min, c_sub, sub, sub_gc):
    """Merge the unsorted tail of every cluster with runs in the lists of ``keys`` once it holds at least
    ``c_len >> shift`` entries, and sort again those whose second level a removal dropped; returns the entries
    merged."""
    merged = 0
    for i in range(keys.shape[0]):
        c = key_head[keys[i]]
        while c >= 0:
            tail = c_len[c] - c_sorted[c]
            if c_k[c] >= 1 and c_len[c] >= run_min and tail > 0 and tail >= (c_len[c] >> shift):
                merged += c_len[c] - c_sorted[c]
                _sort_runs(arena, c, c_base, c_cap, c_len, c_k, c_sorted, c_runs, c_dead, e_pos, sub_min, c_sub, sub,
                           sub_gc)
            c = c_next[c]
    return merged

