"""An in-memory keyed store that a changelog restores."""

from __future__ import annotations

import numpy as np

from .changelog import StateChanges


class KeyedStore:
    """key bytes -> (value bytes, source offset): the state of one input partition as its changelog says.

    ``restore`` applies changes in order but skips those at or past the
    committed input offset: they come from a transaction that did not commit
    (the embedded broker shows aborted records to read_committed consumers) or
    that the replay from the committed offset will produce again.
    """

    def __init__(self) -> None:
        self.data: dict[bytes, tuple[bytes, int]] = {}

    def __len__(self) -> int:
        return len(self.data)

    def get(self, key: bytes) -> bytes | None:
        item = self.data.get(key)
        return None if item is None else item[0]

    def apply(self, changes: StateChanges, committed_offset: int | None = None) -> int:
        """Apply changes in order (only those with offset < ``committed_offset`` if given); returns how many were skipped."""
        skipped = 0
        for key, value, off in changes:
            if committed_offset is not None and off >= committed_offset:
                skipped += 1
                continue
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = (value, off)
        return skipped

    @classmethod
    def restore(cls, changes: StateChanges, committed_offset: int) -> "KeyedStore":
        store = cls()
        store.apply(changes, committed_offset)
        return store

    def snapshot(self) -> StateChanges:
        """Every live key as a put (e.g. to seed a fresh changelog)."""
        keys = list(self.data)
        return StateChanges(keys, [self.data[k][0] for k in keys], np.array([self.data[k][1] for k in keys], np.int64))
