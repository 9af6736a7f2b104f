"""Cluster scan kernels (section 2.2, "the cluster matching algorithm").

For a cluster of subscriptions with ``k`` predicates left to check, entry
``j`` matches iff ``bits[col_r[j]]`` is set for every column ``r``; columns
are tested left to right and the test stops at the first zero, so later
columns are only read for the few entries that survive the first ones
("Cache performance").

As in the paper there is one specialised kernel per ``k`` in 0..10 (``k`` is
a compile-time constant, so the column loop is unrolled) and one generic
kernel; they are one function, :func:`scan_cluster`, which numba compiles
once per constant ``K`` (literal specialisation) rather than ten copies.
:func:`scan_dispatch` selects on ``k`` at run time.

The prefetching variant (propagation-wp) walks the cluster in blocks of
``UNFOLD`` entries and, before each block, prefetches the first
``PREFETCH_COLUMNS`` columns ``LOOKAHEAD`` entries ahead (section 2.2).  The
defaults were chosen by measurement on W0 at 6M subscriptions
(``python -m benchmarks.engine.algorithms --tune``, docs/benchmarks.md): column 0 is a
sequential stream the hardware prefetcher follows anyway; what pays is
prefetching the later columns, which are read only after a mispredicted
branch and otherwise cost one unoverlapped cache miss each.  The prefetch
is LLVM's ``llvm.prefetch`` intrinsic (engine/kernels/prefetch.py), emitted through
``numba.extending.intrinsic``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..structures.sorted_runs import INDEX_ROW, PIDS_ROW, STARTS_ROW, index_run, put_live, run_row
from .prefetch import prefetch
from .sorting import sort_slice

MAX_SPECIALISED = 10
#: A sorted prefix is scanned run by run only if it has at least this many entries per run: a run test
#: (two dependent cache misses when it passes) costs about as much as three plain entry tests
#: (docs/design/clustering.md, "Runs").
RUN_GAIN = 3
#: The run index is used when the sorted prefix has this many times more entries than the event has
#: satisfied predicates to look up.
INDEX_GAIN = 12
UNFOLD = 8
LOOKAHEAD = 256
PREFETCH_COLUMNS = 3


@njit(cache=True, inline="always")
def entry_matches(K, k, arena, bits, base, cap, j):
    """Entry ``j`` of a cluster has the bit of every one of its ``k`` columns set (``K`` >= 0: ``k`` as a constant)."""
    # unsigned indexes: no negative-index wraparound code in the hot loop
    for r in range(k if K < 0 else K):
        if bits[np.uint64(arena[np.uint64(base + r * cap + j)])] == 0:
            return False
    return True


@njit(cache=True, _nrt=False)
def scan_cluster(K, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout):
    """Append to ``out`` the line entries (handles) of the matching entries of one cluster (its dead ones dropped).

    ``K``, ``pf``, ``unfold``, ``lookahead`` are passed as constants, so numba
    compiles one specialisation per value (``K`` columns unrolled; ``K = -1``
    is the generic kernel reading ``k`` at run time).  ``pf`` = number of
    leading columns to prefetch (0: the plain propagation scan).  ``out``
    must have room for ``n`` more; returns the new count.
    """
    kk = k if K < 0 else K
    line = base + kk * cap
    j = 0
    if pf > 0:
        npf = min(pf, kk)
        while j + unfold <= n:
            for r in range(npf):
                prefetch(arena, base + r * cap + j + lookahead)
            for jj in range(j, j + unfold):
                if entry_matches(K, kk, arena, bits, base, cap, jj):
                    nout = put_live(out, nout, arena[np.uint64(line + jj)])
            j += unfold
    for jj in range(j, n):
        if entry_matches(K, kk, arena, bits, base, cap, jj):
            nout = put_live(out, nout, arena[np.uint64(line + jj)])
    return nout


@njit(cache=True, _nrt=False)
def scan_dispatch(pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout):
    """Call the specialisation of :func:`scan_cluster` for ``k`` (0..10), else the generic one.

    One call per constant, written out: numba specialises on a literal ``K``,
    which a loop over the values would pass as a variable.
    """
    if k == 0:
        return scan_cluster(0, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 1:
        return scan_cluster(1, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 2:
        return scan_cluster(2, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 3:
        return scan_cluster(3, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 4:
        return scan_cluster(4, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 5:
        return scan_cluster(5, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 6:
        return scan_cluster(6, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 7:
        return scan_cluster(7, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 8:
        return scan_cluster(8, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 9:
        return scan_cluster(9, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    if k == 10:
        return scan_cluster(10, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)
    return scan_cluster(-1, pf, unfold, lookahead, k, arena, bits, base, cap, n, out, nout)


@njit(cache=True, inline="always")
def predicate_list_key(pred_key, sat, t):
    """Access key of the list an event reaches without a table: the catch-all (key 0) for ``t = -1``, else the
    single-predicate key of its satisfied predicate ``sat[t]`` (-1 if none)."""
    if t < 0:
        return 0
    p = sat[t]
    return pred_key[p] if p < pred_key.shape[0] else -1


@njit(cache=True, inline="always")
def scan_clusters_into(c, arena, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, bits, out, nout, pf, unfold,
                       lookahead, sat, sat0, nsat):
    """Scan cluster ``c`` and the clusters after it in its list (one per number of columns left): each sorted
    prefix by its runs (:func:`scan_runs_into`), then the entries after it.

    For callers without numba's reference-counting runtime: from the store's arrays (unpacked once by the caller)
    and the event's satisfied predicates ``sat[sat0:sat0 + nsat]`` (the set bits, which the run index looks up);
    ``out`` is not grown: returns the new count, or -1 when ``out`` has no room for a cluster (the caller grows it
    and starts again).  A sorted prefix's passing runs are collected at the end of ``out``, which needs room for
    them too."""
    while c >= 0:
        n = c_len[c]
        if n > 0:
            path = run_path_of(c_sorted, c_runs, c, nsat)
            nr = c_runs[c] if path != PLAIN else 0
            if nout + n + nr > out.shape[0]:
                return -1
            ns = 0
            if path != PLAIN:
                ns = c_sorted[c]
                nout = scan_runs_into(c_k[c], arena, bits, c_base[c], c_cap[c], ns, nr, out, nout, lookahead,
                                      path == BY_INDEX, sat, sat0, nsat, out, out.shape[0] - nr)
            if n > ns:
                nout = scan_dispatch(pf, unfold, lookahead, c_k[c], arena, bits, c_base[c] + ns, c_cap[c], n - ns,
                                     out, nout)
        c = c_next[c]
    return nout


PLAIN, BY_RUN, BY_INDEX = 0, 1, 2


@njit(cache=True, inline="always")
def run_path(runs, c, nsat):
    """How to scan cluster ``c``'s sorted prefix for an event with ``nsat`` satisfied predicates.

    Decided from the cluster's bookkeeping alone, so that a cluster scanned
    entry by entry costs no read of its run rows.  A store without runs
    passes empty :class:`~engine.structures.sorted_runs.RunArrays`: nothing more to
    read per cluster than the paper's plain clusters.
    """
    return run_path_of(runs.sorted, runs.runs, c, nsat)


@njit(cache=True, inline="always")
def run_path_of(c_sorted, c_runs, c, nsat):
    """:func:`run_path` from the arrays of the :class:`~engine.structures.sorted_runs.RunArrays` (unpacked once by the caller)."""
    if c_sorted.shape[0] == 0:
        return PLAIN
    ns, nr = c_sorted[c], c_runs[c]
    if ns == 0:
        return PLAIN
    if INDEX_GAIN * nsat < ns:
        return BY_INDEX
    if RUN_GAIN * nr <= ns:
        return BY_RUN
    return PLAIN


@njit(cache=True, _nrt=False)
def scan_runs_into(k, arena, bits, base, cap, ns, nr, out, nout, lookahead, by_index, sat, sat0, nsat, hits, h0):
    """Append the matching entries of a cluster's sorted prefix (``ns`` entries in ``nr`` runs; engine/structures/sorted_runs.py).

    The runs that pass are found either by one bit test per run or, with
    ``by_index``, by looking the event's satisfied predicates up in the run
    index; the other columns are read only for the entries of those runs.
    All are cache misses that no hardware prefetcher foresees (the run row
    is a short cold stream, the passing runs scattered), so the run row is
    prefetched ``lookahead`` runs ahead, and the passing runs are collected
    first, in ``hits[h0:h0 + nr]``, and their columns prefetched together
    before any is read.  The event's satisfied predicates are
    ``sat[sat0:sat0 + nsat]``.  No allocation: callable without numba's
    reference-counting runtime; ``hits`` may be ``out``, past the ``ns``
    entries it must have room for.
    """
    pr, sr, ir = run_row(base, cap, k, PIDS_ROW), run_row(base, cap, k, STARTS_ROW), run_row(base, cap, k, INDEX_ROW)
    line = base + k * cap
    by_index = by_index and arena[ir + 1] > 0  # (no index: its ids spanned more than the row holds)
    nh = h0
    if by_index:
        for t in range(sat0, sat0 + nsat):
            r = index_run(arena, ir, sat[t])
            if r >= 0:
                hits[nh] = r
                nh += 1
    else:
        for r in range(0, min(nr, lookahead), 16):
            prefetch(arena, pr + r)
        r0 = 0
        while r0 < nr:
            prefetch(arena, pr + r0 + lookahead)
            for r in range(r0, min(nr, r0 + 16)):
                if bits[np.uint64(arena[np.uint64(pr + r)])] != 0:
                    hits[nh] = r
                    nh += 1
            r0 += 16
    for h in range(h0, nh):
        prefetch(arena, sr + hits[h])
    for h in range(h0, nh):
        # the second column (the line if there is none): the next read, which few entries get past
        prefetch(arena, base + cap + arena[sr + hits[h]])
    for h in range(h0, nh):
        r = hits[h]
        end = arena[sr + r + 1] if r + 1 < nr else ns
        for j in range(arena[sr + r], end):
            if entry_matches(-1, k - 1, arena, bits, base + cap, cap, j):  # the columns after the first
                nout = put_live(out, nout, arena[line + j])
    return nout


@njit(cache=True, inline="always")
def ensure_room(out, nout, n):
    """``out`` with room for ``n`` more results after ``nout`` (amortised doubling)."""
    if nout + n <= out.shape[0]:
        return out
    bigger = np.empty(max(2 * out.shape[0], nout + n), dtype=np.int64)
    bigger[:nout] = out[:nout]
    return bigger


@njit(cache=True, inline="always")
def doubled(a, n):
    """``a`` twice as long (16 at least), its first ``n`` entries kept: how a batch loop grows the array one of its
    loops without reference counting found full, before it resumes."""
    bigger = np.empty(max(2 * a.shape[0], 16), dtype=a.dtype)
    bigger[:n] = a[:n]
    return bigger


@njit(cache=True, inline="always")
def finish_events(out, out_off, e0, e1, handle_id, nout):
    """:func:`finish_event` for the events ``e0:e1`` a loop completed (``out[nout:]``, free, is the sort's buffer)."""
    for e in range(e0, e1):
        finish_event(out, out_off[e], out_off[e + 1], handle_id, nout)


@njit(cache=True, inline="always")
def finish_event(out, start, nout, handle_id, free=-1):
    """Turn an event's matched handles into subscription ids, ascending (``free``: see ``sort_slice``)."""
    for t in range(start, nout):
        out[t] = handle_id[out[t]]
    sort_slice(out, start, nout, free)
