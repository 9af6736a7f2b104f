"""The engine's state as changelog records: changes since the last call, a full export, a restore
(docs/patterns.md section 4).

An instance's key is its subscription id, start event id and the exit events of the folds it has
left; its value carries the pattern's fingerprint, so a replaced subscription's old state is not
restored.  String values travel as text (codes are per engine).
"""

from __future__ import annotations

import struct

import numpy as np

from fastpubsub.engine import KIND_STRING

from . import kernel as K
from ..state import KeyedStore, StateChanges

_VALUE_HEADER = struct.Struct("<B16sqqqqhhh")  # version, fingerprint, sid, node, start_ts, last_ts, steps, cols, aggs
_VERSION = 1


class Snapshots:
    """Changes, export and restore of the live instances (a part of
    :class:`~fastpubsub.patterns.engine.PatternEngine`)."""

    def _new_epoch(self) -> None:
        self.st[K.ST_BATCH] += 1
        self.st[K.ST_DIRTY] = 0
        self.st[K.ST_TOMB] = 0

    def _key_rows(self, slots: np.ndarray) -> np.ndarray:
        """Instance keys: subscription id, start event id, and the exit event of every fold already left."""
        p = self.inst_p[slots]
        keys = np.full((len(slots), 1 + K.STRIDE), -1, np.int64)
        keys[:, 0] = self.pat_sid[p]
        keys[:, 1] = self.bound[slots, 0]
        for k in range(1, K.STRIDE):
            left = (k < self.inst_node[slots]) & (self.node_op[p * K.STRIDE + k] == K.OP_FOLD)
            keys[left, 1 + k] = self.bound[slots[left], k]
        return keys

    def _value(self, s: int) -> bytes:
        p = int(self.inst_p[s])
        c = self.compiled[p]
        ns, nc, na = len(c.pattern.steps) + 1, len(c.cols), len(c.aggs)
        head = _VALUE_HEADER.pack(_VERSION, c.fp, int(self.pat_sid[p]), int(self.inst_node[s]), int(self.inst_start[s]),
                                  int(self.inst_last[s]), ns, nc, na)
        kinds, nums = self.iv_kind[s, :nc], self.iv_num[s, :nc].copy()
        strings = []  # codes are per engine: strings travel as text
        for j in np.flatnonzero(kinds == KIND_STRING):
            strings.append(self.string_list[int(nums[j])].encode())
            nums[j] = len(strings) - 1
        tail = b"".join(struct.pack("<I", len(b)) + b for b in strings)
        return b"".join((head, self.bound[s, :ns].tobytes(), self.iters[s, :ns].tobytes(), kinds.tobytes(),
                         nums.tobytes(), self.acc[s, :na].tobytes(), self.accn[s, :na].tobytes(), tail))

    def changes(self) -> StateChanges:
        """The state changes since the last call (needs ``track_changes=True``), each tagged with its source offset.

        Tombstones for instances that ended, then one put per instance that
        changed; plus the partition's event time under the key ``b"meta"``.
        """
        if not self.track_changes:
            raise ValueError("changes() needs PatternEngine(track_changes=True)")
        nt = int(self.st[K.ST_TOMB])
        keys = [row.tobytes() for row in self.tomb_key[:nt]]
        values: list[bytes | None] = [None] * nt
        offsets = [self.tomb_off[:nt]]
        dirty = self.dirty[: int(self.st[K.ST_DIRTY])]
        dirty = dirty[self.inst_alive[dirty]]
        keys += [row.tobytes() for row in self._key_rows(dirty)]
        values += [self._value(int(s)) for s in dirty]
        offsets.append(self.inst_changed[dirty])
        if self.last_id >= 0:
            keys.append(b"meta")
            values.append(struct.pack("<qq", int(self.st[K.ST_WM]), self.last_id))
            offsets.append(np.array([self.last_id], np.int64))
        self._new_epoch()
        return StateChanges(keys, values, np.concatenate(offsets))

    def export_state(self) -> StateChanges:
        """Every live instance as a put (a full snapshot in the changelog's format)."""
        slots = np.flatnonzero(self.inst_alive)
        keys = [row.tobytes() for row in self._key_rows(slots)]
        values: list[bytes | None] = [self._value(int(s)) for s in slots]
        offsets = [self.inst_changed[slots]]
        if self.last_id >= 0:
            keys.append(b"meta")
            values.append(struct.pack("<qq", int(self.st[K.ST_WM]), self.last_id))
            offsets.append(np.array([self.last_id], np.int64))
        return StateChanges(keys, values, np.concatenate(offsets))

    def restore(self, store: "KeyedStore") -> int:
        """Load the instances of a restored :class:`~fastpubsub.state.KeyedStore` into an engine without instances.

        Instances of subscriptions that are gone or whose pattern changed are
        skipped (counted as dropped).  Returns the number restored.
        """
        if self.live():
            raise ValueError("restore needs an engine without live instances")
        self._sync_tables()
        restored = 0
        for key, (value, _off, _part) in store.data.items():
            if key == b"meta":
                wm, last = struct.unpack("<qq", value)
                self.st[K.ST_WM] = wm
                self.last_id = last
                continue
            ver, fp, sid, node, start, last, ns, nc, na = _VALUE_HEADER.unpack_from(value)
            p = self.sid_slot.get(sid)
            if ver != _VERSION or p is None or self.compiled[p].fp != fp:
                self._dropped += 1
                continue
            if self.st[K.ST_FREE] == 0:
                self._alloc_slots(2 * self.slot_cap)
            self.st[K.ST_FREE] -= 1
            s = int(self.free[self.st[K.ST_FREE]])
            pos = _VALUE_HEADER.size
            def take(dtype, count):
                nonlocal pos
                arr = np.frombuffer(value, dtype, count, pos)
                pos += arr.nbytes
                return arr
            self.bound[s] = -1
            self.iters[s] = 0
            self.bound[s, :ns] = take(np.int64, ns)
            self.iters[s, :ns] = take(np.int64, ns)
            self.iv_kind[s, :nc] = take(np.int8, nc)
            self.iv_num[s, :nc] = take(np.float64, nc)
            self.acc[s, :na] = take(np.float64, na)
            self.accn[s, :na] = take(np.int64, na)
            strings = []
            while pos < len(value):
                (length,) = struct.unpack_from("<I", value, pos)
                strings.append(value[pos + 4: pos + 4 + length].decode())
                pos += 4 + length
            for j in np.flatnonzero(self.iv_kind[s, :nc] == KIND_STRING):
                self.iv_num[s, j] = self._code(strings[int(self.iv_num[s, j])])
            self.inst_alive[s] = True
            self.inst_p[s] = p
            self.inst_node[s] = node
            self.inst_start[s] = start
            self.inst_last[s] = last
            self.inst_changed[s] = _off
            self.pat_live[p] += 1
            self.st[K.ST_LIVE] += 1
            if self.node_op[p * K.STRIDE + node] == K.OP_FOLD:
                self.st[K.ST_FOLDLIVE] += 1
            if self.st[K.ST_HEAP] >= self._heap_room():
                self._compact_heap(2 * self._heap_room())
            self.inst_deadline[s] = start + int(self.pat_within[p])
            K.heap_push(self.heap, self.st, int(self.inst_deadline[s]), s)
            restored += 1
        self._relist()
        return restored
