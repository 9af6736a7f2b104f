"""The bit-parallel path: subscriptions decided 64 at a time by bitmaps over value cells.

A subscription made only of ranges has no equality to be filed under, so the
clustered matchers check it for every event, and phase 1 lists every range
constant an event value satisfies (half of them, on a uniform workload).
Interval matchers (HEM, TAMA, REIN) instead precompute, per attribute and
*cell* of its values, which subscriptions an event in that cell cannot
match.  Here:

* every subscription takes a *slot* (a bit position; freed slots are reused,
  lowest first, so the bitmaps stay dense) and is held by its predicate ids,
  or, when *range-only* (every predicate ``< <= > >=`` a number), by one
  closed interval of doubles per field (:meth:`RangeBitmaps.add_ranges`,
  filed from the batch's columns: its predicates are never interned);
* per numeric *field* it constrains (engine/frontend/encoding.py), ``cells`` value
  cells -- boundaries at quantiles of the predicates' constants on the
  field -- and per (field, cell) a bitmap of the slots whose predicates on
  the field fail for *every* value of the cell (their interval misses it);
* per constrained field of any kind, a *missing* bitmap: the slots with a
  predicate on the field, which fail when an event lacks it (or carries NaN
  or a value of another kind: another field);
* row 0 marks the slots not in use.

An event ORs one row per constrained field: the cell row of its value, or
the missing row.  A zero bit left is a *survivor*: a true match, or a
subscription with a constant inside the event's cell on some field.
Survivors are checked exactly, predicate by predicate (or interval by
interval), against the event's values (the same comparisons phase 1 makes),
so the result is exact for
every operator: ``!=``, strings and booleans are only in the missing rows
and left to that check.  No phase 1: the predicates this path holds are
kept out of the inequality groups (``PredicateTable.hold_off_path``).

Events are taken in chunks of ``EVENT_CHUNK``, and the bitmaps in blocks of
words (``block``: as many as keep a block of every row within
``BLOCK_BUDGET``, 256 words for 20 fields and 16 cells): the block stays in
the L2 cache while each event of the chunk ORs its rows, so memory is read
once per chunk instead of once per event.  A row takes an odd number of cache lines (:func:`row_words`): with
a power-of-two stride every row's block would fall in the same cache sets.  Memory: ``(fields x (cells + 1) + 1) x slots / 8`` bytes (20
fields, 16 cells, 1M subscriptions: 42 MB) plus the predicate ids (4 bytes each) or intervals (20 bytes each).

:class:`RangeBitmaps` is the structure; :class:`BitmapIndex` is
``Matcher("bitmaps")`` (every subscription on this path), and static and
dynamic use a :class:`RangeBitmaps` for their catch-all list when
``engine.costmodel.bitmaps`` prices it below the scan.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..columnar import csr_positions
from ..frontend.encoding import N_KINDS
from ..structures.idpool import IdPool, grow, lookup
from .index import IndexContext
from ..structures.predicates import PredicateTable, order_holds
from ..kernels.scan import doubled, finish_events
from ..semantics import KIND_BOOL, KIND_NUMBER, KIND_STRING, OP_EQ, OP_GE, OP_GT, OP_LE, OP_LT, OP_NE

#: Value cells per numeric field (boundaries at quantiles of its predicates' constants).
CELLS = 16
#: Bytes of rows a block may span (every row's block stays in a 1 MB L2 cache while a chunk of events ORs it):
#: a block is the largest power of two of words, 16 to 256, within this budget.
BLOCK_BUDGET = 768 * 1024
#: Events whose rows are ORed block by block together.
EVENT_CHUNK = 1024
#: Constants sampled per field to place the cell boundaries.
BOUNDARY_SAMPLE = 65536
#: When subscriptions have doubled, the cells are placed again unless the new constants fill no cell beyond this
#: many times its share.
REPLACE_SHARE = 2.0
#: New slots (every k-th) whose constants are compared with the cells placed before.
FIT_SAMPLE = 16384
#: The row of slots not in use.
DEAD_ROW = 0
ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


class BitmapArrays(NamedTuple):
    """The bit-parallel structure as its kernels read it (:meth:`RangeBitmaps.arrays`)."""

    rows: np.ndarray  # uint64 [rows, words]: bit s of a row = slot s (row 0: slots not in use)
    field_slot: np.ndarray  # int64 [fields]: field -> constrained-field index fa (-1: no subscription constrains it)
    miss_row: np.ndarray  # int64 [fa]: row of slots constraining the field (they fail when an event lacks it)
    cell_base: np.ndarray  # int64 [fa]: row of the field's first cell (-1: no cells, a field not of numbers)
    bounds: np.ndarray  # float64 [fa, cells - 1]: cell boundaries, ascending, +inf padded; cell c = [b[c-1], b[c])
    slot_start: np.ndarray  # int64 [slots]: the slot's predicate ids are sub_pids[start:start + len]
    slot_len: np.ndarray  # int64 [slots]
    slot_handle: np.ndarray  # int64 [slots]: the subscription's handle
    sub_pids: np.ndarray  # int32: predicate ids of the slots
    pfield: np.ndarray  # int64 [ids]: field of each predicate id (PredicateTable.field)
    pop: np.ndarray  # int8 [ids]: operator code (PredicateTable.op)
    pbits: np.ndarray  # int64 [ids]: the constant's equality bits (PredicateTable.bits_value)
    pnum: np.ndarray  # float64 [ids]: pbits viewed as doubles (the constant of a number predicate)
    scodes: np.ndarray  # int64 [strings]: order code of each string id (StringDictionary.codes)
    iv_start: np.ndarray  # int64 [slots]: the slot's intervals are iv_*[start:start + len] (range-only slots)
    iv_len: np.ndarray  # int64 [slots]
    iv_fa: np.ndarray  # int32: constrained-field index of each interval
    iv_lo: np.ndarray  # float64: least double the interval holds (closed: open ends moved inwards)
    iv_hi: np.ndarray  # float64: greatest double (lo > hi: it holds none)


@njit(cache=True, inline="always")
def tighten_low(lo, lo_open, v, is_open):
    if v > lo:
        return v, is_open
    if v == lo:
        return lo, lo_open or is_open
    return lo, lo_open


@njit(cache=True, inline="always")
def tighten_high(hi, hi_open, v, is_open):
    if v < hi:
        return v, is_open
    if v == hi:
        return hi, hi_open or is_open
    return hi, hi_open


@njit(cache=True, inline="always")
def constant_code(p, pfield, pbits, pnum, scodes):
    """The order code of predicate ``p``'s constant (``PredicateTable._codes``): read, not stored per predicate."""
    kind = pfield[p] % N_KINDS
    if kind == KIND_STRING:
        return np.float64(scodes[pbits[p]])
    if kind == KIND_BOOL:
        return np.float64(pbits[p])
    return pnum[p]


@njit(cache=True, inline="always")
def tighten(op, v, lo, lo_open, hi, hi_open):
    """The interval ``(lo, lo_open, hi, hi_open)`` narrowed by one predicate ``x op v``.

    ``!=`` is left out (the exact check decides it): the interval holds every
    value the predicates accept, which is all soundness needs.
    """
    if op == OP_EQ or op == OP_GE:  # = or >=
        lo, lo_open = tighten_low(lo, lo_open, v, False)
    if op == OP_EQ or op == OP_LE:  # = or <=
        hi, hi_open = tighten_high(hi, hi_open, v, False)
    if op == OP_GT:  # >
        lo, lo_open = tighten_low(lo, lo_open, v, True)
    if op == OP_LT:  # <
        hi, hi_open = tighten_high(hi, hi_open, v, True)
    return lo, lo_open, hi, hi_open


@njit(cache=True, inline="always")
def interval_doubles(lo, lo_open, hi, hi_open):
    """The least and greatest doubles of an interval (an open end becomes the next double inwards), and
    whether it holds none at all (``x > inf``, ``x < -inf``)."""
    if (lo_open and lo == np.inf) or (hi_open and hi == -np.inf):
        return lo, hi, True
    xl = np.nextafter(lo, np.inf) if lo_open else lo
    xh = np.nextafter(hi, -np.inf) if hi_open else hi
    return xl, xh, False


def cell_tops(bounds: np.ndarray) -> np.ndarray:
    """Per field and cell, the greatest double of the cell: ``[a, b)`` tops out just below ``b``, the last at inf."""
    tops = np.full((bounds.shape[0], bounds.shape[1] + 1), np.inf)
    tops[:, :-1] = np.nextafter(bounds, -np.inf)
    return tops


@njit(cache=True)
def mark_slots(slots, on, bm, tops):
    """Set (``on``) or clear the bits of ``slots`` in every row of the fields their predicates constrain.

    Setting clears the slot's bit in the dead row, clearing sets it.  A cell's
    bit is set iff no double of the cell (``[bounds[c-1], tops[c]]``) lies in
    the interval the slot's predicates (and intervals) on the field accept:
    exact over doubles, as the comparisons of the exact check are.  One pass
    over the slot's predicates and intervals gathers every field's interval.
    """
    rows, field_slot, miss_row, cell_base, bounds = bm.rows, bm.field_slot, bm.miss_row, bm.cell_base, bm.bounds
    slot_start, slot_len, sub_pids, pfield, pop = bm.slot_start, bm.slot_len, bm.sub_pids, bm.pfield, bm.pop
    n_cells = bounds.shape[1] + 1
    n_fa = miss_row.shape[0]
    stamp = np.full(n_fa, -1, dtype=np.int64)
    lo = np.empty(n_fa, dtype=np.float64)
    hi = np.empty(n_fa, dtype=np.float64)
    lo_open = np.zeros(n_fa, dtype=np.bool_)
    hi_open = np.zeros(n_fa, dtype=np.bool_)
    touched = np.empty(n_fa, dtype=np.int64)
    for s in slots:
        w = s >> 6
        bit = np.uint64(1) << np.uint64(s & 63)
        if on:
            rows[DEAD_ROW, w] &= ~bit
        else:
            rows[DEAD_ROW, w] |= bit
        n_touched = 0
        for q in range(slot_start[s], slot_start[s] + slot_len[s]):
            p = sub_pids[q]
            fa = field_slot[pfield[p]]
            if stamp[fa] != s:
                stamp[fa] = s
                touched[n_touched] = fa
                n_touched += 1
                lo[fa], lo_open[fa], hi[fa], hi_open[fa] = -np.inf, False, np.inf, False
            v = constant_code(p, pfield, bm.pbits, bm.pnum, bm.scodes)
            lo[fa], lo_open[fa], hi[fa], hi_open[fa] = tighten(pop[p], v, lo[fa], lo_open[fa], hi[fa], hi_open[fa])
        for q in range(bm.iv_start[s], bm.iv_start[s] + bm.iv_len[s]):
            fa = bm.iv_fa[q]
            if stamp[fa] != s:
                stamp[fa] = s
                touched[n_touched] = fa
                n_touched += 1
                lo[fa], lo_open[fa], hi[fa], hi_open[fa] = -np.inf, False, np.inf, False
            lo[fa], lo_open[fa] = tighten_low(lo[fa], lo_open[fa], bm.iv_lo[q], False)
            hi[fa], hi_open[fa] = tighten_high(hi[fa], hi_open[fa], bm.iv_hi[q], False)
        for t in range(n_touched):
            fa = touched[t]
            if on:
                rows[miss_row[fa], w] |= bit
            else:
                rows[miss_row[fa], w] &= ~bit
            cb = cell_base[fa]
            if cb < 0:
                continue
            if not on:
                for c in range(n_cells):
                    rows[cb + c, w] &= ~bit
                continue
            xl, xh, empty = interval_doubles(lo[fa], lo_open[fa], hi[fa], hi_open[fa])
            for c in range(n_cells):
                a = -np.inf if c == 0 else bounds[fa, c - 1]
                if empty or max(xl, a) > min(xh, tops[fa, c]):
                    rows[cb + c, w] |= bit
        for t in range(n_touched):
            stamp[touched[t]] = -1  # (a slot listed twice starts afresh)


@njit(cache=True)
def fold_intervals(off, rows, field, op, value):
    """Range-only rows ``rows`` (of predicates ``x < <= > >= number`` in CSR) as one closed interval of doubles per
    row and field: ``(ioff, ifield, ilo, ihi)`` in CSR over ``rows``, fields in order of first appearance; an
    interval that holds no double is ``[inf, -inf]``.  ``x > v`` holds exactly the doubles of
    ``x >= nextafter(v, inf)`` (NaN none of either), so the check ``lo <= x <= hi`` decides what the predicates
    decide."""
    n = rows.shape[0]
    size = 0
    for r in rows:
        size += off[r + 1] - off[r]
    ioff = np.zeros(n + 1, dtype=np.int64)
    ifield = np.empty(size, dtype=np.int64)
    ilo = np.empty(size, dtype=np.float64)
    ihi = np.empty(size, dtype=np.float64)
    k = 0
    for i in range(n):
        r = rows[i]
        k0 = k
        for j in range(off[r], off[r + 1]):
            t = k0
            while t < k and ifield[t] != field[j]:
                t += 1
            if t == k:
                ifield[k], ilo[k], ihi[k] = field[j], -np.inf, np.inf
                k += 1
            # open ends are kept as the next double inwards (always closed from here on)
            lo_, lo_open, hi_, hi_open = tighten(op[j], value[j], ilo[t], False, ihi[t], False)
            xl, xh, empty = interval_doubles(lo_, lo_open, hi_, hi_open)
            if empty or xl > xh:
                xl, xh = np.inf, -np.inf
            ilo[t], ihi[t] = xl, xh
        ioff[i + 1] = k
    return ioff, ifield[:k].copy(), ilo[:k].copy(), ihi[:k].copy()


@njit(cache=True)
def range_only_rows(off, field, op, n_kinds, kind_number):
    """Rows (CSR) of at least one predicate, every one an order comparison (``< <= > >=``) with a number."""
    n = off.shape[0] - 1
    out = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        ok = off[i + 1] > off[i]
        for j in range(off[i], off[i + 1]):
            if op[j] < 2 or field[j] % n_kinds != kind_number:
                ok = False
                break
        out[i] = ok
    return out


@njit(cache=True, inline="always")
def predicate_holds(op, code, eqbits, c, cbits):
    """The comparison of phase 1 for one present value: ``value op constant``."""
    if op == OP_EQ:
        return eqbits == cbits
    if op == OP_NE:
        return eqbits != cbits
    return order_holds(op, code, c)


@njit(cache=True, inline="always")
def mark_pairs(ev_off, ev_field, e, field_slot, pair, clear):
    """``pair[field_slot[f]]``: event ``e``'s pair on each field ``f`` the structure constrains (-1 with ``clear``)."""
    n_fields = field_slot.shape[0]
    for j in range(ev_off[e], ev_off[e + 1]):
        f = ev_field[j]
        if 0 <= f < n_fields and field_slot[f] >= 0:
            pair[field_slot[f]] = -1 if clear else j


@njit(cache=True)
def bitmap_events(ev, bm, handle_id, n_words, block_words, chunk):
    """Match a batch of events (:class:`~engine.frontend.encoding.EventArrays`) on the bit-parallel structure ``bm``.

    Per chunk of events: the survivors of the bitmaps (:func:`bitmap_survivors_into`), then each survivor's
    predicates checked against its event's values (:func:`bitmap_check_into`).  Both stop when an array they
    fill has no room: it is grown here and the step resumed where it stopped (the survivors from the block that
    stopped, the check from the event), so no block is ORed twice.  Returns CSR (ids ascending).
    """
    flat = bm.rows.ravel()
    n_ev = ev.offsets.shape[0] - 1
    n_fa = bm.miss_row.shape[0]
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    erow = np.empty((chunk, max(n_fa, 1)), dtype=np.int64)
    ecount = np.zeros(chunk, dtype=np.int64)
    pair = np.full(max(n_fa, 1), -1, dtype=np.int64)  # fa -> the current event's pair on the field (-1: none)
    acc = np.empty(block_words, dtype=np.uint64)
    sv_e = np.empty(1024, dtype=np.int64)
    sv_s = np.empty(1024, dtype=np.int64)
    order = np.empty(1024, dtype=np.int64)
    sv_off = np.zeros(chunk + 1, dtype=np.int64)
    fill = np.zeros(chunk + 1, dtype=np.int64)
    for c0 in range(0, n_ev, chunk):
        c1 = min(n_ev, c0 + chunk)
        event_rows(c0, c1, ev, bm, erow, ecount, pair)
        w0, nsv = bitmap_survivors_into(c1 - c0, flat, bm.rows.shape[1], n_words, block_words, erow, ecount, acc,
                                        sv_e, sv_s, 0, 0)
        while w0 < n_words:
            sv_e, sv_s = doubled(sv_e, nsv), doubled(sv_s, nsv)
            w0, nsv = bitmap_survivors_into(c1 - c0, flat, bm.rows.shape[1], n_words, block_words, erow, ecount, acc,
                                            sv_e, sv_s, w0, nsv)
        if order.shape[0] < nsv:
            order = np.empty(sv_e.shape[0], dtype=np.int64)
        group_survivors(c1 - c0, nsv, sv_e, sv_s, order, sv_off, fill)
        e = c0
        while True:
            e1, nout = bitmap_check_into(e, c0, c1, ev, bm, order, sv_off, pair, out, nout, out_off)
            finish_events(out, out_off, e, e1, handle_id, nout)
            if e1 >= c1:
                break
            e = e1
            out = doubled(out, nout)
    return out_off, out[:nout].copy()


@njit(cache=True, _nrt=False)
def event_rows(c0, c1, ev, bm, erow, ecount, pair):
    """Per event ``c0 + i`` of a chunk, the rows it ORs (``erow[i, :ecount[i]]``): per constrained field, the row
    of the cell its value falls in, or the missing row when it lacks the field."""
    n_fa = bm.miss_row.shape[0]
    miss_row, field_slot, cell_base, bounds = bm.miss_row, bm.field_slot, bm.cell_base, bm.bounds
    n_bounds = bounds.shape[1]
    ev_off, ev_field, ev_code, ev_rep = ev.offsets, ev.field, ev.code, ev.repeats
    for i in range(c1 - c0):
        e = c0 + i
        mark_pairs(ev_off, ev_field, e, field_slot, pair, False)
        n = 0
        for fa in range(n_fa):
            j = pair[fa]
            if j < 0:
                erow[i, n] = miss_row[fa]
                n += 1
            elif cell_base[fa] >= 0 and not ev_rep[e]:  # (several values of a field: no cell rules a slot out,
                # the survivors are checked value by value in bitmap_check_into)
                # the cell: how many bounds are <= the value (np.searchsorted, side="right": NaN after all)
                x = ev_code[j]
                lo, hi = (0, n_bounds) if x == x else (n_bounds, n_bounds)
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if bounds[fa, mid] <= x:
                        lo = mid + 1
                    else:
                        hi = mid
                erow[i, n] = cell_base[fa] + lo
                n += 1
            pair[fa] = -1
        ecount[i] = n


@njit(cache=True, _nrt=False)
def bitmap_survivors_into(m, flat, stride, n_words, block_words, erow, ecount, acc, sv_e, sv_s, w_from, nsv):
    """The survivors of a chunk's ``m`` events (rows from :func:`event_rows`): slots whose bits no row of the
    event sets, as (event, slot) pairs appended to ``sv_e``, ``sv_s`` after the ``nsv`` already there.

    Block by block of ``block_words`` words from word ``w_from``, every event's rows ORed into one block
    accumulator and its zero bits collected.  Returns ``(w, nsv)``: ``w >= n_words`` when every block is done,
    else the first word of the block that found ``sv_e``, ``sv_s`` full, and ``nsv`` the survivors of the blocks
    before it (the caller grows the arrays and resumes from ``w``).  Without numba's reference-counting runtime
    (docs/design/engine.md, "Kernel contract").
    """
    stride = np.uint64(stride)
    for w0 in range(w_from, n_words, block_words):
        start = nsv
        bw = np.uint64(min(n_words, w0 + block_words) - w0)
        for i in range(m):
            # unsigned indices into the flat rows: the loops vectorise (signed ones add wrap-around code)
            b = np.uint64(DEAD_ROW) * stride + np.uint64(w0)
            for w in range(bw):
                acc[w] = flat[b + w]
            for t in range(ecount[i]):
                b = np.uint64(erow[i, t]) * stride + np.uint64(w0)
                for w in range(bw):
                    acc[w] |= flat[b + w]
            every = ALL_ONES
            for w in range(bw):
                every &= acc[w]
            if every == ALL_ONES:
                continue  # no survivor in the block (the common case)
            for w in range(bw):
                x = ~acc[w]
                if x == 0:
                    continue
                base = (w0 + np.int64(w)) * 64
                for b in range(64):
                    if (x >> np.uint64(b)) & np.uint64(1):
                        if nsv == sv_e.shape[0]:
                            return w0, start
                        sv_e[nsv] = i
                        sv_s[nsv] = base + b
                        nsv += 1
    return n_words, nsv


@njit(cache=True, _nrt=False)
def group_survivors(m, nsv, sv_e, sv_s, order, sv_off, fill):
    """The ``nsv`` survivors grouped by event, ascending slots, in ``order[sv_off[i]:sv_off[i + 1]]`` (a counting
    sort: the survivors come in ascending slots)."""
    for i in range(m + 1):
        sv_off[i] = 0
    for h in range(nsv):
        sv_off[sv_e[h] + 1] += 1
    for i in range(m):
        sv_off[i + 1] += sv_off[i]
    for i in range(m):
        fill[i] = sv_off[i]
    for h in range(nsv):
        order[fill[sv_e[h]]] = sv_s[h]
        fill[sv_e[h]] += 1


@njit(cache=True, _nrt=False)
def bitmap_check_into(e0, c0, c1, ev, bm, order, sv_off, pair, out, nout, out_off):
    """Events ``e0:c1`` of a chunk starting at ``c0``: each survivor's predicates checked against the event's values
    (matched handles, not yet ids), without growing ``out``.

    Returns ``(e, nout)``: ``e = c1`` when done, else the event for which ``out`` had no room for its survivors.
    """
    field_slot, slot_start, slot_len, slot_handle = bm.field_slot, bm.slot_start, bm.slot_len, bm.slot_handle
    sub_pids, pfield, pop, pbits, pnum, scodes = bm.sub_pids, bm.pfield, bm.pop, bm.pbits, bm.pnum, bm.scodes
    iv_start, iv_len, iv_fa, iv_lo, iv_hi = bm.iv_start, bm.iv_len, bm.iv_fa, bm.iv_lo, bm.iv_hi
    ev_off, ev_field, ev_code, ev_eqbits, ev_rep = ev.offsets, ev.field, ev.code, ev.eqbits, ev.repeats
    for e in range(e0, c1):
        i = e - c0
        if nout + sv_off[i + 1] - sv_off[i] > out.shape[0]:
            return e, nout
        mark_pairs(ev_off, ev_field, e, field_slot, pair, False)
        for h in range(sv_off[i], sv_off[i + 1]):
            s = order[h]
            if ev_rep[e]:
                if repeated_holds(s, e, ev, bm):
                    out[nout] = slot_handle[s]
                    nout += 1
                continue
            ok = True
            for q in range(slot_start[s], slot_start[s] + slot_len[s]):
                p = sub_pids[q]
                j = pair[field_slot[pfield[p]]]
                if j < 0 or not predicate_holds(pop[p], ev_code[j], ev_eqbits[j],
                                                         constant_code(p, pfield, pbits, pnum, scodes), pbits[p]):
                    ok = False
                    break
            for q in range(iv_start[s], iv_start[s] + iv_len[s]):
                if not ok:
                    break
                j = pair[iv_fa[q]]
                ok = j >= 0 and iv_lo[q] <= ev_code[j] and ev_code[j] <= iv_hi[q]  # (NaN: false)
            if ok:
                out[nout] = slot_handle[s]
                nout += 1
        mark_pairs(ev_off, ev_field, e, field_slot, pair, True)
        out_off[e + 1] = nout
    return c1, nout


@njit(cache=True, _nrt=False)
def repeated_holds(s, e, ev, bm):
    """Whether slot ``s`` holds for event ``e``, which carries some field several times: each predicate is met by any
    value of its field, and each interval's bounds each by any value (the interval is the conjunction of the
    slot's comparisons on the field, engine/semantics.py)."""
    field_slot, slot_start, slot_len = bm.field_slot, bm.slot_start, bm.slot_len
    sub_pids, pfield, pop, pbits, pnum, scodes = bm.sub_pids, bm.pfield, bm.pop, bm.pbits, bm.pnum, bm.scodes
    iv_start, iv_len, iv_fa, iv_lo, iv_hi = bm.iv_start, bm.iv_len, bm.iv_fa, bm.iv_lo, bm.iv_hi
    ev_off, ev_field, ev_code, ev_eqbits = ev.offsets, ev.field, ev.code, ev.eqbits
    n_fields = field_slot.shape[0]
    for q in range(slot_start[s], slot_start[s] + slot_len[s]):
        p = sub_pids[q]
        c = constant_code(p, pfield, pbits, pnum, scodes)
        found = False
        for j in range(ev_off[e], ev_off[e + 1]):
            if ev_field[j] == pfield[p] and predicate_holds(pop[p], ev_code[j], ev_eqbits[j], c, pbits[p]):
                found = True
                break
        if not found:
            return False
    for q in range(iv_start[s], iv_start[s] + iv_len[s]):
        above = below = False
        for j in range(ev_off[e], ev_off[e + 1]):
            f = ev_field[j]
            if 0 <= f < n_fields and field_slot[f] == iv_fa[q]:
                x = ev_code[j]
                above = above or iv_lo[q] <= x  # (NaN: neither)
                below = below or x <= iv_hi[q]
        if not (above and below):
            return False
    return True


@njit(cache=True, inline="always")
def sample_one(v, fa, count, quota, stride, at, fill, codes):
    """Count constant ``v`` of field ``fa`` (first pass: ``fill`` empty), or take it (``codes[fill[fa]]``) if its
    place ``at[fa]`` in the field's permutation is below ``quota[fa]`` and step the place (:func:`field_samples`)."""
    if fill.shape[0] == 0:
        count[fa] += 1
        return
    if at[fa] < quota[fa]:
        codes[fill[fa]] = v
        fill[fa] += 1
    at[fa] += stride[fa]
    if at[fa] >= count[fa]:
        at[fa] -= count[fa]


@njit(cache=True)
def golden_stride(n):
    """The least integer from ``n / phi`` up that is coprime with ``n`` (1 for ``n <= 2``): ``i -> i * stride mod n``
    permutes ``0..n-1``, and its first values spread as a golden-ratio (Weyl) sequence does."""
    if n <= 2:
        return 1
    a = np.int64(n * 0.6180339887498949)
    while True:
        x, y = a, n
        while y:
            x, y = y, x % y
        if x == 1:
            return a
        a += 1


@njit(cache=True)
def field_samples(slots, bm, n_fa, sample):
    """Per constrained field, ``sample`` to ``2 * sample`` of the constants the slots' predicates and finite
    interval ends on it hold (all of them if fewer; ``!=`` ones bound nothing and are left out), in slot order, as
    CSR over the field index.  Two passes (count, then take), no sort of the predicate ids.

    Of a field's ``n`` constants it takes ``ceil(n / k)`` (``k = n // sample``): the ``i``-th (in slot order)
    when ``i * golden_stride(n) mod n`` is below that number.  Every ``k``-th one would alias with any pattern
    of the constants whose period shares a factor with ``k`` (an interval's two ends alternate: at ``k`` even
    it takes only lower ends, and the cells miss the upper half of the values); for any period dividing ``n``
    this takes each phase in equal numbers (within one), and for the others about equal numbers.
    """
    slot_start, slot_len, sub_pids, pfield, pop = bm.slot_start, bm.slot_len, bm.sub_pids, bm.pfield, bm.pop
    field_slot = bm.field_slot
    count = np.zeros(n_fa, dtype=np.int64)
    quota = np.zeros(n_fa, dtype=np.int64)
    stride = np.ones(n_fa, dtype=np.int64)
    at = np.zeros(n_fa, dtype=np.int64)
    codes = np.empty(0, dtype=np.float64)
    fill = np.empty(0, dtype=np.int64)
    off = np.zeros(n_fa + 1, dtype=np.int64)
    for rnd in range(2):
        if rnd == 1:
            for fa in range(n_fa):
                k = max(count[fa] // sample, 1)
                quota[fa] = (count[fa] + k - 1) // k
                stride[fa] = golden_stride(count[fa])
                off[fa + 1] = off[fa] + quota[fa]
            codes = np.empty(off[n_fa], dtype=np.float64)
            fill = off[:-1].copy()
        for s in slots:
            for q in range(slot_start[s], slot_start[s] + slot_len[s]):
                p = sub_pids[q]
                if pop[p] != 1:
                    sample_one(constant_code(p, pfield, bm.pbits, bm.pnum, bm.scodes), field_slot[pfield[p]], count,
                               quota, stride, at, fill, codes)
            for q in range(bm.iv_start[s], bm.iv_start[s] + bm.iv_len[s]):
                for v in (bm.iv_lo[q], bm.iv_hi[q]):
                    if np.isfinite(v):
                        sample_one(v, bm.iv_fa[q], count, quota, stride, at, fill, codes)
    return off, codes


def row_words(words: int) -> int:
    """Words a row takes to hold ``words``: an odd number of 64-byte lines.  Rows a power of two apart (2**20
    slots: 128 KiB) put every row's block in the same sets of the caches (0.111 against 0.091 ms per event at
    2**20 interval subscriptions, one line more); an odd number of lines is a multiple of no power of two."""
    return 8 * (((words + 7) // 8) | 1)


def _quantile_bounds(values: np.ndarray, cells: int) -> np.ndarray:
    """``cells - 1`` boundaries (+inf padded) at quantiles of a field's finite constants."""
    out = np.full(cells - 1, np.inf)
    values = values[np.isfinite(values)]
    if len(values) == 0 or cells < 2:
        return out
    qs = np.unique(np.quantile(values, np.arange(1, cells) / cells, method="nearest"))
    out[: len(qs)] = qs
    return out


def range_only(off: np.ndarray, field: np.ndarray, op: np.ndarray) -> np.ndarray:
    """Which rows (CSR predicates: field ids, operator codes) :meth:`RangeBitmaps.add_ranges` can hold."""
    return range_only_rows(off, field, op, N_KINDS, KIND_NUMBER)


def intervals_of_rows(off: np.ndarray, field: np.ndarray, op: np.ndarray, value: np.ndarray,
                      rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``rows`` (range-only) of CSR predicates as :func:`fold_intervals` folds them."""
    return fold_intervals(off, rows, field, op, value)


class RangeBitmaps:
    """Slots, rows and the predicate ids of the subscriptions on the bit-parallel path (module docstring).

    ``add`` / ``remove`` patch the bits of the slots concerned; a new field
    gets its rows (cells placed at the quantiles of the constants being
    added); when the number of subscriptions has doubled (and the new
    constants fill some cell beyond ``REPLACE_SHARE`` times its share) or
    fallen to a quarter since the cells were placed, every field's cells
    are placed again and the rows rebuilt.  The predicates of the subscriptions held
    are kept out of phase 1 (``PredicateTable.hold_off_path``); the owner
    keeps the references themselves.
    """

    def __init__(self, preds: PredicateTable, cells: int = CELLS, block_words: int | None = None,
                 event_chunk: int = EVENT_CHUNK) -> None:
        if not isinstance(cells, (int, np.integer)) or not 1 <= cells <= 4096:
            raise ValueError(f"cells must be an integer in 1..4096, not {cells!r}")
        if block_words is not None and (not isinstance(block_words, (int, np.integer)) or block_words < 1):
            raise ValueError(f"block_words must be a positive integer (None: from BLOCK_BUDGET), not {block_words!r}")
        if not isinstance(event_chunk, (int, np.integer)) or event_chunk < 1:
            raise ValueError(f"event_chunk must be a positive integer, not {event_chunk!r}")
        self.preds = preds
        self.cells = int(cells)
        self.block_words = None if block_words is None else int(block_words)
        self.event_chunk = int(event_chunk)
        self.slots = IdPool()
        self.handle_slot = np.zeros(0, dtype=np.int64)
        self.slot_start = np.zeros(0, dtype=np.int64)
        self.slot_len = np.zeros(0, dtype=np.int64)
        self.slot_handle = np.full(0, -1, dtype=np.int64)
        self.sub_pids = np.zeros(0, dtype=np.int32)  # (predicate ids fit: 4 bytes a reference, 20 per interval subscription)
        self.n_pids = 0  # used part of sub_pids (live and garbage)
        self.garbage = 0
        # range-only subscriptions filed from their columns (add_ranges): closed intervals, no predicate ids
        self.iv_start, self.iv_len = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)  # per slot
        self.iv_fa, self.iv_lo, self.iv_hi = np.zeros(0, dtype=np.int32), np.zeros(0), np.zeros(0)
        self.n_iv = 0  # used part of iv_* (live and garbage)
        self.iv_garbage = 0
        self.field_slot = np.full(0, -1, dtype=np.int64)
        self.miss_row = np.zeros(0, dtype=np.int64)
        self.cell_base = np.zeros(0, dtype=np.int64)
        self.bounds = np.zeros((0, max(self.cells - 1, 0)), dtype=np.float64)
        self.rows = np.full((1, row_words(1)), ALL_ONES, dtype=np.uint64)
        self.live = 0
        self.placed_at = 0  # live subscriptions when the cells were last placed
        self.rebuilds = 0

    def __len__(self) -> int:
        return self.live

    # -- insertion and deletion ------------------------------------------
    def add(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """Take slots for subscriptions (distinct predicate ids in CSR) and set their bits."""
        if len(handles) == 0:
            return
        p = self.preds
        p.hold_off_path(pids, 1)
        slots = self._take_slots(handles)
        self.sub_pids = grow(self.sub_pids, self.n_pids + len(pids), 0)
        self.sub_pids[self.n_pids : self.n_pids + len(pids)] = pids
        self.slot_start[slots] = self.n_pids + off[:-1]
        self.slot_len[slots] = np.diff(off)
        self.n_pids += len(pids)
        self._file_slots(slots, self._add_fields(p.fields_of(pids)))

    def add_ranges(self, handles: np.ndarray, off: np.ndarray, field: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray) -> None:
        """Take slots for range-only subscriptions given as closed intervals of doubles (:func:`fold_intervals`:
        per row, one ``field``, ``lo``, ``hi`` per field, in CSR) and set their bits.  The intervals are their only
        copy: no predicate is interned for them, and the exact check reads ``lo <= x <= hi``."""
        if len(handles) == 0:
            return
        slots = self._take_slots(handles)
        new = self._add_fields(np.flatnonzero(np.bincount(field)))
        n = len(field)
        if self.n_iv == 0:  # (a first load: its arrays as they are, not copied into grown ones)
            self.iv_fa, self.iv_lo, self.iv_hi = self.field_slot[field].astype(np.int32), lo.copy(), hi.copy()
        else:
            self.iv_fa = grow(self.iv_fa, self.n_iv + n, 0)
            self.iv_lo = grow(self.iv_lo, self.n_iv + n, 0.0)
            self.iv_hi = grow(self.iv_hi, self.n_iv + n, 0.0)
            self.iv_fa[self.n_iv : self.n_iv + n] = self.field_slot[field]
            self.iv_lo[self.n_iv : self.n_iv + n] = lo
            self.iv_hi[self.n_iv : self.n_iv + n] = hi
        self.iv_start[slots] = self.n_iv + off[:-1]
        self.iv_len[slots] = np.diff(off)
        self.n_iv += n
        self._file_slots(slots, new)

    def _take_slots(self, handles: np.ndarray) -> np.ndarray:
        slots = self.slots.take(len(handles))
        top = int(slots.max()) + 1
        for name, fill in (("slot_start", 0), ("slot_len", 0), ("slot_handle", -1), ("iv_start", 0), ("iv_len", 0)):
            setattr(self, name, grow(getattr(self, name), top, fill))
        self.handle_slot = grow(self.handle_slot, int(handles.max()) + 1, -1)
        self.slot_handle[slots] = handles
        self.handle_slot[handles] = slots
        self.live += len(handles)
        self._ensure_words(top)
        return slots

    def _file_slots(self, slots: np.ndarray, new: np.ndarray) -> None:
        """Slots stored: the cells of their new numeric fields ``new`` placed (all cells again if due), and the
        slots' bits set."""
        replace = self.live > 2 * self.placed_at + 1024 or self.placed_at == 0
        if not replace and len(new):
            self._place(slots, new)
        if replace and self.placed_at and self._cells_still_fit(slots):
            self.placed_at, replace = self.live, False
        if replace:
            self.rebuild()
        else:
            self._mark(slots, True)

    def remove(self, handles: np.ndarray) -> np.ndarray:
        """Free the slots of subscriptions held; returns their predicate ids (the owner drops the references)."""
        slots = self.handle_slot[handles]
        if np.any(slots < 0):
            raise KeyError("a handle is not on the bit-parallel path")
        pids = self._pids_of(slots)
        self._mark(slots, False)
        self.preds.hold_off_path(pids, -1)
        self.slot_handle[slots] = -1
        self.handle_slot[handles] = -1
        self.garbage += int(self.slot_len[slots].sum())
        self.iv_garbage += int(self.iv_len[slots].sum())
        self.slot_len[slots] = 0
        self.iv_len[slots] = 0
        self.slots.release(slots)
        self.live -= len(handles)
        if self.garbage > max(1 << 16, self.n_pids - self.garbage):
            self._compact()
        if self.iv_garbage > max(1 << 16, self.n_iv - self.iv_garbage):
            self._compact_intervals()
        if self.placed_at > 4096 and 4 * self.live < self.placed_at:
            self.rebuild()
        return pids

    def holds(self, handles: np.ndarray) -> np.ndarray:
        """Which of ``handles`` are on this path."""
        return lookup(self.handle_slot, handles, -1) >= 0

    def holds_ranges(self, handles: np.ndarray) -> np.ndarray:
        """Which of ``handles`` are on this path as intervals (:meth:`add_ranges`)."""
        slots = lookup(self.handle_slot, handles, -1)
        out = slots >= 0
        out[out] = self.iv_len[slots[out]] > 0
        return out

    def ranges_of(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The intervals of range-only subscriptions held: ``(off, field, lo, hi)`` in CSR, as given to
        :meth:`add_ranges`."""
        slots = self.handle_slot[handles]
        idx, off = csr_positions(self.iv_start[slots], self.iv_len[slots])
        fa_field = np.empty(len(self.miss_row), dtype=np.int64)
        used = np.flatnonzero(self.field_slot >= 0)
        fa_field[self.field_slot[used]] = used
        return off, fa_field[self.iv_fa[idx]], self.iv_lo[idx], self.iv_hi[idx]

    def live_slots(self) -> np.ndarray:
        return np.flatnonzero(self.slot_handle[: self.slots.high] >= 0)

    def _pids_of(self, slots: np.ndarray) -> np.ndarray:
        idx, _ = csr_positions(self.slot_start[slots], self.slot_len[slots])
        return self.sub_pids[idx].astype(np.int64)

    def _compact_intervals(self) -> None:
        slots = self.live_slots()
        idx, off = csr_positions(self.iv_start[slots], self.iv_len[slots])
        self.iv_fa, self.iv_lo, self.iv_hi = self.iv_fa[idx], self.iv_lo[idx], self.iv_hi[idx]
        self.iv_start[slots] = off[:-1]
        self.n_iv, self.iv_garbage = len(idx), 0

    def _compact(self) -> None:
        slots = self.live_slots()
        pids = self._pids_of(slots)
        lens = self.slot_len[slots]
        self.sub_pids = pids.astype(np.int32)
        self.slot_start[slots] = np.cumsum(lens) - lens
        self.n_pids, self.garbage = len(pids), 0

    def _ensure_words(self, top_slot: int) -> None:
        words = (top_slot + 63) // 64
        if words <= self.rows.shape[1]:
            return
        cap = row_words(max(words, 2 * self.rows.shape[1]))
        rows = np.zeros((self.rows.shape[0], cap), dtype=np.uint64)
        rows[:, : self.rows.shape[1]] = self.rows
        rows[DEAD_ROW, self.rows.shape[1] :] = ALL_ONES
        self.rows = rows

    def _add_fields(self, fields: np.ndarray) -> np.ndarray:
        """Rows for fields no subscription here constrained yet; returns the constrained-field indices of the new
        numeric ones (their cells are placed once the slots constraining them are stored: :meth:`_file_slots`)."""
        self.field_slot = grow(self.field_slot, int(fields.max()) + 1 if len(fields) else 0, -1)
        new = fields[self.field_slot[fields] < 0]
        if len(new) == 0:
            return np.zeros(0, dtype=np.int64)
        n_rows = self.rows.shape[0]
        fa0 = len(self.miss_row)
        numeric = (new % N_KINDS) == KIND_NUMBER
        extra = np.where(numeric, self.cells + 1, 1)
        first = n_rows + np.cumsum(extra) - extra
        self.field_slot[new] = fa0 + np.arange(len(new))
        self.miss_row = np.concatenate([self.miss_row, first])
        self.cell_base = np.concatenate([self.cell_base, np.where(numeric, first + 1, -1)])
        self.bounds = np.concatenate([self.bounds, np.full((len(new), max(self.cells - 1, 0)), np.inf)])
        rows = np.zeros((n_rows + int(extra.sum()), self.rows.shape[1]), dtype=np.uint64)
        rows[:n_rows] = self.rows
        self.rows = rows
        return fa0 + np.flatnonzero(numeric)

    def _place(self, slots: np.ndarray, fas: np.ndarray) -> None:
        """Cell boundaries of constrained fields ``fas`` at the quantiles of the constants ``slots`` hold on them."""
        off, codes = field_samples(slots, self.arrays(), len(self.miss_row), BOUNDARY_SAMPLE)
        for i in fas.tolist():
            if off[i + 1] > off[i]:
                self.bounds[i] = _quantile_bounds(codes[off[i] : off[i + 1]], self.cells)

    def _cells_still_fit(self, slots: np.ndarray) -> bool:
        """Whether the constants of new ``slots`` (a sample of them) spread over the cells placed before about as evenly as quantiles
        would (no cell taking more than ``REPLACE_SHARE`` times its share): then the cells stay and only the new
        slots are marked, instead of every slot again (a bulk load of one distribution in doubling chunks)."""
        slots = slots[:: max(1, len(slots) // FIT_SAMPLE)]
        off, codes = field_samples(slots, self.arrays(), len(self.miss_row), BOUNDARY_SAMPLE)
        for i in np.flatnonzero(self.cell_base >= 0).tolist():
            c = codes[off[i] : off[i + 1]]
            if len(c) and np.bincount(np.searchsorted(self.bounds[i], c, side="right"),
                                      minlength=self.cells).max() > REPLACE_SHARE * len(c) / self.cells + 1:
                return False
        return True

    def rebuild(self) -> None:
        """Place every field's cells at the quantiles of the constants held now, and set every live slot's bits."""
        slots = self.live_slots()
        self._place(slots, np.flatnonzero(self.cell_base >= 0))
        self.rows[:] = 0
        self.rows[DEAD_ROW] = ALL_ONES
        self._mark(slots, True)
        self.placed_at = self.live
        self.rebuilds += 1

    def _mark(self, slots: np.ndarray, on: bool) -> None:
        mark_slots(np.asarray(slots, dtype=np.int64), on, self.arrays(), cell_tops(self.bounds))

    # -- matching --------------------------------------------------------
    def _constants(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``pbits``, ``pnum``, ``scodes`` of :class:`BitmapArrays`: the constants as the predicate table holds them."""
        p = self.preds
        return p.bits_value, p.bits_value.view(np.float64), p.strings.codes

    def arrays(self) -> BitmapArrays:
        p = self.preds
        return BitmapArrays(self.rows, self.field_slot, self.miss_row, self.cell_base, self.bounds, self.slot_start,
                            self.slot_len, self.slot_handle, self.sub_pids, p.field, p.op, *self._constants(),
                            self.iv_start, self.iv_len, self.iv_fa, self.iv_lo, self.iv_hi)

    def match(self, events, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Matches of encoded events as CSR ``(offsets, ids)`` (:func:`bitmap_events`)."""
        n_words = (self.slots.high + 63) // 64
        return bitmap_events(events, self.arrays(), handle_id, n_words, self.block(), self.event_chunk)

    def block(self) -> int:
        """Words per block: ``block_words``, or the largest power of two within ``BLOCK_BUDGET`` (16..256)."""
        if self.block_words is not None:
            return self.block_words
        fit = BLOCK_BUDGET // (8 * self.rows.shape[0])
        return int(min(256, max(16, 1 << max(int(fit).bit_length() - 1, 0))))

    def stats(self) -> dict:
        rows_bytes = int(self.rows.shape[0]) * ((self.slots.high + 63) // 64) * 8
        return {
            "subscriptions": self.live,
            "slots": int(self.slots.high),
            "constrained_fields": int(len(self.miss_row)),
            "cell_fields": int(np.count_nonzero(self.cell_base >= 0)),
            "cells": self.cells,
            "rows": int(self.rows.shape[0]),
            "bitmap_bytes": rows_bytes,
            "rebuilds": self.rebuilds,
            "memory_bytes": int(self.rows.nbytes + self.sub_pids.nbytes + self.slot_start.nbytes + self.slot_len.nbytes
                                + self.slot_handle.nbytes + self.handle_slot.nbytes
                                + self.bounds.nbytes + self.field_slot.nbytes + self.iv_start.nbytes + self.iv_len.nbytes
                                + self.iv_fa.nbytes + self.iv_lo.nbytes + self.iv_hi.nbytes),
        }


class BitmapIndex:
    """``Matcher("bitmaps")``: every subscription on the bit-parallel path (:class:`RangeBitmaps`)."""

    def __init__(self, preds: PredicateTable, **options) -> None:
        self.preds = preds
        self.bitmaps = RangeBitmaps(preds, **options)

    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        self.preds.refcount[: self.preds.n_ids] += np.bincount(pids, minlength=self.preds.n_ids)
        self.bitmaps.add(handles, off, pids)

    def take_ranges(self, handles: np.ndarray, off: np.ndarray, field: np.ndarray, op: np.ndarray,
                    value: np.ndarray) -> np.ndarray:
        """Range-only subscriptions of a batch held as intervals, before their predicates are interned (they never
        are); which rows were taken."""
        rows = np.flatnonzero(range_only(off, field, op))
        if len(rows):
            self.bitmaps.add_ranges(handles[rows], *intervals_of_rows(off, field, op, value, rows))
        taken = np.zeros(len(handles), dtype=bool)
        taken[rows] = True
        return taken

    def remove_bulk(self, handles: np.ndarray) -> None:
        self.preds.decref(self.bitmaps.remove(handles))

    def match_encoded(self, events, batch, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.bitmaps.match(events, handle_id)

    def stats(self) -> dict:
        return {"bitmaps": self.bitmaps.stats(), "memory_bytes": self.bitmaps.stats()["memory_bytes"]}


def make_bitmaps(ctx: IndexContext, **options) -> BitmapIndex:
    """``Matcher("bitmaps", cells=CELLS, block_words=None, event_chunk=EVENT_CHUNK)``."""
    if options.pop("runs", 0):
        raise ValueError("runs (sorted clusters) is an option of static and dynamic, not of bitmaps")
    unknown = set(options) - {"cells", "block_words", "event_chunk"}
    if unknown:
        raise ValueError(f"bitmaps takes no option {', '.join(sorted(unknown))}")
    return BitmapIndex(ctx.preds, **options)
