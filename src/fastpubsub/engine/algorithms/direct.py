"""Predicates tested where an entry needs them, instead of a bit vector filled for every event.

Phase 1 of Figure 2 fills the predicate bit vector with every predicate the
event satisfies, so that a cluster scan tests each column with one byte
read.  Over a few dozen attributes (W0) that is cheap and the scans reuse
each bit many times.  Over tens of thousands of sparse attributes it is the
other way round: 1M subscriptions hold millions of distinct range
predicates, an event of 40 attributes satisfies about 1,500 of them (each
found in its sorted group, written into the bit vector and cleared again),
and the lists the event reaches read a few hundred bits.

Here each event's value on each of its fields goes into a per-field row
(``DirectScratch.slot``: which event, its equality bits, its order code),
and a predicate ``(field << OP_SHIFT | op, constant)`` holds iff its
field's row is the event's and the comparison holds (:func:`check_predicate`):
``=`` on the equality bits, the others on the order codes, as phase 1's
sorted groups decide.  Equality predicates are still looked up once per
pair (:func:`direct_keys`), since the access keys are made of them.
engine/algorithms/packed.py holds the predicates inline in its blocks; clusters outside
them are scanned through a row per predicate id (``DirectPredicates.row``,
:func:`scan_list_direct_into`), from their first entry (sorted runs are not used:
every entry keeps all its columns, so the plain scan is exact).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..structures.hashtable import ht_find2, ht_slot2
from ..structures.predicates import order_holds
from ..structures.sorted_runs import put_live
from ..kernels.probing import KNOWN_KEY, conjunction_rows, grow_rows, repeated_conjunction_rows
from ..kernels.scan import prefetch
from ..semantics import OP_EQ

#: Operator codes packed with the field in ``DirectPredicates.row[:, 0]`` (``field << OP_SHIFT | op``).
OP_SHIFT = 3
#: Pairs ahead whose equality slot and per-field row are prefetched.
PAIRS_AHEAD = 16


class DirectPredicates(NamedTuple):
    """Every predicate id as a row a kernel tests directly (:meth:`DirectTable.arrays`)."""

    row: np.ndarray  # int64 [ids, 2]: (field << OP_SHIFT | op, constant: eqbits for '=', else the order code's bits)
    row_f: np.ndarray  # float64 [ids, 2]: the same memory read as float64 (column 1: the order code)


class DirectScratch(NamedTuple):
    """Per-field rows of the current event (stamp -1 at rest) and the probe rows, kept between batches."""

    slot: np.ndarray  # int64 [fields, 3]: (event index or -1, eqbits, order code bits) of the field's value
    slot_f: np.ndarray  # float64 [fields, 3]: the same memory read as float64
    eq_of_field: np.ndarray  # int64 [fields]: the equality predicate the event satisfies on each field (-1)
    probe: np.ndarray  # int64 [rows, 3]: a row per list a group's events reach


@njit(cache=True, inline="always")
def check_predicate(key, const, const_f, slot, slot_f, e):
    """Whether event ``e`` (its fields' rows in ``slot``) satisfies the predicate ``key`` = ``field << OP_SHIFT | op``
    with constant ``const`` (equality bits) / ``const_f`` (order code)."""
    f = key >> OP_SHIFT
    if slot[f, 0] != e:
        return False  # the event lacks the field: no predicate on it holds
    op = key & 7
    if op == OP_EQ:
        return slot[f, 1] == const
    return order_holds(op, slot_f[f, 2], const_f)


@njit(cache=True, inline="always")
def predicate_holds(p, row, row_f, slot, slot_f, e):
    """Whether event ``e`` satisfies predicate id ``p`` (its row of :class:`DirectPredicates`)."""
    return check_predicate(row[p, 0], row[p, 1], row_f[p, 1], slot, slot_f, e)


@njit(cache=True, inline="always")
def entry_holds(k, arena, base, cap, j, row, row_f, slot, slot_f, e):
    """Entry ``j`` of a cluster: every one of its ``k`` columns' predicates holds for event ``e``."""
    for r in range(k):
        if not predicate_holds(np.int64(arena[np.uint64(base + r * cap + j)]), row, row_f, slot, slot_f, e):
            return False
    return True


@njit(cache=True, inline="always")
def scan_list_direct_into(c, store, row, row_f, slot, slot_f, e, out, nout):
    """Append the handles of the matching entries of cluster ``c`` and the clusters after it in its list (the
    dead entries of sorted prefixes dropped, engine/structures/sorted_runs.py).

    ``out`` is not grown (callable without numba's reference-counting runtime): returns the new count, or -1 when
    ``out`` has no room for a cluster's entries (the caller grows it and scans the event again).
    """
    arena, c_base, c_cap, c_k, c_len, c_next = store.arena, store.base, store.cap, store.k, store.length, store.next
    while c >= 0:
        n = c_len[c]
        if n > 0:
            if nout + n > out.shape[0]:
                return -1
            k, base, cap = c_k[c], c_base[c], c_cap[c]
            line = base + k * cap
            for j in range(n):
                if k > 0 and j + 8 < n:
                    prefetch(row, 2 * np.int64(arena[np.uint64(base + j + 8)]))
                if entry_holds(k, arena, base, cap, j, row, row_f, slot, slot_f, e):
                    nout = put_live(out, nout, arena[np.uint64(line + j)])
        c = c_next[c]
    return nout


@njit(cache=True)
def direct_keys(ev, g0, g1, preds, access, conj_flat, eq_of_field, key_head, n_pf, gp_off, probe):
    """Stage 1: each event's equality predicates (one hash probe per pair) and the lists it reaches.

    A row per reached list in ``probe`` (event ``i`` of the group: rows
    ``gp_off[i]:gp_off[i + 1]``): ``(key, KNOWN_KEY, -)`` for the catch-all,
    the presence lists of its fields and the lists of its single equality
    predicates; ``(p0, p1, p2)`` for each configured conjunction whose fields
    it carries.  ``n_pf``: fields predicates use (others match nothing).
    Returns ``(probe, n_probe)``.
    """
    ev_off, ev_field, ev_eqbits, ev_rep = ev.offsets, ev.field, ev.eqbits, ev.repeats
    tkeys, tvals = preds.table_keys, preds.table_vals
    tk_flat = tkeys.ravel()
    t_mask = tvals.shape[0] - 1
    sch_fields = access.schema_fields
    n_sch = sch_fields.shape[0]
    conj_vals = access.conj_vals
    mask = conj_vals.shape[0] - 1
    pred_key, field_key = access.pred_key, access.field_key
    n_pk, n_fk, n_keys = pred_key.shape[0], field_key.shape[0], key_head.shape[0]
    n_probe = 0
    last = ev_off[g1]
    n_pairs = ev_off[ev_off.shape[0] - 1]
    for j in range(ev_off[g0], min(ev_off[g0] + PAIRS_AHEAD, n_pairs)):
        f = ev_field[j]
        if 0 <= f < n_pf:
            s = ht_slot2(t_mask, f * 6 + 0, ev_eqbits[j])
            prefetch(tvals, s)
            prefetch(tk_flat, 2 * s)
    for e in range(g0, g1):
        lo, hi = ev_off[e], ev_off[e + 1]
        probe = grow_rows(probe, n_probe, n_sch + 2 * (hi - lo) + 1)
        probe[n_probe, 0], probe[n_probe, 1] = 0, KNOWN_KEY  # the catch-all
        if 0 < n_keys:
            n_probe += 1
        for j in range(lo, hi):
            ja = j + PAIRS_AHEAD
            if ja < n_pairs and ja < last + PAIRS_AHEAD:
                fa = ev_field[ja]
                if 0 <= fa < n_pf:
                    s = ht_slot2(t_mask, fa * 6 + 0, ev_eqbits[ja])
                    prefetch(tvals, s)
                    prefetch(tk_flat, 2 * s)
                    if fa < n_fk:
                        prefetch(field_key, fa)
            f = ev_field[j]
            if f < 0 or f >= n_pf:
                continue
            if f < n_fk:
                q = field_key[f]
                if 0 <= q < n_keys:
                    prefetch(key_head, q)
                    probe[n_probe, 0], probe[n_probe, 1] = q, KNOWN_KEY
                    n_probe += 1
            p = ht_find2(tkeys, tvals, f * 6 + 0, ev_eqbits[j])
            if p < 0:
                continue
            eq_of_field[f] = p
            q = pred_key[p] if p < n_pk else -1
            if 0 <= q < n_keys:
                prefetch(key_head, q)
                probe[n_probe, 0], probe[n_probe, 1] = q, KNOWN_KEY
                n_probe += 1
        if ev_rep[e]:
            probe, n_probe = repeated_conjunction_rows(sch_fields, ev_off, ev_field, ev_eqbits, e, tkeys, tvals, mask,
                                                       conj_flat, conj_vals, probe, n_probe)
        else:
            n_probe = conjunction_rows(sch_fields, eq_of_field, mask, conj_flat, conj_vals, probe, n_probe)
        for j in range(lo, hi):
            f = ev_field[j]
            if 0 <= f < n_pf:
                eq_of_field[f] = -1
        gp_off[e - g0 + 1] = n_probe
    return probe, n_probe


class DirectTable:
    """The rows of :class:`DirectPredicates` for a :class:`~engine.structures.predicates.PredicateTable`, rebuilt when it changes.

    The predicate table logs the ids it gives new predicates (new or
    recycled) once this exists (``PredicateTable.assigned``); their rows are
    filled before the next match.  A change of string order codes
    (``strings.version``) fills them all again, vectorised.
    """

    def __init__(self, preds) -> None:
        self.preds = preds
        self.row = np.zeros((1, 2), dtype=np.int64)
        self._strings_version = None
        self.slot = np.full((0, 3), -1, dtype=np.int64)
        self.eq_of_field = np.full(0, -1, dtype=np.int64)
        self.probe = np.empty((64, 3), dtype=np.int64)

    def __getstate__(self) -> dict:
        """Saved structures leave the rows out (rebuilt at the first match after a load)."""
        state = dict(self.__dict__)
        state.update(row=np.zeros((1, 2), dtype=np.int64), _strings_version=None)  # (all filled again at the first match)
        return state

    def arrays(self) -> DirectPredicates:
        """The rows, updated for the ids given new predicates since the last call (all of them the first time and
        when string order codes change)."""
        p = self.preds
        assigned, p.assigned = p.assigned, []
        top = p.n_ids
        if self._strings_version != p.strings.version or assigned is None:
            self.row = np.zeros((max(top + top // 8, 1), 2), dtype=np.int64)  # (room for new ids without a copy)
            self._fill(np.arange(top, dtype=np.int64))
            self._strings_version = p.strings.version
        elif assigned:
            if len(self.row) < top:
                row = np.zeros((max(top, 2 * len(self.row)), 2), dtype=np.int64)
                row[: len(self.row)] = self.row
                self.row = row
            self._fill(np.concatenate(assigned))
        return DirectPredicates(self.row, self.row.view(np.float64))

    def _fill(self, ids: np.ndarray) -> None:
        p = self.preds
        f, o, b = p.field[ids], p.op[ids].astype(np.int64), p.bits_value[ids]
        self.row[ids, 0] = (f << OP_SHIFT) | o
        self.row[ids, 1] = np.where(o == OP_EQ, b, p._codes(f, b).view(np.int64))

    def scratch(self) -> DirectScratch:
        n = max(self.preds.n_fields, 1)
        if len(self.slot) < n:
            slot = np.full((n, 3), -1, dtype=np.int64)
            self.slot = slot
            self.eq_of_field = np.full(n, -1, dtype=np.int64)
        return DirectScratch(self.slot, self.slot.view(np.float64), self.eq_of_field, self.probe)

    def memory_bytes(self) -> int:
        return int(self.row.nbytes + self.slot.nbytes + self.eq_of_field.nbytes)
