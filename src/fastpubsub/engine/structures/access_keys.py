"""Access keys: the ids under which cluster lists are filed.

Section 2.2: a predicate p is an *access predicate* for the subscriptions of a
cluster list when they can only match events satisfying p.  Section 3
generalises p to a conjunction of equality predicates with distinct
attributes.  The cluster layer only knows key ids; this table says what a key
stands for (``members``: up to ``MAX_SCHEMA`` predicate ids, one per field of its schema, -1 padded) and counts the
subscriptions filed under it, so that keys (and their empty clusters) are
released when unused.

Key 0 is the catch-all list (subscriptions without an equality predicate),
scanned for every event.  Single-predicate keys are reached from the
predicate phase through ``pred_key`` (predicate id -> key id, -1 if the
predicate is no access predicate); conjunction keys through ``conj``, a
hash table from the sorted predicate ids of the conjunction (-1 padded) to
the key, probed by the clustered matcher for each configured schema.

*Presence* keys (the pivot attribute of Zhang et al., PVLDB 2014) stand for
"the event carries field f": ``field_key`` (field -> key, -1 if none) is read
once per event pair.  They imply no predicate (``members`` all -1; the
subscriptions filed under one keep every predicate in their columns), so a
subscription without any equality is no longer checked for every event, only
for those carrying its rarest field.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..costmodel.constants import MAX_SCHEMA
from .hashtable import HashTable
from .idpool import IdPool, grow

CATCH_ALL = 0
_NO_FIELDS = np.full(0, -1, dtype=np.int64)


class AccessArrays(NamedTuple):
    """The access-key tables as the kernels read them (:meth:`AccessKeys.arrays`)."""

    pred_key: np.ndarray  # int64 [predicate ids]: the predicate's single-predicate key (-1: none)
    conj_keys: np.ndarray  # int64 [slots, MAX_SCHEMA]: sorted predicate ids of a conjunction (hashtable.py)
    conj_vals: np.ndarray  # int64 [slots]: its key (-1: empty slot)
    schema_fields: np.ndarray  # int64 [schemas, MAX_SCHEMA]: fields of each configured multi-field schema (-1 padded)
    field_key: np.ndarray  # int64 [fields]: the field's presence key (-1: none); empty while there is none


class AccessKeys:
    def __init__(self) -> None:
        self.ids = IdPool()
        self.ids.take(1)  # key 0: catch-all
        self.refs = np.zeros(64, dtype=np.int64)  # subscriptions filed under each key
        self.members = np.full((64, MAX_SCHEMA), -1, dtype=np.int64)  # key -> its predicate ids
        self.pred_key = np.full(64, -1, dtype=np.int64)  # predicate id -> its single-predicate key
        self.conj = HashTable(width=MAX_SCHEMA)  # sorted predicate ids of a conjunction -> key
        self.field_key = np.full(0, -1, dtype=np.int64)  # field -> its presence key
        self.key_field = np.full(64, -1, dtype=np.int64)  # key -> the field of a presence key (-1: other kinds)
        self.n_presence = 0  # live presence keys

    def __len__(self) -> int:
        return len(self.ids)

    def _new_keys(self, n: int) -> np.ndarray:
        new = self.ids.take(n)
        self.refs = grow(self.refs, self.ids.high, 0)
        if len(self.members) < self.ids.high:
            m = np.full((max(self.ids.high, 2 * len(self.members)), MAX_SCHEMA), -1, dtype=np.int64)
            m[: len(self.members)] = self.members
            self.members = m
        self.refs[new] = 0
        self.key_field = grow(self.key_field, self.ids.high, -1)
        self.key_field[new] = -1
        return new

    def _keys_of(self, key_of: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``key_of`` (id -> key, -1: none) grown to ``ids`` and given a new key, without members, for each id it
        lacked: ``(key_of, the ids' keys, the ids that had none, their new keys)``."""
        key_of = grow(key_of, int(ids.max()) + 1 if len(ids) else 0, -1)
        keys = key_of[ids]
        missing = np.unique(ids[keys < 0])
        new = missing
        if len(missing):
            new = self._new_keys(len(missing))
            key_of[missing] = new
            self.members[new] = -1
            keys = key_of[ids]
        return key_of, keys, missing, new

    def for_fields(self, fields: np.ndarray) -> np.ndarray:
        """Presence key of each field, creating missing ones."""
        self.field_key, keys, missing, new = self._keys_of(self.field_key, np.asarray(fields, dtype=np.int64))
        self.key_field[new] = missing
        self.n_presence += len(missing)
        return keys

    def for_predicates(self, pids: np.ndarray) -> np.ndarray:
        """Single-predicate key of each predicate id, creating missing ones."""
        self.pred_key, keys, missing, new = self._keys_of(self.pred_key, pids)
        self.members[new, 0] = missing
        return keys

    def for_conjunctions(self, rows: np.ndarray) -> np.ndarray:
        """Key of each conjunction (rows of sorted predicate ids, -1 padded, >= 2 members), creating missing ones."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)

        def assign(first: np.ndarray) -> np.ndarray:
            new = self._new_keys(len(first))
            self.members[new] = rows[first]
            return new

        return self.conj.get_or_add(rows, assign)

    def incref(self, keys: np.ndarray) -> None:
        self.refs[: self.ids.high] += np.bincount(keys, minlength=self.ids.high)[: self.ids.high]

    def decref(self, keys: np.ndarray) -> np.ndarray:
        """Drop references; returns the keys (never the catch-all) no subscription uses any more."""
        np.subtract.at(self.refs, keys, 1)
        dead = np.unique(keys[(self.refs[keys] == 0) & (keys != CATCH_ALL)])
        if len(dead):
            pres = self.key_field[dead] >= 0
            if pres.any():
                self.field_key[self.key_field[dead[pres]]] = -1
                self.key_field[dead[pres]] = -1
                self.n_presence -= int(pres.sum())
                dead_pres, dead = dead[pres], dead[~pres]
                self.ids.release(dead_pres)
            m = self.members[dead]
            single = m[:, 1] < 0
            self.pred_key[m[single, 0]] = -1
            if np.any(~single):
                self.conj.delete(m[~single])
            self.members[dead] = -1
            self.ids.release(dead)
            if pres.any():
                dead = np.sort(np.concatenate([dead, dead_pres]))
        return dead

    def arrays(self, schema_fields: np.ndarray) -> AccessArrays:
        """The tables as the kernels read them, with the configured schemas' fields (none for propagation)."""
        return AccessArrays(self.pred_key, self.conj.keys, self.conj.vals, schema_fields,
                            self.field_key if self.n_presence else _NO_FIELDS)

    def predicates_of(self, keys: np.ndarray) -> np.ndarray:
        """The access predicates implied by keys (the catch-all implies none), flat."""
        m = self.members[keys].ravel()
        return m[m >= 0]

    def stats(self) -> dict:
        return {
            "access_keys": len(self.ids),
            "conjunction_keys": len(self.conj),
            "presence_keys": int(self.n_presence),
            "memory_bytes": int(self.refs.nbytes + self.members.nbytes + self.pred_key.nbytes + self.conj.nbytes
                                + self.field_key.nbytes + self.key_field.nbytes),
        }
