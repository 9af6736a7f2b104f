"""Event-time order behind a watermark, for a partition that interleaves several sources (a repartition topic).

A repartition topic's partition holds the events of every source partition whose records were re-keyed to it, in
the order the re-keying happened to read them: the order of one key's events there depends on timing.  Patterns
need one order that does not (docs/patterns.md 1.1), so a partition's events are held back and released in the
order (timestamp, source partition, source offset) once the partition's watermark -- its largest timestamp minus
``grace_ms`` -- has passed them.  An event that arrives once the watermark has passed its timestamp is **late**:
it can no longer take its place, and the caller dead-letters it.  Whenever every event arrives within ``grace_ms``
of the largest timestamp before it (in its partition), none is late and the released sequence is all the events
sorted by (timestamp, source partition, source offset), whatever the interleaving.

Re-keying is exactly once with transactions on Apache Kafka; at-least-once delivery can re-key a source record twice
(acknowledged, a crash before the offset commit, then the replay).  Records of a source partition reach a repartition
partition in source-offset order, so a record at or below the highest source offset seen from its source partition
is such a repeat and is dropped (counted).

The held events and the watermark are state: :meth:`changes` gives them in the changelog format of
:mod:`fastpubsub.state` under keys that start with ``KEY_PREFIX`` (no collision with the engine's or the bound
contents'); :meth:`restore` takes them back.
"""

from __future__ import annotations

import heapq
import json
import struct

import numpy as np

from ..state import KeyedStore, StateChanges

KEY_PREFIX = b"reorder:"
META_KEY = KEY_PREFIX + b"meta"
_POS = struct.Struct(">iq")  # source partition, source offset
_TS = struct.Struct(">q")
#: event ids of re-keyed events: the source partition above bit 40, the source offset below
ID_SHIFT = 40


def event_id(partition: int, offset: int) -> int:
    """One int64 per source event (the pattern engine's event id)."""
    return (partition << ID_SHIFT) | offset


def event_name(eid: int) -> tuple[int, int]:
    """(source partition, source offset) of an :func:`event_id`."""
    return eid >> ID_SHIFT, eid & ((1 << ID_SHIFT) - 1)


def split(store: KeyedStore) -> tuple[KeyedStore, KeyedStore]:
    """(everything else, the reorder buffer's keys) of one restored changelog."""
    return store.split(KEY_PREFIX)


class ReorderBuffer:
    """One partition's held events: ``offer`` each in arrival order, then ``release`` those the watermark passed."""

    def __init__(self, grace_ms: int) -> None:
        if grace_ms < 0:
            raise ValueError("the grace must not be negative")
        self.grace_ms = grace_ms
        self.max_ts: int | None = None
        self.frontier: int | None = None  # every event with ts < frontier has been released; later ones are late
        self.seen: dict[int, int] = {}  # source partition -> highest source offset offered
        self._held: list[tuple[int, int, int, bytes]] = []  # a heap of (ts, source partition, source offset, value)
        self._puts: dict[bytes, bytes] = {}
        self._gone: list[bytes] = []
        self._meta_changed = False

    def __len__(self) -> int:
        return len(self._held)

    def offer(self, ts: int, partition: int, offset: int, value: bytes) -> str:
        """``"held"``, ``"late"`` (the watermark passed ``ts``: not held) or ``"repeat"`` (seen already)."""
        if offset <= self.seen.get(partition, -1):
            return "repeat"
        self.seen[partition] = offset
        self._meta_changed = True
        if self.frontier is not None and ts < self.frontier:
            return "late"
        heapq.heappush(self._held, (ts, partition, offset, value))
        self._puts[_POS.pack(partition, offset)] = _TS.pack(ts) + value
        if self.max_ts is None or ts > self.max_ts:
            self.max_ts = ts
        return "held"

    def watermark(self) -> int | None:
        """The largest timestamp minus the grace: events older than it are released (and later ones are late)."""
        return None if self.max_ts is None else self.max_ts - self.grace_ms

    def release(self) -> list[tuple[int, int, int, bytes]]:
        """The held events older than the watermark, in (ts, source partition, source offset) order."""
        wm = self.watermark()
        if wm is None:
            return []
        if self.frontier is None or wm > self.frontier:
            self.frontier = wm
            self._meta_changed = True
        out = []
        while self._held and self._held[0][0] < self.frontier:
            item = heapq.heappop(self._held)
            key = _POS.pack(item[1], item[2])
            self._puts.pop(key, None)  # held and released in one batch: no put, but the tombstone all the same
            self._gone.append(key)  # (an aborted transaction may have written the put; a replay commits past it)
            out.append(item)
        return out

    def changes(self, tag: int) -> StateChanges:
        """Puts of newly held events, tombstones of released ones and the watermark, all tagged ``tag`` (the
        first input offset of the transaction that writes them)."""
        keys = [KEY_PREFIX + k for k in self._gone] + [KEY_PREFIX + k for k in self._puts]
        values: list[bytes | None] = [None] * len(self._gone) + list(self._puts.values())
        if self._meta_changed:
            keys.append(META_KEY)
            values.append(json.dumps({"max_ts": self.max_ts, "frontier": self.frontier,
                                      "seen": {str(p): o for p, o in self.seen.items()}}).encode())
        self._puts, self._gone, self._meta_changed = {}, [], False
        return StateChanges(keys, values, np.full(len(keys), tag, np.int64))

    def restore(self, store: KeyedStore) -> int:
        """Held events and watermark from a restored store (keys under ``KEY_PREFIX``); returns how many held."""
        for key, (value, _off, _part) in store.data.items():
            if not key.startswith(KEY_PREFIX):
                continue
            if key == META_KEY:
                meta = json.loads(value)
                self.max_ts, self.frontier = meta["max_ts"], meta["frontier"]
                self.seen = {int(p): o for p, o in meta["seen"].items()}
                continue
            partition, offset = _POS.unpack(key[len(KEY_PREFIX):])
            self._held.append((_TS.unpack_from(value)[0], partition, offset, value[_TS.size:]))
        heapq.heapify(self._held)
        return len(self._held)
