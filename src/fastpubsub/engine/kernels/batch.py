"""The per-batch event loop of Figure 2 for propagation, and the kernel factories of the scanning algorithms.

For each event of a batch: phase 1 (:func:`~engine.structures.predicates.satisfied_predicates`)
lists the satisfied predicate ids; phase 2 (propagation's cluster scan or
counting's hit counters) appends the handles of matching subscriptions (never
the ``DEAD`` handle of a removed entry, engine/structures/sorted_runs.py); the
handles become ascending ids.  One numba call per batch, CSR result.  Counting
runs the same loop with its own phase 2 (:func:`engine.algorithms.counting.counting_events`);
static and dynamic run theirs (:func:`engine.kernels.probing.clustered_events`), whose
probes are staged over groups of events.

Each loop takes the named containers its algorithm reads and nothing else:
:class:`~engine.frontend.encoding.EventArrays`, :class:`~engine.structures.predicates.PredicateArrays`,
:class:`~engine.structures.cluster_store.ClusterArrays` and
:class:`~engine.structures.sorted_runs.RunArrays`, the access keys' arrays, counting's :class:`~engine.algorithms.counting.CountingArrays`.  The scan
parameters are constants captured by the entry functions of
:func:`propagation_kernel` / :func:`clustered_kernel`; numba specialises the
whole call tree on them.  The closures capture plain ints only, which keeps
numba's on-disk cache valid across processes (a captured function would not
be; ``benchmarks/engine/warm_start.py`` checks that a warm process loads every kernel
from the cache).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from ..structures.predicates import satisfied_predicates
from .probing import clustered_events
from .scan import doubled, finish_events, predicate_list_key, scan_clusters_into


@njit(cache=True)
def propagation_events(ev, preds, store, runs, pred_key, handle_id, pf, unfold, lookahead):
    """Propagation over a batch of events (Figure 2); ``pred_key``: predicate id -> its single-predicate key.

    The events are scanned by :func:`propagation_into`, which stops at an
    event ``out`` has no room for: ``out`` is grown here and the scan resumed
    at that event; the matched handles of the events done become ids.
    """
    n_ev = ev.offsets.shape[0] - 1
    sat = np.empty(max(preds.bits.shape[0], 1), dtype=np.int64)
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    e = 0
    while True:
        e1, nout = propagation_into(e, ev, preds, store, runs, pred_key, sat, out, nout, out_off, pf, unfold,
                                    lookahead)
        finish_events(out, out_off, e, e1, handle_id, nout)
        if e1 >= n_ev:
            return out_off, out[:nout].copy()
        e = e1
        out = doubled(out, nout)


@njit(cache=True, _nrt=False)
def propagation_into(e0, ev, preds, store, runs, pred_key, sat, out, nout, out_off, pf, unfold, lookahead):
    """Events ``e0:`` of :func:`propagation_events` (matched handles, not yet ids), without growing ``out``.

    Per event: phase 1 into ``sat``, its bits set, the catch-all list and the
    lists of its satisfied single-predicate keys scanned, the bits cleared.
    Returns ``(e, nout)``: ``e`` = the number of events when done, else the
    event for which ``out`` had no room, its handles dropped.  Without numba's
    reference-counting runtime (docs/design/engine.md, "Kernel contract"): with it,
    ``out`` reassigned by a growth check and the arrays a list scan unpacks
    cost a pair of atomic operations per list scanned.
    """
    ev_off, ev_field, ev_code, ev_eqbits = ev.offsets, ev.field, ev.code, ev.eqbits
    ev_rep, p_bits = ev.repeats, preds.bits
    tkeys, tvals, group_of = preds.table_keys, preds.table_vals, preds.group_of
    g_start, g_end, g_vals, g_pids, bits = preds.g_start, preds.g_end, preds.g_vals, preds.g_pids, preds.bits
    arena, c_next, c_base, c_cap, c_len, c_k = store.arena, store.next, store.base, store.cap, store.length, store.k
    key_head, c_sorted, c_runs = store.key_head, runs.sorted, runs.runs
    n_keys = key_head.shape[0]
    n_ev = ev_off.shape[0] - 1
    for i in range(e0, n_ev):
        ns = satisfied_predicates(ev_off[i], ev_off[i + 1], ev_field, ev_code, ev_eqbits, tkeys, tvals, group_of,
                                  g_start, g_end, g_vals, g_pids, sat, ev_rep[i], p_bits)
        for t in range(ns):
            bits[sat[t]] = 1
        start = nout
        for t in range(-1, ns):
            q = predicate_list_key(pred_key, sat, t)
            if q < 0 or q >= n_keys:
                continue
            nout = scan_clusters_into(key_head[q], arena, c_next, c_base, c_cap, c_len, c_k, c_sorted, c_runs, bits,
                                      out, nout, pf, unfold, lookahead, sat, 0, ns)
            if nout < 0:
                break
        for t in range(ns):
            bits[sat[t]] = 0
        if nout < 0:
            return i, start
        out_off[i + 1] = nout
    return n_ev, nout


@functools.lru_cache(maxsize=None)
def propagation_kernel(prefetch_columns: int = 0, unfold: int = 8, lookahead: int = 256):
    """``kernel(ev, preds, store, runs, pred_key, handle_id) -> (offsets, ids)`` with the scan parameters fixed."""

    @njit(cache=True, nogil=True)
    def kernel(ev, preds, store, runs, pred_key, handle_id):
        return propagation_events(ev, preds, store, runs, pred_key, handle_id, prefetch_columns, unfold, lookahead)

    return kernel


@functools.lru_cache(maxsize=None)
def clustered_kernel(prefetch_columns: int = 0, unfold: int = 8, lookahead: int = 256):
    """``kernel(ev, preds, store, runs, access, scratch, handle_id) -> (offsets, ids)`` with the scan parameters fixed."""

    @njit(cache=True, nogil=True)
    def kernel(ev, preds, store, runs, access, scratch, handle_id):
        return clustered_events(ev, preds, store, runs, access, scratch, handle_id, prefetch_columns, unfold,
                                lookahead)

    return kernel
