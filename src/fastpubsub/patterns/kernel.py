"""The numba kernel of the pattern engine: one batch of a partition's events, in offset order.

Cayuga's per-event algorithm (EDBT 2006 section 3.2; the index design recovered
from its source, docs/patterns.md section 3): the Fabret matcher has already
said, per event, which nodes' static correlation holds (the affected nodes) and
which nodes' static post-selection holds; this kernel probes the live
instances of the affected nodes through a hash index on their bound values
(the dynamic index), evaluates the dynamic predicates, creates, advances and
kills instances, and writes witnesses.

Instance state is a structure of arrays with a free list; instances sit in
doubly linked lists, one per index key, found through an open-addressing hash
table.  Expiry (``within``) uses a 4-ary heap with lazy deletion.  The kernel
runs without numba's reference-counting runtime (see ``process_kernel``).  Every
buffer is sized by the caller from a bound checked at each event: when a bound
does not hold the kernel returns the index of the event it stopped at, before
touching it, and the caller grows the arrays and resumes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

STRIDE = 9  # nodes per pattern slot: the start plus MAX_STEPS steps
GROUP_BASE = 1 << 40  # matcher ids 2 * (GROUP_BASE + g) are start groups (merged start states), below are nodes
STEP_BASE = 1 << 41  # matcher ids 2 * (STEP_BASE + g) are step groups (equal static correlations), their list key
OP_START, OP_NEXT, OP_FOLD = 0, 1, 2
MODE_NONE, MODE_STATIC, MODE_DYNAMIC = 0, 1, 2
SRC_CONST, SRC_EVENT, SRC_INST, SRC_AGG, SRC_DUR = 0, 1, 2, 3, 4
FN_COUNT, FN_SUM, FN_MIN, FN_MAX, FN_AVG = 0, 1, 2, 3, 4
EMPTY = np.int64(-(2**63))
# st (int64 scalars)
ST_WM, ST_LIVE, ST_KEYS, ST_LISTS, ST_FREE, ST_HEAP, ST_WIT, ST_BATCH, ST_TOMB, ST_DIRTY, ST_FOLDLIVE = range(11)
ST_STARTED, ST_COMPLETED, ST_KILLED, ST_EXPIRED, ST_REFUSED, ST_AFFECTED, ST_PROBES, ST_CALL = range(11, 19)
ST_TRACK = 19  # 1: record dirty instances and tombstones for the changelog (PatternEngine(track_changes=True))
ST_SINK = 20  # the sum of the values the touch passes load (stored so that the loads stay)
ST_SIZE = 21
# an atom is one 64-byte row of a float64 matrix (one cache line: the engine aligns the matrix); per side a header
# and mul, add (arithmetic ``mul * x + add``), const value.  The header is an integer held exactly in the float:
# bits 0-2 src, 3-5 aux (aggregate function), 6 arith, 7-8 const kind, 9-11 op and 12 static (left header only),
# 13 and up idx (below 2**40)
A_LEFT, A_RIGHT, A_WIDTH = 0, 4, 8
H_AUX, H_ARITH, H_KIND, H_OP, H_STATIC, H_IDX = 3, 6, 7, 9, 12, 13


@njit(cache=True, inline="always")
def _mix(a, b, c, d):
    h = np.uint64(0x9E3779B97F4A7C15)
    for x in (a, b, c, d):
        h ^= np.uint64(x) + np.uint64(0x9E3779B97F4A7C15) + (h << np.uint64(6)) + (h >> np.uint64(2))
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
    return h


@njit(cache=True, inline="always")
def find_list(hk, hval, a, b, c, d, create, st, list_head):
    """The list id of key (a, b, c, d), or -1; ``create`` makes a new empty list."""
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
            hval[p] = lid
            list_head[lid] = -1
            st[ST_KEYS] += 1
            return lid
        if hk[p, 0] == a and hk[p, 1] == b and hk[p, 2] == c and hk[p, 3] == d:
            return hval[p]
        pos = (pos + np.uint64(1)) & mask


@njit(cache=True, inline="always")
def _key_of(slot, node, mode, node_theta_static, node_idx_attr, node_idx_col, node_sg, iv_kind, iv_bits):
    """The list key an instance at ``node`` belongs to (see module docstring)."""
    if mode == MODE_DYNAMIC and node_idx_attr[node] >= 0:
        col = node_idx_col[node]
        bits = iv_bits[slot, col]
        if node_theta_static[node]:
            return node, np.int64(node_idx_attr[node]), np.int64(iv_kind[slot, col]), bits
        return np.int64(-1), np.int64(node_idx_attr[node]), np.int64(iv_kind[slot, col]), bits
    if mode != MODE_NONE and node_theta_static[node]:
        if node_sg[node] >= 0:  # a step group: one list for the instances of all its nodes
            return STEP_BASE + node_sg[node], np.int64(-2), np.int64(0), np.int64(0)
        return node, np.int64(-2), np.int64(0), np.int64(0)
    return np.int64(-1), np.int64(-3), np.int64(0), np.int64(0)


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
def _link(slot, lid, inst_list, inst_next, inst_prev, list_head):
    inst_list[slot] = lid
    h = list_head[lid]
    inst_next[slot] = h
    inst_prev[slot] = -1
    if h >= 0:
        inst_prev[h] = slot
    list_head[lid] = slot


@njit(cache=True, inline="always")
def _unlink(slot, inst_list, inst_next, inst_prev, list_head):
    lid = inst_list[slot]
    nx = inst_next[slot]
    pv = inst_prev[slot]
    if pv >= 0:
        inst_next[pv] = nx
    else:
        list_head[lid] = nx
    if nx >= 0:
        inst_prev[nx] = pv
    inst_list[slot] = -1


HEAP_BASE = 3  # the heap's element j sits in row j + 3: the four children of j (4j+1..4j+4) share one cache line


@njit(cache=True, inline="always")
def _heap_push(heap, st, d, s):
    """Push (deadline, slot) into the 4-ary min-heap of rows ``heap`` (16 bytes each, the children of an entry in
    one 64-byte line: a pop reads one line per level, of half as many levels as a binary heap has)."""
    i = st[ST_HEAP]
    st[ST_HEAP] += 1
    while i > 0:
        parent = (i - 1) >> 2
        if heap[parent + HEAP_BASE, 0] <= d:
            break
        heap[i + HEAP_BASE, 0] = heap[parent + HEAP_BASE, 0]
        heap[i + HEAP_BASE, 1] = heap[parent + HEAP_BASE, 1]
        i = parent
    heap[i + HEAP_BASE, 0] = d
    heap[i + HEAP_BASE, 1] = s


@njit(cache=True, _nrt=False)
def _heap_pop(heap, st):
    n = st[ST_HEAP] - 1
    st[ST_HEAP] = n
    d = heap[n + HEAP_BASE, 0]
    s = heap[n + HEAP_BASE, 1]
    i = 0
    while True:
        c = 4 * i + 1
        if c >= n:
            break
        best = c
        bd = heap[c + HEAP_BASE, 0]
        for k in range(c + 1, min(c + 4, n)):
            if heap[k + HEAP_BASE, 0] < bd:
                bd = heap[k + HEAP_BASE, 0]
                best = k
        if bd >= d:
            break
        heap[i + HEAP_BASE, 0] = bd
        heap[i + HEAP_BASE, 1] = heap[best + HEAP_BASE, 1]
        i = best
    if n > 0:
        heap[i + HEAP_BASE, 0] = d
        heap[i + HEAP_BASE, 1] = s


@njit(cache=True, inline="always")
def _operand(a, side, AT, i, ev_kind, ev_num, slot, iv_kind, iv_num, acc, accn, dur):
    """One side of atom ``a``: (kind, value); kind -1 when missing or not a number under arithmetic."""
    b = A_LEFT if side == 0 else A_RIGHT
    h = np.int64(AT[a, b])
    src = h & 7
    idx = h >> H_IDX
    if src == SRC_CONST:
        k = (h >> H_KIND) & 3
        v = AT[a, b + 3]
    elif src == SRC_EVENT:
        k = np.int64(ev_kind[i, idx])
        v = ev_num[i, idx]
    elif src == SRC_INST:
        k = np.int64(iv_kind[slot, idx])
        v = iv_num[slot, idx]
    elif src == SRC_AGG:
        fn = (h >> H_AUX) & 7
        n = accn[slot, idx]
        k = np.int64(0)
        v = acc[slot, idx]
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
        v = AT[a, b + 1] * v + AT[a, b + 2]
    return k, v


@njit(cache=True, inline="always")
def _holds(a, AT, i, ev_kind, ev_num, slot, iv_kind, iv_num, acc, accn, dur):
    lk, lv = _operand(a, 0, AT, i, ev_kind, ev_num, slot, iv_kind, iv_num, acc, accn, dur)
    rk, rv = _operand(a, 1, AT, i, ev_kind, ev_num, slot, iv_kind, iv_num, acc, accn, dur)
    if lk < 0 or rk < 0 or lk != rk:
        return False
    if lk == 0 and (lv != lv or rv != rv):
        return False
    h = np.int64(AT[a, A_LEFT])
    op = (h >> H_OP) & 7
    if lk == 1 and op >= 2 and not (h >> H_STATIC) & 1:
        return False  # strings order only in static atoms (docs/patterns.md 1.2)
    if op == 0:
        return lv == rv
    if op == 1:
        return lv != rv
    if op == 2:
        return lv < rv
    if op == 3:
        return lv <= rv
    if op == 4:
        return lv > rv
    return lv >= rv


@njit(cache=True, inline="always")
def _all(lo, hi, AT,
         i, ev_kind, ev_num, slot, iv_kind, iv_num, acc, accn, dur):
    for a in range(lo, hi):
        if not _holds(a, AT,
                      i, ev_kind, ev_num, slot, iv_kind, iv_num, acc, accn, dur):
            return False
    return True


@njit(cache=True, inline="always")
def _capture(node, i, slot, node_cap, cap_ev, cap_col, ev_kind, ev_num, iv_kind, iv_num):
    for c in range(node_cap[node, 0], node_cap[node, 1]):
        iv_kind[slot, cap_col[c]] = ev_kind[i, cap_ev[c]]
        iv_num[slot, cap_col[c]] = ev_num[i, cap_ev[c]] + 0.0  # -0.0 -> 0.0: one hash key per value


@njit(cache=True, inline="always")
def _agg_init(node, i, slot, node_agg, ag_fn, ag_ev, ag_slot, ev_kind, ev_num, acc, accn):
    for g in range(node_agg[node, 0], node_agg[node, 1]):
        s = ag_slot[g]
        if ag_fn[g] == FN_COUNT:
            acc[slot, s] = 1.0
            accn[slot, s] = 1
        else:
            v = ev_num[i, ag_ev[g]]
            if ev_kind[i, ag_ev[g]] == 0 and v == v:
                acc[slot, s] = v
                accn[slot, s] = 1
            else:
                acc[slot, s] = 0.0
                accn[slot, s] = 0


@njit(cache=True, inline="always")
def _agg_step(node, i, slot, node_agg, ag_fn, ag_ev, ag_slot, ev_kind, ev_num, acc, accn):
    for g in range(node_agg[node, 0], node_agg[node, 1]):
        s = ag_slot[g]
        fn = ag_fn[g]
        if fn == FN_COUNT:
            acc[slot, s] += 1.0
            accn[slot, s] += 1
            continue
        v = ev_num[i, ag_ev[g]]
        if ev_kind[i, ag_ev[g]] != 0 or v != v:
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


@njit(cache=True)
def rebuild_lists(mode, tables, state, hk, hval, list_head, st):
    """Refile every live instance (after growth, a mode change or a restore): empty keys disappear."""
    (node_op, node_theta_static, node_pi_static, node_rng, node_idx_attr, node_idx_col, node_cap, node_agg,
     pat_sid, pat_within, pat_since, pat_nsteps, pat_active, pat_live, gcols, node_sg) = tables
    (inst_alive, inst_p, inst_node, inst_start, inst_last, inst_deadline, inst_list, inst_next, inst_prev,
     inst_changed, bound, iters, iv_kind, iv_num, acc, accn, free, dirty_mark, iv_bits) = state
    hk[:, 0] = EMPTY
    st[ST_KEYS] = 0
    st[ST_LISTS] = 0
    for s in range(inst_alive.shape[0]):
        if inst_alive[s]:
            node = inst_p[s] * STRIDE + inst_node[s]
            a, b, c, d = _key_of(s, node, mode, node_theta_static, node_idx_attr, node_idx_col, node_sg, iv_kind,
                                 iv_bits)
            lid = find_list(hk, hval, a, b, c, d, True, st, list_head)
            _link(s, lid, inst_list, inst_next, inst_prev, list_head)


@njit(cache=True, inline="always")
def _free(s, tables, state, list_head, st, tomb_slot_key, tomb_off, ev_id_i):
    (node_op, node_theta_static, node_pi_static, node_rng, node_idx_attr, node_idx_col, node_cap, node_agg,
     pat_sid, pat_within, pat_since, pat_nsteps, pat_active, pat_live, gcols, node_sg) = tables
    (inst_alive, inst_p, inst_node, inst_start, inst_last, inst_deadline, inst_list, inst_next, inst_prev,
     inst_changed, bound, iters, iv_kind, iv_num, acc, accn, free, dirty_mark, iv_bits) = state
    _unlink(s, inst_list, inst_next, inst_prev, list_head)
    p = inst_p[s]
    if node_op[p * STRIDE + inst_node[s]] == OP_FOLD:
        st[ST_FOLDLIVE] -= 1
    if st[ST_TRACK]:  # tombstone its key, always: an aborted transaction may have written it (docs/patterns.md 4)
        t = st[ST_TOMB]
        st[ST_TOMB] += 1
        tomb_slot_key[t, 0] = pat_sid[p]
        for k in range(STRIDE):
            left = k == 0 or (k < inst_node[s] and node_op[p * STRIDE + k] == OP_FOLD)
            tomb_slot_key[t, 1 + k] = bound[s, k] if left else -1
        tomb_off[t] = ev_id_i
    inst_alive[s] = False
    inst_deadline[s] = EMPTY  # its heap entries are stale from now on
    pat_live[p] -= 1
    st[ST_LIVE] -= 1
    free[st[ST_FREE]] = s
    st[ST_FREE] += 1


@njit(cache=True, inline="always")
def _enter(s, node, i, ts, mode, tables, captures, state, hk, hval, list_head, st, ev_kind, ev_num):
    """Place instance ``s`` at ``node`` after binding event ``i``; a fold initialises ``.last`` and aggregates."""
    (node_op, node_theta_static, node_pi_static, node_rng, node_idx_attr, node_idx_col, node_cap, node_agg,
     pat_sid, pat_within, pat_since, pat_nsteps, pat_active, pat_live, gcols, node_sg) = tables
    (cap_ev, cap_col, ag_fn, ag_ev, ag_slot) = captures
    (inst_alive, inst_p, inst_node, inst_start, inst_last, inst_deadline, inst_list, inst_next, inst_prev,
     inst_changed, bound, iters, iv_kind, iv_num, acc, accn, free, dirty_mark, iv_bits) = state
    if inst_list[s] >= 0:
        _unlink(s, inst_list, inst_next, inst_prev, list_head)
    gnode = inst_p[s] * STRIDE + node
    inst_node[s] = node
    inst_last[s] = ts
    if node_op[gnode] == OP_FOLD:
        _capture(gnode, i, s, node_cap, cap_ev, cap_col, ev_kind, ev_num, iv_kind, iv_num)
        _agg_init(gnode, i, s, node_agg, ag_fn, ag_ev, ag_slot, ev_kind, ev_num, acc, accn)
        bound[s, node] = -1
        iters[s, node] = 0
        st[ST_FOLDLIVE] += 1
    a, b, c, d = _key_of(s, gnode, mode, node_theta_static, node_idx_attr, node_idx_col, node_sg, iv_kind, iv_bits)
    lid = find_list(hk, hval, a, b, c, d, True, st, list_head)
    _link(s, lid, inst_list, inst_next, inst_prev, list_head)


@njit(cache=True, inline="always")
def _mark(s, i, st, state, dirty, ev_id):
    inst_changed = state[9]
    dirty_mark = state[17]
    inst_changed[s] = ev_id[i]
    if not st[ST_TRACK]:
        return  # nobody reads the changes: an engine without a changelog keeps no dirty list
    if dirty_mark[s] != st[ST_BATCH]:
        dirty_mark[s] = st[ST_BATCH]
        dirty[st[ST_DIRTY]] = s
        st[ST_DIRTY] += 1


@njit(cache=True, inline="always")
def _witness(s, i, st, state, w_p, w_ev, w_bound, w_iters, w_acc, w_accn, w_start):
    (inst_alive, inst_p, inst_node, inst_start, inst_last, inst_deadline, inst_list, inst_next, inst_prev,
     inst_changed, bound, iters, iv_kind, iv_num, acc, accn, free, dirty_mark, iv_bits) = state
    w = st[ST_WIT]
    st[ST_WIT] += 1
    st[ST_COMPLETED] += 1
    w_p[w] = inst_p[s]
    w_ev[w] = i
    _copy_row(w_bound, w, bound, s)
    _copy_row(w_iters, w, iters, s)
    _copy_row(w_acc, w, acc, s)
    _copy_row(w_accn, w, accn, s)
    w_start[w] = inst_start[s]


@njit(cache=True, _nrt=False)
def group_starts(g, i, ev_kind, ev_num, grp_blo, grp_bhi, band_lo, band_hi, band_dir, band_col, mem_p, mem_thr, mem_eq,
                 cre_p, cre_parent, ncre):
    """The members of start group ``g`` that event ``i`` may start, appended to ``cre_p`` from ``ncre``.

    A band of threshold members (``attr > c`` / ``>=``, ascending ``c``; ``<`` / ``<=``, descending) is
    walked only while the event passes: those get parent -2 (their start is fully checked); the other
    members (parent -1) still have their remaining start atoms evaluated.  Returns the new ``ncre``.
    """
    for b in range(grp_blo[g], grp_bhi[g]):
        d = band_dir[b]
        if d == 0:
            for k in range(band_lo[b], band_hi[b]):
                cre_p[ncre] = mem_p[k]
                cre_parent[ncre] = -1
                ncre += 1
            continue
        col = band_col[b]
        x = ev_num[i, col]
        if ev_kind[i, col] != 0 or x != x:
            continue  # missing, not a number, NaN: every comparison fails
        for k in range(band_lo[b], band_hi[b]):
            t = mem_thr[k]
            if d == 1:
                if t > x:
                    break
                ok = t < x or (mem_eq[k] and t == x)
            else:
                if t < x:
                    break
                ok = t > x or (mem_eq[k] and t == x)
            if ok:
                cre_p[ncre] = mem_p[k]
                cre_parent[ncre] = -2
                ncre += 1
    return ncre


_group_starts = group_starts


@njit(cache=True, inline="always")
def _argsort_stable(keys, m, order, tmp):
    """``order[:m]``: the indices of ``keys[:m]`` in ascending order, ties in index order (a bottom-up merge sort
    into the caller's buffers: the kernel allocates nothing)."""
    for q in range(m):
        order[q] = q
    width = 1
    while width < m:
        lo = 0
        while lo < m:
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                if keys[order[b]] < keys[order[a]]:
                    tmp[k] = order[b]
                    b += 1
                else:
                    tmp[k] = order[a]
                    a += 1
                k += 1
            while a < mid:
                tmp[k] = order[a]
                a += 1
                k += 1
            while b < hi:
                tmp[k] = order[b]
                b += 1
                k += 1
            lo = hi
        for q in range(m):
            order[q] = tmp[q]
        width *= 2


@njit(cache=True, inline="always")
def _touch(naff, affected, ncre, cre_p, tables, AT, state):
    """Load what the event's affected instances and new instances will need, before they need it.

    Each instance and pattern lies in a random place of a store far larger than the caches, and the work on one
    is a chain of dependent reads (slot, then its node row, then its atoms) that the processor cannot run ahead
    of by more than an instance or two.  These passes do only the loads, one independent load per instance and
    level, so that the misses of all the event's instances are in flight together; phases 1 and 2 then find
    the lines in cache.  Returns a sum of the loaded values (the caller stores it: the loads cannot be dropped).
    """
    (node_op, node_theta_static, node_pi_static, node_rng, node_idx_attr, node_idx_col, node_cap, node_agg,
     pat_sid, pat_within, pat_since, pat_nsteps, pat_active, pat_live, gcols, node_sg) = tables
    (inst_alive, inst_p, inst_node, inst_start, inst_last, inst_deadline, inst_list, inst_next, inst_prev,
     inst_changed, bound, iters, iv_kind, iv_num, acc, accn, free, dirty_mark, iv_bits) = state
    sink = np.int64(0)
    for q in range(naff):  # the slots: their scalars and their captured values
        s = affected[q]
        sink += inst_p[s] + inst_node[s] + inst_last[s] + inst_start[s] + inst_prev[s] + inst_deadline[s]
        sink += np.int64(iv_kind[s, 0]) + np.int64(inst_alive[s])
    for q in range(ncre):  # the start candidates' pattern rows and first two node rows
        p = cre_p[q]
        sink += pat_active[p] + node_cap[p * STRIDE, 0] + node_op[p * STRIDE + 1] + node_sg[p * STRIDE + 1]
    last = AT.shape[0] - 1
    for q in range(naff):  # the nodes, patterns, atoms and list neighbours of the affected instances
        s = affected[q]
        p = inst_p[s]
        node = p * STRIDE + inst_node[s]
        sink += pat_nsteps[p] + node_op[node] + np.int64(AT[min(node_rng[node, 0], last), 0])
        sink += np.int64(AT[min(node_rng[node, 12], last), 0]) + np.int64(AT[min(node_rng[node, 4], last), 0])
        nx = inst_next[s]
        pv = inst_prev[s]
        sink += inst_prev[max(nx, 0)] + inst_next[max(pv, 0)]
    return sink


# Without numba's reference-counting runtime (``_nrt=False``): with it, every array a helper receives or unpacks
# from the ``tables`` / ``state`` tuples is increfed and decrefed (an atomic operation and a call each); the
# inlined helpers left about 70 of them per instance killed or created, which cost more than the instance's
# cache misses.  So the kernel allocates nothing and makes no array views: rows are copied element by element
# (``_copy_row``), the candidates are sorted into the caller's buffers (``_argsort_stable``) and the bits of a
# captured value come from an int64 view of ``iv_num`` made by the engine.
@njit(cache=True, _nrt=False)
def process_kernel(i0, mode, max_per_sub, max_live, ev_ts, ev_id, ev_kind, ev_num, ev_bits,
                   m_off, m_ids, n_start_ev, tables, atoms, captures, state, hk, hval, list_head,
                   heap, pi_mark, affected, cre_p, cre_parent, cre_cnt, cre_dec, cre_key, cre_order, cre_tmp,
                   dirty, tomb_key, tomb_off, w_p, w_ev, w_bound, w_iters, w_acc, w_accn, w_start,
                   start_lo, start_hi, start_res_lo, start_res_hi, groups, st):
    """Process events ``i0..`` of the batch; returns the number processed (stops early when a bound fails)."""
    (node_op, node_theta_static, node_pi_static, node_rng, node_idx_attr, node_idx_col, node_cap, node_agg,
     pat_sid, pat_within, pat_since, pat_nsteps, pat_active, pat_live, gcols, node_sg) = tables
    AT = atoms
    (cap_ev, cap_col, ag_fn, ag_ev, ag_slot) = captures
    (grp_blo, grp_bhi, band_lo, band_hi, band_dir, band_col, mem_p, mem_thr, mem_eq) = groups
    (inst_alive, inst_p, inst_node, inst_start, inst_last, inst_deadline, inst_list, inst_next, inst_prev,
     inst_changed, bound, iters, iv_kind, iv_num, acc, accn, free, dirty_mark, iv_bits) = state
    n = ev_ts.shape[0]
    n_pat = pat_sid.shape[0]
    slots = inst_alive.shape[0]
    for i in range(i0, n):
        # the bounds this event can need (module docstring); stop before touching it
        new_max = n_start_ev[i] + st[ST_FOLDLIVE]
        if (st[ST_FREE] < new_max or heap.shape[0] - HEAP_BASE - st[ST_HEAP] < new_max
                or w_p.shape[0] - st[ST_WIT] < st[ST_LIVE] + n_start_ev[i]
                or 10 * (st[ST_KEYS] + st[ST_LIVE] + new_max) > 7 * hk.shape[0]
                or list_head.shape[0] - st[ST_LISTS] < st[ST_LIVE] + new_max
                or tomb_key.shape[0] - st[ST_TOMB] < st[ST_LIVE] + new_max
                or affected.shape[0] < st[ST_LIVE] or cre_p.shape[0] < new_max):
            return i
        ts = ev_ts[i]
        if st[ST_WM] == EMPTY or ts > st[ST_WM]:
            st[ST_WM] = ts
        wm = st[ST_WM]
        while st[ST_HEAP] > 0 and heap[HEAP_BASE, 0] < wm:
            d = heap[HEAP_BASE, 0]
            s = heap[HEAP_BASE, 1]
            _heap_pop(heap, st)
            if inst_deadline[s] == d:  # else stale: that instance ended (lazy deletion)
                st[ST_EXPIRED] += 1
                _free(s, tables, state, list_head, st, tomb_key, tomb_off, ev_id[i])
        stamp = np.int64(i) + st[ST_CALL] * np.int64(1 << 40)
        # -- the affected instances -----------------------------------------
        naff = 0
        ncre = 0
        if mode != MODE_NONE:
            for j in range(m_off[i], m_off[i + 1]):
                mid = m_ids[j]
                node = mid >> 1
                if mid & 1:
                    pi_mark[node] = stamp
                    continue
                if node >= STEP_BASE:  # a step group: the instances of all its nodes in one list
                    lid = find_list(hk, hval, node, np.int64(-2), np.int64(0), np.int64(0), False, st, list_head)
                elif node >= GROUP_BASE:  # a start group: its members whose threshold the event passes
                    ncre = _group_starts(node - GROUP_BASE, i, ev_kind, ev_num, grp_blo, grp_bhi, band_lo, band_hi,
                                         band_dir, band_col, mem_p, mem_thr, mem_eq, cre_p, cre_parent, ncre)
                    continue
                elif mode == MODE_DYNAMIC and node_idx_attr[node] >= 0:
                    col = node_idx_attr[node]
                    lid = find_list(hk, hval, node, np.int64(col), np.int64(ev_kind[i, col]), ev_bits[i, col], False,
                                    st, list_head)
                else:
                    lid = find_list(hk, hval, node, np.int64(-2), np.int64(0), np.int64(0), False, st, list_head)
                st[ST_PROBES] += 1
                if lid >= 0:
                    s = list_head[lid]
                    while s >= 0:
                        affected[naff] = s
                        naff += 1
                        s = inst_next[s]
            if mode == MODE_DYNAMIC:
                for q in range(gcols.shape[0]):
                    col = gcols[q]
                    lid = find_list(hk, hval, np.int64(-1), np.int64(col), np.int64(ev_kind[i, col]), ev_bits[i, col],
                                    False, st, list_head)
                    st[ST_PROBES] += 1
                    if lid >= 0:
                        s = list_head[lid]
                        while s >= 0:
                            affected[naff] = s
                            naff += 1
                            s = inst_next[s]
        else:
            for p in range(n_pat):
                if pat_active[p] and _all(start_lo[p], start_hi[p], AT, i, ev_kind, ev_num, 0, iv_kind, iv_num, acc,
                                          accn, 0):
                    cre_p[ncre] = p
                    cre_parent[ncre] = -1
                    ncre += 1
        lid = find_list(hk, hval, np.int64(-1), np.int64(-3), np.int64(0), np.int64(0), False, st, list_head)
        if lid >= 0:
            s = list_head[lid]
            while s >= 0:
                affected[naff] = s
                naff += 1
                s = inst_next[s]
        st[ST_AFFECTED] += naff
        n_starts = ncre
        if mode != MODE_NONE:
            st[ST_SINK] += _touch(naff, affected, ncre, cre_p, tables, AT, state)
        # -- phase 1: every affected instance reacts ------------------------
        for q in range(naff):
            s = affected[q]
            if ts <= inst_last[s]:
                continue  # invisible: not strictly later than its last bound event
            p = inst_p[s]
            step = inst_node[s]
            node = p * STRIDE + step
            dur = ts - inst_start[s]
            nr = node_rng
            if mode != MODE_NONE and not _all(nr[node, 10], nr[node, 11], AT,
                                              i, ev_kind, ev_num, s, iv_kind, iv_num, acc, accn, dur):
                continue  # the static correlation's part the matcher did not check
            if mode == MODE_NONE and not _all(nr[node, 2], nr[node, 3], AT,
                                              i, ev_kind, ev_num, s, iv_kind, iv_num, acc, accn, dur):
                continue
            if not _all(nr[node, 0], nr[node, 1], AT,
                        i, ev_kind, ev_num, s, iv_kind, iv_num, acc, accn, dur):
                continue  # the filter edge
            if mode == MODE_NONE:
                pi = _all(nr[node, 6], nr[node, 7], AT,
                          i, ev_kind, ev_num, s, iv_kind, iv_num, acc, accn, dur)
            else:
                pi = (not node_pi_static[node] or pi_mark[node] == stamp) and _all(
                    nr[node, 12], nr[node, 13], AT,
                    i, ev_kind, ev_num, s, iv_kind, iv_num, acc, accn, dur)
            pi = pi and _all(nr[node, 4], nr[node, 5], AT, i, ev_kind, ev_num, s, iv_kind, iv_num, acc, accn, dur)
            if not pi:
                st[ST_KILLED] += 1
                _free(s, tables, state, list_head, st, tomb_key, tomb_off, ev_id[i])
                continue
            if node_op[node] == OP_NEXT:
                _capture(node, i, s, node_cap, cap_ev, cap_col, ev_kind, ev_num, iv_kind, iv_num)
                bound[s, step] = ev_id[i]
                if step == pat_nsteps[p]:
                    _witness(s, i, st, state, w_p, w_ev, w_bound, w_iters, w_acc, w_accn, w_start)
                    _free(s, tables, state, list_head, st, tomb_key, tomb_off, ev_id[i])
                    continue
                _enter(s, step + 1, i, ts, mode, tables, captures, state, hk, hval, list_head, st, ev_kind, ev_num)
                _mark(s, i, st, state, dirty, ev_id)
                continue
            # fold: the rebind edge
            _agg_step(node, i, s, node_agg, ag_fn, ag_ev, ag_slot, ev_kind, ev_num, acc, accn)
            _capture(node, i, s, node_cap, cap_ev, cap_col, ev_kind, ev_num, iv_kind, iv_num)
            bound[s, step] = ev_id[i]
            iters[s, step] += 1
            inst_last[s] = ts
            _mark(s, i, st, state, dirty, ev_id)
            if _all(nr[node, 8], nr[node, 9], AT,
                    i, ev_kind, ev_num, s, iv_kind, iv_num, acc, accn, dur):
                if step == pat_nsteps[p]:
                    _witness(s, i, st, state, w_p, w_ev, w_bound, w_iters, w_acc, w_accn, w_start)
                else:
                    cre_p[ncre] = p
                    cre_parent[ncre] = s
                    ncre += 1
        # -- phase 2: new instances under the caps --------------------------
        m = 0
        for q in range(ncre):
            p = cre_p[q]
            if cre_parent[q] < 0:  # a start
                if not pat_active[p] or ts < pat_since[p]:
                    continue
                if mode != MODE_NONE and cre_parent[q] == -1 and not _all(
                        start_res_lo[p], start_res_hi[p], AT, i, ev_kind, ev_num, 0, iv_kind, iv_num, acc, accn, 0):
                    continue  # the start's part the matcher did not check
                if pat_nsteps[p] == 0:
                    st[ST_STARTED] += 1
                    w = st[ST_WIT]
                    st[ST_WIT] += 1
                    st[ST_COMPLETED] += 1
                    w_p[w] = p
                    w_ev[w] = i
                    _fill_row(w_bound, w, -1)
                    w_bound[w, 0] = ev_id[i]
                    _fill_row(w_iters, w, 0)
                    w_start[w] = ts
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
                cre_key[q] = pat_sid[cre_p[q]]
            _argsort_stable(cre_key, m, cre_order, cre_tmp)
        for qq in range(m):
            q = cre_order[qq] if sorted_ else qq
            p = cre_p[q]
            if cre_dec[p] == 0:
                k = cre_cnt[p]
                if pat_live[p] + k > max_per_sub or st[ST_LIVE] + k > max_live:
                    cre_dec[p] = -1
                    st[ST_REFUSED] += k
                else:
                    cre_dec[p] = 1
                    st[ST_LIVE] += k  # reserved; the slots are taken below
                    pat_live[p] += k
            if cre_dec[p] < 0:
                continue
            st[ST_FREE] -= 1
            s = free[st[ST_FREE]]
            parent = cre_parent[q]
            inst_alive[s] = True
            inst_p[s] = p
            inst_list[s] = -1
            if parent < 0:
                st[ST_STARTED] += 1
                inst_start[s] = ts
                _fill_row(bound, s, -1)
                _fill_row(iters, s, 0)
                bound[s, 0] = ev_id[i]
                _capture(p * STRIDE, i, s, node_cap, cap_ev, cap_col, ev_kind, ev_num, iv_kind, iv_num)
                nxt = 1
            else:
                inst_start[s] = inst_start[parent]
                _copy_row(bound, s, bound, parent)
                _copy_row(iters, s, iters, parent)
                _copy_row(iv_kind, s, iv_kind, parent)
                _copy_row(iv_num, s, iv_num, parent)
                _copy_row(acc, s, acc, parent)
                _copy_row(accn, s, accn, parent)
                nxt = inst_node[parent] + 1
            _enter(s, nxt, i, ts, mode, tables, captures, state, hk, hval, list_head, st, ev_kind, ev_num)
            _mark(s, i, st, state, dirty, ev_id)
            d = inst_start[s] + pat_within[p]
            inst_deadline[s] = d
            _heap_push(heap, st, d, s)
        for q in range(m):
            cre_cnt[cre_p[q]] = 0
            cre_dec[cre_p[q]] = 0
    return n


@njit(cache=True, _nrt=False)
def drop_pattern(p, tables, state, list_head, st, tomb_key, tomb_off, source):
    """Free every instance of pattern slot ``p`` (its subscription was replaced or deleted)."""
    inst_alive = state[0]
    inst_p = state[1]
    n = 0
    for s in range(inst_alive.shape[0]):
        if inst_alive[s] and inst_p[s] == p:
            if tomb_key.shape[0] <= st[ST_TOMB]:
                return -1 - n  # the caller grows the tombstone buffer and calls again
            _free(s, tables, state, list_head, st, tomb_key, tomb_off, source)
            n += 1
    return n
