"""Evaluating a node's atoms on an event and an instance, and the values an instance captures and aggregates."""

from __future__ import annotations

import numpy as np
from numba import njit

from fastpubsub.engine.semantics import OP_EQ, OP_LT
from fastpubsub.engine.structures.predicates import order_holds

from .layout import (A_LEFT, A_RIGHT, FN_AVG, FN_COUNT, FN_MIN, FN_SUM, H_ARITH, H_AUX, H_IDX, H_KIND, H_OP, H_STATIC,
                     SRC_AGG, SRC_CONST, SRC_EVENT, SRC_INST)


@njit(cache=True, inline="always")
def _operand(a, side, atoms, ev, i, store, slot, dur):
    """One side of atom ``a``: (kind, value); kind -1 when missing or not a number under arithmetic."""
    b = A_LEFT if side == 0 else A_RIGHT
    h = np.int64(atoms[a, b])
    src = h & 7
    idx = h >> H_IDX
    if src == SRC_CONST:
        k = (h >> H_KIND) & 3
        v = atoms[a, b + 3]
    elif src == SRC_EVENT:
        k = np.int64(ev.kind[i, idx])
        v = ev.num[i, idx]
    elif src == SRC_INST:
        k = np.int64(store.iv_kind[slot, idx])
        v = store.iv_num[slot, idx]
    elif src == SRC_AGG:
        fn = (h >> H_AUX) & 7
        n = store.accn[slot, idx]
        k = np.int64(0)
        v = store.acc[slot, idx]
        if fn != FN_COUNT:
            if n == 0:
                k = np.int64(-1)
            elif fn == FN_AVG:
                v = v / n
    else:
        k = np.int64(0)
        v = np.float64(dur)
    if (h >> H_ARITH) & 1:
        if k != 0 or v != v:
            return np.int64(-1), 0.0
        v = atoms[a, b + 1] * v + atoms[a, b + 2]
    return k, v


@njit(cache=True, inline="always")
def _holds(a, atoms, ev, i, store, slot, dur):
    lk, lv = _operand(a, 0, atoms, ev, i, store, slot, dur)
    rk, rv = _operand(a, 1, atoms, ev, i, store, slot, dur)
    if lk < 0 or rk < 0 or lk != rk:
        return False
    if lk == 0 and (lv != lv or rv != rv):
        return False
    h = np.int64(atoms[a, A_LEFT])
    op = (h >> H_OP) & 7
    if lk == 1 and op >= OP_LT and not (h >> H_STATIC) & 1:
        return False  # strings order only in static atoms (docs/patterns.md 1.2)
    if op == OP_EQ:
        return lv == rv
    return order_holds(op, lv, rv)


@njit(cache=True, inline="always")
def _all(lo, hi, atoms, ev, i, store, slot, dur):
    """Whether every atom ``lo..hi`` holds for event ``i`` and instance ``slot`` (the start: slot 0, dur 0)."""
    for a in range(lo, hi):
        if not _holds(a, atoms, ev, i, store, slot, dur):
            return False
    return True


@njit(cache=True, inline="always")
def _node_holds(r, node, aut, ev, i, store, slot, dur):
    """Whether the atoms of range ``r`` (one of ``R_*``) of ``node`` all hold."""
    return _all(aut.node_rng[node, r], aut.node_rng[node, r + 1], aut.atoms, ev, i, store, slot, dur)


@njit(cache=True, inline="always")
def _capture(node, i, slot, aut, ev, store):
    for c in range(aut.node_cap[node, 0], aut.node_cap[node, 1]):
        store.iv_kind[slot, aut.cap_col[c]] = ev.kind[i, aut.cap_ev[c]]
        store.iv_num[slot, aut.cap_col[c]] = ev.num[i, aut.cap_ev[c]] + 0.0  # -0.0 -> 0.0: one hash key per value


@njit(cache=True, inline="always")
def _agg_init(node, i, slot, aut, ev, store):
    acc, accn = store.acc, store.accn
    for g in range(aut.node_agg[node, 0], aut.node_agg[node, 1]):
        s = aut.ag_slot[g]
        if aut.ag_fn[g] == FN_COUNT:
            acc[slot, s] = 1.0
            accn[slot, s] = 1
        else:
            v = ev.num[i, aut.ag_ev[g]]
            if ev.kind[i, aut.ag_ev[g]] == 0 and v == v:
                acc[slot, s] = v
                accn[slot, s] = 1
            else:
                acc[slot, s] = 0.0
                accn[slot, s] = 0


@njit(cache=True, inline="always")
def _agg_step(node, i, slot, aut, ev, store):
    acc, accn = store.acc, store.accn
    for g in range(aut.node_agg[node, 0], aut.node_agg[node, 1]):
        s = aut.ag_slot[g]
        fn = aut.ag_fn[g]
        if fn == FN_COUNT:
            acc[slot, s] += 1.0
            accn[slot, s] += 1
            continue
        v = ev.num[i, aut.ag_ev[g]]
        if ev.kind[i, aut.ag_ev[g]] != 0 or v != v:
            continue
        if accn[slot, s] == 0:
            acc[slot, s] = v
        elif fn == FN_SUM or fn == FN_AVG:
            acc[slot, s] += v
        elif fn == FN_MIN:
            acc[slot, s] = min(acc[slot, s], v)
        else:
            acc[slot, s] = max(acc[slot, s], v)
        accn[slot, s] += 1
