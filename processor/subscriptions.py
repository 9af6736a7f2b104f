"""Subscription state: the matcher plus who owns each subscription and until when.

The state is a function of the latest value per key of ``pubsub.subscriptions``
(what compaction keeps), so a live update and a rebuild after a restart agree:
a tombstone removes, a new value replaces, an invalid value removes the old
subscription (and is dead-lettered by the caller), an expired one is dropped.
"""

from __future__ import annotations

import heapq
from typing import Any

from engine import Matcher

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
        self._expiry: dict[int, int] = {}
        self._heap: list[tuple[int, int]] = []  # (valid_until, id); stale entries skipped
        self.added = self.removed = self.replaced = self.expired = 0

    def __len__(self) -> int:
        return len(self.matcher)

    def _drop(self, sid: int) -> bool:
        if sid not in self.matcher:
            return False
        self.matcher.remove(sid)
        del self.subscribers[sid]
        self._expiry.pop(sid, None)
        return True

    def apply(self, key: bytes | None, value: bytes | None, now_ms: int) -> None:
        """Apply one record of the subscriptions topic; ``DecodeError`` says why it is invalid."""
        sid = parse_subscription_id(key)
        if not value:  # tombstone (null or empty value)
            self.removed += self._drop(sid)
            return
        try:
            sub = decode_subscription(value)
        except DecodeError:
            self.removed += self._drop(sid)  # the latest value is what counts, and it is invalid
            raise
        existed = self._drop(sid)
        if sub.valid_until is not None and sub.valid_until <= now_ms:
            self.expired += 1
            return
        self.matcher.add(sid, sub.predicates)
        self.subscribers[sid] = sub.subscriber
        if sub.valid_until is not None:
            self._expiry[sid] = sub.valid_until
            heapq.heappush(self._heap, (sub.valid_until, sid))
        if existed:
            self.replaced += 1
        else:
            self.added += 1

    def expire(self, now_ms: int) -> int:
        """Remove subscriptions whose ``valid_until`` has passed."""
        n = 0
        while self._heap and self._heap[0][0] <= now_ms:
            until, sid = heapq.heappop(self._heap)
            if self._expiry.get(sid) == until:  # not replaced or removed since
                self._drop(sid)
                n += 1
        self.expired += n
        return n

    def stats(self) -> dict[str, Any]:
        return {
            "subscriptions": len(self),
            "added": self.added,
            "replaced": self.replaced,
            "removed": self.removed,
            "expired": self.expired,
        }
