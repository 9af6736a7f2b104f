"""One batch of a partition's events, in offset order (Cayuga's per-event algorithm, EDBT 2006 section 3.2).

Per event: the bounds it can need are checked (else the kernel returns and the caller grows the arrays), the
instances whose deadline passed expire, the affected instances are collected through the dynamic index, phase 1
lets every affected instance react (advance, iterate, stay, die or complete), phase 2 creates new instances
under the caps.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .heap import HEAP_BASE, _heap_pop, heap_push
from .instances import _copy_row, _enter, _fill_row, _free, _mark, _witness
from .layout import (EMPTY, GROUP_BASE, MODE_DYNAMIC, MODE_NONE, OP_NEXT, R_PI_DYN, R_PI_REST, R_PI_STATIC, R_THETA_DYN,
                     R_THETA_REST, R_THETA_STATIC, R_UNTIL, ST_AFFECTED, ST_CALL, ST_COMPLETED, ST_EXPIRED, ST_FOLDLIVE,
                     ST_FREE, ST_HEAP, ST_KEYS, ST_KILLED, ST_LISTS, ST_LIVE, ST_PROBES, ST_REFUSED, ST_SINK,
                     ST_STARTED, ST_TOMB, ST_WIT, ST_WM, STEP_BASE, STRIDE)
from .lists import _collect, find_list
from .predicates import _agg_step, _all, _capture, _node_holds
from .starts import argsort_stable, group_starts


@njit(cache=True, inline="always")
def _touch(naff, ncre, scratch, aut, store):
    """Load what the event's affected instances and new instances will need, before they need it.

    Each instance and pattern lies in a random place of a store far larger than the caches, and the work on one
    is a chain of dependent reads (slot, then its node row, then its atoms) that the processor cannot run ahead
    of by more than an instance or two.  These passes do only the loads, one independent load per instance and
    level, so that the misses of all the event's instances are in flight together; phases 1 and 2 then find
    the lines in cache.  Returns a sum of the loaded values (the caller stores it: the loads cannot be dropped).
    """
    affected, atoms, node_rng = scratch.affected, aut.atoms, aut.node_rng
    sink = np.int64(0)
    for q in range(naff):  # the slots: their scalars and their captured values
        s = affected[q]
        sink += store.inst_p[s] + store.inst_node[s] + store.inst_last[s] + store.inst_start[s] + store.inst_prev[s]
        sink += store.inst_deadline[s] + np.int64(store.iv_kind[s, 0]) + np.int64(store.inst_alive[s])
    for q in range(ncre):  # the start candidates' pattern rows and first two node rows
        p = scratch.cre_p[q]
        sink += aut.pat_active[p] + aut.node_cap[p * STRIDE, 0] + aut.node_op[p * STRIDE + 1]
        sink += aut.node_sg[p * STRIDE + 1]
    last = atoms.shape[0] - 1
    for q in range(naff):  # the nodes, patterns, atoms and list neighbours of the affected instances
        s = affected[q]
        p = store.inst_p[s]
        node = p * STRIDE + store.inst_node[s]
        sink += aut.pat_nsteps[p] + aut.node_op[node] + np.int64(atoms[min(node_rng[node, R_THETA_DYN], last), 0])
        sink += np.int64(atoms[min(node_rng[node, R_PI_REST], last), 0])
        sink += np.int64(atoms[min(node_rng[node, R_PI_DYN], last), 0])
        nx = store.inst_next[s]
        pv = store.inst_prev[s]
        sink += store.inst_prev[max(nx, 0)] + store.inst_next[max(pv, 0)]
    return sink


# Without numba's reference-counting runtime (``_nrt=False``): with it, every array a helper receives or reads
# from the named containers is increfed and decrefed (an atomic operation and a call each); the inlined helpers
# left about 70 of them per instance killed or created, which cost more than the instance's cache misses.  So
# the kernel allocates nothing and makes no array views: rows are copied element by element (``_copy_row``),
# the candidates are sorted into the caller's buffers (``argsort_stable``) and the bits of a captured value
# come from an int64 view of ``iv_num`` made by the engine.
@njit(cache=True, _nrt=False)
def process_kernel(i0, mode, max_per_sub, max_live, ev, aut, store, scratch, changes, out, st):
    """Process events ``i0..`` of the batch ``ev``; returns the number processed (stops early when a bound fails).

    ``aut``: :class:`AutomatonArrays`, ``store``: :class:`InstanceArrays`, ``ev``: :class:`BatchArrays`,
    ``scratch``: :class:`KernelScratch`, ``changes``: :class:`ChangeArrays`, ``out``: :class:`WitnessArrays`,
    ``st``: the scalars (``ST_*``).
    """
    heap, affected, cre_p, cre_parent = store.heap, scratch.affected, scratch.cre_p, scratch.cre_parent
    cre_cnt, cre_dec = scratch.cre_cnt, scratch.cre_dec
    n = ev.ts.shape[0]
    n_pat = aut.pat_sid.shape[0]
    for i in range(i0, n):
        # the bounds this event can need (module docstring); stop before touching it
        new_max = ev.n_start[i] + st[ST_FOLDLIVE]
        if (st[ST_FREE] < new_max or heap.shape[0] - HEAP_BASE - st[ST_HEAP] < new_max
                or out.p.shape[0] - st[ST_WIT] < st[ST_LIVE] + ev.n_start[i]
                or 10 * (st[ST_KEYS] + st[ST_LIVE] + new_max) > 7 * store.hk.shape[0]
                or store.list_head.shape[0] - st[ST_LISTS] < st[ST_LIVE] + new_max
                or changes.tomb_key.shape[0] - st[ST_TOMB] < st[ST_LIVE] + new_max
                or affected.shape[0] < st[ST_LIVE] or cre_p.shape[0] < new_max):
            return i
        ts = ev.ts[i]
        ev_id = ev.ids[i]
        if st[ST_WM] == EMPTY or ts > st[ST_WM]:
            st[ST_WM] = ts
        wm = st[ST_WM]
        while st[ST_HEAP] > 0 and heap[HEAP_BASE, 0] < wm:
            d = heap[HEAP_BASE, 0]
            s = heap[HEAP_BASE, 1]
            _heap_pop(heap, st)
            if store.inst_deadline[s] == d:  # else stale: that instance ended (lazy deletion)
                st[ST_EXPIRED] += 1
                _free(s, aut, store, changes, st, ev_id)
        stamp = np.int64(i) + st[ST_CALL] * np.int64(1 << 40)
        # -- the affected instances -----------------------------------------
        naff = 0
        ncre = 0
        if mode != MODE_NONE:
            for j in range(ev.m_off[i], ev.m_off[i + 1]):
                mid = ev.m_ids[j]
                node = mid >> 1
                if mid & 1:
                    scratch.pi_mark[node] = stamp
                    continue
                if node >= STEP_BASE:  # a step group: the instances of all its nodes in one list
                    lid = find_list(store, node, np.int64(-2), np.int64(0), np.int64(0), False, st)
                elif node >= GROUP_BASE:  # a start group: its members whose threshold the event passes
                    ncre = group_starts(aut.groups, node - GROUP_BASE, i, ev.kind, ev.num, cre_p, cre_parent, ncre)
                    continue
                elif mode == MODE_DYNAMIC and aut.node_idx_attr[node] >= 0:
                    col = aut.node_idx_attr[node]
                    lid = find_list(store, node, np.int64(col), np.int64(ev.kind[i, col]), ev.bits[i, col], False, st)
                else:
                    lid = find_list(store, node, np.int64(-2), np.int64(0), np.int64(0), False, st)
                st[ST_PROBES] += 1
                naff = _collect(lid, store, affected, naff)
            if mode == MODE_DYNAMIC:
                for q in range(aut.gcols.shape[0]):
                    col = aut.gcols[q]
                    lid = find_list(store, np.int64(-1), np.int64(col), np.int64(ev.kind[i, col]), ev.bits[i, col],
                                    False, st)
                    st[ST_PROBES] += 1
                    naff = _collect(lid, store, affected, naff)
        else:
            for p in range(n_pat):
                if aut.pat_active[p] and _all(aut.start_lo[p], aut.start_hi[p], aut.atoms, ev, i, store, 0, 0):
                    cre_p[ncre] = p
                    cre_parent[ncre] = -1
                    ncre += 1
        lid = find_list(store, np.int64(-1), np.int64(-3), np.int64(0), np.int64(0), False, st)
        naff = _collect(lid, store, affected, naff)
        st[ST_AFFECTED] += naff
        if mode != MODE_NONE:
            st[ST_SINK] += _touch(naff, ncre, scratch, aut, store)
        # -- phase 1: every affected instance reacts ------------------------
        for q in range(naff):
            s = affected[q]
            if ts <= store.inst_last[s]:
                continue  # invisible: not strictly later than its last bound event
            p = store.inst_p[s]
            step = store.inst_node[s]
            node = p * STRIDE + step
            dur = ts - store.inst_start[s]
            if mode != MODE_NONE and not _node_holds(R_THETA_REST, node, aut, ev, i, store, s, dur):
                continue  # the static correlation's part the matcher did not check
            if mode == MODE_NONE and not _node_holds(R_THETA_STATIC, node, aut, ev, i, store, s, dur):
                continue
            if not _node_holds(R_THETA_DYN, node, aut, ev, i, store, s, dur):
                continue  # the filter edge
            if mode == MODE_NONE:
                pi = _node_holds(R_PI_STATIC, node, aut, ev, i, store, s, dur)
            else:
                pi = ((not aut.node_pi_static[node] or scratch.pi_mark[node] == stamp)
                      and _node_holds(R_PI_REST, node, aut, ev, i, store, s, dur))
            if not (pi and _node_holds(R_PI_DYN, node, aut, ev, i, store, s, dur)):
                st[ST_KILLED] += 1
                _free(s, aut, store, changes, st, ev_id)
                continue
            if aut.node_op[node] == OP_NEXT:
                _capture(node, i, s, aut, ev, store)
                store.bound[s, step] = ev_id
                if step == aut.pat_nsteps[p]:
                    _witness(s, i, store, out, st)
                    _free(s, aut, store, changes, st, ev_id)
                    continue
                _enter(s, step + 1, i, ts, mode, aut, ev, store, st)
                _mark(s, ev_id, store, changes, st)
                continue
            # fold: the rebind edge
            _agg_step(node, i, s, aut, ev, store)
            _capture(node, i, s, aut, ev, store)
            store.bound[s, step] = ev_id
            store.iters[s, step] += 1
            store.inst_last[s] = ts
            _mark(s, ev_id, store, changes, st)
            if _node_holds(R_UNTIL, node, aut, ev, i, store, s, dur):
                if step == aut.pat_nsteps[p]:
                    _witness(s, i, store, out, st)
                else:
                    cre_p[ncre] = p
                    cre_parent[ncre] = s
                    ncre += 1
        # -- phase 2: new instances under the caps --------------------------
        m = 0
        for q in range(ncre):
            p = cre_p[q]
            if cre_parent[q] < 0:  # a start
                if not aut.pat_active[p] or ts < aut.pat_since[p]:
                    continue
                if mode != MODE_NONE and cre_parent[q] == -1 and not _all(
                        aut.start_res_lo[p], aut.start_res_hi[p], aut.atoms, ev, i, store, 0, 0):
                    continue  # the start's part the matcher did not check
                if aut.pat_nsteps[p] == 0:
                    st[ST_STARTED] += 1
                    w = st[ST_WIT]
                    st[ST_WIT] += 1
                    st[ST_COMPLETED] += 1
                    out.p[w] = p
                    out.ev[w] = i
                    _fill_row(out.bound, w, -1)
                    out.bound[w, 0] = ev_id
                    _fill_row(out.iters, w, 0)
                    out.start[w] = ts
                    continue
            cre_p[m] = p
            cre_parent[m] = cre_parent[q]
            m += 1
            cre_cnt[p] += 1
        if m == 0:
            continue
        sorted_ = st[ST_LIVE] + m > max_live
        if sorted_:  # the global bound may bite: decide subscription by subscription, ascending id
            for q in range(m):
                scratch.cre_key[q] = aut.pat_sid[cre_p[q]]
            argsort_stable(scratch.cre_key, m, scratch.cre_order, scratch.cre_tmp)
        for qq in range(m):
            q = scratch.cre_order[qq] if sorted_ else qq
            p = cre_p[q]
            if cre_dec[p] == 0:
                k = cre_cnt[p]
                if store.pat_live[p] + k > max_per_sub or st[ST_LIVE] + k > max_live:
                    cre_dec[p] = -1
                    st[ST_REFUSED] += k
                else:
                    cre_dec[p] = 1
                    st[ST_LIVE] += k  # reserved; the slots are taken below
                    store.pat_live[p] += k
            if cre_dec[p] < 0:
                continue
            st[ST_FREE] -= 1
            s = store.free[st[ST_FREE]]
            parent = cre_parent[q]
            store.inst_alive[s] = True
            store.inst_p[s] = p
            store.inst_list[s] = -1
            if parent < 0:
                st[ST_STARTED] += 1
                store.inst_start[s] = ts
                _fill_row(store.bound, s, -1)
                _fill_row(store.iters, s, 0)
                store.bound[s, 0] = ev_id
                _capture(p * STRIDE, i, s, aut, ev, store)
                nxt = 1
            else:
                store.inst_start[s] = store.inst_start[parent]
                _copy_row(store.bound, s, store.bound, parent)
                _copy_row(store.iters, s, store.iters, parent)
                _copy_row(store.iv_kind, s, store.iv_kind, parent)
                _copy_row(store.iv_num, s, store.iv_num, parent)
                _copy_row(store.acc, s, store.acc, parent)
                _copy_row(store.accn, s, store.accn, parent)
                nxt = store.inst_node[parent] + 1
            _enter(s, nxt, i, ts, mode, aut, ev, store, st)
            _mark(s, ev_id, store, changes, st)
            d = store.inst_start[s] + aut.pat_within[p]
            store.inst_deadline[s] = d
            heap_push(heap, st, d, s)
        for q in range(m):
            cre_cnt[cre_p[q]] = 0
            cre_dec[cre_p[q]] = 0
    return n
