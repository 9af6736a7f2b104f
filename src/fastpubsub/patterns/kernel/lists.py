"""The dynamic index: instances in doubly linked lists, one per index key (node or step group, and the bound
value), found through an open-addressing hash table (Cayuga's FR index on bound values)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .layout import EMPTY, MODE_DYNAMIC, MODE_NONE, ST_KEYS, ST_LISTS, STEP_BASE, STRIDE


@njit(cache=True, inline="always")
def _mix(a, b, c, d):
    h = np.uint64(0x9E3779B97F4A7C15)
    for x in (a, b, c, d):
        h ^= np.uint64(x) + np.uint64(0x9E3779B97F4A7C15) + (h << np.uint64(6)) + (h >> np.uint64(2))
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
    return h


@njit(cache=True, inline="always")
def find_list(store, a, b, c, d, create, st):
    """The list id of key (a, b, c, d), or -1; ``create`` makes a new empty list."""
    hk = store.hk
    mask = np.uint64(hk.shape[0] - 1)
    pos = _mix(a, b, c, d) & mask
    while True:
        p = np.int64(pos)
        if hk[p, 0] == EMPTY:
            if not create:
                return -1
            hk[p, 0] = a
            hk[p, 1] = b
            hk[p, 2] = c
            hk[p, 3] = d
            lid = st[ST_LISTS]
            st[ST_LISTS] += 1
            store.hval[p] = lid
            store.list_head[lid] = -1
            st[ST_KEYS] += 1
            return lid
        if hk[p, 0] == a and hk[p, 1] == b and hk[p, 2] == c and hk[p, 3] == d:
            return store.hval[p]
        pos = (pos + np.uint64(1)) & mask


@njit(cache=True, inline="always")
def _key_of(slot, node, mode, aut, store):
    """The list key an instance at ``node`` belongs to (see module docstring)."""
    if mode == MODE_DYNAMIC and aut.node_idx_attr[node] >= 0:
        col = aut.node_idx_col[node]
        bits = store.iv_bits[slot, col]
        kind = np.int64(store.iv_kind[slot, col])
        if aut.node_theta_static[node]:
            return node, np.int64(aut.node_idx_attr[node]), kind, bits
        return np.int64(-1), np.int64(aut.node_idx_attr[node]), kind, bits
    if mode != MODE_NONE and aut.node_theta_static[node]:
        if aut.node_sg[node] >= 0:  # a step group: one list for the instances of all its nodes
            return STEP_BASE + aut.node_sg[node], np.int64(-2), np.int64(0), np.int64(0)
        return node, np.int64(-2), np.int64(0), np.int64(0)
    return np.int64(-1), np.int64(-3), np.int64(0), np.int64(0)


@njit(cache=True, inline="always")
def _link(slot, lid, store):
    store.inst_list[slot] = lid
    h = store.list_head[lid]
    store.inst_next[slot] = h
    store.inst_prev[slot] = -1
    if h >= 0:
        store.inst_prev[h] = slot
    store.list_head[lid] = slot


@njit(cache=True, inline="always")
def _unlink(slot, store):
    lid = store.inst_list[slot]
    nx = store.inst_next[slot]
    pv = store.inst_prev[slot]
    if pv >= 0:
        store.inst_next[pv] = nx
    else:
        store.list_head[lid] = nx
    if nx >= 0:
        store.inst_prev[nx] = pv
    store.inst_list[slot] = -1


@njit(cache=True, inline="always")
def _collect(lid, store, affected, naff):
    """Append the instances of list ``lid`` (-1: none) to ``affected`` from ``naff``; returns the new count."""
    if lid >= 0:
        s = store.list_head[lid]
        while s >= 0:
            affected[naff] = s
            naff += 1
            s = store.inst_next[s]
    return naff


@njit(cache=True)
def rebuild_lists(mode, aut, store, st):
    """Refile every live instance (after growth, a mode change or a restore): empty keys disappear."""
    store.hk[:, 0] = EMPTY
    st[ST_KEYS] = 0
    st[ST_LISTS] = 0
    for s in range(store.inst_alive.shape[0]):
        if store.inst_alive[s]:
            node = store.inst_p[s] * STRIDE + store.inst_node[s]
            a, b, c, d = _key_of(s, node, mode, aut, store)
            _link(s, find_list(store, a, b, c, d, True, st), store)
