"""An in-memory keyed store that a changelog restores."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .changelog import StateChanges

#: The committed input offset: one for state of a single input partition, or one per source partition.
Committed = int | Mapping[int, int] | None


class KeyedStore:
    """key bytes -> (value bytes, source offset): the state its changelog says.

    ``restore`` applies changes in order but skips those at or past the
    committed input offset of their source partition: the replay from the
    committed offset will produce them again.  Only at-least-once delivery
    leaves such changes (acknowledged, then a crash before the offset commit);
    with transactions on Apache Kafka a read_committed restore sees a change
    only with the offsets committed in its transaction, so none is skipped
    (tests/faults/test_exactly_once.py).  A partition missing from a mapping has nothing committed.
    """

    def __init__(self) -> None:
        self.data: dict[bytes, tuple[bytes, int, int]] = {}  # key -> (value, source offset, source partition)

    def __len__(self) -> int:
        return len(self.data)

    def get(self, key: bytes) -> bytes | None:
        item = self.data.get(key)
        return None if item is None else item[0]

    def apply(self, changes: StateChanges, committed_offset: Committed = None) -> int:
        """Apply changes in order (only those before the committed offset, if given); returns how many were skipped."""
        skipped = 0
        for key, value, part, off in changes.sources():
            if committed_offset is not None and off >= (committed_offset if isinstance(committed_offset, int)
                                                        else committed_offset.get(part, 0)):
                skipped += 1
                continue
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = (value, off, part)
        return skipped

    def split(self, prefix: bytes) -> tuple["KeyedStore", "KeyedStore"]:
        """(the keys without ``prefix``, the keys with it): one changelog holds several kinds of state, each under
        its own key prefix."""
        rest, mine = KeyedStore(), KeyedStore()
        for key, item in self.data.items():
            (mine if key.startswith(prefix) else rest).data[key] = item
        return rest, mine

    @classmethod
    def restore(cls, changes: StateChanges, committed_offset: Committed) -> "KeyedStore":
        store = cls()
        store.apply(changes, committed_offset)
        return store

    def snapshot(self) -> StateChanges:
        """Every live key as a put (e.g. to seed a fresh changelog)."""
        keys = list(self.data)
        return StateChanges(keys, [self.data[k][0] for k in keys], np.array([self.data[k][1] for k in keys], np.int64),
                            np.array([self.data[k][2] for k in keys], np.int32))
