"""Subscription state: the matcher plus who owns each subscription and until when.

The state is a function of the latest value per key of ``pubsub.subscriptions``
(what compaction keeps), so a live update and a rebuild after a restart agree:
a tombstone removes, a new value replaces, an invalid value removes the old
subscription (and is dead-lettered by the caller).

``valid_until`` is in event time (record timestamps), so a replay matches what
the first run matched: an event matches a subscription only if its timestamp is
before ``valid_until``, and a subscription leaves the matcher once events at or
past that time arrive (``engine.validity.DeadlineQueue``).
"""

from __future__ import annotations

from typing import Any, Iterable

from engine import Matcher
from engine.columnar import SubscriptionBatch
from engine.validity import DeadlineQueue

from .codecs import DecodeError, decode_subscription


def parse_subscription_id(key: bytes | None) -> int:
    """Record key -> subscription id (a decimal string of a signed 64-bit integer)."""
    if key is None:
        raise DecodeError("subscription record has no key; the key must be the subscription id as a decimal string")
    try:
        text = key.decode("ascii")
        sid = int(text)
    except (UnicodeDecodeError, ValueError):
        raise DecodeError(f"subscription key {key[:40]!r} is not a decimal integer") from None
    if text.strip() != text or not -(2**63) <= sid < 2**63:
        raise DecodeError(f"subscription key {key[:40]!r} is not a decimal signed 64-bit integer")
    return sid


class SubscriptionState:
    """What the processor matches against."""

    def __init__(self, algorithm: str = "dynamic") -> None:
        self.matcher = Matcher(algorithm)
        self.subscribers: dict[int, str] = {}
        self._deadlines = DeadlineQueue()  # id -> valid_until, for those that have one
        self.added = self.removed = self.replaced = self.expired = 0

    def __len__(self) -> int:
        return len(self.matcher)

    def _drop(self, sid: int) -> bool:
        if sid not in self.matcher:
            return False
        self.matcher.remove(sid)
        del self.subscribers[sid]
        self._deadlines.discard(sid)
        return True

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of the subscriptions topic; ``DecodeError`` says why it is invalid."""
        errors = self.apply_many([(key, value)])
        if errors:
            raise errors[0][1]

    def apply_many(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> list[tuple[int, DecodeError]]:
        """Apply records of the subscriptions topic in order; returns (index, error) of the invalid ones.

        The result is the same as applying them one by one, but the new
        subscriptions go to the matcher in one ``add_bulk`` (a rebuild of
        millions of subscriptions is a few bulk loads, not millions of adds).
        """
        errors: list[tuple[int, DecodeError]] = []
        latest: dict[int, Any] = {}  # id -> decoded subscription, or None for "removed"
        for i, (key, value) in enumerate(records):
            try:
                sid = parse_subscription_id(key)
            except DecodeError as exc:
                errors.append((i, exc))
                continue
            if not value:  # tombstone (null or empty value)
                latest[sid] = None
                continue
            try:
                latest[sid] = decode_subscription(value)
            except DecodeError as exc:
                latest[sid] = None  # the latest value is what counts, and it is invalid
                errors.append((i, exc))
        new = []
        for sid, sub in latest.items():
            existed = self._drop(sid)
            if sub is None:
                self.removed += existed
                continue
            new.append((sid, sub))
            self.replaced += existed
            self.added += not existed
        if new:
            self.matcher.add_bulk(SubscriptionBatch.from_lists((sid, sub.predicates) for sid, sub in new))
            for sid, sub in new:
                self.subscribers[sid] = sub.subscriber
                if sub.valid_until is not None:
                    self._deadlines.set(sid, sub.valid_until)
        return errors

    def expire(self, event_time_ms: int) -> int:
        """Remove the subscriptions whose ``valid_until`` is at or before ``event_time_ms``."""
        due = self._deadlines.pop_due(event_time_ms).tolist()
        for sid in due:
            self._drop(sid)
        self.expired += len(due)
        return len(due)

    def valid_at(self, sid: int, event_time_ms: int) -> bool:
        """Whether subscription ``sid`` is still valid for an event of that time."""
        deadline = self._deadlines.get(sid)
        return deadline is None or event_time_ms < deadline

    def stats(self) -> dict[str, Any]:
        return {
            "subscriptions": len(self),
            "added": self.added,
            "replaced": self.replaced,
            "removed": self.removed,
            "expired": self.expired,
        }
