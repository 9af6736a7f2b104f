"""Static and dynamic matching over a batch of events: conjunction probes staged over groups of events.

Section 3: a subscription filed under a schema ``X`` is reached through the
multi-attribute hash table of ``X``.  An event knows, after the predicate
phase, which equality predicate it satisfies on each field (at most one), so
probing the table of ``X`` is looking up the tuple of those predicates in
``AccessArrays.conj_keys`` -- and an event lacking a field of ``X`` skips
``X`` without hashing (the ``mu(H)`` of equation 3.1).

A probe that finds its key is a chain of dependent loads that miss the cache
once the configuration is large: the table slot, the key's list head, the
cluster's bookkeeping, the cluster's rows.  Probes are independent of each
other, so :func:`clustered_events` takes each link for all the probes of a
group of ``GROUP`` events before the next -- the tables "probed in batch for
many events at once" -- each stage prefetching what the next one reads, so
that the misses of a stage overlap instead of adding up (docs/design/clustering.md,
"Probing").  The stages, each a function with a naive reference in
``tests/support/naive.py``:

1. :func:`stage_keys`: phase 1 of each event, and the lists it reaches: the
   catch-all, the presence lists of its fields and its single-predicate lists
   (keys known, ``KNOWN_KEY``) and one probe per configured schema whose
   fields it carries;
2. :func:`stage_lookup`: the conjunction probes looked up (key or -1);
3. :func:`stage_heads`: the first cluster of each list found;
4. :func:`stage_prefetch_rows`: the first rows each scan reads, prefetched;
5. :func:`~engine.kernels.run_lookups.stage_runs`: the run index lookups of
   clusters with runs, and their entries' later columns tested column by
   column over the group (engine/kernels/run_lookups.py);
6. :func:`scan_group`, event by event: bits set, the lists scanned, bits cleared.

Each stage is one call per group, never per event: numba reference-counts
every array a call unpacks from a container, so calls per event (even
inlined) pay those counts per event.  Within a stage the loops of stages 5
and 6 run without the reference-counting runtime (``_nrt=False``;
docs/design/engine.md, "Kernel contract"), which otherwise pays an atomic increment
and decrement per array access (figures in docs/benchmarks.md, "Tuned
constants").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..structures.hashtable import ht_find2, ht_find3, ht_slot2, ht_slot3
from ..structures.predicates import satisfied_predicates
from ..structures.sorted_runs import INDEX_ROW, PIDS_ROW, put_live, run_row
from .run_lookups import STAGED, stage_runs
from .scan import (BY_INDEX, BY_RUN, PLAIN, doubled, ensure_room, entry_matches, finish_events, predicate_list_key,
                   prefetch, run_path_of, scan_clusters_into, scan_dispatch)

#: Events whose probes are staged together; at most 32, the bits of ``ProbeScratch.gmask`` (uint32).  16 rather
#: than 32: with 32 a group's prefetched lines outgrow the cache at large N (``python -m benchmarks.experiments.trees``;
#: docs/benchmarks.md, "Tuned constants").
GROUP = 16
#: Lists of one cluster up to this size are checked inline by :func:`scan_group`.
SMALL_CLUSTER = 16
#: ``probe[t, 1]`` of a list whose key the event knows without probing a table (catch-all, single predicate;
#: no predicate id, which that column holds for a conjunction to look up).
KNOWN_KEY = -3
#: Phase 1 prefetches the next events' reads when predicates use at least this many fields (sparse,
#: high-dimensional workloads: its arrays do not stay in cache; W0's 96 fields do).
PHASE1_AHEAD_FIELDS = 4096


class ProbeScratch(NamedTuple):
    """Work arrays :func:`clustered_events` keeps between batches (all in their rest state between calls)."""

    eq_of_field: np.ndarray  # int64 [fields]: the equality predicate the current event satisfies on each field (-1)
    probe: np.ndarray  # int64 [rows, MAX_SCHEMA]: a row per list a group's events reach (grown by the kernel)
    gmask: np.ndarray  # uint32 [predicate ids]: bit i set iff event i of the group satisfies the predicate (0)
    out: np.ndarray  # int64: the batch's first output buffer, sized by the caller (grown by the kernel if short)
    eq_first: bool  # every filed entry's first column is an equality: run indexes are looked up for those only


@njit(cache=True, inline="always")
def grow_rows(a, n, extra):
    """``a`` (2-d) with room for ``extra`` more rows after its first ``n`` (amortised doubling)."""
    if n + extra <= a.shape[0]:
        return a
    bigger = np.empty((max(2 * a.shape[0], n + extra), a.shape[1]), dtype=a.dtype)
    bigger[:n] = a[:n]
    return bigger


@njit(cache=True, inline="always")
def phase1_prefetch_rows(ev_off, ev_field, ev_eqbits, e, g_flat, n_gf, tk_flat, tvals, t_mask):
    """Prefetch what phase 1 reads first for event ``e``: its fields' rows of ``group_of``, its equality slots."""
    for j in range(ev_off[e], ev_off[e + 1]):
        f = ev_field[j]
        if f < 0:
            continue
        s = ht_slot2(t_mask, f * 6 + 0, ev_eqbits[j])
        prefetch(tvals, s)
        prefetch(tk_flat, 2 * s)
        if f < n_gf:
            prefetch(g_flat, f * 6)


@njit(cache=True, inline="always")
def phase1_prefetch_groups(ev_off, ev_field, e, group_of, n_gf, g_start, g_end):
    """Prefetch the bounds of the inequality groups of event ``e``'s fields (their ``group_of`` rows fetched before)."""
    for j in range(ev_off[e], ev_off[e + 1]):
        f = ev_field[j]
        if f < 0 or f >= n_gf:
            continue
        for op in range(1, 6):
            g = group_of[f, op]
            if g >= 0:
                prefetch(g_start, g)
                prefetch(g_end, g)


@njit(cache=True, inline="always")
def split_satisfied(sat, ns, gsat, n_sat, pred_op, pred_field, pred_key, eq_of_field, key_head, probe, n_probe):
    """One event's ``ns`` satisfied predicates into ``gsat[n_sat:n_sat + ns]``, its equalities first (each noted in
    ``eq_of_field``), and a ``KNOWN_KEY`` row in ``probe`` for the catch-all and each single-predicate list they
    reach, its head prefetched.  Returns ``(end of the equalities in gsat, n_probe)``."""
    n_keys = key_head.shape[0]
    front, back = n_sat, n_sat + ns - 1
    for t in range(-1, ns):
        if t >= 0:
            p = sat[t]
            if pred_op[p] != 0:
                gsat[back] = p
                back -= 1
                continue  # only equalities are single-predicate access keys: no pred_key read for the others
            gsat[front] = p
            front += 1
            eq_of_field[pred_field[p]] = p
        # the catch-all and the single-predicate lists: their keys are known, no table to probe
        q = predicate_list_key(pred_key, sat, t)
        if 0 <= q < n_keys:
            prefetch(key_head, q)
            probe[n_probe, 0], probe[n_probe, 1] = q, KNOWN_KEY
            n_probe += 1
    return front, n_probe


@njit(cache=True, inline="always")
def conjunction_rows(sch_fields, eq_of_field, mask, conj_flat, conj_vals, probe, n_probe):
    """A row ``(p0, p1, p2)`` in ``probe`` for each configured schema on whose every field the event satisfies an
    equality (``eq_of_field``; ``p2 = -1`` for two fields), its table slot prefetched.  Returns ``n_probe``."""
    for s in range(sch_fields.shape[0]):
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
    return n_probe


@njit(cache=True)
def repeated_conjunction_rows(sch_fields, ev_off, ev_field, ev_eqbits, e, tkeys, tvals, mask, conj_flat, conj_vals,
                              probe, n_probe):
    """:func:`conjunction_rows` for an event that carries a field several times: a row for *every* combination of
    the equalities it satisfies on a configured schema's fields (a conjunction holds when any value meets each
    of its equalities, engine/semantics.py).  Returns ``(probe, n_probe)``, ``probe`` grown if needed."""
    lo, hi = ev_off[e], ev_off[e + 1]
    for s in range(sch_fields.shape[0]):
        f0, f1, f2 = sch_fields[s, 0], sch_fields[s, 1], sch_fields[s, 2]
        for j0 in range(lo, hi):
            if ev_field[j0] != f0:
                continue
            p0 = ht_find2(tkeys, tvals, f0 * 6 + 0, ev_eqbits[j0])
            if p0 < 0 or _seen_before(ev_field, ev_eqbits, lo, j0):
                continue
            for j1 in range(lo, hi):
                if ev_field[j1] != f1:
                    continue
                p1 = ht_find2(tkeys, tvals, f1 * 6 + 0, ev_eqbits[j1])
                if p1 < 0 or _seen_before(ev_field, ev_eqbits, lo, j1):
                    continue
                for j2 in range(lo, hi if f2 >= 0 else lo + 1):
                    p2 = -1
                    if f2 >= 0:
                        if ev_field[j2] != f2:
                            continue
                        p2 = ht_find2(tkeys, tvals, f2 * 6 + 0, ev_eqbits[j2])
                        if p2 < 0 or _seen_before(ev_field, ev_eqbits, lo, j2):
                            continue
                    probe = grow_rows(probe, n_probe, 1)
                    slot = ht_slot3(mask, p0, p1, p2)
                    prefetch(conj_flat, slot * 3)
                    prefetch(conj_vals, slot)
                    probe[n_probe, 0], probe[n_probe, 1], probe[n_probe, 2] = p0, p1, p2
                    n_probe += 1
    return probe, n_probe


@njit(cache=True, inline="always")
def _seen_before(ev_field, ev_eqbits, lo, j):
    """Whether a pair before ``j`` (from ``lo``) has ``j``'s field and value (a repeated value probes once)."""
    for t in range(lo, j):
        if ev_field[t] == ev_field[j] and ev_eqbits[t] == ev_eqbits[j]:
            return True
    return False


@njit(cache=True, inline="always")
def stage_keys(ev, g0, g1, preds, access, conj_flat, eq_of_field, key_head, sat, gsat, gs_off, ge_end, gp_off,
               probe):
    """Stage 1: phase 1 of events ``g0:g1`` and the lists each reaches, their first reads prefetched.

    Writes the group's satisfied predicates to ``gsat`` (event ``i`` of the
    group: ``gsat[gs_off[i]:gs_off[i + 1]]``, its equalities first, up to
    ``ge_end[i]``) and a row per reached list to
    ``probe`` (event ``i``: rows ``gp_off[i]:gp_off[i + 1]``): ``(key,
    KNOWN_KEY, -)`` for the catch-all and the single-predicate lists, ``(p0,
    p1, p2)`` -- the event's equality predicates on a configured schema's
    fields (``p2 = -1`` for two fields) -- for each conjunction to look up.
    ``conj_flat`` is ``access.conj_keys`` flattened (once per batch).  Returns ``(gsat, probe, n_probe)``, the arrays grown if
    needed.
    """
    ev_off, ev_field, ev_code, ev_eqbits = ev.offsets, ev.field, ev.code, ev.eqbits
    ev_rep, p_bits = ev.repeats, preds.bits
    tkeys, tvals, group_of = preds.table_keys, preds.table_vals, preds.group_of
    g_start, g_end, g_vals, g_pids = preds.g_start, preds.g_end, preds.g_vals, preds.g_pids
    sch_fields = access.schema_fields
    n_sch = sch_fields.shape[0]
    conj_vals = access.conj_vals
    mask = conj_vals.shape[0] - 1
    pred_key, pred_field, pred_op = access.pred_key, preds.field, preds.op
    n_sat = 0
    n_probe = 0
    for e in range(g0, g1):
        ns = satisfied_predicates(ev_off[e], ev_off[e + 1], ev_field, ev_code, ev_eqbits, tkeys, tvals, group_of,
                                  g_start, g_end, g_vals, g_pids, sat, ev_rep[e], p_bits)
        gsat = ensure_room(gsat, n_sat, ns)
        probe = grow_rows(probe, n_probe, n_sch + ns + 1)
        front, n_probe = split_satisfied(sat, ns, gsat, n_sat, pred_op, pred_field, pred_key, eq_of_field, key_head,
                                         probe, n_probe)
        if ev_rep[e]:
            probe, n_probe = repeated_conjunction_rows(sch_fields, ev_off, ev_field, ev_eqbits, e, tkeys, tvals, mask,
                                                       conj_flat, conj_vals, probe, n_probe)
        else:
            n_probe = conjunction_rows(sch_fields, eq_of_field, mask, conj_flat, conj_vals, probe, n_probe)
        for t in range(n_sat, front):  # (the equalities, which alone set eq_of_field)
            eq_of_field[pred_field[gsat[t]]] = -1
        ge_end[e - g0] = front
        n_sat += ns
        gs_off[e - g0 + 1] = n_sat
        gp_off[e - g0 + 1] = n_probe
    return gsat, probe, n_probe


@njit(cache=True)
def stage_keys_sparse(ev, g0, g1, preds, access, conj_flat, eq_of_field, key_head, sat, gsat, gs_off, ge_end,
                      gp_off, probe):
    """Stage 1 of :func:`stage_keys` with presence keys and, over thousands of fields, phase 1's reads prefetched.

    Also adds a ``KNOWN_KEY`` row for the presence list of each field the
    event carries (``access.field_key``).  A separate function, so that
    :func:`stage_keys` (W0 and every workload without presence keys) stays as it was.  Its arguments, what it
    writes and what it returns are :func:`stage_keys`'.
    """
    ev_off, ev_field, ev_code, ev_eqbits = ev.offsets, ev.field, ev.code, ev.eqbits
    ev_rep, p_bits = ev.repeats, preds.bits
    tkeys, tvals, group_of = preds.table_keys, preds.table_vals, preds.group_of
    g_start, g_end, g_vals, g_pids = preds.g_start, preds.g_end, preds.g_vals, preds.g_pids
    sch_fields = access.schema_fields
    n_sch = sch_fields.shape[0]
    conj_vals = access.conj_vals
    mask = conj_vals.shape[0] - 1
    pred_key, pred_field, pred_op = access.pred_key, preds.field, preds.op
    field_key = access.field_key
    n_fk = field_key.shape[0]
    n_keys = key_head.shape[0]
    n_sat = 0
    n_probe = 0
    n_ev = ev_off.shape[0] - 1
    n_gf = group_of.shape[0]
    ahead = n_gf >= PHASE1_AHEAD_FIELDS  # many fields: phase 1's reads miss the cache, fetch them ahead
    if ahead:
        g_flat = group_of.ravel()
        tk_flat = tkeys.ravel()
        t_mask = tvals.shape[0] - 1
        for e2 in range(g0, min(g0 + 2, n_ev)):  # the first two events of the group: not fetched by the one before
            phase1_prefetch_rows(ev_off, ev_field, ev_eqbits, e2, g_flat, n_gf, tk_flat, tvals, t_mask)
    for e in range(g0, g1):
        if ahead:
            # two events ahead: its rows of group_of and its equality slots; one ahead: its groups' bounds
            if e + 2 < n_ev:
                phase1_prefetch_rows(ev_off, ev_field, ev_eqbits, e + 2, g_flat, n_gf, tk_flat, tvals, t_mask)
            if e + 1 < n_ev:
                phase1_prefetch_groups(ev_off, ev_field, e + 1, group_of, n_gf, g_start, g_end)
        ns = satisfied_predicates(ev_off[e], ev_off[e + 1], ev_field, ev_code, ev_eqbits, tkeys, tvals, group_of,
                                  g_start, g_end, g_vals, g_pids, sat, ev_rep[e], p_bits)
        gsat = ensure_room(gsat, n_sat, ns)
        probe = grow_rows(probe, n_probe, n_sch + ns + 1 + (ev_off[e + 1] - ev_off[e] if n_fk else 0))
        if n_fk:
            # the presence lists of the fields the event carries (one read per pair; none while no key exists)
            for j in range(ev_off[e], ev_off[e + 1]):
                f = ev_field[j]
                if 0 <= f < n_fk:
                    q = field_key[f]
                    if 0 <= q < n_keys:
                        prefetch(key_head, q)
                        probe[n_probe, 0], probe[n_probe, 1] = q, KNOWN_KEY
                        n_probe += 1
        front, n_probe = split_satisfied(sat, ns, gsat, n_sat, pred_op, pred_field, pred_key, eq_of_field, key_head,
                                         probe, n_probe)
        if ev_rep[e]:
            probe, n_probe = repeated_conjunction_rows(sch_fields, ev_off, ev_field, ev_eqbits, e, tkeys, tvals, mask,
                                                       conj_flat, conj_vals, probe, n_probe)
        else:
            n_probe = conjunction_rows(sch_fields, eq_of_field, mask, conj_flat, conj_vals, probe, n_probe)
        if ahead:  # the equalities set above are on the event's own fields: no pred_field read per predicate
            for j in range(ev_off[e], ev_off[e + 1]):
                if 0 <= ev_field[j] < eq_of_field.shape[0]:
                    eq_of_field[ev_field[j]] = -1
        else:
            for t in range(n_sat, front):  # (the equalities, which alone set eq_of_field)
                eq_of_field[pred_field[gsat[t]]] = -1
        ge_end[e - g0] = front
        n_sat += ns
        gs_off[e - g0 + 1] = n_sat
        gp_off[e - g0 + 1] = n_probe
    return gsat, probe, n_probe


@njit(cache=True, inline="always")
def stage_lookup(probe, n_probe, access, key_head):
    """Stage 2: look the conjunctions up; ``probe[t, 0]`` becomes the list's key (-1: absent), its head prefetched."""
    n_keys = key_head.shape[0]
    conj_keys, conj_vals = access.conj_keys, access.conj_vals
    for t in range(n_probe):
        if probe[t, 1] == KNOWN_KEY:
            continue
        q = ht_find3(conj_keys, conj_vals, probe[t, 0], probe[t, 1], probe[t, 2])
        if 0 <= q < n_keys:
            prefetch(key_head, q)
        else:
            q = -1
        probe[t, 0] = q


@njit(cache=True, inline="always")
def stage_heads(probe, n_probe, store, runs):
    """Stage 3: ``probe[t, 1]`` becomes the first cluster of the list (-1: none), its bookkeeping prefetched."""
    key_head, c_base, c_cap, c_len, c_k, c_next = store.key_head, store.base, store.cap, store.length, store.k, store.next
    c_sorted, c_runs = runs.sorted, runs.runs
    has_runs = c_sorted.shape[0] > 0
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
            if has_runs:
                prefetch(c_sorted, c)
                prefetch(c_runs, c)


@njit(cache=True, inline="always")
def stage_prefetch_rows(n_grp, gs_off, gp_off, probe, store, runs):
    """Stage 4: prefetch the first rows each cluster's scan reads (its first column and its line, or its runs)."""
    arena, c_base, c_cap, c_k, c_len = store.arena, store.base, store.cap, store.k, store.length
    c_sorted, c_runs = runs.sorted, runs.runs
    for i in range(n_grp):
        nsat = gs_off[i + 1] - gs_off[i]
        for t in range(gp_off[i], gp_off[i + 1]):
            c = probe[t, 1]
            if c >= 0 and c_len[c] > 0:
                path = run_path_of(c_sorted, c_runs, c, nsat)
                if path == PLAIN:
                    prefetch(arena, c_base[c])
                    prefetch(arena, c_base[c] + c_k[c] * c_cap[c])
                else:
                    row = INDEX_ROW if path == BY_INDEX else PIDS_ROW
                    prefetch(arena, run_row(c_base[c], c_cap[c], c_k[c], row))


@njit(cache=True, inline="always")
def scan_group(g0, g1, gsat, gs_off, gp_off, probe, sv, sv_off, bits, store, runs, out, nout, out_off, handle_id, pf,
               unfold, lookahead):
    """Stage 6, event by event: set its bits, check what :func:`stage_runs` left, scan every list it reached, clear.

    Appends each event's matching subscription ids (ascending) to ``out``
    and its end to ``out_off[e + 1]``; returns ``(out, nout)``.  One call per
    group: the per-event work stays in one function (see the module
    docstring), :func:`scan_group_into`, which stops at an event ``out`` has
    no room for: ``out`` is grown here and the scan resumed at that event.
    """
    e = g0
    while True:
        e1, nout = scan_group_into(e, g0, g1, gsat, gs_off, gp_off, probe, sv, sv_off, bits, store, runs, out, nout,
                                   out_off, handle_id, pf, unfold, lookahead)
        finish_events(out, out_off, e, e1, handle_id, nout)
        if e1 >= g1:
            return out, nout
        e = e1
        out = doubled(out, nout)


@njit(cache=True, _nrt=False)
def scan_group_into(e0, g0, g1, gsat, gs_off, gp_off, probe, sv, sv_off, bits, store, runs, out, nout, out_off,
                    handle_id, pf, unfold, lookahead):
    """The events ``e0:g1`` of :func:`scan_group` (matched handles, not yet ids), without growing ``out``.

    Returns ``(e, nout)``: ``e = g1`` when done, else the event for which
    ``out`` had no room, its bits cleared and its handles dropped.  The
    ids of an event's handles are prefetched as soon as it is scanned.  Without
    numba's reference-counting runtime (see engine/kernels/run_lookups.py): with
    it, ``out`` reassigned by its growth checks and the arrays handed to the
    inlined list scans cost a pair of atomic operations per list scanned.
    """
    arena, c_base, c_cap, c_k, c_len = store.arena, store.base, store.cap, store.k, store.length
    c_next, c_sorted, c_runs = store.next, runs.sorted, runs.runs
    for e in range(e0, g1):
        i = e - g0
        if e + 1 < g1:
            # the run rows the next event will read by run, fetched while this one is scanned
            nsat = gs_off[i + 2] - gs_off[i + 1]
            for t in range(gp_off[i + 1], gp_off[i + 2]):
                c = probe[t, 1]
                if c >= 0 and run_path_of(c_sorted, c_runs, c, nsat) == BY_RUN:
                    pr = run_row(c_base[c], c_cap[c], c_k[c], PIDS_ROW)
                    for r in range(16, c_runs[c], 16):
                        prefetch(arena, pr + r)
        s0 = gs_off[i]  # the event's satisfied predicates: gsat[s0:s0 + ns]
        ns = gs_off[i + 1] - s0
        # the bits are read only by the lists scanned entry by entry: none when every list the event reached is
        # a sorted prefix that stage_runs has done (W1, W2 at 6M: 266 stores per event saved)
        scans = False
        for t in range(gp_off[i], gp_off[i + 1]):
            c = probe[t, 1]
            if c >= 0 and (probe[t, 2] != STAGED or c_sorted[c] < c_len[c] or c_next[c] >= 0):
                scans = True
        if scans:
            for t in range(s0, s0 + ns):
                bits[gsat[t]] = 1
        start = nout
        full = False
        if c_sorted.shape[0]:
            # the entries of the runs stage_runs found, every column checked: their handles
            if nout + sv_off[i + 1] - sv_off[i] > out.shape[0]:
                full = True
            else:
                for h in range(sv_off[i], sv_off[i + 1]):
                    c, j = sv[h, 0], sv[h, 1]
                    nout = put_live(out, nout, arena[c_base[c] + c_k[c] * c_cap[c] + j])
        for t in range(gp_off[i], gp_off[i + 1]):
            if full:
                break
            c = probe[t, 1]
            if c < 0:
                continue
            n = c_len[c]
            if probe[t, 2] == STAGED:
                # the sorted prefix is done (above); its unsorted tail, then the list's other clusters
                done = c_sorted[c]
                if nout + n - done > out.shape[0]:
                    full = True
                    break
                nout = scan_dispatch(pf, unfold, lookahead, c_k[c], arena, bits, c_base[c] + done, c_cap[c], n - done,
                                     out, nout)
                nout = scan_clusters_into(c_next[c], arena, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, bits,
                                          out, nout, pf, unfold, lookahead, gsat, s0, ns)
            elif n <= SMALL_CLUSTER:
                # the common case of the small lists a conjunction or a presence key finds (one small cluster
                # per subscription size): checked here, without the call into the cluster kernels (whose
                # fixed cost dwarfs a few entries); a larger cluster further down the list goes to them
                while c >= 0 and c_len[c] <= SMALL_CLUSTER:
                    n = c_len[c]
                    if nout + n > out.shape[0]:
                        full = True
                        break
                    k, base, cap = c_k[c], c_base[c], c_cap[c]
                    for j in range(n):
                        if entry_matches(-1, k, arena, bits, base, cap, j):
                            nout = put_live(out, nout, arena[base + k * cap + j])
                    c = c_next[c]
                if c >= 0 and not full:
                    nout = scan_clusters_into(c, arena, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, bits, out,
                                              nout, pf, unfold, lookahead, gsat, s0, ns)
            else:  # (c is the head of the list stage_heads found)
                nout = scan_clusters_into(c, arena, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, bits, out,
                                          nout, pf, unfold, lookahead, gsat, s0, ns)
            if nout < 0:
                full = True
        if scans:
            for t in range(s0, s0 + ns):
                bits[gsat[t]] = 0
        if full:
            return e, start
        for t in range(start, nout):
            # the id each handle maps to, read by finish_event once the group is scanned: a random read of
            # ``handle_id`` per match, a cache miss when read there
            prefetch(handle_id, out[t])
        out_off[e + 1] = nout
    return g1, nout


@njit(cache=True)
def clustered_events(ev, preds, store, runs, access, scratch, handle_id, pf, unfold, lookahead):
    """Static and dynamic over a batch of events: the stages of the module docstring, ``GROUP`` events at a time.

    ``ev``: :class:`~engine.frontend.encoding.EventArrays`; ``preds``:
    :class:`~engine.structures.predicates.PredicateArrays`; ``store`` / ``runs``:
    :class:`~engine.structures.cluster_store.ClusterArrays` /
    :class:`~engine.structures.sorted_runs.RunArrays`; ``access``:
    :class:`~engine.structures.access_keys.AccessArrays`; ``scratch``:
    :class:`ProbeScratch`.  Returns the matches in CSR (ids ascending per event); the ids are a view of the
    output buffer, ``scratch.out`` unless it had to grow.
    """
    n_ev = ev.offsets.shape[0] - 1
    bits = preds.bits
    has_runs = runs.sorted.shape[0] > 0
    conj_flat = access.conj_keys.ravel()
    sat = np.empty(max(bits.shape[0], 1), dtype=np.int64)
    gsat = np.empty(1024, dtype=np.int64)  # the group's satisfied predicates, event after event
    gs_off = np.zeros(GROUP + 1, dtype=np.int64)
    ge_end = np.zeros(GROUP, dtype=np.int64)  # each event's equalities end there in gsat
    gp_off = np.zeros(GROUP + 1, dtype=np.int64)
    probe = scratch.probe
    out = scratch.out
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    # stage_runs' scratch: the runs found (event, cluster, run -- then its start --, end, second-level index), the
    # entries that pass
    hit = np.empty((256, 5), dtype=np.int64)
    sv = np.empty((256, 2), dtype=np.int64)
    sv_off = np.zeros(GROUP + 1, dtype=np.int64)
    sparse = access.field_key.shape[0] > 0 or preds.group_of.shape[0] >= PHASE1_AHEAD_FIELDS
    for g0 in range(0, n_ev, GROUP):
        g1 = min(n_ev, g0 + GROUP)
        if sparse:
            gsat, probe, n_probe = stage_keys_sparse(ev, g0, g1, preds, access, conj_flat, scratch.eq_of_field,
                                                     store.key_head, sat, gsat, gs_off, ge_end, gp_off, probe)
        else:
            gsat, probe, n_probe = stage_keys(ev, g0, g1, preds, access, conj_flat, scratch.eq_of_field,
                                              store.key_head, sat, gsat, gs_off, ge_end, gp_off, probe)
        stage_lookup(probe, n_probe, access, store.key_head)
        stage_heads(probe, n_probe, store, runs)
        stage_prefetch_rows(g1 - g0, gs_off, gp_off, probe, store, runs)
        if has_runs:
            lookup_end = ge_end if scratch.eq_first else gs_off[1:]
            hit, sv = stage_runs(g1 - g0, gs_off, lookup_end, gp_off, gsat, probe, scratch.gmask, store, runs, hit,
                                 sv, sv_off)
        out, nout = scan_group(g0, g1, gsat, gs_off, gp_off, probe, sv, sv_off, bits, store, runs, out, nout, out_off,
                               handle_id, pf, unfold, lookahead)
    return out_off, out[:nout]
