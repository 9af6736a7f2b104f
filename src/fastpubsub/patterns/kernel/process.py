"""One batch of a partition's events, in offset order (Cayuga's per-event algorithm, EDBT 2006 section 3.2).

Per event, in phases: ``_has_room`` (the bounds it can need, else the kernel returns and the caller grows the
arrays), ``_expire`` (the instances whose deadline passed), ``_affected`` (the instances it reaches, through the
dynamic index, and the starts it may make), ``_touch`` (their loads, ahead), ``_react`` (phase 1: every affected
instance advances, iterates, stays, dies or completes), ``_admit`` and ``_create`` (phase 2: new instances under
the caps).
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


@njit(cache=True, inline="always")
def _has_room(i, ev, store, scratch, changes, out, st):
    """Whether every buffer holds what event ``i`` can need (the package docstring: else the caller grows them)."""
    new_max = ev.n_start[i] + st[ST_FOLDLIVE]
    return not (st[ST_FREE] < new_max or store.heap.shape[0] - HEAP_BASE - st[ST_HEAP] < new_max
                or out.p.shape[0] - st[ST_WIT] < st[ST_LIVE] + ev.n_start[i]
                or 10 * (st[ST_KEYS] + st[ST_LIVE] + new_max) > 7 * store.hk.shape[0]
                or store.list_head.shape[0] - st[ST_LISTS] < st[ST_LIVE] + new_max
                or changes.tomb_key.shape[0] - st[ST_TOMB] < st[ST_LIVE] + new_max
                or scratch.affected.shape[0] < st[ST_LIVE] or scratch.cre_p.shape[0] < new_max)


@njit(cache=True, inline="always")
def _expire(i, ev, aut, store, changes, st):
    """Advance the watermark to event ``i`` and free the instances whose deadline it passed (``within``)."""
    ts = ev.ts[i]
    if st[ST_WM] == EMPTY or ts > st[ST_WM]:
        st[ST_WM] = ts
    wm = st[ST_WM]
    heap = store.heap
    while st[ST_HEAP] > 0 and heap[HEAP_BASE, 0] < wm:
        d = heap[HEAP_BASE, 0]
        s = heap[HEAP_BASE, 1]
        _heap_pop(heap, st)
        if store.inst_deadline[s] == d:  # else stale: that instance ended (lazy deletion)
            st[ST_EXPIRED] += 1
            _free(s, aut, store, changes, st, ev.ids[i])


@njit(cache=True, inline="always")
def _affected(i, stamp, mode, ev, aut, store, scratch, st):
    """The instances event ``i`` reaches (into ``scratch.affected``) and the starts it may make (``cre_*``, parent
    -1 or -2); returns their counts ``(naff, ncre)``.

    With the matcher (modes static and dynamic) the affected nodes' lists and step groups' lists, the start
    groups' members the event passes and, keyed by the event's values, the dynamic index's lists; without it
    (mode none) every active pattern whose start holds.  The instances of no node's list (mode none) always.
    """
    affected, cre_p, cre_parent = scratch.affected, scratch.cre_p, scratch.cre_parent
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
        for p in range(aut.pat_sid.shape[0]):
            if aut.pat_active[p] and _all(aut.start_lo[p], aut.start_hi[p], aut.atoms, ev, i, store, 0, 0):
                cre_p[ncre] = p
                cre_parent[ncre] = -1
                ncre += 1
    lid = find_list(store, np.int64(-1), np.int64(-3), np.int64(0), np.int64(0), False, st)
    naff = _collect(lid, store, affected, naff)
    st[ST_AFFECTED] += naff
    return naff, ncre


@njit(cache=True, inline="always")
def _react(i, stamp, mode, naff, ncre, ev, aut, store, scratch, changes, out, st):
    """Phase 1: every affected instance reacts to event ``i``: it stays (a predicate of its edge fails), dies (its
    post-selection fails), advances (a next step binds; the last one completes it) or iterates (a fold rebinds;
    when its ``until`` holds it completes or leaves a child at the next step, appended to the start candidates).
    Returns the new count of candidates."""
    ts = ev.ts[i]
    ev_id = ev.ids[i]
    for q in range(naff):
        s = scratch.affected[q]
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
                scratch.cre_p[ncre] = p
                scratch.cre_parent[ncre] = s
                ncre += 1
    return ncre


@njit(cache=True, inline="always")
def _admit(i, mode, ncre, ev, aut, store, scratch, out, st):
    """Phase 2, first half: keep the candidates that may start at event ``i`` (active, subscribed before it, the
    start atoms the matcher did not check hold), counted per pattern in ``cre_cnt``; a pattern of no step
    completes at once (a witness, no instance).  Returns the number kept, compacted to the front."""
    cre_p, cre_parent = scratch.cre_p, scratch.cre_parent
    ts = ev.ts[i]
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
                out.bound[w, 0] = ev.ids[i]
                _fill_row(out.iters, w, 0)
                out.start[w] = ts
                continue
        cre_p[m] = p
        cre_parent[m] = cre_parent[q]
        m += 1
        scratch.cre_cnt[p] += 1
    return m


@njit(cache=True, inline="always")
def _within_caps(p, max_per_sub, max_live, store, scratch, st):
    """Whether pattern ``p``'s candidates of this event are created: all or none, decided once per event under the
    per-subscription and the global bound (``cre_dec``); the created are counted live at once."""
    if scratch.cre_dec[p] == 0:
        k = scratch.cre_cnt[p]
        if store.pat_live[p] + k > max_per_sub or st[ST_LIVE] + k > max_live:
            scratch.cre_dec[p] = -1
            st[ST_REFUSED] += k
        else:
            scratch.cre_dec[p] = 1
            st[ST_LIVE] += k  # reserved; the slots are taken by the caller
            store.pat_live[p] += k
    return scratch.cre_dec[p] > 0


@njit(cache=True, inline="always")
def _new_instance(p, parent, i, mode, ev, aut, store, changes, st):
    """A free slot becomes an instance of pattern ``p`` at event ``i``: a start (``parent`` < 0, bound at the start
    node) or a fold's child (a copy of ``parent``, at the node after it); filed in its list and the heap."""
    ts = ev.ts[i]
    ev_id = ev.ids[i]
    st[ST_FREE] -= 1
    s = store.free[st[ST_FREE]]
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
    heap_push(store.heap, st, d, s)


@njit(cache=True, inline="always")
def _create(i, mode, m, max_per_sub, max_live, ev, aut, store, scratch, changes, st):
    """Phase 2, second half: the ``m`` admitted candidates become instances under the caps, subscription by
    subscription in ascending id when the global bound may bite; the per-pattern counts are zeroed after."""
    cre_p = scratch.cre_p
    sorted_ = st[ST_LIVE] + m > max_live
    if sorted_:  # the global bound may bite: decide subscription by subscription, ascending id
        for q in range(m):
            scratch.cre_key[q] = aut.pat_sid[cre_p[q]]
        argsort_stable(scratch.cre_key, m, scratch.cre_order, scratch.cre_tmp)
    for qq in range(m):
        q = scratch.cre_order[qq] if sorted_ else qq
        p = cre_p[q]
        if _within_caps(p, max_per_sub, max_live, store, scratch, st):
            _new_instance(p, scratch.cre_parent[q], i, mode, ev, aut, store, changes, st)
    for q in range(m):
        scratch.cre_cnt[cre_p[q]] = 0
        scratch.cre_dec[cre_p[q]] = 0


# Without numba's reference-counting runtime (``_nrt=False``): with it, every array a helper receives or reads
# from the named containers is increfed and decrefed (an atomic operation and a call each); the inlined helpers
# left about 70 of them per instance killed or created, which cost more than the instance's cache misses.  So
# the kernel allocates nothing and makes no array views: rows are copied element by element (``_copy_row``),
# the candidates are sorted into the caller's buffers (``argsort_stable``) and the bits of a captured value
# come from an int64 view of ``iv_num`` made by the engine.  The phases are inlined (``inline="always"``) so
# that they too are compiled without it.
@njit(cache=True, _nrt=False)
def process_kernel(i0, mode, max_per_sub, max_live, ev, aut, store, scratch, changes, out, st):
    """Process events ``i0..`` of the batch ``ev``; returns the number processed (stops early when a bound fails).

    ``aut``: :class:`AutomatonArrays`, ``store``: :class:`InstanceArrays`, ``ev``: :class:`BatchArrays`,
    ``scratch``: :class:`KernelScratch`, ``changes``: :class:`ChangeArrays`, ``out``: :class:`WitnessArrays`,
    ``st``: the scalars (``ST_*``).
    """
    n = ev.ts.shape[0]
    for i in range(i0, n):
        if not _has_room(i, ev, store, scratch, changes, out, st):
            return i  # before touching event i
        _expire(i, ev, aut, store, changes, st)
        stamp = np.int64(i) + st[ST_CALL] * np.int64(1 << 40)
        naff, ncre = _affected(i, stamp, mode, ev, aut, store, scratch, st)
        if mode != MODE_NONE:
            st[ST_SINK] += _touch(naff, ncre, scratch, aut, store)
        ncre = _react(i, stamp, mode, naff, ncre, ev, aut, store, scratch, changes, out, st)
        m = _admit(i, mode, ncre, ev, aut, store, scratch, out, st)
        if m:
            _create(i, mode, m, max_per_sub, max_live, ev, aut, store, scratch, changes, st)
    return n
