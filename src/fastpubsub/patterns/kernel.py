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
table.  Expiry (``within``) uses a 4-ary heap with lazy deletion.  The kernels
read named containers of arrays, as the matcher's do: the compiled automata
(:class:`AutomatonArrays`), the instance store (:class:`InstanceArrays`), the
event batch (:class:`BatchArrays`), the working buffers, the changes and the
witness rows.  The kernel runs without numba's reference-counting runtime (see
``process_kernel``).  Every buffer is sized by the caller from a bound checked
at each event: when a bound does not hold the kernel returns the index of the
event it stopped at, before touching it, and the caller grows the arrays and
resumes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from fastpubsub.engine.semantics import OP_EQ, OP_LT
from fastpubsub.engine.structures.predicates import order_holds

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


# node_rng: seven [lo, hi) ranges of atoms per node, in this order (the engine's ``_install`` fills them)
R_THETA_DYN, R_THETA_STATIC, R_PI_DYN, R_PI_STATIC, R_UNTIL, R_THETA_REST, R_PI_REST = 0, 2, 4, 6, 8, 10, 12


class GroupArrays(NamedTuple):
    """The start groups (merged start states) as :func:`group_starts` walks them (``PatternEngine._sync_groups``).

    Group ``g`` is the bands ``grp_blo[g]..grp_bhi[g]``; band ``b`` is the members ``band_lo[b]..band_hi[b]``
    that share a threshold direction and attribute, sorted by threshold.
    """

    grp_blo: np.ndarray  # int64 [groups]: first band
    grp_bhi: np.ndarray  # int64 [groups]: end of the bands
    band_lo: np.ndarray  # int64 [bands]: first member
    band_hi: np.ndarray  # int64 [bands]: end of the members
    band_dir: np.ndarray  # int64 [bands]: 0 no threshold, 1 ``attr > c`` / ``>=`` (ascending c), 2 ``<`` / ``<=``
    band_col: np.ndarray  # int64 [bands]: the event column of the threshold's attribute
    mem_p: np.ndarray  # int64 [members]: pattern slot
    mem_thr: np.ndarray  # float64 [members]: threshold c
    mem_eq: np.ndarray  # bool [members]: the comparison admits equality


class AutomatonArrays(NamedTuple):
    """The compiled pattern subscriptions, the subscription side (``PatternEngine._automata``).

    Pattern slot ``p`` owns nodes ``p * STRIDE`` (its start) to ``p * STRIDE +
    pat_nsteps[p]``.  A node's predicates are ranges of rows of ``atoms``
    (``node_rng``, the ``R_*`` order), its captures ranges of ``cap_*`` and a
    fold's aggregates ranges of ``ag_*``.  The node and pattern fields are
    columns of two row-major matrices (strided views): a node's fields share a
    cache line.
    """

    node_op: np.ndarray  # int32 [nodes]: OP_START, OP_NEXT, OP_FOLD (-1: no such step)
    node_theta_static: np.ndarray  # int32 [nodes]: the correlation has static atoms (the matcher reports the node)
    node_pi_static: np.ndarray  # int32 [nodes]: the matcher checks part of the post-selection (``pi_mark``)
    node_rng: np.ndarray  # int32 [nodes, 14]: atom ranges, ``R_*``
    node_idx_attr: np.ndarray  # int32 [nodes]: the event column keying the dynamic index (-1: not indexed)
    node_idx_col: np.ndarray  # int32 [nodes]: the instance value column it equals
    node_cap: np.ndarray  # int32 [nodes, 2]: range of ``cap_*`` bound on entering the node
    node_agg: np.ndarray  # int32 [nodes, 2]: range of ``ag_*`` a fold updates
    node_sg: np.ndarray  # int64 [nodes]: step group (-1: none)
    pat_sid: np.ndarray  # int64 [patterns]: subscription id
    pat_within: np.ndarray  # int64 [patterns]: ms from the start event to the deadline
    pat_since: np.ndarray  # int64 [patterns]: events before this timestamp start nothing
    pat_nsteps: np.ndarray  # int64 [patterns]: steps after the start
    pat_active: np.ndarray  # int64 [patterns]: the slot holds a subscription
    start_lo: np.ndarray  # int64 [patterns]: the start's atoms (mode none evaluates all of them) ...
    start_hi: np.ndarray  # int64 [patterns]: ... end
    start_res_lo: np.ndarray  # int64 [patterns]: the start's atoms the matcher does not check ...
    start_res_hi: np.ndarray  # int64 [patterns]: ... end
    gcols: np.ndarray  # int64: event columns of the index lists keyed without a node (dynamic correlation only)
    atoms: np.ndarray  # float64 [atoms, A_WIDTH]: one cache line per atom (the header comment above)
    cap_ev: np.ndarray  # int64 [captures]: event column captured ...
    cap_col: np.ndarray  # int64 [captures]: ... into this instance value column
    ag_fn: np.ndarray  # int64 [aggregates]: FN_*
    ag_ev: np.ndarray  # int64 [aggregates]: event column aggregated
    ag_slot: np.ndarray  # int64 [aggregates]: the instance's accumulator
    groups: GroupArrays


class InstanceArrays(NamedTuple):
    """The instance store, the state side (``PatternEngine._instances``): a structure of arrays over slots with a
    free list, the lists of the dynamic index (an open-addressing table of keys, a doubly linked list each) and
    the deadline heap."""

    inst_alive: np.ndarray  # bool [slots]
    inst_p: np.ndarray  # int64 [slots]: pattern slot
    inst_node: np.ndarray  # int64 [slots]: the step it waits at (1..nsteps)
    inst_start: np.ndarray  # int64 [slots]: timestamp of the start event
    inst_last: np.ndarray  # int64 [slots]: timestamp of the last bound event (later events only are visible)
    inst_deadline: np.ndarray  # int64 [slots]: start + within (EMPTY once ended: its heap entries are stale)
    inst_list: np.ndarray  # int64 [slots]: its index list (-1: none)
    inst_next: np.ndarray  # int64 [slots]: next in the list (-1: last)
    inst_prev: np.ndarray  # int64 [slots]: previous in the list (-1: first)
    inst_changed: np.ndarray  # int64 [slots]: id of the event that changed it last (its changelog offset)
    bound: np.ndarray  # int64 [slots, STRIDE]: per binding the bound event's id (-1: none yet)
    iters: np.ndarray  # int64 [slots, STRIDE]: per binding a fold's iterations
    iv_kind: np.ndarray  # int8 [slots, cols]: kinds of the captured values
    iv_num: np.ndarray  # float64 [slots, cols]: captured values (strings as codes)
    iv_bits: np.ndarray  # int64 [slots, cols]: ``iv_num``'s bits (a view: the index hashes them)
    acc: np.ndarray  # float64 [slots, aggs]: aggregate accumulators
    accn: np.ndarray  # int64 [slots, aggs]: values accumulated
    free: np.ndarray  # int64 [slots]: the free slots (``st[ST_FREE]`` of them)
    pat_live: np.ndarray  # int64 [patterns]: live instances per pattern (the per-subscription cap)
    hk: np.ndarray  # int64 [table, 4]: index keys (column 0 EMPTY: a free entry)
    hval: np.ndarray  # int64 [table]: the list id of each key
    list_head: np.ndarray  # int64 [lists]: first instance of each list (-1: empty)
    heap: np.ndarray  # int64 [HEAP_BASE + n, 2]: the 4-ary deadline heap of (deadline, slot)


class BatchArrays(NamedTuple):
    """One batch of a partition's events as the kernel reads them, with the matcher's answer for each."""

    ts: np.ndarray  # int64 [events]: timestamps (ms, event time)
    ids: np.ndarray  # int64 [events]: ids (offsets)
    kind: np.ndarray  # int8 [events, columns]: value kinds per attribute column (-1: absent)
    num: np.ndarray  # float64 [events, columns]: values (strings as codes)
    bits: np.ndarray  # int64 [events, columns]: ``num``'s bits
    m_off: np.ndarray  # int64 [events + 1]: each event's range of ``m_ids``
    m_ids: np.ndarray  # int64: matcher ids, 2 * node (+1: the node's static post-selection holds)
    n_start: np.ndarray  # int64 [events]: instances the event's start groups may create (a bound the kernel checks)


class KernelScratch(NamedTuple):
    """Per-event working buffers, sized by the engine (the kernel allocates nothing)."""

    pi_mark: np.ndarray  # int64 [nodes]: the stamp of the last event whose static post-selection holds there
    affected: np.ndarray  # int64 [slots]: the instances the event reaches
    cre_p: np.ndarray  # int64 [slots]: instances to create: pattern slot ...
    cre_parent: np.ndarray  # int64 [slots]: ... and parent (-1, -2: a start)
    cre_cnt: np.ndarray  # int64 [patterns]: instances to create per pattern (zero between events)
    cre_dec: np.ndarray  # int64 [patterns]: the cap's decision per pattern (0 undecided, 1 create, -1 refuse)
    cre_key: np.ndarray  # int64 [slots]: sort keys ...
    cre_order: np.ndarray  # int64 [slots]: ... their order ...
    cre_tmp: np.ndarray  # int64 [slots]: ... and the merge sort's buffer


class ChangeArrays(NamedTuple):
    """What the changelog needs (``st[ST_TRACK]``): the instances changed in the epoch and the keys of those ended."""

    dirty: np.ndarray  # int64 [slots]: instances changed (``st[ST_DIRTY]`` of them)
    dirty_mark: np.ndarray  # int64 [slots]: the epoch (``st[ST_BATCH]``) an instance was last listed in
    tomb_key: np.ndarray  # int64 [n, 1 + STRIDE]: keys of ended instances (``st[ST_TOMB]`` of them) ...
    tomb_off: np.ndarray  # int64 [n]: ... and the id of the event that ended each


class WitnessArrays(NamedTuple):
    """The witness rows a call writes (``st[ST_WIT]`` of them), read by ``PatternEngine._drain``."""

    p: np.ndarray  # int64 [n]: pattern slot
    ev: np.ndarray  # int64 [n]: index in the batch of the completing event
    bound: np.ndarray  # int64 [n, STRIDE]
    iters: np.ndarray  # int64 [n, STRIDE]
    acc: np.ndarray  # float64 [n, aggs]
    accn: np.ndarray  # int64 [n, aggs]
    start: np.ndarray  # int64 [n]: timestamp of the start event


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
def _copy_row(dst, i, src, j):
    """``dst[i, :] = src[j, :]`` without an array view (the kernel runs without the reference-counting runtime)."""
    for k in range(dst.shape[1]):
        dst[i, k] = src[j, k]


@njit(cache=True, inline="always")
def _fill_row(dst, i, value):
    for k in range(dst.shape[1]):
        dst[i, k] = value


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
def group_starts(groups, g, i, ev_kind, ev_num, cre_p, cre_parent, ncre):
    """The members of start group ``g`` that event ``i`` may start, appended to ``cre_p`` from ``ncre``.

    A band of threshold members (``attr > c`` / ``>=``, ascending ``c``; ``<`` / ``<=``, descending) is
    walked only while the event passes: those get parent -2 (their start is fully checked); the other
    members (parent -1) still have their remaining start atoms evaluated.  Returns the new ``ncre``.
    """
    for b in range(groups.grp_blo[g], groups.grp_bhi[g]):
        d = groups.band_dir[b]
        if d == 0:
            for k in range(groups.band_lo[b], groups.band_hi[b]):
                cre_p[ncre] = groups.mem_p[k]
                cre_parent[ncre] = -1
                ncre += 1
            continue
        col = groups.band_col[b]
        x = ev_num[i, col]
        if ev_kind[i, col] != 0 or x != x:
            continue  # missing, not a number, NaN: every comparison fails
        for k in range(groups.band_lo[b], groups.band_hi[b]):
            t = groups.mem_thr[k]
            if d == 1:
                if t > x:
                    break
                ok = t < x or (groups.mem_eq[k] and t == x)
            else:
                if t < x:
                    break
                ok = t > x or (groups.mem_eq[k] and t == x)
            if ok:
                cre_p[ncre] = groups.mem_p[k]
                cre_parent[ncre] = -2
                ncre += 1
    return ncre


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
# the candidates are sorted into the caller's buffers (``_argsort_stable``) and the bits of a captured value
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
            _argsort_stable(scratch.cre_key, m, scratch.cre_order, scratch.cre_tmp)
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
            _heap_push(heap, st, d, s)
        for q in range(m):
            cre_cnt[cre_p[q]] = 0
            cre_dec[cre_p[q]] = 0
    return n


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
