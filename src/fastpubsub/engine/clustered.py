"""The static and dynamic matchers: subscriptions filed under conjunctions of equalities.

Section 3: a subscription may be filed under any *schema* (set of fields)
contained in the fields of its equality predicates; its access predicate is
then the conjunction of its equalities on that schema, reached through the
multi-attribute hash table of the schema.  Here every table lives in one
open-addressing table keyed by the predicate ids of the conjunction
(``AccessKeys.conj``): an event knows, after the predicate phase, which
equality predicate it satisfies on each field (at most one), so probing the
table of schema ``X`` is looking up the tuple of those predicates -- and an
event lacking a field of ``X`` skips ``X`` without hashing (the ``mu(H)`` of
equation 3.1).  Single-field schemas are the predicate phase's own
(``AccessKeys.pred_key``) and cost nothing extra.

* ``static`` (section 3.2): :func:`engine.clustering.greedy_configuration`
  chooses the schemas from scratch (on every bulk load, and on demand with
  :meth:`ClusteredIndex.reorganize`) and files every subscription under its
  best one.
* ``dynamic`` (section 4): new subscriptions go to the configured schema that
  is best for them; :class:`engine.maintenance.Maintenance` creates and drops
  schemas and moves subscriptions as clusters grow hot and statistics shift.

Fields stand in for the paper's attributes (a field is an attribute and a
value kind; predicates only ever compare values of one kind).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
from numba import njit

from .access import CATCH_ALL, MAX_MEMBERS, AccessKeys
from .clustering import EqualityProfile, best_assignment, greedy_configuration, unpack_schema
from .clusters import INDEX_ROW, OP_RANK, PIDS_ROW, STARTS_ROW, ClusterStore, index_run, order_columns, run_row
from .cost import CostModel
from .hashtable import ht_find3, ht_slot3
from .idpool import grow
from .predicates import PredicateTable, satisfied_predicates
from .scan import (BY_INDEX, BY_RUN, LOOKAHEAD, PLAIN, PREFETCH_COLUMNS, UNFOLD, ensure_room, entry_matches, finish_event,
                   predicate_list_key, prefetch, run_path, scan_clusters, scan_dispatch)
from .semantics import OP_EQ

@njit(cache=True)
def equality_profile(off, pids, pred_field, pred_op, pred_prob):
    """The equality predicates of each row, sorted by field: (offsets, field, pid, prob, size)."""
    n = off.shape[0] - 1
    eq_off = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        c = 0
        for j in range(off[i], off[i + 1]):
            if pred_op[pids[j]] == 0:
                c += 1
        eq_off[i + 1] = eq_off[i] + c
    field = np.empty(eq_off[n], dtype=np.int64)
    pid = np.empty(eq_off[n], dtype=np.int64)
    prob = np.empty(eq_off[n], dtype=np.float64)
    size = np.empty(n, dtype=np.int64)
    for i in range(n):
        w = eq_off[i]
        for j in range(off[i], off[i + 1]):
            p = pids[j]
            if pred_op[p] == 0:
                # insertion sort by (field, pid): rows are short
                t = w
                while t > eq_off[i] and (field[t - 1] > pred_field[p] or (field[t - 1] == pred_field[p] and pid[t - 1] > p)):
                    field[t], pid[t], prob[t] = field[t - 1], pid[t - 1], prob[t - 1]
                    t -= 1
                field[t], pid[t], prob[t] = pred_field[p], p, pred_prob[p]
                w += 1
        size[i] = off[i + 1] - off[i]
    return eq_off, field, pid, prob, size


@njit(cache=True)
def access_of(off, pids, pred_field, pred_op, schema_fields):
    """Per row: its equality predicates on its schema's fields, in field order (-1 padded).

    ``schema_fields[i]`` holds the fields of row ``i``'s schema (-1 padded; all -1: catch-all).
    """
    n = off.shape[0] - 1
    access = np.full((n, 3), -1, dtype=np.int64)
    for i in range(n):
        for m in range(3):
            f = schema_fields[i, m]
            if f < 0:
                break
            for j in range(off[i], off[i + 1]):
                p = pids[j]
                if pred_op[p] == 0 and pred_field[p] == f:
                    access[i, m] = p
                    break
    return access


#: Events whose probes are staged together (:func:`clustered_events`); at most 16, the bits of ``gmask``.
GROUP = 16
#: Where the conjunction part of the batch state starts (engine/batch.py); ``sch_fields`` is its third array.
CONJ_STATE = 13

#: Lists of one cluster up to this size are checked inline by :func:`clustered_events`.
SMALL_CLUSTER = 16


#: ``probe[t, 1]`` of a list whose key the event knows without probing a table (catch-all, single predicate;
#: no predicate id, which that column holds for a conjunction to look up).
KNOWN_KEY = -3
#: ``probe[t, 2]`` of a probe whose first cluster's sorted prefix :func:`stage_runs` scans (no predicate id
#: or -1, which that column held before).
STAGED = -2
#: How many runs ahead :func:`stage_runs` reads a run's bounds (and twice that, prefetches its start).
RUN_AHEAD = 8


@njit(cache=True, inline="always")
def grow_rows(a, n, extra):
    """``a`` (2-d) with room for ``extra`` more rows after its first ``n`` (amortised doubling)."""
    if n + extra <= a.shape[0]:
        return a
    bigger = np.empty((max(2 * a.shape[0], n + extra), a.shape[1]), dtype=a.dtype)
    bigger[:n] = a[:n]
    return bigger


@njit(cache=True)
def stage_runs(n_grp, gs_off, gp_off, gsat, probe, gmask, c_len, c_base, c_cap, c_k, c_sorted, c_runs, arena, hit, sv,
               sv_off):
    """The run index lookups of a group's indexed clusters, in stages over the whole group (docs/clustering.md, "Runs").

    An indexed cluster's scan is a chain of dependent misses: the index row,
    the start of each run the event's predicates find, the run's entries in
    the second column, the few that pass in the third.  Per event they add
    up; here each link is taken for every event of the group before the
    next, prefetching what the next reads, so the misses overlap.  The
    second column is checked with ``gmask`` (bit ``i`` of ``gmask[p]``:
    event ``i`` of the group satisfies ``p``), as the per-event bits are set
    one event at a time.  Marks the probes it takes with ``probe[t, 2] =
    STAGED`` and leaves in ``sv[sv_off[i]:sv_off[i + 1]]`` the (cluster,
    entry) pairs of event ``i`` still to check from the third column on.
    Returns the scratch arrays, grown if needed.
    """
    for i in range(n_grp):
        nsat = gs_off[i + 1] - gs_off[i]
        for s in range(gs_off[i], gs_off[i + 1]):
            gmask[gsat[s]] |= np.uint16(1 << i)
        for t in range(gp_off[i], gp_off[i + 1]):
            c = probe[t, 1]
            if c >= 0 and c_len[c] > 0 and run_path(c_sorted, c_runs, c, nsat) == BY_INDEX:
                ir = run_row(c_base[c], c_cap[c], c_k[c], INDEX_ROW)
                w = arena[ir + 1]  # (0: no index, its ids spanned more than the row holds)
                if w > 0:
                    probe[t, 2] = STAGED
                    for r in range(16, 2 + 2 * w, 16):
                        prefetch(arena, ir + r)
    # the runs each event's satisfied predicates find; their starts prefetched
    nh = 0
    for i in range(n_grp):
        nsat = gs_off[i + 1] - gs_off[i]
        for t in range(gp_off[i], gp_off[i + 1]):
            if probe[t, 2] != STAGED:
                continue
            c = probe[t, 1]
            ir = run_row(c_base[c], c_cap[c], c_k[c], INDEX_ROW)
            hit = grow_rows(hit, nh, nsat)
            for s in range(gs_off[i], gs_off[i + 1]):
                r = index_run(arena, ir, gsat[s])
                if r >= 0:
                    hit[nh, 0], hit[nh, 1], hit[nh, 2] = i, c, r
                    nh += 1
    # a pipeline over the runs found: run h's second column is checked while run h + AHEAD's bounds are read
    # (its second column prefetched) and run h + 2 AHEAD's start is prefetched
    nsv = 0
    sv_off[:] = 0
    for h in range(-2 * RUN_AHEAD, nh):
        h2 = h + 2 * RUN_AHEAD
        if h2 < nh:
            c = hit[h2, 1]
            prefetch(arena, run_row(c_base[c], c_cap[c], c_k[c], STARTS_ROW) + hit[h2, 2])
        h1 = h + RUN_AHEAD
        if 0 <= h1 < nh:
            c, r = hit[h1, 1], hit[h1, 2]
            sr = run_row(c_base[c], c_cap[c], c_k[c], STARTS_ROW)
            start = arena[sr + r]
            end = arena[sr + r + 1] if r + 1 < c_runs[c] else c_sorted[c]
            hit[h1, 2], hit[h1, 3] = start, end
            prefetch(arena, c_base[c] + c_cap[c] + start)
            prefetch(arena, c_base[c] + c_cap[c] + end - 1)  # (the same line, unless the run crosses one)
        if h < 0:
            continue
        i, c, start, end = hit[h, 0], hit[h, 1], hit[h, 2], hit[h, 3]
        k, base, cap = c_k[c], c_base[c], c_cap[c]
        sv = grow_rows(sv, nsv, end - start)
        ebit = np.uint16(1 << i)
        for j in range(start, end):
            if k >= 2 and gmask[np.uint64(arena[np.uint64(base + cap + j)])] & ebit == 0:
                continue
            sv[nsv, 0], sv[nsv, 1] = c, j
            nsv += 1
            prefetch(arena, base + min(2, k) * cap + j)
            sv_off[i + 1] += 1
    for i in range(n_grp):
        sv_off[i + 1] += sv_off[i]
        for s in range(gs_off[i], gs_off[i + 1]):
            gmask[gsat[s]] = 0
    return hit, sv


@njit(cache=True)
def clustered_events(ev_off, ev_field, ev_code, ev_eqbits, phase1, n_pred_ids, state, handle_id, pf, unfold, lookahead):
    """Static and dynamic over a batch of events: phase 1, then the conjunction probes of ``GROUP`` events at a time.

    ``state`` is propagation's (engine/batch.py) followed by ``pred_field,
    pred_op, sch_fields, conj_keys, conj_vals, eq_of_field, probe, gmask``
    (``probe``: a row per list a group's events reach, grown here as
    needed; ``gmask``, one entry per predicate id, is :func:`stage_runs`'
    group bit vector).

    A probe that finds its key is a chain of dependent loads that miss the
    cache once the configuration is large: the table slot, the key's list
    head, the cluster's bookkeeping, the cluster's rows.  Probes are
    independent of each other, so they run in stages over all the probes of
    a group of events -- the tables "probed in batch for many events at once"
    -- each stage prefetching what the next one reads: the misses of a stage
    overlap instead of adding up (docs/clustering.md, "Probing").  The
    catch-all and the event's single-predicate lists join the probes with
    their keys already known (``KNOWN_KEY``), so they take the same stages.
    Then each event in turn sets its bits, scans the lists it reached, and
    clears its bits.
    """
    tkeys, tvals, group_of, g_start, g_end, g_vals, g_pids = phase1
    bits, pred_key, key_head, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, arena = state[:11]
    pred_field, pred_op, sch_fields, conj_keys, conj_vals, eq_of_field, probe = state[13:20]  # CONJ_STATE: numba slices need literals
    n_ev = ev_off.shape[0] - 1
    n_sch = sch_fields.shape[0]
    n_keys = key_head.shape[0]
    conj_flat = conj_keys.ravel()
    mask = conj_vals.shape[0] - 1
    sat = np.empty(max(n_pred_ids, 1), dtype=np.int64)
    gsat = np.empty(1024, dtype=np.int64)  # the group's satisfied predicates, event after event
    gs_off = np.zeros(GROUP + 1, dtype=np.int64)
    gp_off = np.zeros(GROUP + 1, dtype=np.int64)
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    gmask = state[20]
    # stage_runs' scratch: the runs found (event, cluster, run -- then its start --, end), the entries that pass
    hit = np.empty((256, 4), dtype=np.int64)
    sv = np.empty((256, 2), dtype=np.int64)
    sv_off = np.zeros(GROUP + 1, dtype=np.int64)
    for g0 in range(0, n_ev, GROUP):
        g1 = min(n_ev, g0 + GROUP)
        # phase 1, and stage 1: the keys each event has, their home slots prefetched
        n_sat = 0
        n_probe = 0
        for e in range(g0, g1):
            ns = satisfied_predicates(ev_off[e], ev_off[e + 1], ev_field, ev_code, ev_eqbits, tkeys, tvals,
                                      group_of, g_start, g_end, g_vals, g_pids, sat)
            gsat = ensure_room(gsat, n_sat, ns)
            probe = grow_rows(probe, n_probe, n_sch + ns + 1)
            for t in range(-1, ns):
                if t >= 0:
                    p = sat[t]
                    gsat[n_sat + t] = p
                    if pred_op[p] == 0:
                        eq_of_field[pred_field[p]] = p
                # the catch-all and the single-predicate lists: their keys are known, no table to probe
                q = predicate_list_key(pred_key, sat, t)
                if 0 <= q < n_keys:
                    prefetch(key_head, q)
                    probe[n_probe, 0], probe[n_probe, 1] = q, KNOWN_KEY
                    n_probe += 1
            for s in range(n_sch):
                p0 = eq_of_field[sch_fields[s, 0]]
                if p0 < 0:
                    continue
                p1 = eq_of_field[sch_fields[s, 1]]
                if p1 < 0:
                    continue
                p2 = -1
                if sch_fields[s, 2] >= 0:
                    p2 = eq_of_field[sch_fields[s, 2]]
                    if p2 < 0:
                        continue
                slot = ht_slot3(mask, p0, p1, p2)
                prefetch(conj_flat, slot * 3)
                prefetch(conj_vals, slot)
                probe[n_probe, 0], probe[n_probe, 1], probe[n_probe, 2] = p0, p1, p2
                n_probe += 1
            for t in range(ns):
                eq_of_field[pred_field[sat[t]]] = -1
            n_sat += ns
            gs_off[e - g0 + 1] = n_sat
            gp_off[e - g0 + 1] = n_probe
        # stage 2: look the keys up, prefetch their list heads (probe[t, 0] becomes the key, -1 if absent)
        for t in range(n_probe):
            if probe[t, 1] == KNOWN_KEY:
                continue
            q = ht_find3(conj_keys, conj_vals, probe[t, 0], probe[t, 1], probe[t, 2])
            if 0 <= q < n_keys:
                prefetch(key_head, q)
            else:
                q = -1
            probe[t, 0] = q
        # stage 3: the first cluster of each list, prefetch its bookkeeping (probe[t, 1])
        for t in range(n_probe):
            c = key_head[probe[t, 0]] if probe[t, 0] >= 0 else -1
            probe[t, 1] = c
            probe[t, 2] = 0  # (STAGED once stage_runs takes it)
            if c >= 0:
                prefetch(c_base, c)
                prefetch(c_cap, c)
                prefetch(c_len, c)
                prefetch(c_k, c)
                prefetch(c_next, c)
                if c_sorted.shape[0]:
                    prefetch(c_sorted, c)
                    prefetch(c_runs, c)
        # stage 4: prefetch the first rows each cluster's scan reads (its first column and its line, or its runs)
        for i in range(g1 - g0):
            nsat = gs_off[i + 1] - gs_off[i]
            for t in range(gp_off[i], gp_off[i + 1]):
                c = probe[t, 1]
                if c >= 0 and c_len[c] > 0:
                    path = run_path(c_sorted, c_runs, c, nsat)
                    if path == PLAIN:
                        prefetch(arena, c_base[c])
                        prefetch(arena, c_base[c] + c_k[c] * c_cap[c])
                    else:
                        row = INDEX_ROW if path == BY_INDEX else PIDS_ROW
                        prefetch(arena, run_row(c_base[c], c_cap[c], c_k[c], row))
        if c_sorted.shape[0]:
            hit, sv = stage_runs(g1 - g0, gs_off, gp_off, gsat, probe, gmask, c_len, c_base, c_cap, c_k, c_sorted,
                                 c_runs, arena, hit, sv, sv_off)
        # stage 5, event by event: bits, the lists the event reached (single-predicate and conjunction keys)
        for e in range(g0, g1):
            i = e - g0
            if e + 1 < g1:
                # the run rows the next event will read, fetched while this one is scanned
                nsat = gs_off[i + 2] - gs_off[i + 1]
                for t in range(gp_off[i + 1], gp_off[i + 2]):
                    c = probe[t, 1]
                    if c >= 0:
                        path = run_path(c_sorted, c_runs, c, nsat)
                        if path == BY_RUN:
                            pr = run_row(c_base[c], c_cap[c], c_k[c], PIDS_ROW)
                            for r in range(16, c_runs[c], 16):
                                prefetch(arena, pr + r)
            esat = gsat[gs_off[i] : gs_off[i + 1]]
            ns = esat.shape[0]
            for t in range(ns):
                bits[esat[t]] = 1
            start = nout
            if c_sorted.shape[0]:
                # the entries of the runs stage_runs found: the columns after the second
                out = ensure_room(out, nout, sv_off[i + 1] - sv_off[i])
                for h in range(sv_off[i], sv_off[i + 1]):
                    c, j = sv[h, 0], sv[h, 1]
                    k, base, cap = c_k[c], c_base[c], c_cap[c]
                    r0 = min(2, k)
                    if entry_matches(-1, k - r0, arena, bits, base + r0 * cap, cap, j):
                        out[nout] = arena[base + k * cap + j]
                        nout += 1
            for t in range(gp_off[i], gp_off[i + 1]):
                c = probe[t, 1]
                if c < 0:
                    continue
                n = c_len[c]
                if probe[t, 2] == STAGED:
                    # the sorted prefix is done (above); its unsorted tail, then the list's other clusters
                    done = c_sorted[c]
                    out = ensure_room(out, nout, n - done)
                    nout = scan_dispatch(pf, unfold, lookahead, c_k[c], arena, bits, c_base[c] + done, c_cap[c],
                                         n - done, out, nout)
                    out, nout = scan_clusters(c_next[c], c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, arena,
                                              bits, out, nout, pf, unfold, lookahead, esat, ns)
                elif n <= SMALL_CLUSTER and c_next[c] < 0:
                    # the common case of the small lists a conjunction finds: checked here, without the
                    # call into the cluster kernels (whose fixed cost dwarfs a few entries)
                    out = ensure_room(out, nout, n)
                    k, base, cap = c_k[c], c_base[c], c_cap[c]
                    for j in range(n):
                        if entry_matches(-1, k, arena, bits, base, cap, j):
                            out[nout] = arena[base + k * cap + j]
                            nout += 1
                else:  # (c is the head of the list stage 3 found)
                    out, nout = scan_clusters(c, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, arena, bits, out,
                                              nout, pf, unfold, lookahead, esat, ns)
            for t in range(ns):
                bits[esat[t]] = 0
            finish_event(out, start, nout, handle_id)
            out_off[e + 1] = nout
    return out_off, out[:nout].copy()


def no_conjunctions() -> tuple:
    """The conjunction part of the batch state for algorithms without it (empty, same types)."""
    i64 = np.zeros(0, dtype=np.int64)
    rows = np.zeros((0, MAX_MEMBERS), dtype=np.int64)
    return (i64, np.zeros(0, dtype=np.int8), rows, rows, i64, i64, rows, np.zeros(0, dtype=np.uint16))


def schema_fields(schemas: np.ndarray) -> np.ndarray:
    """(n, 3) field rows (-1 padded) of packed schemas (0 -> all -1), vectorised."""
    schemas = np.asarray(schemas, dtype=np.int64)
    out = np.empty((len(schemas), MAX_MEMBERS), dtype=np.int64)
    for m in range(MAX_MEMBERS):
        out[:, m] = ((schemas >> (21 * m)) & ((1 << 21) - 1)) - 1
    return out


class ClusteredIndex:
    """Subscriptions filed under single or conjunctive equality access keys (sections 3 and 4).

    ``probabilities(pids)`` (given by the matcher) returns nu of equality
    predicates and ``mu(fields)`` the probability that an event carries a set
    of fields, from the current event statistics.  ``runs`` (0: off, the
    default) keeps clusters of that many entries or more sorted into runs
    (engine/clusters.py; ``Matcher("dynamic", runs=RUN_MIN)``).
    """

    def __init__(self, preds: PredicateTable, model: CostModel, probabilities: Callable[[np.ndarray], np.ndarray],
                 mu: Callable[[tuple[int, ...]], float], *, prefetch_columns: int = PREFETCH_COLUMNS,
                 unfold: int = UNFOLD, lookahead: int = LOOKAHEAD, max_space: float | None = None,
                 runs: int = 0) -> None:
        self.preds = preds
        self.model = model
        self.probabilities = probabilities
        self.mu = mu
        self.max_space = max_space
        self.keys = AccessKeys()
        self.store = ClusterStore(runs=runs)
        self.scan_options = (prefetch_columns, unfold, lookahead)
        self.schemas = np.zeros(0, dtype=np.int64)  # configured multi-field schemas (packed, sorted)
        self.sch_fields = np.zeros((0, MAX_MEMBERS), dtype=np.int64)
        self.pred_prob = np.zeros(0, dtype=np.float64)  # nu of each equality predicate id
        self._prob_known = np.zeros(0, dtype=bool)
        self.eq_of_field = np.full(0, -1, dtype=np.int64)
        self.gmask = np.zeros(0, dtype=np.uint16)  # stage_runs' group bit vector (all zero between batches)
        self.moved = 0  # subscriptions re-filed since creation
        self.reorganize_seconds = 0.0
        self.handles_high = 0

    # -- probabilities -----------------------------------------------------
    def refresh_probabilities(self, pids: np.ndarray | None = None) -> None:
        """nu of the given equality predicates (all live ones if None) from the current statistics."""
        top = self.preds.n_ids
        self.pred_prob = grow(self.pred_prob, top, 1.0)
        self._prob_known = grow(self._prob_known, top, False)
        if pids is None:
            pids = np.flatnonzero((self.preds.refcount[:top] > 0) & (self.preds.op[:top] == OP_EQ))
        else:
            pids = np.unique(pids[self.preds.op[pids] == OP_EQ])
        if len(pids):
            self.pred_prob[pids] = self.probabilities(pids)
            self._prob_known[pids] = True

    def _ensure_probabilities(self, pids: np.ndarray) -> None:
        top = self.preds.n_ids
        self.pred_prob = grow(self.pred_prob, top, 1.0)
        self._prob_known = grow(self._prob_known, top, False)
        unknown = pids[~self._prob_known[pids]]
        if len(unknown):
            self.refresh_probabilities(unknown)

    def profile(self, off: np.ndarray, pids: np.ndarray) -> tuple[EqualityProfile, np.ndarray]:
        """Equality profile of subscriptions given as CSR predicate ids (and the pid of each entry)."""
        self._ensure_probabilities(pids)
        eq_off, field, pid, prob, size = equality_profile(off, pids, self.preds.field, self.preds.op, self.pred_prob)
        return EqualityProfile(eq_off, field, pid, prob, size), pid

    def config(self) -> np.ndarray:
        """Every schema subscriptions may be filed under: all single fields plus the multi ones."""
        fields = np.unique(self.preds.field[: self.preds.n_ids][self.preds.op[: self.preds.n_ids] == OP_EQ])
        return np.union1d(fields + 1, self.schemas)

    def set_schemas(self, schemas: np.ndarray) -> None:
        self.schemas = np.unique(np.asarray(schemas, dtype=np.int64))
        self.sch_fields = schema_fields(self.schemas)

    # -- filing ------------------------------------------------------------
    def file(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray, schemas: np.ndarray) -> None:
        """File subscriptions (distinct predicate ids in CSR) under the given packed schemas."""
        access = access_of(off, pids, self.preds.field, self.preds.op, schema_fields(schemas))
        self._ensure_probabilities(pids)
        ks, cols, col_off = order_columns(off, pids, self.preds.op, access, OP_RANK, self.pred_prob)
        n_members = (access >= 0).sum(axis=1)
        keys = np.full(len(handles), CATCH_ALL, dtype=np.int64)
        single = n_members == 1
        if np.any(single):
            keys[single] = self.keys.for_predicates(access[single, 0])
        multi = n_members >= 2
        if np.any(multi):
            keys[multi] = self.keys.for_conjunctions(access[multi])
        self.keys.incref(keys)
        clusters = self.store.clusters_for(keys, ks)
        self.store.append(clusters, handles, cols, col_off)
        self.handles_high = max(self.handles_high, int(handles.max()) + 1 if len(handles) else 0)

    def insert(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """File new subscriptions under the configured schema that is best for each (section 4)."""
        prof, _ = self.profile(off, pids)
        key, _, _ = best_assignment(prof, self.config())
        self.file(handles, off, pids, key)

    def predicates_of(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predicate ids (CSR: access predicates, then columns) of filed subscriptions."""
        cols, col_off = self.store.payload(handles)
        members = self.keys.members[self.store.key_of(handles)]
        n_acc = (members >= 0).sum(axis=1)
        off = np.zeros(len(handles) + 1, dtype=np.int64)
        np.cumsum(np.diff(col_off) + n_acc, out=off[1:])
        pids = np.empty(int(off[-1]), dtype=np.int64)
        _interleave(pids, off, cols, col_off, members)
        return off, pids

    def unfile(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Take subscriptions out of their clusters; returns their predicate ids (CSR), references kept."""
        off, pids = self.predicates_of(handles)
        keys = self.store.key_of(handles)
        self.store.remove(handles)
        for q in self.keys.decref(keys).tolist():
            self.store.release_key(q)
        return off, pids

    def delete(self, handles: np.ndarray) -> np.ndarray:
        """Unfile subscriptions; returns the predicate ids whose references they held."""
        _, pids = self.unfile(handles)
        return pids

    def predicates_freed(self, dead: np.ndarray) -> None:
        """Nothing to do: a freed predicate's access keys were released with their last subscription."""

    def move(self, handles: np.ndarray, schemas: np.ndarray) -> None:
        """Re-file subscriptions under new schemas (the maintenance algorithm's moves)."""
        if len(handles) == 0:
            return
        off, pids = self.unfile(handles)
        self.file(handles, off, pids, schemas)
        self.moved += len(handles)

    def members_of(self, keys: np.ndarray) -> np.ndarray:
        """Handles filed under the given access keys."""
        return _members(np.asarray(keys, dtype=np.int64), *self.store.scan_args())

    def live_handles(self) -> np.ndarray:
        e = self.store.e_cluster[: self.handles_high]
        return np.flatnonzero(e >= 0)

    def key_schema(self, keys: np.ndarray) -> np.ndarray:
        """Packed schema of access keys: the fields of their predicates (0: catch-all)."""
        members = self.keys.members[keys]
        fields = np.where(members >= 0, self.preds.field[np.maximum(members, 0)], -1)
        out = np.zeros(len(keys), dtype=np.int64)
        for m in range(MAX_MEMBERS):
            f = fields[:, m]
            out |= np.where(f >= 0, (f + 1) << (21 * m), 0)
        return out

    def key_nu(self, keys: np.ndarray) -> np.ndarray:
        """nu of access keys: the product of their predicates' probabilities (catch-all: 1)."""
        members = self.keys.members[keys]
        self._ensure_probabilities(members[members >= 0])
        return np.where(members >= 0, self.pred_prob[np.maximum(members, 0)], 1.0).prod(axis=1)

    def live_keys(self) -> np.ndarray:
        """Access keys with at least one subscription, catch-all excluded."""
        live = np.flatnonzero(self.keys.refs[: self.keys.ids.high] > 0)
        return live[live != CATCH_ALL]

    def filed_schema(self, handles: np.ndarray) -> np.ndarray:
        """Packed schema each handle is filed under (0: catch-all)."""
        return self.key_schema(self.store.key_of(handles))

    # -- whole reorganisations ---------------------------------------------
    def reorganize(self) -> dict:
        """Section 3.2 from scratch: greedy configuration, then every subscription re-filed."""
        t0 = time.perf_counter()
        handles = self.live_handles()
        if len(handles) == 0:
            self.set_schemas(np.zeros(0, np.int64))
            return {"schemas": 0, "moved": 0}
        off, pids = self.unfile(handles)
        prof, _ = self.profile(off, pids)
        cfg = greedy_configuration(prof, self.mu, self.model, max_space=self.max_space)
        self.set_schemas(cfg.multi)
        self.file(handles, off, pids, cfg.key)
        self.moved += len(handles)
        self.reorganize_seconds += time.perf_counter() - t0
        return {"schemas": len(cfg.multi), "moved": len(handles), "steps": cfg.steps}

    # -- matching ----------------------------------------------------------
    def state(self) -> tuple:
        """The arrays :func:`clustered_events` reads (see engine/batch.py)."""
        p = self.preds
        self.eq_of_field = grow(self.eq_of_field, max(p.n_fields, 1), -1)
        probe = np.empty((GROUP * max(len(self.schemas), 1), MAX_MEMBERS), dtype=np.int64)
        self.gmask = grow(self.gmask, len(p.bits), 0)
        assert GROUP <= 8 * self.gmask.itemsize  # one bit per event of a group
        no_counts = np.zeros(0, dtype=np.int32)
        return (p.bits, self.keys.pred_key, *self.store.scan_args(), no_counts, no_counts,
                p.field, p.op, self.sch_fields, self.keys.conj.keys, self.keys.conj.vals, self.eq_of_field, probe,
                self.gmask)

    def stats(self) -> dict:
        s = self.store.stats()
        k = self.keys.stats()
        s.update({key: v for key, v in k.items() if key != "memory_bytes"})
        s["memory_bytes"] += k["memory_bytes"] + int(self.pred_prob.nbytes + self.eq_of_field.nbytes)
        live = self.live_handles()
        schema_of = self.filed_schema(live) if len(live) else np.zeros(0, np.int64)
        tables = []
        for sch, n_subs in zip(*np.unique(schema_of, return_counts=True)):
            fields = unpack_schema(int(sch))
            if len(fields) >= 2:
                tables.append({"fields": list(fields), "subscriptions": int(n_subs)})
        s["hash_tables"] = {
            "multi_attribute": len(self.schemas),
            "schemas": tables,
            "single_field_subscriptions": int(np.count_nonzero((schema_of > 0) & (schema_of < (1 << 21)))),
            "catch_all_subscriptions": int(np.count_nonzero(schema_of == 0)),
        }
        sizes = self.store.c_len[: self.store.ids.high][self.store.c_k[: self.store.ids.high] >= 0]
        s["cluster_size_histogram"] = _log2_histogram(sizes)
        s["subscriptions_moved"] = int(self.moved)
        s["reorganize_seconds"] = round(self.reorganize_seconds, 6)
        return s


def _log2_histogram(sizes: np.ndarray) -> dict[str, int]:
    """Cluster sizes in power-of-two buckets: {"1": n, "2-3": n, "4-7": n, ...}."""
    sizes = sizes[sizes > 0]
    if len(sizes) == 0:
        return {}
    b = np.floor(np.log2(sizes)).astype(np.int64)
    out = {}
    for e, n in zip(*np.unique(b, return_counts=True)):
        lo, hi = 1 << int(e), (1 << (int(e) + 1)) - 1
        out[f"{lo}" if lo == hi else f"{lo}-{hi}"] = int(n)
    return out


@njit(cache=True)
def _interleave(pids, off, cols, col_off, members):
    for i in range(off.shape[0] - 1):
        w = off[i]
        for m in range(members.shape[1]):
            if members[i, m] >= 0:
                pids[w] = members[i, m]
                w += 1
        for j in range(col_off[i], col_off[i + 1]):
            pids[w] = cols[j]
            w += 1


@njit(cache=True)
def _members(keys, key_head, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, arena):
    total = 0
    for q in keys:
        c = key_head[q] if q < key_head.shape[0] else -1
        while c >= 0:
            total += c_len[c]
            c = c_next[c]
    out = np.empty(total, dtype=np.int64)
    w = 0
    for q in keys:
        c = key_head[q] if q < key_head.shape[0] else -1
        while c >= 0:
            line = c_base[c] + c_k[c] * c_cap[c]
            for j in range(c_len[c]):
                out[w] = arena[line + j]
                w += 1
            c = c_next[c]
    return out
