"""Packed lists: each short access-key list of static and dynamic in one block, its predicates inline.

A cluster (engine/structures/cluster_store.py) holds the entries of one access key with
the same number ``k`` of columns; a key's list chains one cluster per ``k``.
With sparse, high-dimensional attributes (OpIndex's workload: 1M
subscriptions over 20,000 attributes) the keys are many and their lists
short: an event of 40 attributes reaches about 61 lists of 2.7 clusters and
6.6 entries each, every cluster costing its bookkeeping (five arrays), its
first column and its line of handles in separate cache lines, for two or
three entries most of which fail their first test.  And phase 1 sets and
clears about 1,500 bits per event for those few hundred tests.

So a list of at most ``PACK_MAX`` entries is also kept *packed*: one block
``[n, (k, handle, (field << 3 | op, constant) x k) x n]`` in
``PackedLists.data``, at ``start[key]`` (-1: not packed; its clusters are
scanned with engine/algorithms/direct.py's row per predicate).  An event reaching the
key reads one block (its first lines prefetched for the whole group of
events before any is scanned), follows no cluster, and tests each predicate
from the block against its own per-field rows (engine/algorithms/direct.py): no
inequality group is searched, no bit set or cleared.  :func:`packed_events`
is the batch loop; ``lists="auto"`` takes it where :func:`use_packed` says.

The clusters stay the source of truth: every append and removal logs its
keys (``ClusterStore.changed_keys``), and before a batch the changed keys
are packed again at the end of ``data``; the whole of ``data`` is rebuilt, in an array sized to it,
when the blocks left behind pass a quarter of the live ones (:data:`REPACK_SHIFT`), and when string order
codes change (the blocks hold the constants).  ``data`` grows by a quarter, not twice over, so that under
subscription churn it stays near the live blocks instead of swinging to twice them or more.  Reordering within a cluster
(sorted runs, compaction, relocation) changes no block, since an event's
matches are sorted at the end.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .direct import DirectTable, check_predicate, direct_keys, scan_list_direct_into
from ..structures.hashtable import ht_find3
from ..structures.idpool import grow
from ..structures.sorted_runs import DEAD
from ..kernels.probing import GROUP, KNOWN_KEY, PHASE1_AHEAD_FIELDS
from ..kernels.scan import doubled, finish_events, prefetch
from ..semantics import OP_EQ

#: Lists of at most this many entries are packed.
PACK_MAX = 32
#: Cells of abandoned blocks tolerated beyond ``live >> REPACK_SHIFT`` before ``data`` is rebuilt.
REPACK_SLACK = 1 << 16
#: ``data`` is rebuilt once the blocks left behind pass this fraction (a power of two) of the live ones: a
#: rebuild packs every list, so it runs once per about ``live >> REPACK_SHIFT`` cells repacked.
REPACK_SHIFT = 2
#: ``probe[t, 1]`` of a probe whose key is packed (its block starts at ``probe[t, 2]``).
PACKED = -2
LIST_MODES = ("auto", "clusters", "packed")


class PackedArrays(NamedTuple):
    start: np.ndarray  # int64 [keys]: the key's block in ``data`` (-1: not packed)
    data: np.ndarray  # int64: blocks [n, (k, handle, (predicate key, constant) x k) x n]
    data_f: np.ndarray  # float64: the same memory (the constants read as order codes)


@njit(cache=True)
def pack_keys(keys, key_head, c_next, c_base, c_cap, c_len, c_k, c_dead, arena, row, start, data, used, pack_max):
    """Pack the lists of ``keys`` at ``data[used:]`` (``start[q]`` = -1 for a list of more than ``pack_max`` live
    entries; dead entries, ``c_dead`` of a cluster, are left out).

    Each column's predicate id ``p`` is written as its row of
    :class:`~engine.algorithms.direct.DirectPredicates` (``row[p]``: field and operator,
    constant).  ``data`` must have room (:func:`packed_size`).  Returns the new ``used``.
    """
    for q in keys:
        c = key_head[q] if q < key_head.shape[0] else -1
        n = 0
        while c >= 0:
            n += c_len[c] - c_dead[c]
            c = c_next[c]
        if n > pack_max:
            start[q] = -1
            continue
        start[q] = used
        data[used] = n
        w = used + 1
        c = key_head[q] if q < key_head.shape[0] else -1
        while c >= 0:
            k, base, cap = c_k[c], c_base[c], c_cap[c]
            for j in range(c_len[c]):
                if arena[base + k * cap + j] == DEAD:
                    continue
                data[w] = k
                data[w + 1] = arena[base + k * cap + j]
                for r in range(k):
                    p = arena[base + r * cap + j]
                    data[w + 2 + 2 * r] = row[p, 0]
                    data[w + 3 + 2 * r] = row[p, 1]
                w += 2 + 2 * k
            c = c_next[c]
        used = w
    return used


@njit(cache=True)
def packed_size(keys, key_head, c_next, c_len, c_k, c_dead, pack_max):
    """Room :func:`pack_keys` needs for ``keys``."""
    total = 0
    for q in keys:
        c = key_head[q] if q < key_head.shape[0] else -1
        n = 0
        cells = 1
        while c >= 0:
            live = c_len[c] - c_dead[c]
            n += live
            cells += live * (2 + 2 * c_k[c])
            c = c_next[c]
        if n <= pack_max:
            total += cells
    return total


@njit(cache=True, inline="always")
def scan_packed_into(data, data_f, s, slot, slot_f, e, out, nout):
    """Append the handles of the block at ``data[s]`` whose predicates all hold for event ``e``.

    ``out`` is not grown (callable without numba's reference-counting runtime): returns the new count, or -1 when
    it has no room for the block's entries.
    """
    n = data[s]
    if nout + n > out.shape[0]:
        return -1
    w = s + 1
    for _ in range(n):
        k = data[w]
        ok = True
        for r in range(k):
            if not check_predicate(data[w + 2 + 2 * r], data[w + 3 + 2 * r], data_f[w + 3 + 2 * r], slot, slot_f, e):
                ok = False
                break
        if ok:
            out[nout] = data[w + 1]
            nout += 1
        w += 2 + 2 * k
    return nout


@njit(cache=True)
def packed_heads(probe, n_probe, access, store, start, data):
    """Conjunctions looked up, then ``probe[t, 1]`` = ``PACKED`` (block at ``probe[t, 2]``), the list's first
    cluster, or -1; the first reads of each prefetched."""
    key_head = store.key_head
    n_keys, n_pk = key_head.shape[0], start.shape[0]
    for t in range(n_probe):
        if probe[t, 1] == KNOWN_KEY:
            continue
        q = ht_find3(access.conj_keys, access.conj_vals, probe[t, 0], probe[t, 1], probe[t, 2])
        if 0 <= q < n_keys:
            prefetch(key_head, q)
            if q < n_pk:
                prefetch(start, q)
        else:
            q = -1
        probe[t, 0] = q
    for t in range(n_probe):
        q = probe[t, 0]
        if q >= 0 and q < n_pk:
            prefetch(start, q)
    for t in range(n_probe):
        q = probe[t, 0]
        if q < 0 or key_head[q] < 0:  # (a list hidden by its head, as the catch-all on bitmaps is)
            probe[t, 1] = -1
        elif q < n_pk and start[q] >= 0:
            s = start[q]
            probe[t, 1], probe[t, 2] = PACKED, s
            prefetch(data, s)
            prefetch(data, s + 8)
            prefetch(data, s + 16)
        else:
            c = key_head[q]
            probe[t, 1], probe[t, 2] = c, 0
            prefetch(store.base, c)
            prefetch(store.cap, c)
            prefetch(store.length, c)
            prefetch(store.k, c)
            prefetch(store.next, c)


@njit(cache=True)
def packed_events(ev, preds, dpreds, store, access, dscratch, packed, handle_id):
    """Static and dynamic over a batch with packed lists and direct tests (module docstring); CSR of ids.

    Per group of events: the lists each reaches (:func:`~engine.algorithms.direct.direct_keys`), their heads
    (:func:`packed_heads`), then the scans (:func:`packed_group_into`), which stop at an event ``out`` has no
    room for: ``out`` is grown here and the event scanned again.
    """
    n_ev = ev.offsets.shape[0] - 1
    n_pf = min(dscratch.slot.shape[0], dscratch.eq_of_field.shape[0])
    conj_flat = access.conj_keys.ravel()
    gp_off = np.zeros(GROUP + 1, dtype=np.int64)
    probe = dscratch.probe
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    for g0 in range(0, n_ev, GROUP):
        g1 = min(n_ev, g0 + GROUP)
        probe, n_probe = direct_keys(ev, g0, g1, preds, access, conj_flat, dscratch.eq_of_field, store.key_head, n_pf,
                                     gp_off, probe)
        packed_heads(probe, n_probe, access, store, packed.start, packed.data)
        e = g0
        while True:
            e1, nout = packed_group_into(e, g0, g1, ev, probe, gp_off, packed, dpreds, dscratch, store, n_pf, out,
                                         nout, out_off)
            finish_events(out, out_off, e, e1, handle_id, nout)
            if e1 >= g1:
                break
            e = e1
            out = doubled(out, nout)
    return out_off, out[:nout].copy()


@njit(cache=True, _nrt=False)
def packed_group_into(e0, g0, g1, ev, probe, gp_off, packed, dpreds, dscratch, store, n_pf, out, nout, out_off):
    """The events ``e0:g1`` of a group of :func:`packed_events` (matched handles, not yet ids), without growing
    ``out``: each event's fields written to its rows, the blocks and lists it reaches scanned, its rows cleared.

    Returns ``(e, nout)``: ``e = g1`` when done, else the event for which ``out`` had no room, its handles dropped.
    Without numba's reference-counting runtime (docs/design/engine.md, "Kernel contract"): with it, ``out`` reassigned
    by a growth check and the store's arrays unpacked by each list scan cost a pair of atomic operations per list.
    """
    ev_off, ev_field, ev_code, ev_eqbits = ev.offsets, ev.field, ev.code, ev.eqbits
    data, data_f = packed.data, packed.data_f
    row, row_f = dpreds.row, dpreds.row_f
    slot, slot_f = dscratch.slot, dscratch.slot_f
    for e in range(e0, g1):
        i = e - g0
        for j in range(ev_off[e], ev_off[e + 1]):
            f = ev_field[j]
            if 0 <= f < n_pf:
                slot[f, 0] = e
                slot[f, 1] = ev_eqbits[j]
                slot_f[f, 2] = ev_code[j]
        begin = nout
        for t in range(gp_off[i], gp_off[i + 1]):
            c = probe[t, 1]
            if c == PACKED:
                nout = scan_packed_into(data, data_f, probe[t, 2], slot, slot_f, e, out, nout)
            elif c >= 0:
                nout = scan_list_direct_into(c, store, row, row_f, slot, slot_f, e, out, nout)
            if nout < 0:
                break
        for j in range(ev_off[e], ev_off[e + 1]):
            f = ev_field[j]
            if 0 <= f < n_pf:
                slot[f, 0] = -1
        if nout < 0:
            return e, begin
        out_off[e + 1] = nout
    return g1, nout


#: ``lists="auto"`` packs when an event is expected to satisfy at least this many inequality predicates: below,
#: phase 1 is little more than the equality probes it keeps, and the blocks save only the clusters' misses.
PACK_MIN_SATISFIED = 64


def expected_satisfied(preds, field_nu: np.ndarray) -> float:
    """Inequality predicates an event satisfies, expected: half of those on each field, times P(field present)
    (``field_nu``; a field beyond it counts as always present)."""
    top = preds.n_ids
    live = (preds.refcount[:top] > 0) & (preds.op[:top] != OP_EQ)
    counts = np.bincount(preds.field[:top][live], minlength=preds.n_fields).astype(np.float64)
    nu = np.ones(len(counts))
    k = min(len(nu), len(field_nu))
    nu[:k] = field_nu[:k]
    return float(0.5 * np.dot(counts, nu))


def use_packed(mode: str, n_fields: int, satisfied: float) -> bool:
    """``mode`` "packed" / "clusters" forces the choice; "auto" packs over thousands of fields
    (``PHASE1_AHEAD_FIELDS``, where phase 1's arrays miss the cache) when an event is expected to satisfy at least
    ``PACK_MIN_SATISFIED`` inequality predicates (``satisfied``, :func:`expected_satisfied`)."""
    if mode == "auto":
        return n_fields >= PHASE1_AHEAD_FIELDS and satisfied >= PACK_MIN_SATISFIED
    return mode == "packed"


class PackedLists:
    """The packed copies of a :class:`~engine.structures.cluster_store.ClusterStore`'s short lists, kept up to date lazily."""

    def __init__(self, store, direct: DirectTable) -> None:
        self.store = store
        self.direct = direct
        self.start = np.full(0, -1, dtype=np.int64)
        self.data = np.zeros(1, dtype=np.int64)
        self.used = 0
        self.live = 0  # cells of the blocks in use (the rest: blocks left behind by repacks)
        self.built = False
        self.rebuilds = 0
        self._strings_version = -1

    def __getstate__(self) -> dict:
        """Saved structures (engine/structure.py) leave the blocks out: the first match after a load packs again."""
        state = dict(self.__dict__)
        state.update(start=np.full(0, -1, dtype=np.int64), data=np.zeros(1, dtype=np.int64), used=0, live=0,
                     built=False)
        return state

    def _pack(self, keys: np.ndarray, row: np.ndarray) -> None:
        s = self.store
        need = int(packed_size(keys, s.key_head, s.c_next, s.c_len, s.c_k, s.c_dead, PACK_MAX))
        if self.used + need > len(self.data):  # (an eighth to spare: the repacks after a build fit without a copy)
            data = np.empty(max(self.used + need + (self.used + need) // 8, len(self.data) + len(self.data) // 4),
                            dtype=np.int64)
            data[: self.used] = self.data[: self.used]
            self.data = data
        self.used = int(pack_keys(keys, s.key_head, s.c_next, s.c_base, s.c_cap, s.c_len, s.c_k, s.c_dead, s.arena, row,
                                  self.start, self.data, self.used, PACK_MAX))
        self.live += need

    def arrays(self) -> PackedArrays:
        """The blocks, after packing the keys changed since the last call (all of them the first time, and
        whenever string order codes change: the blocks hold the constants)."""
        s = self.store
        row = self.direct.arrays().row
        n_keys = len(s.key_head)
        s.track_keys = True
        changed = s.changed_keys
        s.changed_keys = []
        strings_version = self.direct.preds.strings.version
        if (not self.built or strings_version != self._strings_version
                or sum(len(c) for c in changed) > n_keys):
            self.start = np.full(n_keys, -1, dtype=np.int64)
            self.used = self.live = 0
            self.data = np.zeros(1, dtype=np.int64)  # sized afresh: blocks of removed subscriptions give back their room
            self._pack(np.arange(n_keys, dtype=np.int64), row)
            self.built = True
            self.rebuilds += 1
            self._strings_version = strings_version
        elif changed:
            self.start = grow(self.start, n_keys, -1)
            keys = np.unique(np.concatenate(changed))
            keys = keys[(keys >= 0) & (keys < n_keys)]
            old = self.start[keys]
            self.live -= int(_block_cells(self.data, old[old >= 0]))
            self._pack(keys, row)
            if self.used - self.live > (self.live >> REPACK_SHIFT) + REPACK_SLACK:
                self.built = False
                return self.arrays()
        return PackedArrays(self.start, self.data, self.data.view(np.float64))

    def stats(self) -> dict:
        packed = int(np.count_nonzero(self.start >= 0))
        return {"packed_keys": packed, "packed_cells": int(self.live), "packed_rebuilds": self.rebuilds}

    def memory_bytes(self) -> int:
        return int(self.start.nbytes + self.data.nbytes)


@njit(cache=True)
def _block_cells(data, starts):
    total = 0
    for s in starts:
        w = s + 1
        for _ in range(data[s]):
            w += 2 + 2 * data[w]
        total += w - s
    return total
