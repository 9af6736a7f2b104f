"""OpIndex (Zhang, Chan and Tan, PVLDB 7(8), 2014): pivot attributes, then operators, for sparse wide events.

Built for events that carry a few dozen of tens of thousands of attributes.

* **Level 1, pivot** (section 4.1): each subscription row is filed under one
  of its fields, the one least frequent in events (equation 1,
  ``argmin Delta(A)``): every predicate needs its attribute present, so a row
  can only match an event that carries its pivot (Lemma 1), and an event
  visits only the lists of the pivots it carries.  ``Delta`` is the
  presence of the field in the event statistics the matcher uses
  (``Matcher.set_statistics``), or, before any are given, the number of
  predicates on the field among the subscriptions (the paper's fallback);
  ties go to the field with fewer subscriptions.  ``refresh_pivots`` (called
  when the statistics change, and by ``Matcher.reorganize``) moves the rows
  whose pivot changed.
* **Level 2, operator** (section 4.2): within a pivot list, predicates are
  split by operator (the six comparisons; ``in``, ``between``, ``prefix``...
  arrive lowered by engine/frontend/lowering.py, as section 4.2 rewrites set and
  interval operators).  Each (pivot, operator) list is cut into ``segments``
  (b = 32) by attribute, ``attribute mod b``, with a directory; a segment is
  sorted by (field, value, slot) and has a ``w`` = 64-bit signature: a
  predicate sets bit ``h(field, value)`` for ``=`` and ``h(field)`` for the
  others, and an event pair whose bit is clear skips the segment
  (Example 3).  A segment's range scan is two binary searches.
* **Counters** (section 4.3): a pivot list owns a contiguous region of
  counters, one slot per row, which list entries point at (by local slot, so
  a region can move).  A counter holds ``(epoch << 32) | unmatched``: a
  counter last written for an earlier event reads as the row's size, so
  nothing is reset per event (the paper re-initialises them, O(N)).  A row
  matches when its counter reaches 0 (Algorithm 2).

Insertion (Algorithm 1) and deletion are batched numba kernels: a segment is
a capacity-managed region of an arena; new entries are merged into it in
place (or it moves to the arena's end with doubled capacity), a deleted
entry is found by binary search on its full key and the segment's signature
is recomputed from what remains.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..columnar import csr_positions
from ..frontend.encoding import N_KINDS
from ..structures.idpool import grow
from .index import IndexContext
from ..frontend.lowering import parse_derived
from ..structures.predicates import PredicateTable
from ..kernels.scan import doubled, finish_events, prefetch
from ..semantics import KIND_NUMBER, KIND_STRING, KINDS, OP_EQ, OP_GT, OP_LE, OP_LT, OP_NE

N_OPS = 6
#: Segments per (pivot, operator) list (the paper's b, section 7.1).
SEGMENTS = 32
#: Candidate segments (signature passed) the matching kernel makes room for at first, per event.
CANDIDATES = 1 << 16
#: Epochs stay below this; the counters are cleared when it is reached.
EPOCH_LIMIT = 1 << 30


class OpIndexArrays(NamedTuple):
    """OpIndex as the matching kernel reads it (:meth:`OpIndex.arrays`)."""

    list_of_field: np.ndarray  # int32 [fields]: pivot list of the field (-1: not a pivot)
    list_op: np.ndarray  # int32 [lists * 6]: directory of the (list, operator) predicate list (-1: none)
    seg_sig: np.ndarray  # uint64 [directories * segments]: the segment's signature (a list's b are adjacent)
    b_base: np.ndarray  # int64 [directories * segments]: first arena position of the segment
    b_len: np.ndarray  # int32 [directories * segments]: its entries, sorted by (field, value, slot)
    e_field: np.ndarray  # int32 [arena]: the entry's field
    e_slot: np.ndarray  # int32 [arena]: the owning row's slot in its pivot list's counter region
    e_val: np.ndarray  # float64 [arena]: value (=, !=: number, string id or 0/1; ranges: the order code)
    c_base: np.ndarray  # int64 [lists]: first counter of the list's region
    c_need: np.ndarray  # int32 [counters]: predicates of the row in the slot
    c_state: np.ndarray  # int64 [counters]: (epoch << 32) | predicates not yet matched in that epoch
    c_handle: np.ndarray  # int32 [counters]: the row's handle (-1: free slot)


@njit(cache=True, inline="always")
def signature_bit(field, key):
    """Bit of the w = 64-bit signature for (field, key) (key = equality bits for '=', 0 otherwise)."""
    x = np.uint64(field) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(key)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return x >> np.uint64(58)


@njit(cache=True, inline="always")
def equality_key(field, val, scratch, scratch_bits):
    """The equality bits of an '=' entry's value (what an event pair carries as ``eqbits``).

    ``scratch`` is a one-element float64 array and ``scratch_bits`` its int64 view.
    """
    if field % 3 == 0:  # number: the double's bits, -0.0 folded
        scratch[0] = val + 0.0
        return scratch_bits[0]
    return np.int64(val)  # string id, or 0/1


@njit(cache=True, inline="always")
def field_bounds(e_field, lo, hi, f):
    """[a, b) of the entries of field ``f`` in the sorted run ``lo:hi``."""
    a, b = lo, hi
    while a < b:
        mid = (a + b) >> 1
        if e_field[mid] < f:
            a = mid + 1
        else:
            b = mid
    c, d = a, hi
    while c < d:
        mid = (c + d) >> 1
        if e_field[mid] <= f:
            c = mid + 1
        else:
            d = mid
    return a, c


@njit(cache=True, inline="always")
def value_lower(e_val, lo, hi, x):
    """First position in ``lo:hi`` (one field) whose value is >= x."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if e_val[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def value_upper(e_val, lo, hi, x):
    """First position in ``lo:hi`` (one field) whose value is > x."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if e_val[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def opindex_events(ev, ix, handle_id, segments, epoch, room):
    """Algorithm 2 over a batch of events: CSR (offsets, ids) of matches, and the next epoch.

    The events are matched by :func:`opindex_into`, which stops at an event
    for which its output or its candidate rows have no room: the full one is
    grown here and the event matched again (in a new epoch, so the counters
    it decremented count as untouched).  At most ``RETRIES_MAX`` epochs
    beyond one per event.
    """
    ev_off = ev.offsets
    n_ev = ev_off.shape[0] - 1
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    width = 1
    for i in range(n_ev):
        width = max(width, ev_off[i + 1] - ev_off[i])
    p_seg = np.empty(width, dtype=np.int64)  # per pair of the event: its segment,
    p_any = np.empty(width, dtype=np.uint64)  # its signature bit for any operator but '=',
    p_eq = np.empty(width, dtype=np.uint64)  # and for '='
    d_seg = np.empty(6 * width, dtype=np.int64)  # stage 1: first segment of each operator list reached,
    d_op = np.empty(6 * width, dtype=np.int64)  # its operator,
    d_cb = np.empty(6 * width, dtype=np.int64)  # and its pivot list's counter base
    room = max(1, min(6 * width * width, room))  # candidate segments; grows when an event needs more
    c_b = np.empty(room, dtype=np.int64)  # stage 2: segments whose signature passed,
    c_t = np.empty(room, dtype=np.int64)  # the event pair,
    c_d = np.empty(room, dtype=np.int64)  # and the operator list
    e = 0
    while True:
        e1, nout, epoch, full = opindex_into(e, ev, ix, segments, epoch, p_seg, p_any, p_eq, d_seg, d_op, d_cb, c_b,
                                             c_t, c_d, out, nout, out_off)
        finish_events(out, out_off, e, e1, handle_id, nout)
        if e1 >= n_ev:
            return out_off, out[:nout].copy(), epoch
        e = e1
        if full == OUT_FULL:
            out = doubled(out, nout)
        else:
            c_b, c_t, c_d = doubled(c_b, 0), doubled(c_t, 0), doubled(c_d, 0)


#: What stopped :func:`opindex_into` before the last event: its output or its candidate rows were full.
OUT_FULL, CANDIDATES_FULL = 1, 2
#: Events matched again (each in an epoch of its own) per batch at most: one per doubling of the output or of the
#: candidate rows, which never exceed 2^62 bytes.
RETRIES_MAX = 128


@njit(cache=True, _nrt=False)
def opindex_into(e0, ev, ix, segments, epoch, p_seg, p_any, p_eq, d_seg, d_op, d_cb, c_b, c_t, c_d, out, nout,
                 out_off):
    """Events ``e0:`` of :func:`opindex_events` (matched handles, not yet ids), without growing any array.

    Per event, for every pair whose field is a pivot, for every operator list
    of that pivot, for every pair of the event: the pair's segment, its
    signature bit, then the range scan of the segment; each entry found
    decrements its row's counter and a counter at 0 is a match.

    The work is the paper's, in stages so that cache misses overlap (the
    machine otherwise waits for each): (1) the operator lists of the
    event's pivots, prefetching their signatures; (2) the signature tests,
    prefetching the segments that pass; (3) the first arena line of each of
    those; (4) the scans.

    Returns ``(e, nout, epoch, full)``: ``e`` = the number of events when
    done (``full`` = 0), else the event for which ``out`` (``OUT_FULL``) or
    the candidate rows ``c_b``, ``c_t``, ``c_d`` (``CANDIDATES_FULL``) had no
    room, its handles dropped.  Without numba's reference-counting runtime
    (docs/design/engine.md, "Kernel contract"): with it, ``out`` reassigned by its
    growth check cost a pair of atomic operations per candidate segment.
    """
    ev_off, ev_field, ev_code, ev_eqbits, ev_rep = ev.offsets, ev.field, ev.code, ev.eqbits, ev.repeats
    list_of_field, list_op, seg_sig = ix.list_of_field, ix.list_op, ix.seg_sig
    b_base, b_len = ix.b_base, ix.b_len
    e_field, e_slot, e_val = ix.e_field, ix.e_slot, ix.e_val
    c_base, c_need, c_state, c_handle = ix.c_base, ix.c_need, ix.c_state, ix.c_handle
    n_fields = list_of_field.shape[0]
    n_ev = ev_off.shape[0] - 1
    low = np.int64(0xFFFFFFFF)
    one = np.uint64(1)
    for i in range(e0, n_ev):
        epoch += 1
        tag = np.int64(epoch) << 32
        lo_pair, hi_pair = ev_off[i], ev_off[i + 1]
        start = nout
        for t in range(lo_pair, hi_pair):
            g = ev_field[t]
            if g >= 0:
                p_seg[t - lo_pair] = (g // 3) % segments
                p_any[t - lo_pair] = one << signature_bit(g, 0)
                p_eq[t - lo_pair] = one << signature_bit(g, ev_eqbits[t])
        nd = 0
        rep = ev_rep[i]
        for j in range(lo_pair, hi_pair):
            fj = ev_field[j]
            if fj < 0 or fj >= n_fields:
                continue
            if rep and _field_before(ev_field, lo_pair, j):  # a pivot's lists once, however many values it has
                continue
            lst = list_of_field[fj]
            if lst < 0:
                continue
            for op in range(6):
                d = list_op[lst * 6 + op]
                if d < 0:
                    continue
                dseg = d * segments
                for s8 in range(0, segments, 8):  # a list's signatures: 8 per cache line
                    prefetch(seg_sig, dseg + s8)
                d_seg[nd], d_op[nd], d_cb[nd] = dseg, op, c_base[lst]
                nd += 1
        nc = 0
        for k in range(nd):
            dseg, op = d_seg[k], d_op[k]
            for t in range(lo_pair, hi_pair):
                if ev_field[t] < 0:
                    continue
                q = t - lo_pair
                b = dseg + p_seg[q]
                if seg_sig[b] & (p_eq[q] if op == OP_EQ else p_any[q]) == 0:
                    continue
                prefetch(b_base, b)
                prefetch(b_len, b)
                if nc == c_b.shape[0]:
                    return i, start, epoch, CANDIDATES_FULL
                c_b[nc], c_t[nc], c_d[nc] = b, t, k
                nc += 1
        for c in range(nc):
            base = b_base[c_b[c]]
            prefetch(e_field, base)
            prefetch(e_val, base)
            prefetch(e_slot, base)
        for c in range(nc):
            b, t, k = c_b[c], c_t[c], c_d[c]
            op, cb = d_op[k], d_cb[k]
            g = ev_field[t]
            n = b_len[b]
            base = b_base[b]
            a, e = field_bounds(e_field, base, base + n, g)
            if a == e:
                continue
            if op <= 1:  # '=' and '!=' compare equality values
                x = np.float64(ev_eqbits[t]) if g % 3 == 1 else ev_code[t]
            else:
                x = ev_code[t]
            skip_lo, skip_hi = 0, 0
            if op == OP_EQ:
                s = value_lower(e_val, a, e, x)
                e = value_upper(e_val, s, e, x)
                a = s
            elif op == OP_NE:  # whole field but the constants equal to x
                skip_lo = value_lower(e_val, a, e, x)
                skip_hi = value_upper(e_val, skip_lo, e, x)
            elif op == OP_LT:  # x < c
                a = value_upper(e_val, a, e, x)
            elif op == OP_LE:  # x <= c
                a = value_lower(e_val, a, e, x)
            elif op == OP_GT:  # x > c
                e = value_lower(e_val, a, e, x)
            else:  # x >= c
                e = value_upper(e_val, a, e, x)
            for k2 in range(a, e):
                if k2 >= skip_lo and k2 < skip_hi:
                    continue
                if rep and _earlier_value_holds(ev_field, ev_code, ev_eqbits, lo_pair, t, g, op, e_val[k2]):
                    continue  # the predicate was counted for an earlier value of the field
                pos = cb + e_slot[k2]
                v = c_state[pos]
                rem = (v & low) - 1 if (v >> 32) == epoch else np.int64(c_need[pos]) - 1
                c_state[pos] = tag | rem
                if rem == 0:
                    if nout == out.shape[0]:
                        return i, start, epoch, OUT_FULL
                    out[nout] = c_handle[pos]
                    nout += 1
        out_off[i + 1] = nout
    return n_ev, nout, epoch, 0


@njit(cache=True, inline="always")
def _field_before(ev_field, lo, j):
    """Whether a pair before ``j`` (from ``lo``) has ``j``'s field."""
    for u in range(lo, j):
        if ev_field[u] == ev_field[j]:
            return True
    return False


@njit(cache=True, inline="always")
def _earlier_value_holds(ev_field, ev_code, ev_eqbits, lo, t, g, op, c):
    """Whether a pair before ``t`` (from ``lo``) on field ``g`` satisfies ``op c`` as the scan compares: an event
    carrying the field several times counts each predicate once (engine/semantics.py)."""
    for u in range(lo, t):
        if ev_field[u] != g:
            continue
        x = (np.float64(ev_eqbits[u]) if g % 3 == 1 else ev_code[u]) if op <= 1 else ev_code[u]
        if op == OP_EQ:
            h = x == c
        elif op == OP_NE:
            h = x != c
        elif op == OP_LT:
            h = x < c
        elif op == OP_LE:
            h = x <= c
        elif op == OP_GT:
            h = x > c
        else:
            h = x >= c
        if h:
            return True
    return False


@njit(cache=True)
def choose_pivots(off, fields, delta, subs):
    """Per row: the field of its predicates with the least ``delta`` (ties: fewer ``subs``, then lower field)."""
    n = off.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        best = -1
        for j in range(off[i], off[i + 1]):
            f = fields[j]
            if best < 0 or delta[f] < delta[best] or (delta[f] == delta[best] and (
                    subs[f] < subs[best] or (subs[f] == subs[best] and f < best))):
                best = f
        out[i] = best
    return out


@njit(cache=True)
def assign_slots(rows_list, handles, sizes, c_base, c_top, c_free, c_nfree, c_need, c_state, c_handle, c_next):
    """A counter slot per new row in its pivot list's region (freed slots first); returns the local slots."""
    n = rows_list.shape[0]
    out = np.empty(n, dtype=np.int32)
    for i in range(n):
        lst = rows_list[i]
        s = c_free[lst]
        if s >= 0:
            c_free[lst] = c_next[c_base[lst] + s]
            c_nfree[lst] -= 1
        else:
            s = c_top[lst]
            c_top[lst] = s + 1
        pos = c_base[lst] + s
        c_need[pos] = sizes[i]
        c_state[pos] = 0
        c_handle[pos] = handles[i]
        c_next[pos] = -1
        out[i] = s
    return out


@njit(cache=True)
def move_counters(lists, old_base, new_base, c_top, c_need, c_state, c_handle, c_next):
    """Copy the counter regions of ``lists`` (their ``c_top`` slots) from ``old_base`` to ``new_base``."""
    for t in range(lists.shape[0]):
        lst = lists[t]
        a, b = old_base[t], new_base[t]
        for s in range(c_top[lst]):
            c_need[b + s] = c_need[a + s]
            c_state[b + s] = c_state[a + s]
            c_handle[b + s] = c_handle[a + s]
            c_next[b + s] = c_next[a + s]


@njit(cache=True)
def key_less(f1, v1, s1, f2, v2, s2):
    if f1 != f2:
        return f1 < f2
    if v1 != v2:
        return v1 < v2
    return s1 < s2


@njit(cache=True)
def assign_ids(keys, table, next_id):
    """``table[key]`` for each key, giving the keys without one (-1) the next ids in order of appearance.

    Returns (ids, next id, positions of the keys that got a new id).
    """
    out = np.empty(keys.shape[0], dtype=np.int64)
    fresh = np.empty(keys.shape[0], dtype=np.int64)
    n_fresh = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        v = table[k]
        if v < 0:
            v = next_id
            table[k] = v
            next_id += 1
            fresh[n_fresh] = i
            n_fresh += 1
        out[i] = v
    return out, next_id, fresh[:n_fresh]


@njit(cache=True)
def sort_by_bucket(buckets, fields, vals, slots):
    """Order of new entries by (bucket, field, value, slot): a counting sort by bucket, then each bucket's entries."""
    n = buckets.shape[0]
    n_b = 0
    for i in range(n):
        n_b = max(n_b, buckets[i] + 1)
    start = np.zeros(n_b + 1, dtype=np.int64)
    for i in range(n):
        start[buckets[i] + 1] += 1
    for b in range(n_b):
        start[b + 1] += start[b]
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        b = buckets[i]
        order[start[b]] = i
        start[b] += 1
    i = 0
    while i < n:
        j = i + 1
        b = buckets[order[i]]
        while j < n and buckets[order[j]] == b:
            j += 1
        if j - i <= 32:  # insertion sort of a small group
            for a in range(i + 1, j):
                x = order[a]
                c = a - 1
                while c >= i and key_less(fields[x], vals[x], slots[x], fields[order[c]], vals[order[c]],
                                          slots[order[c]]):
                    order[c + 1] = order[c]
                    c -= 1
                order[c + 1] = x
        else:  # a large group: stable sorts by the minor keys first
            g = order[i:j].copy()
            g = g[np.argsort(slots[g], kind="mergesort")]
            g = g[np.argsort(vals[g], kind="mergesort")]
            g = g[np.argsort(fields[g], kind="mergesort")]
            order[i:j] = g
        i = j
    return order


@njit(cache=True)
def merge_entries(starts, bucket, new_cap, new_base, nf, nv, ns, b_base, b_len, b_cap, seg_sig, b_op,
                  e_field, e_slot, e_val):
    """Merge each bucket's new entries (sorted, ``starts`` CSR per touched bucket) into it.

    A bucket whose ``new_base`` is >= 0 moves there (capacity ``new_cap``);
    the others merge in place, from the back.  Signature bits of the new
    entries are set.
    """
    scratch = np.empty(1, dtype=np.float64)
    bits = scratch.view(np.int64)
    for t in range(bucket.shape[0]):
        b = bucket[t]
        lo, hi = starts[t], starts[t + 1]
        n_old = b_len[b]
        src = b_base[b]
        dst = src
        if new_base[t] >= 0:
            dst = new_base[t]
            b_cap[b] = new_cap[t]
        # merge from the back: positions dst + n_old + (hi - lo) - 1 down to dst
        i = n_old - 1
        j = hi - 1
        w = dst + n_old + (hi - lo) - 1
        while j >= lo:
            if i >= 0 and key_less(nf[j], nv[j], ns[j], e_field[src + i], e_val[src + i], e_slot[src + i]):
                e_field[w], e_val[w], e_slot[w] = e_field[src + i], e_val[src + i], e_slot[src + i]
                i -= 1
            else:
                e_field[w], e_val[w], e_slot[w] = nf[j], nv[j], ns[j]
                j -= 1
            w -= 1
        if dst != src:
            while i >= 0:
                e_field[w], e_val[w], e_slot[w] = e_field[src + i], e_val[src + i], e_slot[src + i]
                i -= 1
                w -= 1
        b_base[b] = dst
        b_len[b] = n_old + (hi - lo)
        sig = seg_sig[b]
        for j in range(lo, hi):
            key = equality_key(nf[j], nv[j], scratch, bits) if b_op[b] == 0 else 0
            sig |= np.uint64(1) << signature_bit(nf[j], key)
        seg_sig[b] = sig


@njit(cache=True)
def delete_entries(bucket, nf, nv, ns, b_base, b_len, seg_sig, b_op, e_field, e_slot, e_val):
    """Delete entries (bucket, field, value, slot) found by binary search; recompute touched signatures.

    Returns how many were not found (0 unless the index is corrupt).
    """
    scratch = np.empty(1, dtype=np.float64)
    bits = scratch.view(np.int64)
    missing = 0
    for t in range(bucket.shape[0]):
        b = bucket[t]
        base, n = b_base[b], b_len[b]
        lo, hi = base, base + n
        f, v, s = nf[t], nv[t], ns[t]
        while lo < hi:
            mid = (lo + hi) >> 1
            if key_less(e_field[mid], e_val[mid], e_slot[mid], f, v, s):
                lo = mid + 1
            else:
                hi = mid
        if lo >= base + n or e_field[lo] != f or e_val[lo] != v or e_slot[lo] != s:
            missing += 1
            continue
        for k in range(lo, base + n - 1):
            e_field[k], e_val[k], e_slot[k] = e_field[k + 1], e_val[k + 1], e_slot[k + 1]
        b_len[b] = n - 1
    for t in range(bucket.shape[0]):
        b = bucket[t]
        if t > 0 and bucket[t - 1] == b:
            continue
        sig = np.uint64(0)
        base = b_base[b]
        for k in range(base, base + b_len[b]):
            key = equality_key(e_field[k], e_val[k], scratch, bits) if b_op[b] == 0 else 0
            sig |= np.uint64(1) << signature_bit(e_field[k], key)
        seg_sig[b] = sig
    return missing


@njit(cache=True)
def free_slots(lists, slots, c_base, c_free, c_nfree, c_handle, c_next):
    """Return the slots of removed rows to their lists' free stacks."""
    for t in range(lists.shape[0]):
        lst = lists[t]
        pos = c_base[lst] + slots[t]
        c_handle[pos] = -1
        c_next[pos] = c_free[lst]
        c_free[lst] = slots[t]
        c_nfree[lst] += 1


@njit(cache=True)
def compact_entries(b_base, b_len, b_cap, e_field, e_slot, e_val, n_total, slack):
    """Every bucket into fresh arrays, capacity ``len + len // slack`` (at least 1 when non-empty)."""
    nb = b_base.shape[0]
    caps = np.empty(nb, dtype=np.int64)
    total = 0
    for b in range(nb):
        n = b_len[b]
        c = n + n // slack if n > 0 else 0
        if n > 0 and c < 2:
            c = 2
        caps[b] = c
        total += c
    nf = np.empty(max(total, n_total), dtype=np.int32)
    ns = np.empty(max(total, n_total), dtype=np.int32)
    nv = np.empty(max(total, n_total), dtype=np.float64)
    w = 0
    for b in range(nb):
        src = b_base[b]
        for k in range(b_len[b]):
            nf[w + k], ns[w + k], nv[w + k] = e_field[src + k], e_slot[src + k], e_val[src + k]
        b_base[b] = w
        b_cap[b] = caps[b]
        w += caps[b]
    return nf, ns, nv, w


class OpIndex:
    """Subscription rows by pivot field, their predicates by operator in signed segments (module docstring)."""

    def __init__(self, ctx: IndexContext, segments: int = SEGMENTS) -> None:
        if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
            raise ValueError(f"segments must be a positive integer, got {segments!r}")
        self.preds: PredicateTable = ctx.preds
        self.probabilities = ctx.probabilities
        self.segments = segments
        # level 1: pivot lists
        self.list_of_field = np.zeros(0, dtype=np.int32)
        self.n_lists = 0
        self.list_field = np.zeros(0, dtype=np.int64)
        self.list_rows = np.zeros(0, dtype=np.int64)
        # level 2: (list, op) directories of segments, buckets, arena
        self.list_op = np.zeros(0, dtype=np.int32)
        self.n_dirs = 0
        self.seg_sig = np.zeros(0, dtype=np.uint64)
        self.n_buckets = 0  # directories * segments: segment d * segments + s is "bucket" d * segments + s
        self.b_base = np.zeros(0, dtype=np.int64)
        self.b_len = np.zeros(0, dtype=np.int32)
        self.b_cap = np.zeros(0, dtype=np.int32)
        self.b_op = np.zeros(0, dtype=np.int8)
        self.e_field = np.zeros(0, dtype=np.int32)
        self.e_slot = np.zeros(0, dtype=np.int32)
        self.e_val = np.zeros(0, dtype=np.float64)
        self.e_top = 0  # arena high-water mark
        self.n_entries = 0
        # counters, one region per pivot list
        self.c_base = np.zeros(0, dtype=np.int64)
        self.c_cap = np.zeros(0, dtype=np.int64)
        self.c_top = np.zeros(0, dtype=np.int64)
        self.c_free = np.zeros(0, dtype=np.int64)
        self.c_nfree = np.zeros(0, dtype=np.int64)
        self.c_need = np.zeros(0, dtype=np.int32)
        self.c_state = np.zeros(0, dtype=np.int64)
        self.c_handle = np.zeros(0, dtype=np.int32)
        self.c_next = np.zeros(0, dtype=np.int64)
        self.c_used = 0  # counter arena high-water mark
        self.epoch = 0
        # per handle: its list, slot and predicates (for removal and re-pivoting)
        self.h_list = np.zeros(0, dtype=np.int32)
        self.h_slot = np.zeros(0, dtype=np.int32)
        self.h_first = np.zeros(0, dtype=np.int64)
        self.h_size = np.zeros(0, dtype=np.int64)
        self.pool = np.zeros(0, dtype=np.int64)
        self.pool_top = 0
        self.pool_live = 0
        self.live = np.zeros(0, dtype=bool)
        # Delta (event frequency) and subscription counts per field
        self.field_subs = np.zeros(0, dtype=np.int64)
        self.delta = np.zeros(0, dtype=np.float64)
        self._delta_source: object = None
        self._strings_version = self.preds.strings.version
        self._codes_seen = self.preds.strings.codes.copy()  # string codes the stored order values use
        self.moved_by_refresh = 0

    # -- Delta ---------------------------------------------------------
    def _deltas(self, n_fields: int) -> np.ndarray:
        """Delta per field: event presence from the statistics in use, else subscription frequency (section 4.1)."""
        stats = self.probabilities.statistics
        if stats.source == "uniform":
            return grow(self.field_subs, n_fields, 0)[:n_fields].astype(np.float64)
        if self._delta_source is stats and len(self.delta) >= n_fields:
            return self.delta
        names = list(self.probabilities.attributes.ids)
        out = np.zeros(max(n_fields, len(names) * N_KINDS), dtype=np.float64)
        for a, name in enumerate(names):
            base = parse_derived(name)
            st = stats.attributes.get(base[1] if base else name)
            if st is None:
                continue
            for k, kind in enumerate(KINDS):
                share = st.value_types.get(kind, 0.0) if st.value_types else 1.0
                if base:
                    share = st.value_types.get("string", 0.0) if st.value_types else 1.0
                out[a * N_KINDS + k] = st.presence * share
        self.delta, self._delta_source = out, stats
        return out

    # -- insertion -------------------------------------------------------
    def _entry_values(self, pids: np.ndarray) -> np.ndarray:
        """The value an entry of each predicate is sorted and compared by (see :class:`OpIndexArrays`)."""
        p = self.preds
        kind = p.field[pids] % N_KINDS
        bits = p.bits_value[pids]
        out = bits.astype(np.float64)  # string ids and booleans
        num = kind == KIND_NUMBER
        out[num] = bits[num].view(np.float64)
        rng = (p.op[pids] > OP_NE) & (kind == KIND_STRING)
        if np.any(rng):
            out[rng] = p.strings.codes[bits[rng]]
        return out

    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """File rows (Algorithm 1): pivot, counter slot, then each predicate into its segment."""
        self.preds.refcount[: self.preds.n_ids] += np.bincount(pids, minlength=self.preds.n_ids)
        self._check_strings()
        fields = self.preds.field[pids]
        top = int(fields.max()) + 1
        self.field_subs = grow(self.field_subs, top, 0)
        self.field_subs[:top] += np.bincount(fields, minlength=top)
        self._file(handles.astype(np.int64), off.astype(np.int64), pids.astype(np.int64))
        top_h = int(handles.max()) + 1
        self.h_first, self.h_size = grow(self.h_first, top_h, 0), grow(self.h_size, top_h, 0)
        self.live = grow(self.live, top_h, False)
        sizes = np.diff(off)
        self.pool = grow(self.pool, self.pool_top + len(pids), -1)
        self.pool[self.pool_top: self.pool_top + len(pids)] = pids
        self.h_first[handles] = self.pool_top + off[:-1]
        self.h_size[handles] = sizes
        self.live[handles] = True
        self.pool_top += len(pids)
        self.pool_live += len(pids)

    def _file(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """Pivot, slot and entries of rows whose predicate references are already taken."""
        fields = self.preds.field[pids]
        n_fields = max(int(fields.max()) + 1, len(self.field_subs))
        delta = self._deltas(n_fields)
        subs = grow(self.field_subs, n_fields, 0)
        pivots = choose_pivots(off, fields, delta, subs)
        lists = self._lists_for(pivots)
        sizes = np.diff(off)
        slots = self._slots_for(lists, handles, sizes)
        top_h = int(handles.max()) + 1
        self.h_list, self.h_slot = grow(self.h_list, top_h, -1), grow(self.h_slot, top_h, -1)
        self.h_list[handles] = lists
        self.h_slot[handles] = slots
        row_of = np.repeat(np.arange(len(handles)), sizes)
        self._insert_entries(lists[row_of], self.preds.op[pids].astype(np.int64), fields,
                             self._entry_values(pids), slots[row_of])

    def _lists_for(self, pivots: np.ndarray) -> np.ndarray:
        top = int(pivots.max()) + 1
        self.list_of_field = grow(self.list_of_field, top, -1)
        new = np.unique(pivots[self.list_of_field[pivots] < 0])
        if len(new):
            ids = np.arange(self.n_lists, self.n_lists + len(new))
            self.list_of_field[new] = ids
            self.n_lists += len(new)
            n = self.n_lists
            self.list_field = grow(self.list_field, n, -1)
            self.list_field[ids] = new
            self.list_rows = grow(self.list_rows, n, 0)
            self.list_op = grow(self.list_op, n * N_OPS, -1)
            self.c_base, self.c_cap = grow(self.c_base, n, 0), grow(self.c_cap, n, 0)
            self.c_top = grow(self.c_top, n, 0)
            self.c_free, self.c_nfree = grow(self.c_free, n, -1), grow(self.c_nfree, n, 0)
            self.c_cap[ids] = 0
            self.c_top[ids] = 0
            self.c_free[ids] = -1
            self.c_nfree[ids] = 0
        lists = self.list_of_field[pivots].astype(np.int64)
        np.add.at(self.list_rows, lists, 1)
        return lists

    def _slots_for(self, lists: np.ndarray, handles: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        if self.c_used > 2 * int(self.c_top[: self.n_lists].sum()) + 4096:  # mostly abandoned regions
            self._compact_counters()
        demand = np.bincount(lists, minlength=self.n_lists)
        touched = np.flatnonzero(demand)
        avail = self.c_cap[touched] - self.c_top[touched] + self.c_nfree[touched]
        moving = touched[demand[touched] > avail]
        if len(moving):
            caps = np.maximum(np.maximum(2 * self.c_cap[moving], self.c_top[moving] + demand[moving]), 4)
            self._reserve_counters(int(caps.sum()))
            new_base = self.c_used + np.r_[0, np.cumsum(caps)[:-1]]
            move_counters(moving, self.c_base[moving], new_base, self.c_top, self.c_need, self.c_state,
                          self.c_handle, self.c_next)
            self.c_base[moving] = new_base
            self.c_cap[moving] = caps
            self.c_used += int(caps.sum())
        return assign_slots(lists, handles.astype(np.int32), sizes.astype(np.int32), self.c_base, self.c_top,
                            self.c_free, self.c_nfree, self.c_need, self.c_state, self.c_handle, self.c_next)

    def _reserve_counters(self, extra: int) -> None:
        need = self.c_used + extra
        if need > len(self.c_need):
            self.c_need = grow(self.c_need, need, 0)
            self.c_state = grow(self.c_state, need, 0)
            self.c_handle = grow(self.c_handle, need, -1)
            self.c_next = grow(self.c_next, need, -1)

    def _compact_counters(self) -> None:
        lists = np.arange(self.n_lists)
        caps = self.c_top[lists].copy()
        idx_old, new_off = csr_positions(self.c_base[lists], caps)  # (each list's new base: new_off[:-1])
        size = max(int(caps.sum()), 64)
        need, state = np.zeros(size, np.int32), np.zeros(size, np.int64)
        handle, nxt = np.full(size, -1, np.int32), np.full(size, -1, np.int64)
        for arr_new, arr_old in ((need, self.c_need), (state, self.c_state), (handle, self.c_handle),
                                 (nxt, self.c_next)):
            arr_new[: int(caps.sum())] = arr_old[idx_old]
        self.c_need, self.c_state, self.c_handle, self.c_next = need, state, handle, nxt
        self.c_base[lists] = new_off[:-1]
        self.c_cap[lists] = caps
        self.c_used = int(caps.sum())

    def _directories(self, lists: np.ndarray, ops: np.ndarray, create: bool) -> np.ndarray:
        key = lists * N_OPS + ops
        if not create:
            return self.list_op[key].astype(np.int64)
        d, self.n_dirs, fresh = assign_ids(key, self.list_op, self.n_dirs)
        if len(fresh):
            n = self.n_buckets = self.n_dirs * self.segments
            self.seg_sig, self.b_op = grow(self.seg_sig, n, 0), grow(self.b_op, n, 0)
            self.b_base, self.b_len = grow(self.b_base, n, 0), grow(self.b_len, n, 0)
            self.b_cap = grow(self.b_cap, n, 0)
            slots = (d[fresh][:, None] * self.segments + np.arange(self.segments)).ravel()
            self.seg_sig[slots] = 0
            self.b_base[slots] = 0
            self.b_len[slots] = 0
            self.b_cap[slots] = 0
            self.b_op[slots] = np.repeat(ops[fresh], self.segments)
        return d

    def _buckets(self, lists, ops, fields, create: bool) -> np.ndarray:
        d = self._directories(lists, ops, create)
        return d * self.segments + (fields // N_KINDS) % self.segments

    def _insert_entries(self, lists, ops, fields, vals, slots) -> None:
        if self.e_top > 2 * self.n_entries + 4096:  # mostly abandoned segments: compact first
            self._compact_entries()
        buckets = self._buckets(lists, ops, fields, create=True)
        order = sort_by_bucket(buckets, fields, vals, slots)
        buckets, fields, vals, slots = buckets[order], fields[order], vals[order], slots[order]
        first = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
        starts = np.r_[first, len(buckets)].astype(np.int64)
        touched = buckets[first]
        counts = np.diff(starts)
        need = self.b_len[touched] + counts
        moving = need > self.b_cap[touched]
        new_cap = np.where(moving, np.maximum(np.maximum(2 * self.b_cap[touched], need), 2), 0).astype(np.int64)
        self._reserve_entries(int(new_cap.sum()))
        new_base = np.where(moving, self.e_top + np.cumsum(new_cap) - new_cap, -1).astype(np.int64)
        self.e_top += int(new_cap.sum())
        merge_entries(starts, touched, new_cap, new_base, fields.astype(np.int32), vals, slots.astype(np.int32),
                      self.b_base, self.b_len, self.b_cap, self.seg_sig, self.b_op, self.e_field,
                      self.e_slot, self.e_val)
        self.n_entries += len(buckets)

    def _reserve_entries(self, extra: int) -> None:
        if self.e_top + extra <= len(self.e_field):
            return
        n = self.e_top + extra
        self.e_field, self.e_slot = grow(self.e_field, n, 0), grow(self.e_slot, n, 0)
        self.e_val = grow(self.e_val, n, 0.0)

    def _compact_entries(self) -> None:
        nb = self.n_buckets
        nf, ns, nv, w = compact_entries(self.b_base[:nb], self.b_len[:nb], self.b_cap[:nb], self.e_field, self.e_slot,
                                        self.e_val, 64, 2)
        self.e_field, self.e_slot, self.e_val, self.e_top = nf, ns, nv, int(w)

    # -- deletion --------------------------------------------------------
    def remove_bulk(self, handles: np.ndarray) -> None:
        """Unfile rows and drop their predicate references."""
        self._check_strings()
        pids = self._unfile(handles.astype(np.int64))
        fields = self.preds.field[pids]
        self.field_subs[: int(fields.max()) + 1] -= np.bincount(fields)
        self.live[handles] = False
        self.pool_live -= len(pids)
        if self.pool_top > 2 * self.pool_live + 4096:
            self._compact_pool()
        self.preds.decref(pids)

    def _pids_of(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sizes = self.h_size[handles]
        pos, _ = csr_positions(self.h_first[handles], sizes)
        return sizes, self.pool[pos]

    def _unfile(self, handles: np.ndarray) -> np.ndarray:
        """Take the rows' entries and slots out (their references stay); returns their predicates."""
        sizes, pids = self._pids_of(handles)
        lists = self.h_list[handles].astype(np.int64)
        slots = self.h_slot[handles].astype(np.int64)
        row_of = np.repeat(np.arange(len(handles)), sizes)
        fields = self.preds.field[pids]
        ops = self.preds.op[pids].astype(np.int64)
        buckets = self._buckets(lists[row_of], ops, fields, create=False)
        vals = self._entry_values(pids)
        order = np.argsort(buckets, kind="stable")
        missing = delete_entries(buckets[order], fields[order].astype(np.int32), vals[order],
                                 slots[row_of][order].astype(np.int32), self.b_base, self.b_len,
                                 self.seg_sig, self.b_op, self.e_field, self.e_slot, self.e_val)
        if missing:
            raise AssertionError(f"opindex: {missing} entries to delete were not found")
        self.n_entries -= len(pids)
        free_slots(lists, slots.astype(np.int32), self.c_base, self.c_free, self.c_nfree, self.c_handle, self.c_next)
        np.subtract.at(self.list_rows, lists, 1)
        return pids

    def _compact_pool(self) -> None:
        handles = np.flatnonzero(self.live)
        sizes, pids = self._pids_of(handles)
        self.pool = pids.copy() if len(pids) else np.zeros(64, dtype=np.int64)
        self.h_first[handles] = np.cumsum(sizes) - sizes
        self.pool_top = len(pids)

    # -- statistics and pivots -------------------------------------------
    def refresh_pivots(self) -> int:
        """Move every row whose pivot (equation 1, current Delta) changed; returns how many moved."""
        self._check_strings()
        handles = np.flatnonzero(self.live)
        if len(handles) == 0:
            return 0
        sizes, pids = self._pids_of(handles)
        fields = self.preds.field[pids]
        n_fields = max(int(fields.max()) + 1, len(self.field_subs))
        off = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        pivots = choose_pivots(off, fields, self._deltas(n_fields), grow(self.field_subs, n_fields, 0))
        moved = handles[pivots != self.list_field[self.h_list[handles]]]
        if len(moved):
            self._unfile(moved)
            msizes, mpids = self._pids_of(moved)
            self._file(moved, np.r_[0, np.cumsum(msizes)].astype(np.int64), mpids)
        self.moved_by_refresh += len(moved)
        return len(moved)

    def statistics_changed(self) -> None:
        """New event statistics (``Matcher.set_statistics``): re-pivot."""
        self._delta_source = None
        self.refresh_pivots()

    def refresh_probabilities(self) -> None:
        self._delta_source = None

    def reorganize(self) -> dict:
        """Re-pivot every row with the current Delta (``Matcher.reorganize``)."""
        moved = self.refresh_pivots()
        return {"moved": moved, "pivot_lists": int(np.count_nonzero(self.list_rows[: self.n_lists]))}

    def _check_strings(self) -> None:
        """Renumbered string codes (engine/frontend/encoding.py): rewrite the stored codes of order predicates on strings.

        Renumbering keeps the order of strings, so each segment stays sorted;
        an old code is mapped to its string through the codes seen last time.
        """
        strings = self.preds.strings
        if self._strings_version == strings.version:
            if len(self._codes_seen) != len(strings.codes):  # new constants only: existing codes unchanged
                self._codes_seen = strings.codes.copy()
            return
        self._strings_version = strings.version
        old, self._codes_seen = self._codes_seen, strings.codes.copy()
        nb = self.n_buckets
        rng = np.flatnonzero(self.b_op[:nb] > OP_NE)
        lens = self.b_len[rng].astype(np.int64)
        if len(old) == 0 or lens.sum() == 0:
            return
        pos, _ = csr_positions(self.b_base[rng], lens)
        pos = pos[self.e_field[pos] % N_KINDS == KIND_STRING]
        if len(pos) == 0:
            return
        order = np.argsort(old)
        stale = self.e_val[pos].astype(np.int64)
        sid = order[np.minimum(np.searchsorted(old[order], stale), len(old) - 1)]
        if np.any(old[sid] != stale):
            raise AssertionError("opindex: a stored string code is not one of the codes seen")
        self.e_val[pos] = self._codes_seen[sid]

    def pivot_fields(self, handles: np.ndarray) -> np.ndarray:
        """The pivot field (``attribute id * 3 + kind``) of each filed row."""
        return self.list_field[self.h_list[np.asarray(handles, dtype=np.int64)]]

    # -- matching --------------------------------------------------------
    def arrays(self) -> OpIndexArrays:
        return OpIndexArrays(self.list_of_field, self.list_op, self.seg_sig, self.b_base, self.b_len,
                             self.e_field, self.e_slot, self.e_val, self.c_base, self.c_need, self.c_state,
                             self.c_handle)

    def match_encoded(self, events, batch, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Matches of encoded events (:func:`opindex_events`)."""
        self._check_strings()
        n = len(events.offsets) - 1
        if self.epoch + n + RETRIES_MAX >= EPOCH_LIMIT:
            self.c_state[:] = 0
            self.epoch = 0
        off, ids, self.epoch = opindex_events(events, self.arrays(), handle_id, self.segments, self.epoch, CANDIDATES)
        return off, ids

    def stats(self) -> dict:
        lists = int(np.count_nonzero(self.list_rows[: self.n_lists]))
        mem = sum(int(a.nbytes) for a in (
            self.list_of_field, self.list_field, self.list_rows, self.list_op, self.seg_sig,
            self.b_base, self.b_len, self.b_cap, self.b_op, self.e_field, self.e_slot, self.e_val, self.c_base,
            self.c_cap, self.c_top, self.c_free, self.c_nfree, self.c_need, self.c_state, self.c_handle, self.c_next,
            self.h_list, self.h_slot, self.h_first, self.h_size, self.pool, self.live, self.field_subs, self.delta))
        return {
            "pivot_lists": lists,
            "clusters": lists,
            "nonempty_clusters": lists,
            "operator_lists": self.n_dirs,
            "segments": int(np.count_nonzero(self.b_len[: self.n_buckets])),
            "entries": self.n_entries,
            "moved_by_refresh": self.moved_by_refresh,
            "memory_bytes": mem,
        }


def make_opindex(ctx: IndexContext, **options) -> OpIndex:
    """``Matcher("opindex", segments=32)``."""
    if options.pop("runs", 0):
        raise ValueError("runs (sorted clusters) is an option of static and dynamic, not of opindex")
    segments = options.pop("segments", SEGMENTS)
    if options:
        raise ValueError(f"opindex takes no option {', '.join(sorted(options))}")
    return OpIndex(ctx, segments=segments)
