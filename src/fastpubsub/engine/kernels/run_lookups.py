"""Stage 5 of the clustered matching (engine/kernels/probing.py): the runs a group of events finds, read in stages.

:func:`stage_runs` takes each link of an indexed cluster's scan (the index
row, the runs found, their second column, their later columns) for every
event of a group before the next, so that the misses overlap
(docs/design/clustering.md, "Probing"); each of its steps has a naive reference in
``tests/support/naive.py``.  The runs, their index and their second level are
laid out and written by engine/structures/sorted_runs.py; a cluster the group
does not stage has its runs scanned event by event (engine/kernels/scan.py,
``scan_runs_into``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..structures.sorted_runs import (INDEX_ROW, STARTS_ROW, index_run, popcount32, run_row, sub_half, sub_index,
                                      sub_pointer)
from .scan import BY_INDEX, prefetch, run_path_of

#: ``probe[t, 2]`` of a probe whose first cluster's sorted prefix :func:`stage_runs` scans.
STAGED = -2
#: How many runs ahead :func:`stage_runs` reads a run's bounds (and twice that, prefetches its start).  Past a
#: few million W0 subscriptions a run holds about 8 entries and an event finds 30 runs; fewer runs ahead do not
#: cover the misses there, more gain nothing (``python -m benchmarks.engine.flatness --ahead``, docs/design/clustering.md
#: "Flatness: what grows with N").
RUN_AHEAD = 16
#: :func:`runs_entries_into` tests the second column without a branch per entry once more than one in this many
#: of the entries it has tested passed: W1's and W2's inequalities hold for about half of them, and each
#: mispredicted branch costs more than the stores of a failing entry; W0's equalities hold for 1 in 35, and
#: there the stores cost more than the branch (``python -m benchmarks.experiments.trees --workloads W0``).
BRANCHLESS_PASS_RATE = 8
#: Subscription ids per cache line of the arena (int32): the stride of a prefetch over a row.
LINE_IDS = 16


@njit(cache=True)
def stage_runs(n_grp, gs_off, lookup_end, gp_off, gsat, probe, gmask, store, runs, hit, sv, sv_off):
    """Stage 5: the run index lookups of a group's indexed clusters, in stages over the whole group.

    An indexed cluster's scan is a chain of dependent misses: the index row,
    the start of each run the event's predicates find, the run's entries in
    the second column, the few that pass in the third.  Per event they add
    up; here each link is taken for every event of the group before the
    next, prefetching what the next reads, so the misses overlap:
    :func:`runs_index_rows`, :func:`runs_found`, :func:`runs_entries`,
    :func:`runs_later_columns`.
    Leaves in ``sv[sv_off[i]:sv_off[i + 1]]`` the (cluster, entry) pairs of
    event ``i`` whose every column holds (:func:`runs_later_columns`), and
    ``gmask`` at rest.  The run indexes are looked up for ``gsat[gs_off[i]:lookup_end[i]]``
    (``gs_off[i + 1]``, or the event's equalities alone when no filed entry
    has another operator in its first column: W2's events satisfy 133
    predicates, 26 of them equalities).  Returns the scratch arrays
    ``(hit, sv)``, grown if needed.
    """
    runs_index_rows(n_grp, gs_off, gp_off, gsat, probe, gmask, store, runs)
    hit, nh = runs_found(n_grp, gs_off, lookup_end, gp_off, gsat, probe, store, hit)
    sv = runs_entries(n_grp, gs_off, gsat, hit, nh, gmask, store, runs, sv, sv_off)
    runs_later_columns(n_grp, gp_off, probe, gmask, store, sv, sv_off)
    for i in range(n_grp):
        for s in range(gs_off[i], gs_off[i + 1]):
            gmask[gsat[s]] = 0
    return hit, sv


@njit(cache=True, _nrt=False)
def runs_index_rows(n_grp, gs_off, gp_off, gsat, probe, gmask, store, runs):
    """Stage 5a: mark the probes whose first cluster takes the run index (``probe[t, 2] = STAGED``), prefetch the rows.

    Also sets ``gmask`` (bit ``i`` of ``gmask[p]``: event ``i`` of the group
    satisfies ``p``), which :func:`runs_entries` checks the second column
    with, since the per-event bits are set one event at a time.
    """
    arena, c_base, c_cap, c_k, c_len = store.arena, store.base, store.cap, store.k, store.length
    c_sorted, c_runs = runs.sorted, runs.runs
    for i in range(n_grp):
        nsat = gs_off[i + 1] - gs_off[i]
        for s in range(gs_off[i], gs_off[i + 1]):
            gmask[gsat[s]] |= np.uint32(1 << i)
        for t in range(gp_off[i], gp_off[i + 1]):
            c = probe[t, 1]
            if c >= 0 and c_len[c] > 0 and run_path_of(c_sorted, c_runs, c, nsat) == BY_INDEX:
                ir = run_row(c_base[c], c_cap[c], c_k[c], INDEX_ROW)
                w = arena[ir + 1]  # (0: no index, its ids spanned more than the row holds)
                if w > 0:
                    probe[t, 2] = STAGED
                    for r in range(16, 2 + 2 * w, 16):
                        prefetch(arena, ir + r)


@njit(cache=True)
def runs_found(n_grp, gs_off, lookup_end, gp_off, gsat, probe, store, hit):
    """Stage 5b: the runs each event's satisfied predicates find in its staged clusters, their starts prefetched.

    Rows ``hit[:nh]`` are ``(event, cluster, run, -, -)``; returns ``(hit, nh)``
    (``hit`` grown first to the group's index lookups, so that the loop,
    :func:`runs_found_into`, allocates nothing).
    """
    lookups = 0
    for i in range(n_grp):
        for t in range(gp_off[i], gp_off[i + 1]):
            if probe[t, 2] == STAGED:
                lookups += lookup_end[i] - gs_off[i]
    if lookups > hit.shape[0]:
        hit = np.empty((max(2 * hit.shape[0], lookups), hit.shape[1]), dtype=hit.dtype)
    return hit, runs_found_into(n_grp, gs_off, lookup_end, gp_off, gsat, probe, store, hit)


# The loops of stage 5 run without numba's reference-counting runtime (``_nrt=False``, as the pattern kernel):
# with it, the arrays unpacked from ``store`` / ``runs`` per run and the scratch arrays reassigned by their growth
# checks cost a pair of atomic operations each (docs/design/engine.md, "Kernel contract").  They allocate nothing: their
# callers size the scratch arrays, or grow them and resume.
@njit(cache=True, _nrt=False)
def runs_found_into(n_grp, gs_off, lookup_end, gp_off, gsat, probe, store, hit):
    """The loop of :func:`runs_found`: ``hit`` has a row per index lookup of the group; returns the rows written."""
    arena, c_base, c_cap, c_k = store.arena, store.base, store.cap, store.k
    nh = 0
    for i in range(n_grp):
        for t in range(gp_off[i], gp_off[i + 1]):
            if probe[t, 2] != STAGED:
                continue
            c = probe[t, 1]
            ir = run_row(c_base[c], c_cap[c], c_k[c], INDEX_ROW)
            for s in range(gs_off[i], lookup_end[i]):
                r = index_run(arena, ir, gsat[s])
                if r >= 0:
                    hit[nh, 0], hit[nh, 1], hit[nh, 2] = i, c, r
                    nh += 1
    return nh


@njit(cache=True, inline="always")
def run_bounds_ahead(hit, h, nh, ahead, arena, c_base, c_cap, c_k, c_sorted, c_runs, sub_off, sub):
    """Step ``h`` of :func:`runs_entries`' pipeline: prefetch the start of run ``h + 2 ahead`` (and its
    second-level pointer), then read the bounds of run ``h + ahead`` into ``hit[h + ahead, 2:4]`` and its
    second-level index into ``hit[h + ahead, 4]`` (-1: none), and prefetch what is read next: the index's
    bitmap, or the run's second column."""
    h2 = h + 2 * ahead
    if h2 < nh:
        c = hit[h2, 1]
        prefetch(arena, run_row(c_base[c], c_cap[c], c_k[c], STARTS_ROW) + hit[h2, 2])
        if sub_off.shape[0] and sub_off[c] >= 0:
            prefetch(sub, sub_pointer(sub_off, c, hit[h2, 2]))
    h1 = h + ahead
    if 0 <= h1 < nh:
        c, r = hit[h1, 1], hit[h1, 2]
        sr = run_row(c_base[c], c_cap[c], c_k[c], STARTS_ROW)
        start = arena[sr + r]
        end = arena[sr + r + 1] if r + 1 < c_runs[c] else c_sorted[c]
        x, x_end = sub_index(sub, sub_off, c, r) if sub_off.shape[0] else (-1, -1)
        hit[h1, 2], hit[h1, 3], hit[h1, 4] = start, end, x
        if x >= 0:  # the whole index: a bit test per satisfied predicate, then the rank and bounds of each found
            for a in range(x, x_end, LINE_IDS):
                prefetch(sub, a)
            prefetch(sub, x_end - 1)
        else:
            prefetch(arena, c_base[c] + c_cap[c] + start)
            prefetch(arena, c_base[c] + c_cap[c] + end - 1)  # (the same line, unless the run crosses one)


@njit(cache=True)
def runs_entries(n_grp, gs_off, gsat, hit, nh, gmask, store, runs, sv, sv_off, ahead=RUN_AHEAD):
    """Stage 5c: the entries of the runs found whose second column the event satisfies, in a prefetching pipeline.

    Run ``h``'s second column is checked while run ``h + ahead``'s
    bounds are read (its second column prefetched) and run ``h + 2
    ahead``'s start is prefetched (``RUN_AHEAD``; ``benchmarks.engine.flatness
    --ahead`` compares depths).  Writes the (cluster, entry) pairs of
    event ``i`` to ``sv[sv_off[i]:sv_off[i + 1]]``; returns ``sv``.  The
    loop is :func:`runs_entries_into`, which stops where ``sv`` is full:
    ``sv`` is grown here and the loop resumed.  A run with a second level
    (engine/structures/cluster_store.py) is not tested entry by entry: the
    words of its index's bitmap are AND-ed with those of the event's
    satisfied predicates ``gsat[gs_off[i]:gs_off[i + 1]]`` (:func:`event_words`),
    and the entries of each sub-run found pass.
    """
    sv_off[:] = 0
    h, nsv = -2 * ahead, 0
    ebits = event_words(n_grp, gs_off, gsat, hit, nh, runs)
    while True:
        h, nsv = runs_entries_into(h, n_grp, ebits, hit, nh, gmask, store, runs, sv, nsv, sv_off, ahead)
        if h >= nh:
            break
        bigger = np.empty((max(2 * sv.shape[0], nsv + hit[h, 3] - hit[h, 2]), sv.shape[1]), dtype=sv.dtype)
        bigger[:nsv] = sv[:nsv]
        sv = bigger
    for i in range(n_grp):
        sv_off[i + 1] += sv_off[i]
    return sv


@njit(cache=True)
def event_words(n_grp, gs_off, gsat, hit, nh, runs):
    """Bit ``p & 31`` of word ``[i, p >> 5]``: event ``i`` of the group satisfies ``p`` -- if a run found has a
    second level (else nothing: no words), up to the group's largest satisfied predicate id."""
    sub_off = runs.sub_off
    need = False
    for h in range(nh):
        if sub_off.shape[0] and sub_off[hit[h, 1]] >= 0:
            need = True
            break
    if not need:
        return np.zeros((0, 0), dtype=np.uint32)
    top = 0
    for s in range(gs_off[0], gs_off[n_grp]):
        top = max(top, gsat[s])
    ebits = np.zeros((n_grp, (top >> 5) + 1), dtype=np.uint32)
    for i in range(n_grp):
        for s in range(gs_off[i], gs_off[i + 1]):
            p = gsat[s]
            ebits[i, p >> 5] |= np.uint32(1 << (p & 31))
    return ebits


@njit(cache=True, _nrt=False)
def runs_entries_into(h0, n_grp, ebits, hit, nh, gmask, store, runs, sv, nsv, sv_off, ahead):
    """The pipeline of :func:`runs_entries` from step ``h0`` with ``nsv`` pairs written; returns ``(h, nsv)``:
    ``h = nh`` when done, else the run whose entries ``sv`` has no room for (its step not taken yet)."""
    arena, c_base, c_cap, c_k = store.arena, store.base, store.cap, store.k
    c_sorted, c_runs, sub_off, sub = runs.sorted, runs.runs, runs.sub_off, runs.sub
    tested = passed = 0  # entries of the runs so far, and those that passed: which form of the loop to take
    for h in range(h0, nh):
        if h >= 0 and nsv + hit[h, 3] - hit[h, 2] > sv.shape[0]:
            return h, nsv
        run_bounds_ahead(hit, h, nh, ahead, arena, c_base, c_cap, c_k, c_sorted, c_runs, sub_off, sub)
        if h < 0:
            continue
        i, c, start, end, x = hit[h, 0], hit[h, 1], hit[h, 2], hit[h, 3], hit[h, 4]
        k, base, cap = c_k[c], c_base[c], c_cap[c]
        ebit = np.uint32(1 << i)
        first = nsv
        many = passed * BRANCHLESS_PASS_RATE > tested  # (of the entries tested so far: which form to take)
        j0, j1 = end, start - 1  # the entries written: their later columns are prefetched below
        if x >= 0:
            # the second level: the words of the run's own index AND-ed with the event's, each bit left a sub-run
            w, w0, s0 = sub[x + 1], sub[x] >> 5, sub[x + 2]
            ranks = x + 3 + w
            bounds = ranks + ((w + 1) >> 1)
            for q in range(min(w, ebits.shape[1] - w0)):
                word = np.int64(sub[x + 3 + q]) & 0xFFFFFFFF
                m = word & np.int64(ebits[i, w0 + q])
                while m != 0:
                    low = m & -m
                    d = sub_half(sub, ranks, q) + popcount32(word & (low - 1))
                    a, b = s0 + sub_half(sub, bounds, d), s0 + sub_half(sub, bounds, d + 1)
                    j0, j1 = min(j0, a), max(j1, b - 1)
                    for j in range(a, b):
                        sv[nsv, 0], sv[nsv, 1] = c, j
                        nsv += 1
                    m ^= low
        elif k >= 2 and many:
            # without a branch per entry: an inequality in the second column holds for about half of them (W1,
            # W2), and a mispredicted branch costs more than writing the pair of an entry that fails
            for j in range(start, end):
                sv[nsv, 0], sv[nsv, 1] = c, j
                nsv += (gmask[np.uint64(arena[np.uint64(base + cap + j)])] & ebit) != 0
        elif k >= 2:
            # few pass (W0's equalities: 1 in 35): the branch is predicted, and an entry that fails writes nothing
            for j in range(start, end):
                if gmask[np.uint64(arena[np.uint64(base + cap + j)])] & ebit != 0:
                    sv[nsv, 0], sv[nsv, 1] = c, j
                    nsv += 1
        else:
            for j in range(start, end):
                sv[nsv, 0], sv[nsv, 1] = c, j
                nsv += 1
        if nsv > first:
            # the lines read next for these entries: while few pass (W0), every later column and the handles;
            # while many do (W1, W2), the third column alone, since :func:`runs_later_columns` drops about
            # half of the entries at each column and fetches each next column as it tests the one before
            if x < 0:
                j0, j1 = sv[first, 1], sv[nsv - 1, 1]
            last_row = min(2, k) if many else k
            for r in range(min(2, k), last_row + 1):
                row = base + r * cap
                for a in range(row + j0, row + j1 + 1, LINE_IDS):
                    prefetch(arena, a)
                prefetch(arena, row + j1)
        sv_off[i + 1] += nsv - first
        tested += end - start
        passed += nsv - first
    return nh, nsv


@njit(cache=True, _nrt=False)
def runs_later_columns(n_grp, gp_off, probe, gmask, store, sv, sv_off):
    """Stage 5d: of the pairs :func:`runs_entries` left, keep those whose columns from the third on all hold.

    One pass per column over the whole group, each keeping the entries whose
    predicate in that column the event satisfies (bit ``i`` of ``gmask``)
    and prefetching, as it tests an entry, that entry's next column (its
    handle after the last).  W2's subscriptions have six inequalities after
    the run's equality, each holding for about half of the entries: tested
    column after column, a run's lines of a column are fetched only while
    some of its entries still hold, where fetching every column of every
    entry that passed the second read them all; within a pass the group's
    lines are fetched together.  Compacts ``sv`` and ``sv_off`` in place,
    without a branch per entry.
    """
    arena, c_base, c_cap, c_k = store.arena, store.base, store.cap, store.k
    kmax = 0  # the most columns of a staged cluster: the passes to make
    for t in range(gp_off[n_grp]):
        if probe[t, 2] == STAGED:
            kmax = max(kmax, c_k[probe[t, 1]])
    for r in range(2, kmax):
        w = 0
        lo = sv_off[0]
        for i in range(n_grp):
            ebit = np.uint32(1 << i)
            hi = sv_off[i + 1]
            sv_off[i] = w
            for h in range(lo, hi):
                c, j = sv[h, 0], sv[h, 1]
                sv[w, 0], sv[w, 1] = c, j
                if r < c_k[c]:
                    a = c_base[c] + r * c_cap[c] + j
                    prefetch(arena, a + c_cap[c])
                    w += (gmask[np.uint64(arena[np.uint64(a)])] & ebit) != 0
                else:  # (every column of this entry tested)
                    w += 1
            lo = hi
        sv_off[n_grp] = w

