"""The per-batch event loop of Figure 2 for propagation, and the kernel factories of the scanning algorithms.

For each event of a batch: phase 1 (:func:`~engine.structures.predicates.satisfied_predicates`)
lists the satisfied predicate ids; phase 2 (propagation's cluster scan or
counting's hit counters) appends the handles of matching subscriptions; the
handles become ascending ids.  One numba call per batch, CSR result.  Counting
runs the same loop with its own phase 2 (:func:`engine.algorithms.counting.counting_events`);
static and dynamic run theirs (:func:`engine.kernels.probing.clustered_events`), whose
probes are staged over groups of events.

Each loop takes the named containers its algorithm reads and nothing else:
:class:`~engine.frontend.encoding.EventArrays`, :class:`~engine.structures.predicates.PredicateArrays`,
:class:`~engine.structures.cluster_store.ClusterArrays` and ``RunArrays``, the access
keys' arrays, counting's :class:`~engine.algorithms.counting.CountingArrays`.  The scan
parameters are constants captured by the entry functions of
:func:`propagation_kernel` / :func:`clustered_kernel`; numba specialises the
whole call tree on them.  The closures capture plain ints only, which keeps
numba's on-disk cache valid across processes (a captured function would not
be; ``benchmarks/warm_start.py`` checks that a warm process loads every kernel
from the cache).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from ..structures.predicates import satisfied_predicates
from .probing import clustered_events
from .scan import finish_event, propagation_phase2


@njit(cache=True)
def propagation_events(ev, preds, store, runs, pred_key, handle_id, pf, unfold, lookahead):
    """Propagation over a batch of events (Figure 2); ``pred_key``: predicate id -> its single-predicate key."""
    ev_off, ev_field, ev_code, ev_eqbits = ev.offsets, ev.field, ev.code, ev.eqbits
    tkeys, tvals, group_of = preds.table_keys, preds.table_vals, preds.group_of
    g_start, g_end, g_vals, g_pids = preds.g_start, preds.g_end, preds.g_vals, preds.g_pids
    n_ev = ev.offsets.shape[0] - 1
    sat = np.empty(max(preds.bits.shape[0], 1), dtype=np.int64)
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    for i in range(n_ev):
        ns = satisfied_predicates(ev_off[i], ev_off[i + 1], ev_field, ev_code, ev_eqbits, tkeys, tvals, group_of,
                                  g_start, g_end, g_vals, g_pids, sat)
        start = nout
        out, nout = propagation_phase2(sat, ns, preds.bits, pred_key, store, runs, out, nout, pf, unfold, lookahead)
        finish_event(out, start, nout, handle_id)
        out_off[i + 1] = nout
    return out_off, out[:nout].copy()


@functools.lru_cache(maxsize=None)
def propagation_kernel(prefetch_columns: int = 0, unfold: int = 8, lookahead: int = 256):
    """``kernel(ev, preds, store, runs, pred_key, handle_id) -> (offsets, ids)`` with the scan parameters fixed."""

    @njit(cache=True)
    def kernel(ev, preds, store, runs, pred_key, handle_id):
        return propagation_events(ev, preds, store, runs, pred_key, handle_id, prefetch_columns, unfold, lookahead)

    return kernel


@functools.lru_cache(maxsize=None)
def clustered_kernel(prefetch_columns: int = 0, unfold: int = 8, lookahead: int = 256):
    """``kernel(ev, preds, store, runs, access, scratch, handle_id) -> (offsets, ids)`` with the scan parameters fixed."""

    @njit(cache=True)
    def kernel(ev, preds, store, runs, access, scratch, handle_id):
        return clustered_events(ev, preds, store, runs, access, scratch, handle_id, prefetch_columns, unfold,
                                lookahead)

    return kernel
