"""Packed lists: each short access-key list of static and dynamic copied into one contiguous block.

A cluster (engine/cluster_store.py) holds the entries of one access key with
the same number ``k`` of columns; a key's list chains one cluster per ``k``.
With sparse, high-dimensional attributes (OpIndex's workload: 1M
subscriptions over 20,000 attributes) the keys are many and their lists
short: an event of 40 attributes reaches about 60 lists of 2.7 clusters and
6.6 entries each, and every cluster costs its bookkeeping (five arrays:
base, capacity, length, columns, next), its first column and its line of
handles -- seven cache misses for two or three entries, most of which fail
their first test.  Those misses, not the predicate bit vector, are most of
the time.

So a list of at most ``PACK_MAX`` entries is also kept *packed*: one block
``[n, (k, handle, column 0 .. column k-1) x n]`` in ``PackedLists.data``, at
``start[key]`` (-1: not packed; its clusters are scanned as usual).  An
event reaching the key reads one or two cache lines, the block's first
columns' bits are prefetched for the whole group of events before any is
tested, and there is no cluster to follow.

The clusters stay the source of truth: every append and removal logs its
keys (``ClusterStore.changed_keys``), and before a batch the changed keys
are packed again at the end of ``data``; the whole of ``data`` is rebuilt
when the blocks left behind outweigh the live ones.  Reordering within a
cluster (sorted runs, compaction, relocation) changes no block, since an
event's matches are sorted at the end.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .idpool import grow
from .probing import GROUP, PHASE1_AHEAD_FIELDS, stage_keys_sparse, stage_lookup
from .scan import ensure_room, finish_event, prefetch, scan_clusters

#: Lists of at most this many entries are packed.
PACK_MAX = 32
#: ``probe[t, 1]`` of a probe whose key is packed (its block starts at ``probe[t, 2]``).
PACKED = -2
LIST_MODES = ("auto", "clusters", "packed")


class PackedArrays(NamedTuple):
    start: np.ndarray  # int64 [keys]: the key's block in ``data`` (-1: not packed)
    data: np.ndarray  # int32: blocks [n, (k, handle, columns...) x n]


@njit(cache=True)
def pack_keys(keys, key_head, c_next, c_base, c_cap, c_len, c_k, arena, start, data, used, pack_max):
    """Pack the lists of ``keys`` at ``data[used:]`` (``start[q]`` = -1 for a list longer than ``pack_max``).

    ``data`` must have room (:func:`packed_size`).  Returns the new ``used``.
    """
    for q in keys:
        c = key_head[q] if q < key_head.shape[0] else -1
        n = 0
        while c >= 0:
            n += c_len[c]
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
                data[w] = k
                data[w + 1] = arena[base + k * cap + j]
                for r in range(k):
                    data[w + 2 + r] = arena[base + r * cap + j]
                w += 2 + k
            c = c_next[c]
        used = w
    return used


@njit(cache=True)
def packed_size(keys, key_head, c_next, c_len, c_k, pack_max):
    """Room :func:`pack_keys` needs for ``keys``."""
    total = 0
    for q in keys:
        c = key_head[q] if q < key_head.shape[0] else -1
        n = 0
        cells = 1
        while c >= 0:
            n += c_len[c]
            cells += c_len[c] * (2 + c_k[c])
            c = c_next[c]
        if n <= pack_max:
            total += cells
    return total


@njit(cache=True, inline="always")
def scan_packed(data, s, bits, out, nout):
    """Append the handles of the block at ``data[s]`` whose columns' bits are all set."""
    n = data[s]
    out = ensure_room(out, nout, n)
    w = s + 1
    for _ in range(n):
        k = data[w]
        ok = True
        for r in range(k):
            if bits[np.uint64(data[w + 2 + r])] == 0:
                ok = False
                break
        if ok:
            out[nout] = data[w + 1]
            nout += 1
        w += 2 + k
    return out, nout


@njit(cache=True)
def packed_heads(probe, n_probe, store, start, data):
    """``probe[t, 1]`` = ``PACKED`` (block at ``probe[t, 2]``), the list's first cluster, or -1; then the first
    reads of each prefetched, and the first column's bits of each packed block's entries."""
    n_pk = start.shape[0]
    for t in range(n_probe):
        q = probe[t, 0]
        if q < 0 or store.key_head[q] < 0:  # (a list hidden by its head, as the catch-all on bitmaps is)
            probe[t, 1] = -1
        elif q < n_pk and start[q] >= 0:
            s = start[q]
            probe[t, 1], probe[t, 2] = PACKED, s
            prefetch(data, s)
            prefetch(data, s + 16)
        else:
            c = store.key_head[q]
            probe[t, 1], probe[t, 2] = c, 0
            if c >= 0:
                prefetch(store.base, c)
                prefetch(store.cap, c)
                prefetch(store.length, c)
                prefetch(store.k, c)
                prefetch(store.next, c)


@njit(cache=True)
def packed_prefetch_bits(probe, n_probe, data, bits):
    """The bit of each packed entry's first column, for every probe of the group (the scans' first reads)."""
    for t in range(n_probe):
        if probe[t, 1] != PACKED:
            continue
        s = probe[t, 2]
        w = s + 1
        for _ in range(data[s]):
            k = data[w]
            if k > 0:
                prefetch(bits, data[w + 2])
            w += 2 + k


@njit(cache=True)
def packed_events(ev, preds, store, runs, access, scratch, packed, handle_id, pf, unfold, lookahead):
    """Static and dynamic over a batch with packed lists: phase 1 and the probes of
    :func:`engine.probing.clustered_events`, then each reached list scanned from its block or its clusters."""
    n_ev = ev.offsets.shape[0] - 1
    bits = preds.bits
    start, data = packed.start, packed.data
    conj_flat = access.conj_keys.ravel()
    sat = np.empty(max(bits.shape[0], 1), dtype=np.int64)
    gsat = np.empty(1024, dtype=np.int64)
    gs_off = np.zeros(GROUP + 1, dtype=np.int64)
    gp_off = np.zeros(GROUP + 1, dtype=np.int64)
    probe = scratch.probe
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    for g0 in range(0, n_ev, GROUP):
        g1 = min(n_ev, g0 + GROUP)
        gsat, probe, n_probe = stage_keys_sparse(ev, g0, g1, preds, access, conj_flat, scratch.eq_of_field,
                                                 store.key_head, sat, gsat, gs_off, gp_off, probe)
        stage_lookup(probe, n_probe, access, store.key_head)
        packed_heads(probe, n_probe, store, start, data)
        packed_prefetch_bits(probe, n_probe, data, bits)
        for e in range(g0, g1):
            i = e - g0
            esat = gsat[gs_off[i]: gs_off[i + 1]]
            ns = esat.shape[0]
            for t in range(ns):
                bits[esat[t]] = 1
            begin = nout
            for t in range(gp_off[i], gp_off[i + 1]):
                c = probe[t, 1]
                if c == PACKED:
                    out, nout = scan_packed(data, probe[t, 2], bits, out, nout)
                elif c >= 0:
                    out, nout = scan_clusters(c, store, runs, bits, out, nout, pf, unfold, lookahead, esat, ns)
            for t in range(ns):
                bits[esat[t]] = 0
            finish_event(out, begin, nout, handle_id)
            out_off[e + 1] = nout
    return out_off, out[:nout].copy()


def use_packed(mode: str, n_fields: int) -> bool:
    """``mode`` "packed" / "clusters" forces the choice; "auto" packs over thousands of fields
    (``PHASE1_AHEAD_FIELDS``, the sparse workloads whose lists are many and short)."""
    if mode == "auto":
        return n_fields >= PHASE1_AHEAD_FIELDS
    return mode == "packed"


class PackedLists:
    """The packed copies of a :class:`~engine.cluster_store.ClusterStore`'s short lists, kept up to date lazily."""

    def __init__(self, store) -> None:
        self.store = store
        self.start = np.full(0, -1, dtype=np.int64)
        self.data = np.zeros(1, dtype=np.int32)
        self.used = 0
        self.live = 0  # cells of the blocks in use (the rest: blocks left behind by repacks)
        self.built = False
        self.rebuilds = 0

    def _pack(self, keys: np.ndarray) -> None:
        s = self.store
        need = int(packed_size(keys, s.key_head, s.c_next, s.c_len, s.c_k, PACK_MAX))
        if self.used + need > len(self.data):
            data = np.empty(max(self.used + need, 2 * len(self.data)), dtype=np.int32)
            data[: self.used] = self.data[: self.used]
            self.data = data
        self.used = int(pack_keys(keys, s.key_head, s.c_next, s.c_base, s.c_cap, s.c_len, s.c_k, s.arena, self.start,
                                  self.data, self.used, PACK_MAX))
        self.live += need

    def arrays(self) -> PackedArrays:
        """The blocks, after packing the keys changed since the last call (all of them the first time)."""
        s = self.store
        n_keys = len(s.key_head)
        s.track_keys = True
        changed = s.changed_keys
        s.changed_keys = []
        if not self.built or sum(len(c) for c in changed) > n_keys:
            self.start = np.full(n_keys, -1, dtype=np.int64)
            self.used = self.live = 0
            self._pack(np.arange(n_keys, dtype=np.int64))
            self.built = True
            self.rebuilds += 1
        elif changed:
            self.start = grow(self.start, n_keys, -1)
            keys = np.unique(np.concatenate(changed))
            keys = keys[keys >= 0]
            old = self.start[keys]
            self.live -= int(self._cells(old[old >= 0]))
            self._pack(keys)
            if self.used > 2 * self.live + (1 << 16):
                self.built = False
                return self.arrays()
        return PackedArrays(self.start, self.data)

    def _cells(self, starts: np.ndarray) -> int:
        return _block_cells(self.data, starts)

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
            w += 2 + data[w]
        total += w - s
    return total
