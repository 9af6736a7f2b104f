"""An instance's life: entering a node, its changelog mark, its witness, its end (freed, tombstoned)."""

from __future__ import annotations

from numba import njit

from .layout import (EMPTY, OP_FOLD, ST_BATCH, ST_COMPLETED, ST_DIRTY, ST_FOLDLIVE, ST_FREE, ST_LIVE, ST_TOMB, ST_TRACK,
                     ST_WIT, STRIDE)
from .lists import _key_of, _link, _unlink, find_list
from .predicates import _agg_init, _capture


@njit(cache=True, inline="always")
def _copy_row(dst, i, src, j):
    """``dst[i, :] = src[j, :]`` without an array view (the kernel runs without the reference-counting runtime)."""
    for k in range(dst.shape[1]):
        dst[i, k] = src[j, k]


@njit(cache=True, inline="always")
def _fill_row(dst, i, value):
    for k in range(dst.shape[1]):
        dst[i, k] = value


@njit(cache=True, inline="always")
def _free(s, aut, store, changes, st, ev_id_i):
    _unlink(s, store)
    p = store.inst_p[s]
    node = store.inst_node[s]
    if aut.node_op[p * STRIDE + node] == OP_FOLD:
        st[ST_FOLDLIVE] -= 1
    if st[ST_TRACK]:  # tombstone its key, always: an aborted transaction may have written it (docs/patterns.md 4)
        t = st[ST_TOMB]
        st[ST_TOMB] += 1
        changes.tomb_key[t, 0] = aut.pat_sid[p]
        for k in range(STRIDE):
            left = k == 0 or (k < node and aut.node_op[p * STRIDE + k] == OP_FOLD)
            changes.tomb_key[t, 1 + k] = store.bound[s, k] if left else -1
        changes.tomb_off[t] = ev_id_i
    store.inst_alive[s] = False
    store.inst_deadline[s] = EMPTY  # its heap entries are stale from now on
    store.pat_live[p] -= 1
    st[ST_LIVE] -= 1
    store.free[st[ST_FREE]] = s
    st[ST_FREE] += 1


@njit(cache=True, inline="always")
def _enter(s, node, i, ts, mode, aut, ev, store, st):
    """Place instance ``s`` at ``node`` after binding event ``i``; a fold initialises ``.last`` and aggregates."""
    if store.inst_list[s] >= 0:
        _unlink(s, store)
    gnode = store.inst_p[s] * STRIDE + node
    store.inst_node[s] = node
    store.inst_last[s] = ts
    if aut.node_op[gnode] == OP_FOLD:
        _capture(gnode, i, s, aut, ev, store)
        _agg_init(gnode, i, s, aut, ev, store)
        store.bound[s, node] = -1
        store.iters[s, node] = 0
        st[ST_FOLDLIVE] += 1
    a, b, c, d = _key_of(s, gnode, mode, aut, store)
    _link(s, find_list(store, a, b, c, d, True, st), store)


@njit(cache=True, inline="always")
def _mark(s, ev_id_i, store, changes, st):
    store.inst_changed[s] = ev_id_i
    if not st[ST_TRACK]:
        return  # nobody reads the changes: an engine without a changelog keeps no dirty list
    if changes.dirty_mark[s] != st[ST_BATCH]:
        changes.dirty_mark[s] = st[ST_BATCH]
        changes.dirty[st[ST_DIRTY]] = s
        st[ST_DIRTY] += 1


@njit(cache=True, inline="always")
def _witness(s, i, store, out, st):
    w = st[ST_WIT]
    st[ST_WIT] += 1
    st[ST_COMPLETED] += 1
    out.p[w] = store.inst_p[s]
    out.ev[w] = i
    _copy_row(out.bound, w, store.bound, s)
    _copy_row(out.iters, w, store.iters, s)
    _copy_row(out.acc, w, store.acc, s)
    _copy_row(out.accn, w, store.accn, s)
    out.start[w] = store.inst_start[s]


@njit(cache=True, _nrt=False)
def drop_pattern(p, aut, store, changes, st, source):
    """Free every instance of pattern slot ``p`` (its subscription was replaced or deleted)."""
    n = 0
    for s in range(store.inst_alive.shape[0]):
        if store.inst_alive[s] and store.inst_p[s] == p:
            if changes.tomb_key.shape[0] <= st[ST_TOMB]:
                return -1 - n  # the caller grows the tombstone buffer and calls again
            _free(s, aut, store, changes, st, source)
            n += 1
    return n
