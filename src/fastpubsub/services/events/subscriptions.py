"""Subscription state: the matcher plus who owns each subscription and when it is valid.

The state is a function of the latest value per key of ``pubsub.subscriptions``
(what compaction keeps), so a live update and a rebuild after a restart agree:
a tombstone removes, a new value replaces, an invalid value removes the old
subscription (and is dead-lettered by the caller).

Validity intervals (Fabret et al., section 1) are in event time (record
timestamps), so a replay matches what the first run matched: a subscription
matches an event only if ``valid_from <= event time < valid_until`` (either
bound may be missing), and it leaves the matcher in bulk once events at or past
``valid_until`` arrive (``engine.validity.deadlines.DeadlineQueue`` + ``Matcher.remove_bulk``).

Beside the matcher the state keeps a columnar copy of what it added
(``SubscriptionBatch`` chunks, small ones merged as they come, compacted when stale rows outnumber live ones),
so that a snapshot (``processor.snapshot``) is a few array copies, not a walk
over the engine's internal structures.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.engine import (
    SubscriptionBatch, batch_from_arrays, batch_to_arrays, concat_subscriptions, pack_strings, take_subscription_groups,
    unpack_strings,
)
from fastpubsub.engine import DeadlineQueue
from fastpubsub.engine import index_holds

from fastpubsub.wire.codecs import DecodeError
from fastpubsub.wire.subscription_decoder import DecodedSubscriptions, decode_subscriptions, parse_subscription_id

__all__ = ["Applied", "SubscriptionState", "parse_subscription_id"]

from .shard import UNSHARDED, Shard

_COUNTERS = ("added", "replaced", "removed", "expired")


class Applied:
    """What one :meth:`SubscriptionState.apply_records` call did."""

    def __init__(self, errors: list[tuple[int, DecodeError]], added: SubscriptionBatch, rows: np.ndarray,
                 times: Sequence[int] | Callable[[np.ndarray], np.ndarray] | None) -> None:
        self.errors = errors  # (index of the record, why it is invalid)
        self.added = added  # the new and replaced subscriptions (their latest value)
        self.rows = rows  # int64: the index of the record of each row of ``added``
        self._times = times

    @functools.cached_property
    def times(self) -> np.ndarray:
        """int64: the record time of each row of ``added`` (only asked for when valid events are stored, so a
        caller may hand a function of the rows instead of every record's time)."""
        if self._times is None:
            return np.zeros(len(self.rows), np.int64)
        if callable(self._times):
            return np.asarray(self._times(self.rows), np.int64)
        return np.asarray(self._times, np.int64)[self.rows]


class SubscriptionState:
    """What the processor matches against."""

    def __init__(self, algorithm: str = "dynamic", runs: int | None = None, shard: Shard = UNSHARDED) -> None:
        self.matcher = Matcher(algorithm) if runs is None else Matcher(algorithm, runs=runs)
        self.runs = runs
        self.index_loaded = False  # the matcher came built from a snapshot (engine.structure), not from a bulk load
        self.shard = shard  # only the ids it owns are held; the other shards' records are skipped
        self.skipped = 0  # records of ids that other shards hold
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
        a few bulk loads, not millions of adds).  Records of ids another shard
        holds are skipped (neither held nor dead-lettered here); a key that is no id
        is an error on shard 0 only (``processor.shard``).
        """
        records = records if isinstance(records, list) else list(records)
        return self.apply_columns([k for k, _ in records], [v for _, v in records], times)

    def apply_columns(self, keys: Sequence[bytes | None], values: Sequence[bytes | None],
                      times: Sequence[int] | Callable[[np.ndarray], np.ndarray] | None = None,
                      decoded: DecodedSubscriptions | None = None) -> Applied:
        """:meth:`apply_records` of the records ``(keys[i], values[i])`` (no tuple per record); ``times`` may be
        a function of record indices, asked only if :attr:`Applied.times` is.  ``decoded``: these records already
        through :func:`decode_subscriptions` (a rebuild decodes the next chunk on a thread while this one loads)."""
        if decoded is None:
            decoded = decode_subscriptions(keys, values)
        elif len(decoded) != len(keys):
            raise ValueError(f"{len(keys)} records but {len(decoded)} decoded")
        # the latest record of each id (records with a bad key name no id), in the order of those records
        named = np.ones(len(keys), bool)
        if decoded.key_errors:
            named[list(decoded.key_errors)] = False
        if self.shard.sharded:  # another shard's records: neither held nor reported here
            owns = self.shard.owns
            mine = np.fromiter((owns(sid) for sid in decoded.ids.tolist()), bool, len(keys))
            self.skipped += int(np.count_nonzero(named & ~mine))
            named &= mine
        key_errors = decoded.key_errors if self.shard.reports_unowned_input else {}
        if decoded.aggregate:  # aggregate subscriptions are the table service's to refuse
            key_errors = {i: reason for i, reason in key_errors.items() if i not in decoded.aggregate}
        errors = sorted([(i, DecodeError(reason)) for i, reason in key_errors.items()]
                        + [(i, DecodeError(reason)) for i, reason in decoded.errors.items() if named[i]],
                        key=lambda x: x[0])
        rows = np.flatnonzero(named)
        ids = decoded.ids[rows]
        _, last_from_end = np.unique(ids[::-1], return_index=True)
        latest = np.sort(rows[len(rows) - 1 - last_from_end])
        latest_ids = decoded.ids[latest]
        # the matcher holds exactly the subscribers' ids: asked of it in one vectorised probe
        existed = self.matcher.holds(latest_ids) if self.subscribers else np.zeros(len(latest), bool)
        self._drop_many(latest_ids[existed].tolist())
        is_new = decoded.valid[latest]
        new = latest[is_new]
        self.removed += int(np.count_nonzero(~is_new & existed))
        self.replaced += int(np.count_nonzero(is_new & existed))
        self.added += int(np.count_nonzero(is_new & ~existed))
        batch = decoded.batch(new)
        if len(new):
            self.matcher.add_bulk(batch)
            self._append_log(batch)
            new_ids = decoded.ids[new].tolist()  # (the batch has a row per disjunct: OR, in, ...)
            owners = np.empty(len(decoded.subscribers), object)  # one string per subscriber, picked in one take
            owners[:] = [sys.intern(name) for name in decoded.subscribers]
            self.subscribers.update(zip(new_ids, owners[decoded.owner[new]].tolist()))
            until = new[decoded.has_until[new]]
            if len(until) > 10_000:  # one heapify (as a snapshot load does), not a push each
                self._deadlines.set_many(decoded.ids[until].tolist(), decoded.valid_until[until].tolist())
            else:
                for sid, deadline in zip(decoded.ids[until].tolist(), decoded.valid_until[until].tolist()):
                    self._deadlines.set(sid, deadline)
            since = new[decoded.has_from[new]]
            self._starts.update(zip(decoded.ids[since].tolist(), decoded.valid_from[since].tolist()))
        if self._logged > 2 * len(self.subscribers) + 4096:  # (rows: a subscription of several counts several)
            self._log = [self.live_batch()]
            self._logged = len(self._log[0])
        heads = np.flatnonzero(batch.disjunct_flags() == 0)  # a subscription may have several rows (OR, in, ...)
        rows = new if len(heads) == len(batch) else np.repeat(new, np.diff(np.r_[heads, len(batch)]))
        return Applied(errors, batch, rows, times)

    def _append_log(self, batch: SubscriptionBatch) -> None:
        """Log ``batch``, merging the log's last chunks while the one before is at most twice the last (a binary
        counter: O(log n) chunks, each row copied O(log n) times).  A live processor applies a few records at a
        time, and a batch of them costs kilobytes beside its rows (its arrays' headers, views of the decoder's
        buffers): kept one by one until the next compaction they grew the process by about 14 KB per apply."""
        log = self._log
        log.append(batch)
        self._logged += len(batch)
        while len(log) >= 2 and len(log[-2]) <= 2 * len(log[-1]):
            log[-2:] = [concat_subscriptions(log[-2:])]

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
        heads = np.flatnonzero(batch.disjunct_flags() == 0)  # first row of each subscription
        ids = np.asarray(batch.ids, dtype=np.int64)[heads]
        _, first_from_end = np.unique(ids[::-1], return_index=True)
        last = len(ids) - 1 - first_from_end  # the latest value of each id
        live = np.fromiter(self.subscribers, dtype=np.int64, count=len(self.subscribers))
        return take_subscription_groups(batch, heads[np.sort(last[np.isin(ids[last], live)])])

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
    def from_arrays(cls, arrays: Any, algorithm: str = "dynamic", runs: int | None = None,
                    shard: Shard = UNSHARDED, matcher: Matcher | None = None) -> "SubscriptionState":
        """The state :meth:`to_arrays` wrote; ``ValueError`` if inconsistent.

        ``matcher``: the snapshot's built index (``engine.structure``), used as
        it is if it holds exactly these subscriptions; else (or without one)
        they are loaded with one ``add_bulk``.
        """
        state = cls(algorithm, runs, shard)
        batch = batch_from_arrays(SubscriptionBatch, arrays, "subscriptions.")
        names = unpack_strings(arrays["subscribers.names"], arrays["subscribers.names.offsets"])
        owner = np.asarray(arrays["subscribers.index"])
        if len(owner) != len(batch) or (len(owner) and not 0 <= owner.min() <= owner.max() < len(names)):
            raise ValueError("snapshot: one subscriber per subscription is needed")
        if shard.sharded and not all(map(shard.owns, batch.ids.tolist())):
            raise ValueError(f"snapshot: subscriptions of another shard than {shard}")
        if matcher is not None and matcher.algorithm == algorithm and index_holds(matcher, batch.ids):
            state.matcher, state.index_loaded = matcher, True
        else:
            state.matcher.add_bulk(batch)
        if len(batch):
            state._log, state._logged = [batch], len(batch)
        by_index = np.empty(len(names), object)  # one string per subscriber, picked for every row in one take
        by_index[:] = names
        state.subscribers = dict(zip(batch.ids.tolist(), by_index[owner].tolist()))
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
