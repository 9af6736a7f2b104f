"""The predicate table: each distinct predicate once, its bit-vector entry, its indexes.

Section 2.2: "each indexed predicate that occurs in one or more subscriptions
is associated with a single entry in the predicate bit vector".  A predicate
is (field, operator, value) (see engine/frontend/encoding.py); its id is its bit.

Indexes (phase 1 of Figure 2, shared by every algorithm):

* equality: a hash table keyed by (field * 6 + operator, eqbits), probed once
  per event pair;
* ``<`` ``<=`` ``>`` ``>=``: per (field, operator) *group*, the constants in
  sorted order with their ids, so that an event value satisfies a contiguous
  run of the group, found by two binary searches;
* ``!=``: the same sorted group; the event value satisfies the whole run
  except the one constant equal to it (set the run, skip one).

Groups are flat arrays rebuilt lazily, and only when a new inequality
predicate appears (or freed ids are recycled); bulk loads give new predicates
ids in (field, operator, value) order, so runs are also contiguous in the bit
vector.  Reference counts free a predicate when its last subscription goes;
its id is recycled at the next rebuild.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..frontend.encoding import N_KINDS, StringDictionary
from .hashtable import HashTable, KeylessTable, ht_find2
from .idpool import IdPool, grow
from ..semantics import KIND_BOOL, KIND_STRING, OP_EQ, OP_GT, OP_LE, OP_LT, OP_NE, OPERATORS

N_OPS = len(OPERATORS)


class PredicateArrays(NamedTuple):
    """The predicate table as the kernels read it (:meth:`PredicateTable.arrays`).

    Phase 1 (Figure 2) reads the equality hash table and the inequality
    groups; phase 2 reads and writes the bit vector (one byte per predicate
    id, all zero between events); the conjunction probes read ``field`` and
    ``op`` of the satisfied predicates.
    """

    table_keys: np.ndarray  # int64 [slots, 2]: (field * 6 + op, eqbits) of every predicate (hashtable.py)
    table_vals: np.ndarray  # int64 [slots]: its id (-1: empty slot)
    group_of: np.ndarray  # int32 [fields, 6]: inequality group of (field, op), -1 if none
    g_start: np.ndarray  # int64 [groups]: first position of the group in g_vals / g_pids
    g_end: np.ndarray  # int64 [groups]: one past its last
    g_vals: np.ndarray  # float64: the group's constants (codes), ascending
    g_pids: np.ndarray  # int64: the predicate id of each constant
    field: np.ndarray  # int64 [ids]: field of each predicate id
    op: np.ndarray  # int8 [ids]: operator code of each predicate id
    bits: np.ndarray  # uint8 [>= ids]: the predicate bit vector


@njit(cache=True, inline="always")
def _nan_last_lt(a, b):
    """``a < b`` in numpy's sort order (NaN after every number), as ``np.searchsorted`` compares."""
    return a < b or (b != b and a == a)


@njit(cache=True, inline="always")
def _bisect(a, lo, hi, x, right):
    """``lo + np.searchsorted(a[lo:hi], x, side)`` without the view (``right``: side="right")."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if (not _nan_last_lt(x, a[mid])) if right else _nan_last_lt(a[mid], x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def order_holds(op, x, c):
    """``x op c`` for the operator codes 1..5 (``!=`` ``<`` ``<=`` ``>`` ``>=``), on order codes or numbers."""
    if op == OP_NE:
        return x != c
    if op == OP_LT:
        return x < c
    if op == OP_LE:
        return x <= c
    if op == OP_GT:
        return x > c
    return x >= c


# Without numba's reference-counting runtime: it allocates nothing, and with it each group's slice of
# ``g_vals`` cost an atomic increment and decrement per group examined (docs/design/engine.md, "Kernel contract").
@njit(cache=True, _nrt=False)
def satisfied_predicates(lo, hi, field, code, eqbits, tkeys, tvals, group_of, g_start, g_end, g_vals, g_pids, sat,
                         rep, bits):
    """Phase 1 for the event made of pairs ``lo:hi``: ids of satisfied predicates into ``sat``.

    ``field``, ``code``, ``eqbits`` are :class:`~engine.frontend.encoding.EventArrays`'
    and ``tkeys`` .. ``g_pids`` the phase-1 arrays of :class:`PredicateArrays`
    (``table_keys`` .. ``g_pids``), passed one by one: this is called once
    per event, and the batch loops unpack their containers once per batch
    (numba reference-counts every array a call unpacks from a container).

    Returns how many were written, each predicate at most once, so that
    ``len(sat)`` >= number of predicate ids suffices.  An event that carries
    a field several times (``rep``: ``EventArrays.repeats``) may satisfy a
    predicate through several values: then ``bits`` (the predicate bit vector,
    all zero, left so) marks those written already.
    """
    n = 0
    n_fields = group_of.shape[0]
    for j in range(lo, hi):
        f = field[j]
        if f < 0:
            continue
        p = ht_find2(tkeys, tvals, f * 6 + 0, eqbits[j])
        if p >= 0:
            n = _put(sat, n, p, rep, bits)
        if f >= n_fields:  # no inequality on this field (groups are sized lazily)
            continue
        x = code[j]
        for op in range(1, 6):
            g = group_of[f, op]
            if g < 0:
                continue
            s = g_start[g]
            e = g_end[g]
            if op == OP_NE:  # !=: whole group but the constant equal to x
                a = _bisect(g_vals, s, e, x, False)
                skip = a if (a < e and g_vals[a] == x) else -1
                for i in range(s, e):
                    if i != skip:
                        n = _put(sat, n, g_pids[i], rep, bits)
                continue
            if op == OP_LT:  # x < c
                a = _bisect(g_vals, s, e, x, True)
                b = e
            elif op == OP_LE:  # x <= c
                a = _bisect(g_vals, s, e, x, False)
                b = e
            elif op == OP_GT:  # x > c
                a = s
                b = _bisect(g_vals, s, e, x, False)
            else:  # x >= c
                a = s
                b = _bisect(g_vals, s, e, x, True)
            for i in range(a, b):
                n = _put(sat, n, g_pids[i], rep, bits)
    if rep:
        for t in range(n):
            bits[sat[t]] = 0
    return n


@njit(cache=True, inline="always")
def _put(sat, n, p, rep, bits):
    """``p`` appended to ``sat[:n]`` unless ``rep`` and it is there already (its bit set); the new length."""
    if rep:
        if bits[p]:
            return n
        bits[p] = 1
    sat[n] = p
    return n + 1


@njit(cache=True)
def group_order(order, key, n_keys):
    """``order`` stably re-sorted by ``key[order]`` (small non-negative ints below ``n_keys``): a counting sort,
    which with ``order`` sorting the values is ``np.lexsort((values, key))`` without its comparison sort of tuples."""
    start = np.zeros(n_keys + 1, dtype=np.int64)
    for i in order:
        start[key[i] + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
    out = np.empty_like(order)
    for i in order:
        out[start[key[i]]] = i
        start[key[i]] += 1
    return out


@njit(cache=True)
def fields_of(pfield, pids, n_fields):
    """Which fields ``pids`` are on: ``np.unique(pfield[pids])`` as a mask, without sorting millions of ids."""
    seen = np.zeros(n_fields, dtype=np.bool_)
    for p in pids:
        seen[pfield[p]] = True
    return seen


@njit(cache=True)
def fields_in_use(pfield, pop, refcount, top, n_fields, equality_only, live_only):
    """Which fields ids ``0:top`` are on, among the equality ones (``equality_only``) and the referenced ones
    (``live_only``): the mask of :func:`fields_of` over a filter of the whole table."""
    seen = np.zeros(n_fields, dtype=np.bool_)
    for p in range(top):
        if (live_only and refcount[p] <= 0) or (equality_only and pop[p] != OP_EQ):
            continue
        seen[pfield[p]] = True
    return seen


class PredicateTable:
    """Distinct predicates, their reference counts, indexes and bit vector."""

    def __init__(self, strings: StringDictionary) -> None:
        self.strings = strings
        self.table = HashTable(width=2)  # equality predicates: (field * N_OPS + op, eqbits) -> id
        self.ranges = KeylessTable(N_OPS)  # every other operator's, keyed by the same pair (see intern)
        self.n_ids = 0  # high-water mark of ids
        self.field = np.zeros(0, dtype=np.int64)
        self.op = np.zeros(0, dtype=np.int8)
        self.bits_value = np.zeros(0, dtype=np.int64)  # eqbits of the constant
        self.refcount = np.zeros(0, dtype=np.int32)  # (int32: a predicate held by 2**31 subscriptions is no use case)
        # references held by indexes that evaluate the predicate themselves (engine/algorithms/bitmaps.py): a predicate
        # all of whose references are such stays out of the inequality groups, so phase 1 never lists it
        self.offpath = np.zeros(0, dtype=np.int32)
        self.ids = IdPool()
        self.pending_free: list[int] = []  # freed ids still present in the groups
        self.n_live = 0
        self.bits = np.zeros(64, dtype=np.uint8)  # the predicate bit vector (one byte per entry)
        self._dirty = True
        self._strings_version = -1
        self.group_of = np.full((0, N_OPS), -1, dtype=np.int32)
        self.g_start = np.zeros(0, dtype=np.int64)
        self.g_end = np.zeros(0, dtype=np.int64)
        self.g_vals = np.zeros(0, dtype=np.float64)
        self.g_pids = np.zeros(0, dtype=np.int64)
        self.n_fields = 0
        self.version = 0  # bumped whenever ids get new predicates
        self.assigned: list[np.ndarray] | None = None  # the ids given new predicates, logged once a list (engine/algorithms/direct.py)

    # -- insertion -----------------------------------------------------
    def intern(self, field: np.ndarray, op: np.ndarray, eqbits: np.ndarray) -> np.ndarray:
        """Ids of predicates (field, op, eqbits), creating new ones (refcount 0).

        Equalities are found through the keyed hash table phase 1 probes;
        the other operators through a keyless one (4 bytes a slot, the keys
        read from ``field``, ``op``, ``bits_value``): phase 1 reaches them
        through their sorted groups, and a range-heavy load holds tens of
        millions of distinct constants.
        """
        out = np.empty(len(field), dtype=np.int64)
        eq = op == OP_EQ
        for rows in (eq, ~eq):
            part = slice(None) if rows.all() else np.flatnonzero(rows)
            if isinstance(part, np.ndarray) and len(part) == 0:
                continue
            f, o, b = field[part], op[part], eqbits[part]

            def assign(first: np.ndarray, f=f, o=o, b=b) -> np.ndarray:
                return self._assign(f[first], o[first], b[first])

            if o[0] == OP_EQ:
                keys = np.empty((len(f), 2), dtype=np.int64)
                keys[:, 0] = f * N_OPS + o
                keys[:, 1] = b
                out[part] = self.table.get_or_add(keys, assign)
            else:
                out[part] = self.ranges.get_or_add(f * N_OPS + o, np.ascontiguousarray(b, dtype=np.int64), self._keys,
                                                   assign)
        return out

    def _keys(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The arrays the keyless table reads a predicate's key from: ``field * N_OPS + op``, ``bits_value``."""
        return self.field, self.op, self.bits_value

    def _assign(self, nf: np.ndarray, no: np.ndarray, nb: np.ndarray) -> np.ndarray:
        """Ids for new predicates, in (field, op, value) order so that a group's runs are contiguous in the bit vector."""
        n_new = len(nf)
        order = group_order(np.argsort(self._codes(nf, nb)), nf * N_OPS + no, self.n_fields_after(nf) * N_OPS)
        final = np.empty(n_new, dtype=np.int64)
        final[order] = self.ids.take(n_new)
        self.n_ids = top = self.ids.high
        self.field = grow(self.field, top, 0)
        self.op = grow(self.op, top, 0)
        self.bits_value = grow(self.bits_value, top, 0)
        self.refcount = grow(self.refcount, top, 0)
        self.offpath = grow(self.offpath, top, 0)
        self.field[final], self.op[final], self.bits_value[final] = nf, no, nb
        self.refcount[final] = 0
        self.n_live += n_new
        self.n_fields = self.n_fields_after(nf)
        if np.any(no != OP_EQ):
            self._dirty = True
        self.version += 1
        if self.assigned is not None:
            self.assigned.append(final)
        return final

    def n_fields_after(self, field: np.ndarray) -> int:
        """``n_fields`` once predicates on ``field`` are in."""
        return max(self.n_fields, int(field.max()) + 1 if len(field) else 0)

    def _codes(self, field: np.ndarray, eqbits: np.ndarray) -> np.ndarray:
        kind = field % N_KINDS
        out = eqbits.view(np.float64).copy()
        out[kind == KIND_BOOL] = eqbits[kind == KIND_BOOL]
        s = kind == KIND_STRING
        if np.any(s):
            out[s] = self.strings.codes[eqbits[s]]
        return out

    def fields_of(self, ids: np.ndarray) -> np.ndarray:
        """The distinct fields of predicates ``ids``, ascending (``np.unique(field[ids])``)."""
        return np.flatnonzero(fields_of(self.field, np.asarray(ids, dtype=np.int64), self.n_fields))

    def fields_in_use(self, equality_only: bool = False, live_only: bool = True) -> np.ndarray:
        """The distinct fields of the live (``live_only``) or all predicate ids, of equalities only if asked; ascending."""
        return np.flatnonzero(fields_in_use(self.field, self.op, self.refcount, self.n_ids, self.n_fields,
                                            equality_only, live_only))

    def incref(self, ids: np.ndarray) -> None:
        np.add.at(self.refcount, ids, 1)

    def hold_off_path(self, ids: np.ndarray, delta: int) -> None:
        """References ``ids`` (one per entry) are (``delta=1``) or stop being (``-1``) evaluated off phase 1."""
        if not len(ids):
            return
        if 8 * len(ids) >= self.n_ids:  # (np.add.at takes a slow path per entry: seconds for millions)
            self.offpath[: self.n_ids] += delta * np.bincount(ids, minlength=self.n_ids).astype(np.int32)
        else:
            np.add.at(self.offpath, ids, delta)
        if np.any(self.op[ids] != OP_EQ):
            self._dirty = True

    def decref(self, ids: np.ndarray) -> np.ndarray:
        """Drop references; predicates reaching zero are removed from the indexes. Returns them."""
        if 8 * len(ids) >= self.n_ids:  # (np.subtract.at takes a slow path per entry: see hold_off_path)
            self.refcount[: self.n_ids] -= np.bincount(ids, minlength=self.n_ids).astype(np.int32)
        else:
            np.subtract.at(self.refcount, ids, 1)
        left = self.refcount[ids]
        if np.any((left > 0) & (left <= self.offpath[ids])):
            self._dirty = True  # only off-path references left: out of the groups
        dead = np.unique(ids[left == 0])
        if len(dead):
            eq = self.op[dead] == OP_EQ
            keys = np.empty((len(dead), 2), dtype=np.int64)
            keys[:, 0] = self.field[dead] * N_OPS + self.op[dead]
            keys[:, 1] = self.bits_value[dead]
            self.table.delete(keys[eq])
            self.ranges.delete(np.ascontiguousarray(keys[~eq, 0]), np.ascontiguousarray(keys[~eq, 1]), self._keys)
            self.n_live -= len(dead)
            self.ids.release(dead[eq])  # not in any group: reusable now
            self.pending_free.extend(dead[~eq].tolist())
            if len(self.pending_free) > max(1024, self.n_live):
                self._dirty = True
        return dead

    # -- matching-time structures -------------------------------------
    def prepare(self) -> None:
        """Rebuild the inequality groups if needed; size the bit vector."""
        if len(self.bits) < max(self.n_ids, 1):
            self.bits = np.zeros(max(self.n_ids, 2 * len(self.bits)), dtype=np.uint8)
        if not self._dirty and self._strings_version == self.strings.version:
            return
        top = self.n_ids
        ids = np.flatnonzero((self.refcount[:top] > self.offpath[:top]) & (self.op[:top] != OP_EQ))
        f, o = self.field[ids], self.op[ids].astype(np.int64)
        vals = self._codes(f, self.bits_value[ids])
        order = np.lexsort((vals, o, f))
        ids, f, o, vals = ids[order], f[order], o[order], vals[order]
        gkey = f * N_OPS + o
        starts = np.flatnonzero(np.r_[True, gkey[1:] != gkey[:-1]]) if len(gkey) else np.zeros(0, np.int64)
        ends = np.r_[starts[1:], len(gkey)].astype(np.int64)
        self.group_of = np.full((self.n_fields, N_OPS), -1, dtype=np.int32)
        self.group_of[f[starts], o[starts]] = np.arange(len(starts), dtype=np.int32)
        self.g_start, self.g_end = starts.astype(np.int64), ends
        self.g_vals, self.g_pids = np.ascontiguousarray(vals), ids.astype(np.int64)
        self.ids.release(self.pending_free)
        self.pending_free = []
        self._dirty = False
        self._strings_version = self.strings.version

    def arrays(self) -> PredicateArrays:
        """The table as the kernels read it (call :meth:`prepare` first)."""
        return PredicateArrays(self.table.keys, self.table.vals, self.group_of, self.g_start, self.g_end, self.g_vals,
                               self.g_pids, self.field, self.op, self.bits)

    def stats(self) -> dict:
        return {
            "predicates": self.n_live,
            "predicate_ids": self.n_ids,
            "inequality_groups": len(self.g_start),
            "bit_vector_bytes": int(self.bits.nbytes),
            "predicate_hash_slots": len(self.table.vals) + len(self.ranges.slots),
            "memory_bytes": int(self.table.nbytes + self.ranges.nbytes + self.field.nbytes + self.op.nbytes + self.bits_value.nbytes
                                + self.refcount.nbytes + self.bits.nbytes + self.group_of.nbytes
                                + self.g_start.nbytes + self.g_end.nbytes + self.g_vals.nbytes + self.g_pids.nbytes),
        }
