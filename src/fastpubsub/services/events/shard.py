"""Sharding by subscription id: shard ``I`` of ``K`` holds only the subscriptions whose id hashes to ``I``.

The hash is fixed so that every process, host and version agrees on the
owner of an id: ``zlib.crc32`` (CRC-32, ISO-HDLC, as in zip and PNG) of the
id's canonical decimal form in UTF-8 (``str(int(key))``: ``"42"`` for the
keys ``"42"``, ``"042"`` and ``"+42"``, which name one subscription), modulo
``K``.  Python's ``hash()`` would not do: it is salted per process.

A replacement or a removal carries the same id, so it reaches the same shard
as the subscription it changes.  Every shard reads every partition of
``pubsub.events`` in its own consumer group (``<group>.shard-I-of-K``), so the
union of the shards' notifications is what one unsharded instance sends, with
the same notification ids.  Input that belongs to no subscription id (an
event that cannot be decoded, a subscription record whose key is not an id)
is dead-lettered by shard 0 only, so that the dead-letter topic holds it once.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

_SPEC = re.compile(r"^\s*(-?\d+)\s*/\s*(-?\d+)\s*$")

#: Most shards a deployment may declare (each is a consumer group reading every event).
MAX_SHARDS = 4096


def shard_of(subscription_id: int, count: int) -> int:
    """The shard of ``count`` that holds ``subscription_id``: crc32 of its decimal UTF-8 form, modulo ``count``."""
    return zlib.crc32(str(int(subscription_id)).encode("utf-8")) % count


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``; ``Shard(0, 1)`` is the unsharded processor (it holds everything)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SHARDS:
            raise ValueError(f"shard count must be between 1 and {MAX_SHARDS}, got {self.count}")
        if self.index < 0:
            raise ValueError(f"shard index must be 0 or more, got {self.index}")
        if self.index >= self.count:
            raise ValueError(f"shard index must be below the shard count: {self.index}/{self.count} "
                             f"(shards are numbered 0 to {self.count - 1})")

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """``"I/K"`` -> ``Shard(I, K)``; ``ValueError`` with a message a user can act on."""
        m = _SPEC.match(text)
        if m is None:
            raise ValueError(f"shard must be I/K (shard I of K, e.g. 0/2 and 1/2), got {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    @property
    def sharded(self) -> bool:
        return self.count > 1

    def owns(self, subscription_id: int) -> bool:
        return self.count == 1 or shard_of(subscription_id, self.count) == self.index

    @property
    def reports_unowned_input(self) -> bool:
        """Whether this shard dead-letters input that no shard owns by id (shard 0 does)."""
        return self.index == 0

    def group(self, group_id: str) -> str:
        """The consumer group of this shard: ``<group>.shard-I-of-K`` (the group itself when unsharded)."""
        return f"{group_id}.shard-{self.index}-of-{self.count}" if self.sharded else group_id

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


UNSHARDED = Shard()
