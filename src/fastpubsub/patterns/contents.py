"""The contents of bound events, kept while a live instance may still put them in a witness.

The engine keeps the ids of bound events only (its instances are fixed-width
rows).  A notification carries the bound events themselves, so a service keeps
each event that a live instance has bound, by id, and forgets it once no live
instance refers to it (``PatternEngine.bound_event_ids``).  What is kept is
bounded by the live instances (at most one event per binding of each).

The kept contents are state like the instances: :meth:`changes` gives them in
the changelog format of :mod:`fastpubsub.state` (a put tagged with the event's
own offset, a tombstone tagged with the offset of the event that released it),
under keys that cannot collide with the engine's (``KEY_PREFIX`` + the id), so
one changelog holds both and :func:`split` separates them on restore.
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

from ..state import KeyedStore, StateChanges

KEY_PREFIX = b"event:"
_KEY = struct.Struct(">q")
_TS = struct.Struct(">q")


def content_key(event_id: int) -> bytes:
    return KEY_PREFIX + _KEY.pack(event_id)


def split(store: KeyedStore) -> tuple[KeyedStore, KeyedStore]:
    """(the engine's instances, the bound events' contents) of one restored changelog."""
    return store.split(KEY_PREFIX)


class BoundContents:
    """Event id -> (timestamp, value bytes) for the events live instances have bound."""

    def __init__(self) -> None:
        self.kept: dict[int, tuple[int, bytes]] = {}
        self._batch: dict[int, tuple[int, bytes]] = {}
        self._keys: list[bytes] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []

    def __len__(self) -> int:
        return len(self.kept)

    def offer(self, ids: Sequence[int], ts: Sequence[int], values: Sequence[bytes]) -> None:
        """The events of the batch about to be processed: witnesses of the batch may bind any of them."""
        self._batch = {int(i): (int(t), v) for i, t, v in zip(ids, ts, values)}

    def get(self, event_id: int) -> tuple[int, bytes] | None:
        """(timestamp, value) of an event bound by a witness of the current batch or a live instance."""
        return self._batch.get(event_id) or self.kept.get(event_id)

    def settle(self, referenced: np.ndarray, source_offset: int) -> None:
        """After the batch: keep exactly the ``referenced`` events (``engine.bound_event_ids()``).

        New ones are recorded as puts tagged with their own id (offset); the
        released ones as tombstones tagged ``source_offset`` (the last event
        processed: a replay from an earlier committed offset rebinds them).
        """
        ref = set(referenced.tolist())
        for i in [i for i in self.kept if i not in ref]:
            del self.kept[i]
            self._record(content_key(i), None, source_offset)
        for i in sorted(ref - self.kept.keys()):
            item = self._batch.get(i)
            if item is None:  # bound before a restore that lost its contents: nothing to carry
                continue
            self.kept[i] = item
            self._record(content_key(i), _TS.pack(item[0]) + item[1], i)
        self._batch = {}

    def _record(self, key: bytes, value: bytes | None, offset: int) -> None:
        self._keys.append(key)
        self._values.append(value)
        self._offsets.append(offset)

    def changes(self) -> StateChanges:
        """The puts and tombstones since the last call."""
        out = StateChanges(self._keys, self._values, np.array(self._offsets, np.int64))
        self._keys, self._values, self._offsets = [], [], []
        return out

    def restore(self, store: KeyedStore) -> int:
        """Load the contents of a restored store (keys under ``KEY_PREFIX``); returns how many."""
        for key, (value, _off, _part) in store.data.items():
            if key.startswith(KEY_PREFIX):
                self.kept[_KEY.unpack(key[len(KEY_PREFIX):])[0]] = (_TS.unpack_from(value)[0], value[_TS.size:])
        return len(self.kept)
