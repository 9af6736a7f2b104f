"""The counting algorithm (section 5): the classic baseline the paper compares against.

Each predicate keeps the list of subscriptions containing it; an event
increments a hit counter for every subscription on the list of every
satisfied predicate, and a subscription matches when its counter reaches its
number of distinct predicates.  Phase 1 is the shared predicate phase.

Per event this touches every (subscription, satisfied predicate) pair, at
random positions of the counter array, where propagation reads one
contiguous column of the clusters whose access predicate holds and rarely
goes further.  The lists live in a :class:`~engine.structures.cluster_store.ClusterStore`
(key = predicate id, one column = the owning subscription's handle), so
insertion and O(size) deletion are the cluster layer's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..columnar import csr_positions
from ..structures.cluster_store import ClusterStore
from ..structures.idpool import grow
from .index import IndexContext
from ..structures.predicates import PredicateTable, satisfied_predicates
from ..kernels.scan import doubled, finish_events


class CountingArrays(NamedTuple):
    """Counting's per-subscription arrays, indexed by handle."""

    need: np.ndarray  # int32: distinct predicates of the subscription (a match when the counter reaches it)
    count: np.ndarray  # int32: hits so far in this event (all zero between events)


@njit(cache=True, inline="always")
def count_hits(sat, ns, key_head, c_next, c_base, c_len, arena, need, cnt, out, nout, reset):
    """A hit counted for every subscription on the list of every satisfied predicate ``sat[:ns]``, those whose
    counter reaches their number of predicates appended to ``out``; returns the new count, or -1 when ``out`` is
    full.  With ``reset``: their counters set back to 0 instead (``out`` untouched)."""
    n_keys = key_head.shape[0]
    for t in range(ns):
        p = sat[t]
        c = key_head[p] if p < n_keys else -1
        while c >= 0:
            b, n = c_base[c], c_len[c]
            for j in range(b, b + n):
                h = arena[j]
                if reset:
                    cnt[h] = 0
                    continue
                v = cnt[h] + 1
                cnt[h] = v
                if v == need[h]:
                    if nout == out.shape[0]:
                        return -1
                    out[nout] = h
                    nout += 1
            c = c_next[c]
    return nout


@njit(cache=True, _nrt=False)
def counting_into(e0, ev, preds, store, counting, sat, out, nout, out_off):
    """Events ``e0:`` of :func:`counting_events` (matched handles, not yet ids), without growing ``out``.

    Per event: phase 1 into ``sat``, a hit counted for every subscription on
    the list of every satisfied predicate (``store``: the per-predicate lists,
    key = predicate id, one column = the handle), the counters touched reset.
    Returns ``(e, nout)``: ``e`` = the number of events when done, else the
    event for which ``out`` had no room, its counters reset and its handles
    dropped.  Without numba's reference-counting runtime (docs/design/engine.md,
    "Kernel contract"): with it, ``out`` reassigned by a growth check and the
    containers a call per event unpacks cost a pair of atomic operations each.
    """
    ev_off, ev_field, ev_code, ev_eqbits = ev.offsets, ev.field, ev.code, ev.eqbits
    ev_rep, p_bits = ev.repeats, preds.bits
    tkeys, tvals, group_of = preds.table_keys, preds.table_vals, preds.group_of
    g_start, g_end, g_vals, g_pids = preds.g_start, preds.g_end, preds.g_vals, preds.g_pids
    key_head, c_next, c_base, c_len, arena = store.key_head, store.next, store.base, store.length, store.arena
    need, cnt = counting.need, counting.count
    n_ev = ev_off.shape[0] - 1
    for i in range(e0, n_ev):
        ns = satisfied_predicates(ev_off[i], ev_off[i + 1], ev_field, ev_code, ev_eqbits, tkeys, tvals, group_of,
                                  g_start, g_end, g_vals, g_pids, sat, ev_rep[i], p_bits)
        start = nout
        nout = count_hits(sat, ns, key_head, c_next, c_base, c_len, arena, need, cnt, out, nout, False)
        count_hits(sat, ns, key_head, c_next, c_base, c_len, arena, need, cnt, out, 0, True)
        if nout < 0:
            return i, start
        out_off[i + 1] = nout
    return n_ev, nout


@njit(cache=True)
def counting_events(ev, preds, store, counting, handle_id):
    """Counting over a batch of events (section 5): :func:`counting_into`, ``out`` grown when it stops."""
    n_ev = ev.offsets.shape[0] - 1
    sat = np.empty(max(preds.bits.shape[0], 1), dtype=np.int64)
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    e = 0
    while True:
        e1, nout = counting_into(e, ev, preds, store, counting, sat, out, nout, out_off)
        finish_events(out, out_off, e, e1, handle_id, nout)
        if e1 >= n_ev:
            return out_off, out[:nout].copy()
        e = e1
        out = doubled(out, nout)


class CountingIndex:
    """Per-predicate subscription lists plus per-subscription hit counters."""

    def __init__(self, preds: PredicateTable) -> None:
        self.preds = preds
        self.store = ClusterStore()
        self.need = np.zeros(0, dtype=np.int32)  # distinct predicates per handle
        self.cnt = np.zeros(0, dtype=np.int32)
        self.first = np.zeros(0, dtype=np.int64)  # handle -> first of its block of entry ids
        self.entry_pred = np.zeros(0, dtype=np.int64)  # entry id -> predicate id
        self.n_entries = 0  # bump allocator of entry blocks
        self.free_blocks: dict[int, list[int]] = {}  # block size -> starts, reused by single inserts

    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """Append each subscription's handle to the list of each of its predicates."""
        self.preds.refcount[: self.preds.n_ids] += np.bincount(pids, minlength=self.preds.n_ids)
        sizes = np.diff(off)
        blocks = self.free_blocks.get(int(sizes[0])) if len(handles) == 1 else None
        if blocks:
            firsts = np.array([blocks.pop()], dtype=np.int64)
        else:
            firsts = self.n_entries + off[:-1]
            self.n_entries += int(off[-1])
        entries, _ = csr_positions(firsts, sizes)
        top = int(handles.max()) + 1
        self.need, self.cnt, self.first = grow(self.need, top, 0), grow(self.cnt, top, 0), grow(self.first, top, 0)
        self.need[handles] = sizes
        self.first[handles] = firsts
        self.entry_pred = grow(self.entry_pred, int(entries.max()) + 1, -1)
        self.entry_pred[entries] = pids
        clusters = self.store.clusters_for(pids, np.ones(len(pids), dtype=np.int64))
        self.store.append(clusters, entries, np.repeat(handles, sizes), np.arange(len(pids) + 1, dtype=np.int64))
        self.store.trim()

    def remove_bulk(self, handles: np.ndarray) -> None:
        """Take the subscriptions off their predicates' lists; release the lists of predicates that die."""
        for p in self.preds.decref(self._unlist(handles)).tolist():
            self.store.release_key(p)

    def _unlist(self, handles: np.ndarray) -> np.ndarray:
        sizes = self.need[handles].astype(np.int64)
        firsts = self.first[handles]
        entries, _ = csr_positions(firsts, sizes)
        pids = self.entry_pred[entries]
        self.store.remove(entries)
        self.entry_pred[entries] = -1
        for f, s in zip(firsts.tolist(), sizes.tolist()):
            self.free_blocks.setdefault(s, []).append(f)
        self.need[handles] = 0
        return pids

    def match_encoded(self, events, batch, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Matches of encoded events (:func:`counting_events`)."""
        return counting_events(events, self.preds.arrays(), self.store.arrays(), self.arrays(), handle_id)

    def arrays(self) -> CountingArrays:
        return CountingArrays(self.need, self.cnt)

    def stats(self) -> dict:
        s = self.store.stats()
        s["memory_bytes"] += int(self.need.nbytes + self.cnt.nbytes + self.first.nbytes + self.entry_pred.nbytes)
        return s


def make_counting(ctx: IndexContext, **options) -> CountingIndex:
    """``Matcher("counting")``: no options."""
    if options.pop("runs", 0):
        raise ValueError("runs (sorted clusters) is an option of static and dynamic, not of counting")
    if options:
        raise ValueError(f"counting has no scan options ({', '.join(options)})")
    return CountingIndex(ctx.preds)
