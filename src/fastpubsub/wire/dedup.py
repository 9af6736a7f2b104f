"""Dropping redelivered notifications by ``notification_id``, in bounded memory.

With at-least-once delivery (a broker without transactions, or a reader that
is not read_committed) a batch replayed after a failure reaches consumers twice.  Each notification's id is ``event_id/subscription_id``
(``codecs.notification_id``), the same for every replay, so a consumer can drop
what it has already seen.

The memory is a least-recently-seen set of at most ``capacity`` ids.  A replay
re-sends what followed the last committed offsets: at most one uncommitted
batch per processor instance (``--batch-size`` events times their matches).
A duplicate is therefore caught as long as fewer than ``capacity`` distinct
other ids arrive between the original and its copy; the default of 1,000,000
ids (about 150 MB of Python strings at ~100 bytes each, less for short ids)
covers a replayed batch of 1,000 events with up to 1,000 matches each.  A
duplicate further apart than that passes through: the bound trades memory for
the length of the window, never correctness of what it does drop (an id is
only dropped if it really was seen).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

DEFAULT_CAPACITY = 100_000


class Deduplicator:
    """Remembers the last ``capacity`` distinct ids; :meth:`seen` says whether an id is a repeat."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()
        self.passed = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._ids)

    def seen(self, notification_id: str) -> bool:
        """True if ``notification_id`` is among the remembered ids (a duplicate); remembers it either way."""
        if notification_id in self._ids:
            self._ids.move_to_end(notification_id)  # a repeat refreshes it: replays come in runs
            self.dropped += 1
            return True
        self._ids[notification_id] = None
        if len(self._ids) > self.capacity:
            self._ids.popitem(last=False)
        self.passed += 1
        return False

    def filter(self, items: Iterable[T], key: Callable[[T], str] = lambda n: n["notification_id"]) -> Iterator[T]:
        """The items whose id (``key``, by default a notification dict's ``notification_id``) was not seen."""
        for item in items:
            if not self.seen(key(item)):
                yield item


def deduplicate(notifications: Iterable[T], capacity: int = DEFAULT_CAPACITY,
                key: Callable[[T], str] = lambda n: n["notification_id"]) -> list[T]:
    """The notifications without repeats of an id, first occurrence kept, in order."""
    return list(Deduplicator(capacity).filter(notifications, key))
