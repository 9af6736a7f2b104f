"""The per-batch event loop of Figure 2, shared by every algorithm.

For each event of a batch: phase 1 (:func:`~engine.predicates.satisfied_predicates`)
lists the satisfied predicate ids; phase 2 (propagation's cluster scan or
counting's hit counters) appends the handles of matching subscriptions; the
handles become ascending ids.  One numba call per batch, CSR result.

Every algorithm passes the same ``state`` tuple (unused arrays empty), so
that one loop serves all: ``(bits, pred_key, key_head, c_next, c_base,
c_cap, c_len, c_k, c_sorted, c_runs, arena, need, cnt)`` followed, for static and dynamic, by
the conjunction probing arrays of :func:`~engine.clustered.clustered_events`, which runs
static and dynamic batches itself (their probes are staged over groups of events).  The algorithm and the scan
parameters are constants captured by the entry function of
:func:`batch_kernel`; numba specialises the whole call tree on them.  The
closures capture plain ints only, which keeps numba's on-disk cache valid
across processes (a captured function would not be).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from .clustered import clustered_events
from .counting import counting_phase2
from .predicates import satisfied_predicates
from .scan import finish_event, propagation_phase2

PROPAGATION, COUNTING, CLUSTERED = 0, 1, 2


@njit(cache=True)
def run_events(algo, pf, unfold, lookahead, ev_off, ev_field, ev_code, ev_eqbits, phase1, n_pred_ids, state, handle_id):
    if algo == CLUSTERED:
        return clustered_events(ev_off, ev_field, ev_code, ev_eqbits, phase1, n_pred_ids, state, handle_id,
                                pf, unfold, lookahead)
    tkeys, tvals, group_of, g_start, g_end, g_vals, g_pids = phase1
    n_ev = ev_off.shape[0] - 1
    sat = np.empty(max(n_pred_ids, 1), dtype=np.int64)
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    for i in range(n_ev):
        ns = satisfied_predicates(ev_off[i], ev_off[i + 1], ev_field, ev_code, ev_eqbits, tkeys, tvals,
                                  group_of, g_start, g_end, g_vals, g_pids, sat)
        start = nout
        if algo == PROPAGATION:
            out, nout = propagation_phase2(sat, ns, state, out, nout, pf, unfold, lookahead)
        else:
            out, nout = counting_phase2(sat, ns, state, out, nout)
        finish_event(out, start, nout, handle_id)
        out_off[i + 1] = nout
    return out_off, out[:nout].copy()


@functools.lru_cache(maxsize=None)
def batch_kernel(algo: int, prefetch_columns: int = 0, unfold: int = 8, lookahead: int = 256):
    """``kernel(ev_off, ev_field, ev_code, ev_eqbits, phase1, n_pred_ids, state, handle_id) -> (offsets, ids)``."""

    @njit(cache=True)
    def kernel(ev_off, ev_field, ev_code, ev_eqbits, phase1, n_pred_ids, state, handle_id):
        return run_events(algo, prefetch_columns, unfold, lookahead, ev_off, ev_field, ev_code, ev_eqbits,
                          phase1, n_pred_ids, state, handle_id)

    return kernel
