"""The kernel's layout: its constants (node operators, modes, operand sources, the scalar slots ``ST_*``, the
atom row) and the named containers of arrays it reads (docs/patterns.md section 3)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

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
