"""Open-addressing hash tables of fixed-width int64 keys, probed in batch by numba.

One structure serves the engine's exact-match lookups: (attribute, kind,
operator, value) -> predicate id (section 2.2:
each distinct predicate is stored once; equality predicates are found by
hashing), (access key, size) -> cluster.  Keys are rows of ``width`` int64
words, so the multi-attribute hash tables of section 3 (one per schema, keyed
by the conjunction of the schema's value codes) are the same structure with a
wider key.

Linear probing, power-of-two capacity, backward-shift deletion (no
tombstones, so probe chains stay short under heavy insert/delete churn).

:class:`KeylessTable` and :class:`IdTable` are the same table for keys their
owner stores anyway (the predicate table's range predicates, by the million;
the matcher's subscription ids, by the hundred million): a slot holds the
value and a tag byte, and the key is read from the owner's arrays.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from numba import njit

from ..kernels.prefetch import prefetch

EMPTY = np.int64(-1)  # value of a free slot; stored values are always >= 0
_PROVISIONAL = 1 << 62  # values of keys get_or_add is inserting, above any real one
MAX_LOAD = 0.75


@njit(cache=True, inline="always")
def _mix(h):
    # splitmix64 finaliser: every input bit affects every output bit
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


@njit(cache=True, inline="always")
def _slot(keys, row, mask):
    h = np.uint64(0x9E3779B97F4A7C15)
    for w in range(keys.shape[1]):
        h = _mix(h ^ np.uint64(keys[row, w]))
    return np.int64(h & np.uint64(mask))


@njit(cache=True, inline="always")
def _same(tkeys, slot, keys, row):
    for w in range(keys.shape[1]):
        if tkeys[slot, w] != keys[row, w]:
            return False
    return True


@njit(cache=True, inline="always")
def ht_find2(tkeys, tvals, k0, k1):
    """Scalar probe of a width-2 table (the kernels' per-pair equality lookup)."""
    mask = tvals.shape[0] - 1
    h = np.uint64(0x9E3779B97F4A7C15)
    h = _mix(h ^ np.uint64(k0))
    h = _mix(h ^ np.uint64(k1))
    s = np.int64(h & np.uint64(mask))
    while tvals[s] != -1:
        if tkeys[s, 0] == k0 and tkeys[s, 1] == k1:
            return tvals[s]
        s = (s + 1) & mask
    return -1


@njit(cache=True, inline="always")
def ht_slot2(mask, k0, k1):
    """Home slot of a width-2 key (what :func:`ht_find2` probes first; prefetch it ahead)."""
    h = np.uint64(0x9E3779B97F4A7C15)
    h = _mix(h ^ np.uint64(k0))
    h = _mix(h ^ np.uint64(k1))
    return np.int64(h & np.uint64(mask))


@njit(cache=True, inline="always")
def ht_slot3(mask, k0, k1, k2):
    """Home slot of a width-3 key (what :func:`ht_find3` probes first; prefetch it ahead)."""
    h = np.uint64(0x9E3779B97F4A7C15)
    h = _mix(h ^ np.uint64(k0))
    h = _mix(h ^ np.uint64(k1))
    h = _mix(h ^ np.uint64(k2))
    return np.int64(h & np.uint64(mask))


@njit(cache=True, inline="always")
def ht_find3(tkeys, tvals, k0, k1, k2):
    """Scalar probe of a width-3 table (the multi-attribute access keys of section 3)."""
    mask = tvals.shape[0] - 1
    s = ht_slot3(mask, k0, k1, k2)
    while tvals[s] != -1:
        if tkeys[s, 0] == k0 and tkeys[s, 1] == k1 and tkeys[s, 2] == k2:
            return tvals[s]
        s = (s + 1) & mask
    return -1


@njit(cache=True)
def ht_lookup(tkeys, tvals, keys, out):
    """``out[i]`` = value stored for ``keys[i]``, or -1."""
    mask = tvals.shape[0] - 1
    for i in range(keys.shape[0]):
        s = _slot(keys, i, mask)
        out[i] = -1
        while tvals[s] != -1:
            if _same(tkeys, s, keys, i):
                out[i] = tvals[s]
                break
            s = (s + 1) & mask
    return out


@njit(cache=True)
def ht_get_or_insert(tkeys, tvals, count, limit, keys, start, next_value, out):
    """Look up ``keys[start:]``; insert missing ones with values ``next_value, next_value+1, ...``.

    Stops before the table's count would exceed ``limit`` so that the caller
    can grow it and resume.  Returns (row reached, new count, next value).
    """
    mask = tvals.shape[0] - 1
    i = start
    n = keys.shape[0]
    while i < n:
        s = _slot(keys, i, mask)
        found = -1
        while tvals[s] != -1:
            if _same(tkeys, s, keys, i):
                found = tvals[s]
                break
            s = (s + 1) & mask
        if found < 0:
            if count >= limit:
                break
            for w in range(keys.shape[1]):
                tkeys[s, w] = keys[i, w]
            tvals[s] = next_value
            found = next_value
            next_value += 1
            count += 1
        out[i] = found
        i += 1
    return i, count, next_value


@njit(cache=True)
def ht_insert_values(tkeys, tvals, count, limit, keys, values, start):
    """Insert ``keys[start:]`` (absent, distinct) with ``values``; stops at ``limit``."""
    mask = tvals.shape[0] - 1
    i = start
    while i < keys.shape[0]:
        if count >= limit:
            break
        s = _slot(keys, i, mask)
        while tvals[s] != -1:
            s = (s + 1) & mask
        for w in range(keys.shape[1]):
            tkeys[s, w] = keys[i, w]
        tvals[s] = values[i]
        count += 1
        i += 1
    return i, count


@njit(cache=True)
def ht_set_values(tkeys, tvals, keys, values):
    """Overwrite the values of present keys (used to renumber ids after a bulk insert)."""
    mask = tvals.shape[0] - 1
    for i in range(keys.shape[0]):
        s = _slot(keys, i, mask)
        while tvals[s] != -1:
            if _same(tkeys, s, keys, i):
                tvals[s] = values[i]
                break
            s = (s + 1) & mask


@njit(cache=True, inline="always")
def _fills_hole(j, hole, home):
    """Backward-shift deletion: the entry at ``j`` moves into ``hole`` unless its home lies cyclically in (hole, j]."""
    return (j > hole and (home <= hole or home > j)) or (j < hole and (home <= hole and home > j))


@njit(cache=True)
def ht_delete(tkeys, tvals, keys):
    """Remove ``keys`` (absent ones are ignored); returns how many were removed."""
    mask = tvals.shape[0] - 1
    removed = 0
    for i in range(keys.shape[0]):
        s = _slot(keys, i, mask)
        while tvals[s] != -1 and not _same(tkeys, s, keys, i):
            s = (s + 1) & mask
        if tvals[s] == -1:
            continue
        removed += 1
        # backward-shift deletion: pull later members of the run into the hole
        hole = s
        j = (s + 1) & mask
        while tvals[j] != -1:
            home = _slot(tkeys, j, mask)
            if _fills_hole(j, hole, home):
                for w in range(tkeys.shape[1]):
                    tkeys[hole, w] = tkeys[j, w]
                tvals[hole] = tvals[j]
                hole = j
            j = (j + 1) & mask
        tvals[hole] = -1
    return removed


class HashTable:
    """Map from int64 key rows of a fixed ``width`` to non-negative int64 values."""

    def __init__(self, width: int, capacity: int = 1024) -> None:
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self.width = width
        self.keys = np.zeros((cap, width), dtype=np.int64)
        self.vals = np.full(cap, EMPTY, dtype=np.int64)
        self.count = 0

    def __len__(self) -> int:
        return self.count

    @property
    def limit(self) -> int:
        return int(len(self.vals) * MAX_LOAD)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.vals.nbytes

    def _rows(self, keys: np.ndarray) -> np.ndarray:
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        return keys.reshape(len(keys), self.width) if keys.ndim == 1 else keys

    def _grow(self, needed: int) -> None:
        cap = len(self.vals)
        while int(cap * MAX_LOAD) < needed:
            cap *= 2
        if cap == len(self.vals):
            return
        live = self.vals != EMPTY
        old_keys, old_vals = self.keys[live], self.vals[live]
        self.keys = np.zeros((cap, self.width), dtype=np.int64)
        self.vals = np.full(cap, EMPTY, dtype=self.vals.dtype)
        _, self.count = ht_insert_values(self.keys, self.vals, 0, self.limit, old_keys, old_vals, 0)

    def reserve(self, extra: int) -> None:
        self._grow(self.count + extra)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        keys = self._rows(keys)
        return ht_lookup(self.keys, self.vals, keys, np.empty(len(keys), dtype=np.int64))

    def get_or_insert(self, keys: np.ndarray, next_value: int) -> tuple[np.ndarray, int]:
        """Values of ``keys``; missing keys get ``next_value, next_value + 1, ...`` in row order."""
        keys = self._rows(keys)
        out = np.empty(len(keys), dtype=np.int64)
        i = 0
        while i < len(keys):
            i, self.count, next_value = ht_get_or_insert(
                self.keys, self.vals, self.count, self.limit, keys, i, next_value, out
            )
            if i < len(keys):
                self._grow(self.count + min(len(keys) - i, max(1024, self.count)))
        return out, int(next_value)

    def get_or_add(self, keys: np.ndarray, assign) -> np.ndarray:
        """Values of ``keys``; the distinct missing ones get the values ``assign(first)`` returns.

        ``first[j]`` is a row holding the ``j``-th distinct missing key (in
        first-occurrence order); ``assign`` returns one new value per entry of
        ``first`` and may record whatever the caller keeps about new keys.
        """
        keys = self._rows(keys)
        out, nxt = self.get_or_insert(keys, _PROVISIONAL)
        n_new = nxt - _PROVISIONAL
        if n_new:
            fresh = np.flatnonzero(out >= _PROVISIONAL)
            first = np.empty(n_new, dtype=np.int64)
            first[out[fresh] - _PROVISIONAL] = fresh
            values = np.asarray(assign(first), dtype=np.int64)
            self.set_values(keys[first], values)
            out[fresh] = values[out[fresh] - _PROVISIONAL]
        return out

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Insert absent, pairwise distinct keys."""
        keys = self._rows(keys)
        self._grow(self.count + len(keys))
        _, self.count = ht_insert_values(
            self.keys, self.vals, self.count, self.limit, keys, np.ascontiguousarray(values, dtype=np.int64), 0
        )

    def set_values(self, keys: np.ndarray, values: np.ndarray) -> None:
        ht_set_values(self.keys, self.vals, self._rows(keys), np.ascontiguousarray(values, dtype=np.int64))

    def delete(self, keys: np.ndarray) -> int:
        n = int(ht_delete(self.keys, self.vals, self._rows(keys)))
        self.count -= n
        return n


# -- keyless tables: the owner keeps the keys ------------------------------------------------------------------
# A slot holds only a value: an id >= 0 whose key the owner's arrays give (``k0_of[v] * k0_scale + k0_add[v]``,
# ``k1_of[v]``), or, while a batch is being inserted, ``-(j + 2)`` for the batch's ``j``-th new key (row
# ``first[j]`` of the batch); beside it a one-byte tag (hash bits above the slot's), so that a probe reads the
# key of a slot only when the tags agree.  5 bytes a slot instead of 8 * (width + 1), for millions of keys the
# owner stores anyway.


@njit(cache=True, inline="always")
def _kl_key(v, k0_of, k0_scale, k0_add, k1_of, k0, k1, first):
    if v >= 0:
        return k0_of[v] * k0_scale + k0_add[v], k1_of[v]
    r = first[-v - 2]
    return k0[r], k1[r]


@njit(cache=True, inline="always")
def _kl_hash(a0, a1):
    h = np.uint64(0x9E3779B97F4A7C15)
    h = _mix(h ^ np.uint64(a0))
    return _mix(h ^ np.uint64(a1))


@njit(cache=True, inline="always")
def _kl_tag(h):
    return np.uint8(h >> np.uint64(56))


@njit(cache=True, inline="always")
def _close_hole(slots, tags, hole, home_of, owner):
    """Backward-shift deletion (:func:`ht_delete`) in a table of tagged slots: later members of the probe run move
    into ``hole``; ``home_of(value, mask, owner)`` is a value's home slot, from the keys its owner keeps."""
    mask = slots.shape[0] - 1
    j = (hole + 1) & mask
    while slots[j] != -1:
        if _fills_hole(j, hole, home_of(np.int64(slots[j]), mask, owner)):
            slots[hole] = slots[j]
            tags[hole] = tags[j]
            hole = j
        j = (j + 1) & mask
    slots[hole] = -1


@njit(cache=True)
def kl_get_or_insert(slots, tags, count, limit, k0, k1, start, k0_of, k0_scale, k0_add, k1_of, first, n_new, out):
    """Look up the batch keys ``(k0[i], k1[i])`` from ``start``; a missing key takes the next provisional value
    ``-(n_new + 2)`` (``first[n_new] = i``).  Stops before ``count`` would pass ``limit`` (the caller grows the table
    and resumes).  Returns (row reached, new count, new n_new).  :func:`ht_get_or_insert`'s loop, kept apart for
    the keyless layout: a slot holds a value and a tag, and a candidate's key is read back from the owner's arrays."""
    mask = slots.shape[0] - 1
    i = start
    n = k0.shape[0]
    while i < n:
        a0, a1 = k0[i], k1[i]
        h = _kl_hash(a0, a1)
        s = np.int64(h & np.uint64(mask))
        tag = _kl_tag(h)
        found = np.int64(-1)
        while slots[s] != -1:
            if tags[s] == tag:
                v = np.int64(slots[s])
                b0, b1 = _kl_key(v, k0_of, k0_scale, k0_add, k1_of, k0, k1, first)
                if b0 == a0 and b1 == a1:
                    found = v
                    break
            s = (s + 1) & mask
        if found == -1:
            if count >= limit:
                break
            found = -(n_new + 2)
            slots[s] = found
            tags[s] = tag
            first[n_new] = i
            n_new += 1
            count += 1
        out[i] = found
        i += 1
    return i, count, n_new


@njit(cache=True)
def kl_rehash(old, slots, tags, k0, k1, k0_of, k0_scale, k0_add, k1_of, first):
    """Every value of ``old`` into the empty table ``slots``, ``tags``."""
    mask = slots.shape[0] - 1
    for t in range(old.shape[0]):
        v = np.int64(old[t])
        if v == -1:
            continue
        b0, b1 = _kl_key(v, k0_of, k0_scale, k0_add, k1_of, k0, k1, first)
        h = _kl_hash(b0, b1)
        s = np.int64(h & np.uint64(mask))
        while slots[s] != -1:
            s = (s + 1) & mask
        slots[s] = v
        tags[s] = _kl_tag(h)


@njit(cache=True)
def kl_settle(slots, final):
    """Provisional values ``-(j + 2)`` become ``final[j]``."""
    for t in range(slots.shape[0]):
        v = slots[t]
        if v <= -2:
            slots[t] = final[-v - 2]


@njit(cache=True)
def kl_delete(slots, tags, k0, k1, k0_of, k0_scale, k0_add, k1_of):
    """Remove the values of keys ``(k0[i], k1[i])`` (absent ones are ignored; no provisional value is left);
    backward-shift deletion as :func:`ht_delete`.  Returns how many were removed."""
    mask = slots.shape[0] - 1
    removed = 0
    for i in range(k0.shape[0]):
        a0, a1 = k0[i], k1[i]
        h = _kl_hash(a0, a1)
        s = np.int64(h & np.uint64(mask))
        tag = _kl_tag(h)
        while slots[s] != -1:
            v = np.int64(slots[s])
            if tags[s] == tag and k0_of[v] * k0_scale + k0_add[v] == a0 and k1_of[v] == a1:
                break
            s = (s + 1) & mask
        if slots[s] == -1:
            continue
        removed += 1
        _close_hole(slots, tags, s, _kl_home, (k0_of, k0_scale, k0_add, k1_of))
    return removed


@njit(cache=True, inline="always")
def _kl_home(v, mask, owner):
    k0_of, k0_scale, k0_add, k1_of = owner
    return np.int64(_kl_hash(k0_of[v] * k0_scale + k0_add[v], k1_of[v]) & np.uint64(mask))


class _TaggedSlots:
    """The storage of the tables whose keys their owner keeps: a value (int32, -1 free) and a tag byte per slot."""

    def __init__(self, capacity: int = 1024) -> None:
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self.slots = np.full(cap, -1, dtype=np.int32)
        self.tags = np.zeros(cap, dtype=np.uint8)
        self.count = 0

    def __len__(self) -> int:
        return self.count

    @property
    def nbytes(self) -> int:
        return self.slots.nbytes + self.tags.nbytes


class KeylessTable(_TaggedSlots):
    """Map from two-word int64 keys to ids >= 0 whose keys the owner keeps in arrays indexed by the id.

    ``key0 = k0_of[id] * k0_scale + k0_add[id]``, ``key1 = k1_of[id]``:
    ``owner()`` returns the arrays ``(k0_of, k0_add, k1_of)`` as they are
    now (they grow with the owner).  Values are int32 (ids below 2**31).
    """

    def __init__(self, k0_scale: int, capacity: int = 1024) -> None:
        super().__init__(capacity)
        self.k0_scale = int(k0_scale)

    def _resize(self, cap: int, k0, k1, owner: Callable[[], tuple], first: np.ndarray) -> None:
        old, self.slots, self.tags = self.slots, np.full(cap, -1, dtype=np.int32), np.zeros(cap, dtype=np.uint8)
        k0_of, k0_add, k1_of = owner()
        kl_rehash(old, self.slots, self.tags, k0, k1, k0_of, self.k0_scale, k0_add, k1_of, first)

    def _fit(self, needed: int) -> int:
        """The capacity ``needed`` entries take (a power of two, loaded at most ``MAX_LOAD``)."""
        cap = 16
        while int(cap * MAX_LOAD) < needed:
            cap *= 2
        return cap

    def get_or_add(self, k0: np.ndarray, k1: np.ndarray, owner: Callable[[], tuple], assign) -> np.ndarray:
        """Ids of keys ``(k0, k1)``; the distinct missing ones get the ids ``assign(first)`` returns (as
        :meth:`HashTable.get_or_add`; ``assign`` stores their keys in the owner's arrays).

        The table is sized for every row being new before the batch goes in
        (one rehash instead of one per doubling) and shrunk back after it if
        the rows repeated keys.
        """
        n = len(k0)
        out = np.empty(n, dtype=np.int64)
        first = np.empty(n, dtype=np.int64)
        if self._fit(self.count + n) > len(self.slots):
            self._resize(self._fit(self.count + n), k0, k1, owner, first)
        k0_of, k0_add, k1_of = owner()
        _, self.count, n_new = kl_get_or_insert(self.slots, self.tags, self.count, len(self.slots), k0, k1, 0,
                                                k0_of, self.k0_scale, k0_add, k1_of, first, 0, out)
        if n_new:
            final = np.asarray(assign(first[:n_new]), dtype=np.int64)
            kl_settle(self.slots, final.astype(np.int32))
            fresh = out < 0
            out[fresh] = final[-out[fresh] - 2]
        if 2 * self._fit(self.count) < len(self.slots):
            self._resize(self._fit(self.count), k0, k1, owner, first)
        return out

    def delete(self, k0: np.ndarray, k1: np.ndarray, owner: Callable[[], tuple]) -> int:
        k0_of, k0_add, k1_of = owner()
        n = int(kl_delete(self.slots, self.tags, k0, k1, k0_of, self.k0_scale, k0_add, k1_of))
        self.count -= n
        return n


# -- the id table: subscription id -> handle, the id read from the matcher's handle -> id array -------------------
# The matcher keeps every handle's id (``handle_id``, to report matches) anyway: a slot holds the handle and a
# tag byte, and an id is compared only where the tags agree.  5 bytes a slot instead of 12 (an int64 key and an
# int32 value), for as many slots as ids over the load factor.


@njit(cache=True, inline="always")
def _id_hash(key):
    return _mix(np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(key))


@njit(cache=True, inline="always")
def _id_probe(slots, tags, hid, key):
    """The slot holding ``key``, else the free slot its probe ends at."""
    mask = slots.shape[0] - 1
    h = _id_hash(key)
    s = np.int64(h & np.uint64(mask))
    tag = _kl_tag(h)
    while slots[s] != -1:
        if tags[s] == tag and hid[slots[s]] == key:
            return s
        s = (s + 1) & mask
    return s


#: Ids a batch probe hashes ahead of the one it probes, their home slots prefetched: in a table of tens of millions
#: of ids every probe misses the cache, and one at a time the misses do not overlap.
ID_AHEAD = 16


@njit(cache=True, inline="always")
def _id_ahead(slots, tags, keys, i):
    if i < keys.shape[0]:
        h = _id_hash(keys[i])
        s = np.int64(h & np.uint64(slots.shape[0] - 1))
        prefetch(slots, s)
        prefetch(tags, s)


@njit(cache=True)
def id_lookup(slots, tags, hid, keys, out):
    """``out[i]`` = the handle of id ``keys[i]``, or -1."""
    for i in range(min(ID_AHEAD, keys.shape[0])):
        _id_ahead(slots, tags, keys, i)
    for i in range(keys.shape[0]):
        _id_ahead(slots, tags, keys, i + ID_AHEAD)
        out[i] = slots[_id_probe(slots, tags, hid, keys[i])]
    return out


@njit(cache=True)
def id_has(slots, tags, hid, key):
    """Whether id ``key`` is held: one probe with a scalar argument (a single change's check)."""
    return slots[_id_probe(slots, tags, hid, key)] != -1


@njit(cache=True)
def id_insert(slots, tags, hid, handles):
    """Insert ``handles`` (their ids ``hid[handles]``, absent and distinct; the table has room)."""
    mask = slots.shape[0] - 1
    for i in range(handles.shape[0]):
        if i + ID_AHEAD < handles.shape[0]:
            ahead = np.int64(_id_hash(hid[handles[i + ID_AHEAD]]) & np.uint64(mask))
            prefetch(slots, ahead)
            prefetch(tags, ahead)
        h = _id_hash(hid[handles[i]])
        s = np.int64(h & np.uint64(mask))
        while slots[s] != -1:
            s = (s + 1) & mask
        slots[s] = handles[i]
        tags[s] = _kl_tag(h)


@njit(cache=True)
def id_delete(slots, tags, hid, keys):
    """Remove ids ``keys`` (absent ones are ignored) by backward shift (:func:`ht_delete`); how many were removed."""
    mask = slots.shape[0] - 1
    removed = 0
    for i in range(keys.shape[0]):
        s = _id_probe(slots, tags, hid, keys[i])
        if slots[s] == -1:
            continue
        removed += 1
        _close_hole(slots, tags, s, _id_home, hid)
    return removed


@njit(cache=True, inline="always")
def _id_home(v, mask, hid):
    return np.int64(_id_hash(hid[v]) & np.uint64(mask))


class IdTable(_TaggedSlots):
    """Map from subscription ids to handles, whose ids the owner keeps in ``hid`` (``hid[handle] = id``).

    Every call takes ``hid`` as it is now (it grows with the owner).  A
    handle's entry of ``hid`` must hold its id from its insertion to its
    deletion.  Handles are int32 (below 2**31).
    """

    def handles(self) -> np.ndarray:
        """The handles held, in slot order."""
        return self.slots[self.slots != -1].astype(np.int64)

    def lookup(self, keys: np.ndarray, hid: np.ndarray) -> np.ndarray:
        keys = np.ascontiguousarray(keys, dtype=np.int64).reshape(-1)
        return id_lookup(self.slots, self.tags, hid, keys, np.empty(len(keys), dtype=np.int64))

    def has(self, key: int, hid: np.ndarray) -> bool:
        return bool(id_has(self.slots, self.tags, hid, key))

    def insert(self, handles: np.ndarray, hid: np.ndarray) -> None:
        """Insert ``handles`` under their ids ``hid[handles]`` (absent and distinct)."""
        handles = np.ascontiguousarray(handles, dtype=np.int64)
        cap = len(self.slots)
        while int(cap * MAX_LOAD) < self.count + len(handles):
            cap *= 2
        if cap != len(self.slots):
            held = self.handles()
            self.slots, self.tags = np.full(cap, -1, dtype=np.int32), np.zeros(cap, dtype=np.uint8)
            id_insert(self.slots, self.tags, hid, held)
        id_insert(self.slots, self.tags, hid, handles)
        self.count += len(handles)

    def delete(self, keys: np.ndarray, hid: np.ndarray) -> int:
        n = int(id_delete(self.slots, self.tags, hid, np.ascontiguousarray(keys, dtype=np.int64).reshape(-1)))
        self.count -= n
        return n
