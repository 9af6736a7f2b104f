"""Adaptive multiple key hashing (Wu & Yu): inequality clauses in the hash key, in one table of M chained slots.

A subscription is a point whose coordinate on a *hashed* field is one of its
clauses there (0: none).  Its slot is ``(sum_i w_i * h_i(C_i)) mod M``
(equations 1 and 2 of the paper), collisions chained.  ``h_i`` of an
equality clause is exact (its predicate id + 1); of an inequality clause on a
*general* field it depends on the bucketing:

* ``"exact"``: exact too (MKH, equation 1);
* ``"fold"``: ``-(1 + (C_i mod B))``, the paper's ``w_i (C_i mod B)`` with the
  predicate id as the clause ID (AMKH(G, B));
* ``"range"``: the clause's value bucket, ``B`` buckets per field and
  direction (``<``/``<=``, ``>``/``>=``, ``!=``) bounded at quantiles of the
  constants filed when the field is configured; an event satisfying a clause
  of a bucket probes the bucket, so a bucket holds the clauses an event
  near its edge satisfies and few others.

An event makes, per hashed field, the set of members its satisfied
predicates map to, and for each *shape* (the set of hashed fields on which
live subscriptions have a clause) probes the product of those sets: the
candidate coordinates, enumerated per shape rather than over every field
with 0s (2^k probes).  Every subscription chained in a probed slot is
*examined*: all its predicates are checked against the event's satisfied
predicates, so matching is exact whatever the bucketing and collisions.
``stats()["amkh"]`` counts events, coordinate probes, subscriptions examined
and matched since :meth:`AmkhIndex.reset_counters`: the paper's metric is
``(examined - matched) / events``.

Which fields are hashed is the *configuration*, fixed from the first
subscriptions filed (and redone by :meth:`AmkhIndex.reorganize`):
``equality`` (attribute names; default every attribute whose clauses are all
``=``, the paper's equality-only attributes) key their ``=`` clauses;
``general`` (attribute names, each with a bucketing, or ``"auto"``) key
every clause.  With ``general="auto"`` the index prices candidate
configurations on a sample of events (the first match batch of at least
``AUTO_MIN_EVENTS`` events, or :meth:`AmkhIndex.set_sample`) by building each and counting what it probes
and examines: ``PROBE_NS`` per coordinate probe, ``CHECK_NS`` per chained
subscription read.  A greedy keeps adding the (attribute, bucketing) that
lowers the price most, at most ``MAX_GENERAL``; the paper's rules of thumb
(G = 0 when many equality clauses, the most selective general attribute
first, B small when selectivity is low) become outcomes of the price.
Choosing costs one trial build of the live subscriptions per candidate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from ..columnar import csr_positions
from ..costmodel.model import CostModel
from ..frontend.encoding import N_KINDS, AttributeDictionary
from ..structures.idpool import grow, lookup
from .index import IndexContext
from ..structures.predicates import PredicateTable, satisfied_predicates
from ..kernels.scan import doubled, finish_events
from ..kernels.sorting import sort_slice_into
from ..semantics import KIND_STRING, OP_EQ

BUCKETINGS = ("exact", "fold", "range")
#: the bucketings ``general="auto"`` tries for each attribute with inequality clauses
AUTO_BUCKETINGS = (("exact", 1), ("fold", 2), ("range", 2), ("range", 4), ("range", 8))
#: events a batch needs for ``general="auto"`` to price on it (smaller batches match with equality keys only)
AUTO_MIN_EVENTS = 100
#: the most general attributes ``general="auto"`` keys (the paper's G; it finds 1 or 2 enough)
MAX_GENERAL = 2
#: member_of value of a predicate that is no key member (an inequality on an equality-only field)
NO_MEMBER = np.iinfo(np.int64).min
#: slots per subscription when ``table_size`` is not given (load factor 1/2)
SLOTS_PER_SUBSCRIPTION = 2
#: the most hashed fields (shapes are bit masks): beyond, the equality fields with the most "=" clauses are keyed
MAX_HASHED = 63
#: predicates a handle's record holds inline (one 64-byte line: next, key sum, size, 5 predicate ids)
INLINE = 5
REC_WIDTH = 3 + INLINE
#: ns per coordinate probe and per chained subscription read (each a random read of a slot or a record), the
#: weights of ``general="auto"``'s price, set by hand (their ratio is what matters); benchmarks/workloads/amkh.py fits them on
#: its runs, but on a shared machine the fit follows the load
PROBE_NS = 60.0
CHECK_NS = 30.0
#: direction of each operator code for range buckets: = (none), !=, <, <=, >, >=
_DIRECTION = np.array([-1, 2, 0, 0, 1, 1], dtype=np.int64)


@njit(cache=True)
def coordinates(off, pids, pred_field, pred_op, hpos, member_of, weights):
    """Per row: its key sum (``sum w_k * member_k``, wrapping) and shape (bit mask of hashed positions).

    On each hashed field the row's ``=`` clause is its member, else its first
    inequality clause with a member.
    """
    n = off.shape[0] - 1
    ksum = np.zeros(n, dtype=np.int64)
    shape = np.zeros(n, dtype=np.int64)
    nh = weights.shape[0]
    chosen = np.zeros(max(nh, 1), dtype=np.int64)
    is_eq = np.zeros(max(nh, 1), dtype=np.bool_)
    for i in range(n):
        m = 0
        for j in range(off[i], off[i + 1]):
            p = pids[j]
            f = pred_field[p]
            k = hpos[f] if f < hpos.shape[0] else -1
            if k < 0 or member_of[p] == NO_MEMBER:
                continue
            bit = np.int64(1) << k
            eq = pred_op[p] == 0
            if (m & bit) == 0 or (eq and not is_eq[k]):
                chosen[k] = member_of[p]
                is_eq[k] = eq
                m |= bit
        s = np.int64(0)
        for k in range(nh):
            if m & (np.int64(1) << k):
                s += weights[k] * chosen[k]  # wraps modulo 2^64
                is_eq[k] = False
        ksum[i] = s
        shape[i] = m
    return ksum, shape


@njit(cache=True)
def link(handles, ksum, head, rec, prv, slot_of, m_slots):
    """Chain each handle at the head of its slot ``ksum mod M`` (``rec[h, NEXT]``), its key sum in ``rec[h, KEY]``."""
    for i in range(handles.shape[0]):
        h = handles[i]
        s = ksum[i] % m_slots
        slot_of[h] = s
        f = head[s]
        rec[h, 0] = f
        rec[h, 1] = ksum[i]
        prv[h] = -1
        if f >= 0:
            prv[f] = h
        head[s] = h


@njit(cache=True)
def unlink(handles, head, rec, prv, slot_of):
    for i in range(handles.shape[0]):
        h = handles[i]
        p, q = prv[h], rec[h, 0]
        if p >= 0:
            rec[p, 0] = q
        else:
            head[slot_of[h]] = q
        if q >= 0:
            prv[q] = p
        rec[h, 0] = -1
        prv[h] = -1
        slot_of[h] = -1


@njit(cache=True, _nrt=False)
def event_members(sat, ns, pred_field, hpos, member_of, nh, cnt, mem_off, mem, buf):
    """The distinct key members of an event's satisfied predicates per hashed position (CSR in ``mem_off``/``mem``).

    ``buf``: room for ``ns + 256`` entries, the sort's (nothing is allocated: no reference-counting runtime).
    """
    for k in range(nh):
        cnt[k] = 0
    for t in range(ns):
        p = sat[t]
        f = pred_field[p]
        k = hpos[f] if f < hpos.shape[0] else -1
        if k >= 0 and member_of[p] != NO_MEMBER:
            cnt[k] += 1
    mem_off[0] = 0
    for k in range(nh):
        mem_off[k + 1] = mem_off[k] + cnt[k]
        cnt[k] = mem_off[k]
    for t in range(ns):
        p = sat[t]
        f = pred_field[p]
        k = hpos[f] if f < hpos.shape[0] else -1
        if k >= 0 and member_of[p] != NO_MEMBER:
            mem[cnt[k]] = member_of[p]
            cnt[k] += 1
    # distinct members per position (fold and range map many predicates to one member)
    for k in range(nh):
        a, b = mem_off[k], mem_off[k + 1]
        if b - a > 1:
            sort_slice_into(mem, a, b, buf)
            w = a + 1
            for t in range(a + 1, b):
                if mem[t] != mem[w - 1]:
                    mem[w] = mem[t]
                    w += 1
            cnt[k] = w - a
        else:
            cnt[k] = b - a


@njit(cache=True)
def amkh_events(ev, preds, member_of, hpos, weights, shapes, head, rec, arena, handle_id, counters):
    """Match a batch of events; ``counters`` += (events, probes, examined, matched, collisions).

    The events are matched by :func:`amkh_into`, which stops at an event for
    which its output or its probed coordinates have no room: the full one is
    grown here (with the sort's buffer) and the event matched again.
    """
    n_ev = ev.offsets.shape[0] - 1
    n_ids = max(preds.bits.shape[0], 1)
    sat = np.empty(n_ids, dtype=np.int64)
    satbit = np.zeros(n_ids, dtype=np.bool_)
    nh = weights.shape[0]
    cnt = np.zeros(nh + 1, dtype=np.int64)
    mem_off = np.zeros(nh + 1, dtype=np.int64)
    mem = np.empty(n_ids, dtype=np.int64)
    pos = np.zeros(nh + 1, dtype=np.int64)
    digit = np.zeros(nh + 1, dtype=np.int64)
    slots = np.empty(64, dtype=np.int64)
    buf = np.empty(max(n_ids, slots.shape[0]) + 256, dtype=np.int64)
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    tally = np.zeros(3, dtype=np.int64)
    e = 0
    while True:
        e1, nout, full = amkh_into(e, ev, preds, member_of, hpos, weights, shapes, head, rec, arena, sat, satbit, cnt,
                                   mem_off, mem, pos, digit, slots, buf, out, nout, out_off, tally)
        finish_events(out, out_off, e, e1, handle_id, nout)
        if e1 >= n_ev:
            break
        e = e1
        if full == OUT_FULL:
            out = doubled(out, nout)
        else:
            slots = doubled(slots, 0)
            buf = np.empty(max(n_ids, slots.shape[0]) + 256, dtype=np.int64)
    counters[0] += n_ev
    counters[1] += tally[0]
    counters[2] += tally[1]
    counters[3] += nout
    counters[4] += tally[2]
    return out_off, out[:nout].copy()


#: What stopped :func:`amkh_into` before the last event: its output or its probed coordinates were full.
OUT_FULL, SLOTS_FULL = 1, 2


@njit(cache=True, _nrt=False)
def amkh_into(e0, ev, preds, member_of, hpos, weights, shapes, head, rec, arena, sat, satbit, cnt, mem_off, mem, pos,
              digit, slots, buf, out, nout, out_off, tally):
    """Events ``e0:`` of :func:`amkh_events` (matched handles, not yet ids), without growing any array.

    Per event: phase 1, its key members per hashed position, the
    coordinates of every shape present probed once each.  A chained
    subscription whose key sum is not the probed coordinate's is a
    collision: skipped without reading its predicates.  ``rec`` holds per
    handle, in one cache line: the next handle of its chain, its key sum, its
    number of predicates and the predicates themselves (up to ``INLINE``; more
    live in ``arena`` from ``rec[h, 3]``).  ``tally`` += (probes, examined,
    collisions) of the events done.

    Returns ``(e, nout, full)``: ``e`` = the number of events when done
    (``full`` = 0), else the event for which ``out`` (``OUT_FULL``) or
    ``slots`` (``SLOTS_FULL``) had no room, its handles dropped.  Without
    numba's reference-counting runtime (docs/design/engine.md, "Kernel contract"):
    with it, ``out`` and ``slots`` reassigned by their growth checks cost a
    pair of atomic operations per coordinate.
    """
    ev_off, ev_field, ev_code, ev_eqbits = ev.offsets, ev.field, ev.code, ev.eqbits
    ev_rep, p_bits = ev.repeats, preds.bits
    tkeys, tvals, group_of = preds.table_keys, preds.table_vals, preds.group_of
    g_start, g_end, g_vals, g_pids = preds.g_start, preds.g_end, preds.g_vals, preds.g_pids
    pred_field = preds.field
    n_ev = ev_off.shape[0] - 1
    nh = weights.shape[0]
    m_slots = head.shape[0]
    for i in range(e0, n_ev):
        ns = satisfied_predicates(ev_off[i], ev_off[i + 1], ev_field, ev_code, ev_eqbits, tkeys, tvals, group_of,
                                  g_start, g_end, g_vals, g_pids, sat, ev_rep[i], p_bits)
        for t in range(ns):
            satbit[sat[t]] = True
        event_members(sat, ns, pred_field, hpos, member_of, nh, cnt, mem_off, mem, buf)
        nslots = 0
        full = 0
        for si in range(shapes.shape[0]):
            sh = shapes[si]
            d = 0
            ok = True
            for k in range(nh):
                if sh & (np.int64(1) << k):
                    if cnt[k] == 0:
                        ok = False
                        break
                    pos[d] = k
                    digit[d] = 0
                    d += 1
            if not ok:
                continue
            while True:  # odometer over the product of the shape's member sets
                s = np.int64(0)
                for t in range(d):
                    k = pos[t]
                    s += weights[k] * mem[mem_off[k] + digit[t]]
                if nslots == slots.shape[0]:
                    full = SLOTS_FULL
                    break
                slots[nslots] = s
                nslots += 1
                t = 0
                while t < d:
                    digit[t] += 1
                    if digit[t] < cnt[pos[t]]:
                        break
                    digit[t] = 0
                    t += 1
                if t == d:
                    break
            if full:
                break
        start = nout
        examined = 0
        collisions = 0
        if not full:
            # a coordinate reached twice (sums of distinct members may coincide) is probed once
            sort_slice_into(slots, 0, nslots, buf)
            for t in range(nslots):
                if t > 0 and slots[t] == slots[t - 1]:
                    continue
                key = slots[t]
                h = head[key % m_slots]
                while h >= 0:
                    if rec[h, 1] != key:
                        collisions += 1
                        h = rec[h, 0]
                        continue
                    examined += 1
                    n = rec[h, 2]
                    good = True
                    if n <= INLINE:
                        for j in range(3, 3 + n):
                            if not satbit[rec[h, j]]:
                                good = False
                                break
                    else:
                        a = rec[h, 3]
                        for j in range(a, a + n):
                            if not satbit[arena[j]]:
                                good = False
                                break
                    if good:
                        if nout == out.shape[0]:
                            full = OUT_FULL
                            break
                        out[nout] = h
                        nout += 1
                    h = rec[h, 0]
                if full:
                    break
        for t in range(ns):
            satbit[sat[t]] = False
        if full:
            return i, start, full
        tally[0] += nslots
        tally[1] += examined
        tally[2] += collisions
        out_off[i + 1] = nout
    return n_ev, nout, 0


def _weights(n: int, seed: int) -> np.ndarray:
    """The paper's "random" w_i: odd 64-bit multipliers (int64 arithmetic wraps modulo 2^64 in the kernels)."""
    rng = np.random.default_rng(seed)
    return rng.integers(-(2**62), 2**62, size=n, dtype=np.int64) * 2 + 1


class AmkhIndex:
    """One multiple-key hash table of M chained slots (module docstring); ``Matcher("amkh", ...)``.

    Options: ``general`` (attributes whose inequality clauses enter the key:
    names, each with ``bucketing`` and ``buckets``, or ``(name, bucketing,
    buckets)`` triples, or a dict ``{name: (bucketing, buckets)}``; ``()`` for
    none; ``"auto"`` to price them), ``bucketing`` (one of
    :data:`BUCKETINGS`), ``buckets`` (B of ``fold``, buckets per direction of
    ``range``), ``equality`` (attribute names whose ``=`` clauses enter the
    key; None: every equality-only attribute), ``table_size`` (M; None: twice
    the subscriptions, doubled as they grow), ``seed`` (of the weights).
    """

    def __init__(self, preds: PredicateTable, attributes: AttributeDictionary, model: CostModel, *,
                 general: Any = (), bucketing: str = "fold", buckets: int = 2, equality: Any = None,
                 table_size: int | None = None, seed: int = 0) -> None:
        _check_bucketing(bucketing, buckets)
        if table_size is not None and (not isinstance(table_size, (int, np.integer)) or table_size < 1):
            raise ValueError(f"table_size is an integer >= 1, not {table_size!r}")
        if isinstance(general, str) and general != "auto":
            general = (general,)
        if isinstance(equality, str):
            equality = (equality,)
        self.preds = preds
        self.attributes = attributes
        self.model = model
        self.general_option = general if general == "auto" else _general(general, bucketing, int(buckets))
        self.bucketing = bucketing
        self.buckets = int(buckets)
        self.equality_option = None if equality is None else tuple(equality)
        self.table_size = None if table_size is None else int(table_size)
        self.seed = seed
        self.configured = False
        self.general: tuple[tuple[str, str, int], ...] = ()  # (attribute, bucketing, buckets)
        self.equality: tuple[str, ...] = ()
        self.hpos = np.full(0, -1, dtype=np.int64)  # field -> hashed position (-1: not hashed)
        self.general_field = np.zeros(0, dtype=bool)  # field -> its inequality clauses are key members
        self.field_bucketing: dict[int, tuple[str, int]] = {}  # general field -> (bucketing, buckets)
        self.weights = np.zeros(0, dtype=np.int64)
        self.bounds: dict[tuple[int, int], np.ndarray] = {}  # (field, direction) -> range bucket bounds
        self.member_of = np.full(0, NO_MEMBER, dtype=np.int64)
        self._member_known = np.zeros(0, dtype=bool)
        self.head = np.full(1, -1, dtype=np.int64)
        self.rec = np.zeros((0, REC_WIDTH), dtype=np.int64)  # handle -> next, key sum, size, predicates
        self.prv = np.zeros(0, dtype=np.int64)
        self.slot_of = np.zeros(0, dtype=np.int64)
        self.ksum = np.zeros(0, dtype=np.int64)
        self.shape_of = np.zeros(0, dtype=np.int64)
        self.shape_refs: dict[int, int] = {}
        self.shapes = np.zeros(0, dtype=np.int64)
        self.sub_first = np.zeros(0, dtype=np.int64)
        self.sub_len = np.zeros(0, dtype=np.int64)
        self.arena = np.zeros(0, dtype=np.int64)
        self.arena_used = 0
        self.live = np.zeros(0, dtype=bool)
        self.n_live = 0
        self.counters = np.zeros(5, dtype=np.int64)
        self.sample_events = None  # events "auto" prices on (set_sample), else the first match batch

    # -- configuration ---------------------------------------------------------
    def _fields_of(self, names: tuple[str, ...]) -> np.ndarray:
        ids = [self.attributes.ids[n] for n in names if n in self.attributes.ids]
        return np.array([a * N_KINDS + k for a in ids for k in range(N_KINDS)], dtype=np.int64)

    def _live_pids(self) -> np.ndarray:
        handles = np.flatnonzero(self.live)
        if not len(handles):
            return np.zeros(0, dtype=np.int64)
        return self._pids_of(handles)[1]

    def _configure(self, pids: np.ndarray, spec: tuple[tuple[str, str, int], ...]) -> None:
        """Choose the hashed fields and the members of every predicate (before any subscription is linked)."""
        general = tuple(g[0] for g in spec)
        field, op = self.preds.field[pids], self.preds.op[pids]
        names = {i: n for n, i in self.attributes.ids.items()}
        if self.equality_option is None:
            attrs = field // N_KINDS
            ineq = set(np.unique(attrs[op != OP_EQ]).tolist())
            eq_attrs = [a for a in np.unique(attrs[op == OP_EQ]).tolist() if a not in ineq]
            equality = tuple(sorted(names[a] for a in eq_attrs if names[a] not in general))
        else:
            equality = tuple(n for n in self.equality_option if n not in general)
        present = np.unique(field)
        gen_fields = np.intersect1d(self._fields_of(general), present)
        eq_fields = np.setdiff1d(np.intersect1d(self._fields_of(equality), present), gen_fields)
        if len(gen_fields) > MAX_HASHED:  # keyed in the order given; the others are checked
            order = [f for g in general for f in self._fields_of((g,)).tolist() if f in set(gen_fields.tolist())]
            gen_fields = np.sort(np.array(order[:MAX_HASHED], dtype=np.int64))
            kept = {int(f) // N_KINDS for f in gen_fields}
            spec = tuple(g for g in spec if self.attributes.ids.get(g[0]) in kept)
            general = tuple(g[0] for g in spec)
        if len(gen_fields) + len(eq_fields) > MAX_HASHED:
            # wide workloads: key the equality fields with the most "=" clauses, check the others
            counts = np.bincount(field[op == OP_EQ], minlength=int(present.max()) + 1)[eq_fields]
            keep = np.sort(eq_fields[np.argsort(-counts, kind="stable")[: MAX_HASHED - len(gen_fields)]])
            kept = {int(f) // N_KINDS for f in keep}
            equality = tuple(n for n in equality if self.attributes.ids[n] in kept)
            eq_fields = keep
        hashed = np.union1d(eq_fields, gen_fields)
        self.equality, self.general = equality, spec
        n_fields = max(self.preds.n_fields, int(hashed.max()) + 1 if len(hashed) else 0)
        self.hpos = np.full(n_fields, -1, dtype=np.int64)
        self.hpos[hashed] = np.arange(len(hashed))
        self.general_field = np.zeros(n_fields, dtype=bool)
        self.field_bucketing = {}
        for name, kind, b in spec:
            fs = self._fields_of((name,))
            self.general_field[fs[fs < n_fields]] = True
            self.field_bucketing.update({int(f): (kind, b) for f in fs})
        self.weights = _weights(len(hashed), self.seed)
        self.bounds = {}
        codes = self.preds._codes(field, self.preds.bits_value[pids])
        for f in np.flatnonzero(self.general_field).tolist():
            kind, nb = self.field_bucketing[f]
            if kind == "range":
                for d in range(3):
                    sel = (field == f) & (op != OP_EQ) & (_DIRECTION[op] == d)
                    vals = np.unique(codes[sel])
                    vals = vals[np.isfinite(vals)]
                    if len(vals) > 1 and nb > 1:
                        self.bounds[(f, d)] = np.unique(np.quantile(vals, np.arange(1, nb) / nb))
                    else:
                        self.bounds[(f, d)] = np.zeros(0)
        self.member_of = np.full(0, NO_MEMBER, dtype=np.int64)
        self._member_known = np.zeros(0, dtype=bool)
        self.configured = True

    def _members(self, pids: np.ndarray) -> None:
        """member_of of predicates not seen since the configuration."""
        top = self.preds.n_ids
        self.member_of = grow(self.member_of, top, NO_MEMBER)
        self._member_known = grow(self._member_known, top, False)
        new = np.unique(pids[~self._member_known[pids]])
        if not len(new):
            return
        self._member_known[new] = True
        field, op = self.preds.field[new], self.preds.op[new]
        gen = lookup(self.general_field, field, False)
        mem = np.full(len(new), NO_MEMBER, dtype=np.int64)
        eq = op == OP_EQ
        mem[eq] = new[eq] + 1
        ineq = np.flatnonzero(gen & ~eq)
        codes = self.preds._codes(field, self.preds.bits_value[new])
        for i in ineq.tolist():
            f, p = int(field[i]), int(new[i])
            kind, nb = self.field_bucketing[f]
            if kind == "exact":
                mem[i] = p + 1
                continue
            d = int(_DIRECTION[op[i]])
            b = self.bounds.get((f, d))
            if kind == "fold" or b is None or f % N_KINDS == KIND_STRING:  # strings: their codes move, fold them
                mem[i] = -(1 + 3 * nb + p % nb)
            else:
                mem[i] = -(1 + d * nb + int(np.searchsorted(b, codes[i], side="right")))
        self.member_of[new] = mem

    # -- filing ----------------------------------------------------------------
    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        self.preds.incref(pids)
        if not self.configured:
            general = self.general_option
            if general == "auto":
                general = ()  # priced on the first events (choose_general)
            self._configure(pids, general)
        self._members(pids)
        top = int(handles.max()) + 1
        if len(self.rec) < top:
            rec = np.full((max(top, 2 * len(self.rec)), REC_WIDTH), -1, dtype=np.int64)
            rec[: len(self.rec)] = self.rec
            self.rec = rec
        self.prv = grow(self.prv, top, -1)
        self.slot_of, self.ksum = grow(self.slot_of, top, -1), grow(self.ksum, top, 0)
        self.shape_of = grow(self.shape_of, top, 0)
        self.sub_first, self.sub_len = grow(self.sub_first, top, 0), grow(self.sub_len, top, 0)
        self.live = grow(self.live, top, False)
        sizes = np.diff(off)
        need = self.arena_used + len(pids)
        if need > len(self.arena):
            self.arena = grow(self.arena, max(need, 2 * len(self.arena)), -1)
        self.arena[self.arena_used:need] = pids
        self.sub_first[handles] = self.arena_used + off[:-1]
        self.sub_len[handles] = sizes
        self.arena_used = need
        self._records(handles)
        self.live[handles] = True
        self.n_live += len(handles)
        self._link(handles, off, pids)

    def _records(self, handles: np.ndarray) -> None:
        """Size and predicates (inline, or their place in the arena) of each handle's record."""
        sizes = self.sub_len[handles]
        self.rec[handles, 2] = sizes
        long = sizes > INLINE
        self.rec[handles[long], 3] = self.sub_first[handles[long]]
        short = handles[~long]
        for j in range(INLINE):
            has = self.sub_len[short] > j
            self.rec[short[has], 3 + j] = self.arena[self.sub_first[short[has]] + j]

    def _link(self, handles, off, pids) -> None:
        ksum, shape = coordinates(off, pids, self.preds.field, self.preds.op, self.hpos, self.member_of, self.weights)
        self.ksum[handles] = ksum
        self.shape_of[handles] = shape
        for s, c in zip(*np.unique(shape, return_counts=True)):
            self.shape_refs[int(s)] = self.shape_refs.get(int(s), 0) + int(c)
        self.shapes = np.array(sorted(self.shape_refs), dtype=np.int64)
        if self.table_size is not None:
            rehash = len(self.head) != self.table_size
            want = self.table_size
        else:
            want = max(SLOTS_PER_SUBSCRIPTION * self.n_live, 1)
            rehash = len(self.head) < want // 2
        if rehash:
            self._rehash(want)
        else:
            link(handles, ksum, self.head, self.rec, self.prv, self.slot_of, len(self.head))

    def _rehash(self, m_slots: int) -> None:
        self.head = np.full(m_slots, -1, dtype=np.int64)
        live = np.flatnonzero(self.live)
        link(live, self.ksum[live], self.head, self.rec, self.prv, self.slot_of, m_slots)

    def _pids_of(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx, off = csr_positions(self.sub_first[handles], self.sub_len[handles])
        return off, self.arena[idx]

    def remove_bulk(self, handles: np.ndarray) -> None:
        handles = np.asarray(handles, dtype=np.int64)
        _, pids = self._pids_of(handles)
        unlink(handles, self.head, self.rec, self.prv, self.slot_of)
        for s, c in zip(*np.unique(self.shape_of[handles], return_counts=True)):
            left = self.shape_refs[int(s)] - int(c)
            if left:
                self.shape_refs[int(s)] = left
            else:
                del self.shape_refs[int(s)]
        self.shapes = np.array(sorted(self.shape_refs), dtype=np.int64)
        self.live[handles] = False
        self.sub_len[handles] = 0
        self.n_live -= len(handles)
        dead = self.preds.decref(pids)
        if len(dead):
            self._member_known[dead[dead < len(self._member_known)]] = False
        if self.arena_used > 1024 and self.arena_used > 4 * int(self.sub_len.sum()):
            self._compact()

    def _compact(self) -> None:
        live = np.flatnonzero(self.live)
        off, pids = self._pids_of(live)
        self.arena = pids.copy()
        self.sub_first[live] = off[:-1]
        self.arena_used = len(pids)
        self._records(live)

    def reorganize(self, general: Any = None) -> dict:
        """Configure again from the live subscriptions (``general``: as the option; None: the option given)."""
        live = np.flatnonzero(self.live)
        off, pids = self._pids_of(live)
        chosen = self.general_option if general is None else general
        if chosen == "auto":
            chosen = self.choose_general(self.sample_events) if self.sample_events is not None else ()
        self._configure(pids, _general(chosen, self.bucketing, self.buckets))
        self._members(pids)
        self.shape_refs = {}
        self.head = np.full(1, -1, dtype=np.int64)
        self.n_live = len(live)
        self._link(live, off, pids)
        return self.configuration()

    def configuration(self) -> dict:
        return {"equality": list(self.equality), "general": [list(g) for g in self.general],
                "table_size": int(len(self.head)), "shapes": int(len(self.shapes))}

    # -- "auto": price the candidate general attributes -----------------------------
    def set_sample(self, events) -> None:
        """Encoded events (:class:`~engine.frontend.encoding.EventArrays`) ``general="auto"`` prices configurations on."""
        self.sample_events = events

    def choose_general(self, events) -> tuple[tuple[str, str, int], ...]:
        """Greedy: add the (general attribute, bucketing) that lowers :meth:`price` most, while one does.

        Candidates: every attribute with inequality clauses, at most
        ``MAX_GENERAL`` of them, each with every bucketing of :data:`AUTO_BUCKETINGS`.
        """
        self.preds.prepare()  # the trial matches run phase 1
        pids = self._live_pids()
        field, op = self.preds.field[pids], self.preds.op[pids]
        names = {i: n for n, i in self.attributes.ids.items()}
        attrs = sorted({names[a] for a in np.unique(field[op != OP_EQ] // N_KINDS).tolist()})
        chosen: tuple[tuple[str, str, int], ...] = ()
        best = self.price(events, chosen)
        self.prices = {"()": round(best, 1)}
        while len(chosen) < MAX_GENERAL:
            used = {g[0] for g in chosen}
            trials = []
            for a in attrs:
                if a in used:
                    continue
                for kind, b in AUTO_BUCKETINGS:
                    cost = self.price(events, chosen + ((a, kind, b),))
                    self.prices[str(chosen + ((a, kind, b),))] = round(cost, 1)
                    trials.append((cost, (a, kind, b)))
            if not trials:
                break
            cost, c = min(trials)
            if cost >= best:
                break
            best, chosen = cost, chosen + (c,)
        self.chosen_price = best
        return chosen

    def price(self, events, general) -> float:
        """Predicted ns per event of a configuration, from its probes and examined subscriptions on ``events``."""
        spec = _general(general, self.bucketing, self.buckets)
        trial = AmkhIndex(self.preds, self.attributes, self.model, general=spec, equality=self.equality_option,
                          table_size=self.table_size, seed=self.seed)
        live = np.flatnonzero(self.live)
        off, pids = self._pids_of(live)
        trial._configure(pids, spec)
        trial._members(pids)
        top = int(live.max()) + 1 if len(live) else 1
        trial.prv, trial.slot_of = np.full(top, -1, dtype=np.int64), np.full(top, -1, dtype=np.int64)
        trial.rec = self.rec[:top].copy()
        trial.ksum, trial.shape_of = np.zeros(top, dtype=np.int64), np.zeros(top, dtype=np.int64)
        trial.live = self.live[:top].copy()
        trial.arena, trial.sub_first, trial.sub_len = self.arena, self.sub_first, self.sub_len
        trial.n_live = len(live)
        trial._link(live, off, pids)
        trial._match(events, np.arange(top, dtype=np.int64))
        ev, probes, examined, _, collisions = trial.counters
        return float((probes * PROBE_NS + (examined + collisions) * CHECK_NS) / max(ev, 1))

    # -- matching --------------------------------------------------------------
    def _match(self, events, handle_id):
        return amkh_events(events, self.preds.arrays(), self.member_of, self.hpos, self.weights, self.shapes,
                           self.head, self.rec, self.arena, handle_id, self.counters)

    def match_encoded(self, events, batch, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if (self.general_option == "auto" and self.sample_events is None and self.n_live
                and len(events.offsets) - 1 >= AUTO_MIN_EVENTS):
            self.sample_events = events
            self.reorganize("auto")
        return self._match(events, handle_id)

    def reset_counters(self) -> None:
        self.counters[:] = 0

    def stats(self) -> dict:
        ev, probes, examined, matched, collisions = (int(x) for x in self.counters)
        mem = sum(int(a.nbytes) for a in (self.head, self.rec, self.prv, self.slot_of, self.ksum, self.shape_of,
                                          self.sub_first, self.sub_len, self.arena, self.member_of))
        return {"subscriptions": int(self.n_live), "memory_bytes": mem, "configuration": self.configuration(),
                "amkh": {"events": ev, "probes": probes, "examined": examined, "matched": matched,
                         "collisions": collisions,
                         "unmatched_examined_per_event": (examined - matched) / ev if ev else 0.0,
                         "chained_unmatched_per_event": (examined - matched + collisions) / ev if ev else 0.0,
                         "probes_per_event": probes / ev if ev else 0.0}}


def _check_bucketing(bucketing, buckets) -> None:
    if bucketing not in BUCKETINGS:
        raise ValueError(f"bucketing is one of {', '.join(BUCKETINGS)}, not {bucketing!r}")
    if isinstance(buckets, bool) or not isinstance(buckets, (int, np.integer)) or buckets < 1:
        raise ValueError(f"buckets is an integer >= 1, not {buckets!r}")


def _general(general: Any, bucketing: str, buckets: int) -> tuple[tuple[str, str, int], ...]:
    """The ``general`` option as (attribute, bucketing, buckets) triples."""
    if isinstance(general, str):
        general = (general,)
    items = general.items() if isinstance(general, dict) else general
    out = []
    for g in items:
        if isinstance(g, str):
            out.append((g, bucketing, 1 if bucketing == "exact" else int(buckets)))
            continue
        name, rest = (g[0], tuple(g[1:])) if not isinstance(general, dict) else (g[0], tuple(g[1]))
        if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
            rest = tuple(rest[0])
        if not isinstance(name, str) or len(rest) != 2:
            raise ValueError(f"a general attribute is a name or (name, bucketing, buckets), not {g!r}")
        _check_bucketing(rest[0], rest[1])
        out.append((name, rest[0], 1 if rest[0] == "exact" else int(rest[1])))
    return tuple(out)


def make_amkh(ctx: IndexContext, **options) -> AmkhIndex:
    """``Matcher("amkh", general=..., bucketing=..., buckets=..., equality=..., table_size=..., seed=...)``."""
    if options.pop("runs", 0):
        raise ValueError("runs (sorted clusters) is an option of static and dynamic, not of amkh")
    allowed = {"general", "bucketing", "buckets", "equality", "table_size", "seed"}
    extra = set(options) - allowed
    if extra:
        raise ValueError(f"amkh takes no option {', '.join(sorted(extra))}; its options: {', '.join(sorted(allowed))}")
    return AmkhIndex(ctx.preds, ctx.probabilities.attributes, ctx.cost_model(), **options)
