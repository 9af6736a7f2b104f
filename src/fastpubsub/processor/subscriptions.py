"""Subscription state: the matcher plus who owns each subscription and when it is valid.

The state is a function of the latest value per key of ``pubsub.subscriptions``
(what compaction keeps), so a live update and a rebuild after a restart agree:
a tombstone removes, a new value replaces, an invalid value removes the old
subscription (and is dead-lettered by the caller).

Validity intervals (Fabret et al., section 1) are in event time (record
timestamps), so a replay matches what the first run matched: a subscription
matches an event only if ``valid_from <= event time < valid_until`` (either
bound may be missing), and it leaves the matcher in bulk once events at or past
``valid_until`` arrive (``engine.validity.DeadlineQueue`` + ``Matcher.remove_bulk``).

Beside the matcher the state keeps a columnar copy of what it added
(``SubscriptionBatch`` chunks, compacted when stale rows outnumber live ones),
so that a snapshot (``processor.snapshot``) is a few array copies, not a walk
over the engine's internal structures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.engine import (
    SubscriptionBatch, batch_from_arrays, batch_to_arrays, concat_subscriptions, pack_strings, take_subscriptions,
    unpack_strings,
)
from fastpubsub.engine import DeadlineQueue

from fastpubsub.wire.codecs import (
    AggregateDecodeError, AggregateSubscription, DecodeError, decode_any_subscription, is_aggregate_subscription,
)

_COUNTERS = ("added", "replaced", "removed", "expired")


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


@dataclass
class Applied:
    """What one :meth:`SubscriptionState.apply_records` call did."""

    errors: list[tuple[int, DecodeError]]  # (index of the record, why it is invalid)
    added: SubscriptionBatch  # the new and replaced subscriptions (their latest value)
    times: np.ndarray  # int64: the record time of each of ``added``


class SubscriptionState:
    """What the processor matches against."""

    def __init__(self, algorithm: str = "dynamic", runs: int = 0) -> None:
        self.matcher = Matcher(algorithm, runs=runs)
        self.subscribers: dict[int, str] = {}
        self._deadlines = DeadlineQueue()  # id -> valid_until, for those that have one
        self._starts: dict[int, int] = {}  # id -> valid_from, for those that have one
        self._log: list[SubscriptionBatch] = []  # everything added, latest row per live id counts
        self._logged = 0
        self.added = self.removed = self.replaced = self.expired = 0

    def __len__(self) -> int:
        return len(self.matcher)

    def _drop_many(self, sids: Iterable[int]) -> int:
        present = [sid for sid in sids if sid in self.subscribers]
        if present:
            self.matcher.remove_bulk(np.array(present, dtype=np.int64))
            for sid in present:
                del self.subscribers[sid]
                self._deadlines.discard(sid)
                self._starts.pop(sid, None)
        return len(present)

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of the subscriptions topic; ``DecodeError`` says why it is invalid."""
        errors = self.apply_many([(key, value)])
        if errors:
            raise errors[0][1]

    def apply_many(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> list[tuple[int, DecodeError]]:
        """Apply records of the subscriptions topic in order; returns (index, error) of the invalid ones."""
        return self.apply_records(records).errors

    def apply_records(self, records: Iterable[tuple[bytes | None, bytes | None]],
                      times: Sequence[int] | None = None) -> Applied:
        """Apply records (with their record times) in order; the result is the same as one by one.

        Only the latest record per id counts; the ids it replaces or removes
        leave the matcher in one ``remove_bulk`` and the new subscriptions
        enter it in one ``add_bulk`` (a rebuild of millions of subscriptions is
        a few bulk loads, not millions of adds).
        """
        errors: list[tuple[int, DecodeError]] = []
        latest: dict[int, Any] = {}  # id -> (decoded subscription or None for "removed", record index)
        for i, (key, value) in enumerate(records):
            try:
                sid = parse_subscription_id(key)
            except DecodeError as exc:
                if not is_aggregate_subscription(value):  # an aggregate one is the table service's to refuse
                    errors.append((i, exc))
                continue
            latest.pop(sid, None)  # keep the dict in order of each id's latest record
            if not value:  # tombstone (null or empty value)
                latest[sid] = (None, i)
                continue
            try:
                sub = decode_any_subscription(value)
                # aggregate subscriptions (valid or not) belong to the table service (processor.tables): here the
                # id just stops being a plain subscription
                latest[sid] = (None if isinstance(sub, AggregateSubscription) else sub, i)
            except AggregateDecodeError:
                latest[sid] = (None, i)
            except DecodeError as exc:
                latest[sid] = (None, i)  # the latest value is what counts, and it is invalid
                errors.append((i, exc))
        existed = {sid for sid in latest if sid in self.subscribers}
        self._drop_many(existed)
        new = [(sid, sub, i) for sid, (sub, i) in latest.items() if sub is not None]
        self.removed += sum(1 for sid, (sub, _) in latest.items() if sub is None and sid in existed)
        self.replaced += sum(1 for sid, _, _ in new if sid in existed)
        self.added += sum(1 for sid, _, _ in new if sid not in existed)
        batch = SubscriptionBatch.from_lists((sid, sub.predicates) for sid, sub, _ in new)
        if new:
            self.matcher.add_bulk(batch)
            self._log.append(batch)
            self._logged += len(batch)
            for sid, sub, _ in new:
                self.subscribers[sid] = sub.subscriber
                if sub.valid_until is not None:
                    self._deadlines.set(sid, sub.valid_until)
                if sub.valid_from is not None:
                    self._starts[sid] = sub.valid_from
        if self._logged > 2 * len(self.subscribers) + 4096:
            self._log = [self.live_batch()]
            self._logged = len(self._log[0])
        when = np.array([0 if times is None else times[i] for _, _, i in new], dtype=np.int64)
        return Applied(errors, batch, when)

    def expire(self, event_time_ms: int) -> int:
        """Remove, in bulk, the subscriptions whose ``valid_until`` is at or before ``event_time_ms``."""
        n = self._drop_many(self._deadlines.pop_due(event_time_ms).tolist())
        self.expired += n
        return n

    def valid_at(self, sid: int, event_time_ms: int) -> bool:
        """Whether subscription ``sid`` is valid for an event of that time (``valid_from <= t < valid_until``)."""
        deadline = self._deadlines.get(sid)
        start = self._starts.get(sid)
        return (deadline is None or event_time_ms < deadline) and (start is None or start <= event_time_ms)

    def valid_mask(self, sids: np.ndarray, event_times: np.ndarray) -> np.ndarray:
        """:meth:`valid_at` of each (subscription, event time) pair."""
        if not len(self._deadlines) and not self._starts:
            return np.ones(len(sids), dtype=bool)
        return np.fromiter(map(self.valid_at, sids.tolist(), event_times.tolist()), dtype=bool, count=len(sids))

    # --- snapshots --------------------------------------------------------------

    def live_batch(self) -> SubscriptionBatch:
        """Every live subscription (its latest value), as one batch."""
        batch = self._log[0] if len(self._log) == 1 else concat_subscriptions(self._log)
        ids = np.asarray(batch.ids, dtype=np.int64)
        _, first_from_end = np.unique(ids[::-1], return_index=True)
        last = len(ids) - 1 - first_from_end  # the latest row of each id
        live = np.fromiter(self.subscribers, dtype=np.int64, count=len(self.subscribers))
        return take_subscriptions(batch, np.sort(last[np.isin(ids[last], live)]))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The state as flat arrays (``processor.snapshot`` writes them); see :meth:`from_arrays`."""
        batch = self.live_batch() if self._log else SubscriptionBatch.from_lists([])
        names: dict[str, int] = {}
        owner = np.fromiter((names.setdefault(self.subscribers[s], len(names)) for s in batch.ids.tolist()),
                            dtype=np.int64, count=len(batch))
        blob, offsets = pack_strings(list(names))
        until_ids, until_ms = self._deadlines.items()
        return {
            **batch_to_arrays(batch, "subscriptions."),
            "subscribers.names": blob, "subscribers.names.offsets": offsets, "subscribers.index": owner,
            "valid_until.ids": until_ids, "valid_until.ms": until_ms,
            "valid_from.ids": np.array(list(self._starts), np.int64), "valid_from.ms": np.array(list(self._starts.values()), np.int64),
            "counters": np.array([getattr(self, c) for c in _COUNTERS], np.int64),
        }

    @classmethod
    def from_arrays(cls, arrays: Any, algorithm: str = "dynamic", runs: int = 0) -> "SubscriptionState":
        """The state :meth:`to_arrays` wrote, loaded with one ``add_bulk``; ``ValueError`` if inconsistent."""
        state = cls(algorithm, runs)
        batch = batch_from_arrays(SubscriptionBatch, arrays, "subscriptions.")
        names = unpack_strings(arrays["subscribers.names"], arrays["subscribers.names.offsets"])
        owner = np.asarray(arrays["subscribers.index"])
        if len(owner) != len(batch) or (len(owner) and not 0 <= owner.min() <= owner.max() < len(names)):
            raise ValueError("snapshot: one subscriber per subscription is needed")
        state.matcher.add_bulk(batch)
        if len(batch):
            state._log, state._logged = [batch], len(batch)
        state.subscribers = dict(zip(batch.ids.tolist(), [names[i] for i in owner.tolist()]))
        for what in ("valid_until", "valid_from"):
            ids = np.asarray(arrays[f"{what}.ids"])
            if len(ids) != len(arrays[f"{what}.ms"]) or not all(i in state.subscribers for i in ids.tolist()):
                raise ValueError(f"snapshot: {what} of unknown subscriptions")
        state._deadlines.set_many(arrays["valid_until.ids"].tolist(), arrays["valid_until.ms"].tolist())
        state._starts = dict(zip(arrays["valid_from.ids"].tolist(), arrays["valid_from.ms"].tolist()))
        for name, value in zip(_COUNTERS, np.asarray(arrays["counters"]).tolist()):
            setattr(state, name, value)
        return state

    def stats(self) -> dict[str, Any]:
        return {
            "subscriptions": len(self),
            "added": self.added,
            "replaced": self.replaced,
            "removed": self.removed,
            "expired": self.expired,
        }
