"""The changelog record format shared by every stateful subscription kind.

One record per changed key: the key bytes as the record key, the value bytes
as the record value (``None``: a tombstone, which a compacted topic deletes),
and the source position — the input partition and offset of the record that
caused the change — in record headers, since a tombstone has no value to
carry it.  State kept per input partition (patterns) has one source partition;
state fed by every partition of a topic (an aggregate's table) has several.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

OFFSET_HEADER = "fastpubsub.source-offset"
PARTITION_HEADER = "fastpubsub.source-partition"
_OFFSET = struct.Struct(">q")
_PARTITION = struct.Struct(">i")


@dataclass
class StateChanges:
    """Changes of keyed state, in the order they must be applied.

    ``values[i] is None`` marks a tombstone (``tombstones``); ``offsets[i]`` and
    ``partitions[i]`` are the source offset and partition of change ``i``
    (partitions default to 0: state of one input partition).
    """

    keys: list[bytes] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    partitions: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.offsets = np.asarray(self.offsets, np.int64)
        self.partitions = (np.zeros(len(self.offsets), np.int32) if self.partitions is None
                           else np.asarray(self.partitions, np.int32))
        if not (len(self.keys) == len(self.values) == len(self.offsets) == len(self.partitions)):
            raise ValueError("StateChanges: keys, values, offsets and partitions need one entry per change")
        for k in self.keys:
            if not isinstance(k, bytes) or not k:
                raise ValueError(f"StateChanges: a key must be non-empty bytes, got {k!r}")

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def tombstones(self) -> np.ndarray:
        return np.array([v is None for v in self.values], np.bool_)

    def __iter__(self):
        """``(key, value or None, source offset)`` per change."""
        return iter(zip(self.keys, self.values, self.offsets.tolist()))

    def sources(self):
        """``(key, value or None, source partition, source offset)`` per change."""
        return iter(zip(self.keys, self.values, self.partitions.tolist(), self.offsets.tolist()))

    @classmethod
    def concat(cls, parts: Sequence["StateChanges"]) -> "StateChanges":
        return cls([k for p in parts for k in p.keys], [v for p in parts for v in p.values],
                   np.concatenate([p.offsets for p in parts]) if parts else np.zeros(0, np.int64),
                   np.concatenate([p.partitions for p in parts]) if parts else np.zeros(0, np.int32))


def source_headers(partition: int, offset: int) -> list[tuple[str, bytes]]:
    """The headers that name a change's source position."""
    return [(OFFSET_HEADER, _OFFSET.pack(offset)), (PARTITION_HEADER, _PARTITION.pack(partition))]


def to_records(changes: StateChanges) -> list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]]:
    """``(key, value or None, headers)`` per change, ready for a producer."""
    parts = {p: (PARTITION_HEADER, _PARTITION.pack(p)) for p in set(changes.partitions.tolist())}
    pack = _OFFSET.pack
    return [(k, v, [(OFFSET_HEADER, pack(o)), parts[p]]) for k, v, p, o in changes.sources()]


def from_records(records: Iterable[tuple[bytes, bytes | None, Sequence[tuple[str, bytes]] | None]]) -> StateChanges:
    """The inverse of :func:`to_records`; a record without the offset header raises ``ValueError``."""
    keys, values, offsets, partitions = [], [], [], []
    for key, value, headers in records:
        off, part = None, 0
        for name, raw in headers or ():
            if name == OFFSET_HEADER:
                off = _OFFSET.unpack(raw)[0]
            elif name == PARTITION_HEADER:
                part = _PARTITION.unpack(raw)[0]
        if off is None:
            raise ValueError(f"changelog record {key!r} has no {OFFSET_HEADER} header")
        keys.append(bytes(key))
        values.append(None if value is None else bytes(value))
        offsets.append(off)
        partitions.append(part)
    return StateChanges(keys, values, np.array(offsets, np.int64), np.array(partitions, np.int32))
