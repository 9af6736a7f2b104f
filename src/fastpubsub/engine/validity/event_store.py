"""Still-valid events, so that a new subscription sees them (Fabret et al., section 1).

"When a new subscription comes in, the system evaluates the subscription
against the valid events."  Events that carry a ``valid_until`` (event time,
milliseconds, exclusive) are kept here until then, in chunks of columnar
batches.  :meth:`ValidEventStore.match_bulk` evaluates a whole batch of new
subscriptions against every stored event with the engine itself: the new
subscriptions are loaded into a small :class:`~engine.matcher.Matcher` and the
stored chunks are matched against it, one kernel call per chunk — the roles
of the paper's two functionalities swapped, with the same code and semantics.

Each event may carry an opaque payload (the processor keeps the bytes its
notifications re-use).  The store is bounded by ``max_events`` and
``max_bytes`` (approximate: payload + id + 24 bytes per attribute + 32 per
event): past either, the events closest to their expiry are dropped first and
counted in ``stats()["evicted"]`` (they are the ones that would have left
soonest anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np

from ..columnar import EventBatch, SubscriptionBatch, batch_from_arrays, batch_to_arrays, concat_events, pack_strings, take_events, unpack_strings
from ..semantics import Predicate, validate_predicates

_PER_PAIR_BYTES = 24
_PER_EVENT_BYTES = 32


class StoredMatches(NamedTuple):
    """One entry per (stored event, subscription) match."""

    subscription_ids: np.ndarray  # int64
    times: np.ndarray  # int64: the event's time
    valid_until: np.ndarray  # int64: the event's valid_until
    event_ids: list[str]
    payloads: list[bytes]


@dataclass
class _Chunk:
    """A batch of stored events and what goes with each."""

    batch: EventBatch
    event_ids: list[str]
    times: np.ndarray  # int64 [n]
    valid_until: np.ndarray  # int64 [n]
    payloads: list[bytes]
    sizes: np.ndarray  # int64 [n], approximate bytes held
    alive: np.ndarray  # bool [n]

    @classmethod
    def build(cls, batch: EventBatch, event_ids: list[str], times: np.ndarray, valid_until: np.ndarray,
              payloads: list[bytes]) -> "_Chunk":
        n = len(batch)
        sizes = (np.fromiter((len(p) + len(i) for p, i in zip(payloads, event_ids)), dtype=np.int64, count=n)
                 + _PER_PAIR_BYTES * np.diff(batch.offsets) + _PER_EVENT_BYTES)
        return cls(batch, event_ids, times, valid_until, payloads, sizes, np.ones(n, dtype=bool))

    def take(self, rows: np.ndarray) -> tuple[EventBatch, list[str], np.ndarray, np.ndarray, list[bytes]]:
        r = rows.tolist()
        return (take_events(self.batch, rows), [self.event_ids[i] for i in r], self.times[rows],
                self.valid_until[rows], [self.payloads[i] for i in r])


class ValidEventStore:
    """Bounded store of events that are still valid in event time."""

    def __init__(self, max_events: int = 100_000, max_bytes: int = 256 << 20, max_chunks: int = 64) -> None:
        if max_events <= 0 or max_bytes <= 0:
            raise ValueError("max_events and max_bytes must be positive")
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_chunks = max_chunks
        self._chunks: list[_Chunk] = []
        self._size = 0
        self._bytes = 0
        self.added = 0
        self.expired = 0
        self.evicted = 0

    def __len__(self) -> int:
        return self._size

    def add(self, batch: EventBatch, event_ids: Sequence[str], valid_until: np.ndarray, now: int | np.ndarray,
            times: np.ndarray | None = None, payloads: Sequence[bytes] | None = None) -> int:
        """Keep the events of ``batch`` whose ``valid_until`` lies after ``now`` (one per event or one for all).

        ``times`` (default ``now``) is each event's own time, ``payloads`` what
        :meth:`match_bulk` hands back with it.  Returns how many were kept.
        """
        n = len(batch)
        valid_until = np.asarray(valid_until, dtype=np.int64)
        times = np.broadcast_to(np.asarray(now if times is None else times, dtype=np.int64), (n,))
        if len(valid_until) != n or len(event_ids) != n or (payloads is not None and len(payloads) != n):
            raise ValueError("one event id, one valid_until (and one payload) are needed per event")
        keep = np.flatnonzero(valid_until > np.asarray(now, dtype=np.int64))
        if len(keep) == 0:
            return 0
        if len(keep) < n:
            batch = take_events(batch, keep)
        rows = keep.tolist()
        chunk = _Chunk.build(batch, [event_ids[i] for i in rows], times[keep].copy(), valid_until[keep],
                             [b"" for _ in rows] if payloads is None else [payloads[i] for i in rows])
        self._chunks.append(chunk)
        self._size += len(keep)
        self._bytes += int(chunk.sizes.sum())
        self.added += len(keep)
        if self._size > self.max_events or self._bytes > self.max_bytes:
            self._evict()
        if len(self._chunks) > self.max_chunks:
            self._compact()
        return len(keep)

    def expire(self, now: int) -> int:
        """Drop events whose ``valid_until`` is ``<= now``; returns how many."""
        dropped = 0
        for c in self._chunks:
            dead = c.alive & (c.valid_until <= now)
            k = int(dead.sum())
            if k:
                c.alive &= ~dead
                dropped += k
                self._bytes -= int(c.sizes[dead].sum())
        self._size -= dropped
        self.expired += dropped
        self._chunks = [c for c in self._chunks if c.alive.any()]
        return dropped

    def match_bulk(self, subscriptions: SubscriptionBatch) -> StoredMatches:
        """Every (stored event, subscription of ``subscriptions``) pair that matches, with the engine."""
        ids, times, until, event_ids, payloads = [], [], [], [], []
        for c, rows, sids in self._matches(subscriptions):
            ids.append(sids)
            times.append(c.times[rows])
            until.append(c.valid_until[rows])
            event_ids.extend(c.event_ids[r] for r in rows.tolist())
            payloads.extend(c.payloads[r] for r in rows.tolist())
        cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)  # noqa: E731
        return StoredMatches(cat(ids), cat(times), cat(until), event_ids, payloads)

    def match(self, predicates: list[Predicate]) -> list[tuple[str, dict[str, Any]]]:
        """(event id, event) of every stored event that satisfies all ``predicates``."""
        out = []
        for c, rows, _ in self._matches(SubscriptionBatch.from_lists([(0, validate_predicates(predicates))])):
            out.extend(zip((c.event_ids[r] for r in rows.tolist()), take_events(c.batch, rows).to_dicts()))
        return out

    def _matches(self, subscriptions: SubscriptionBatch):
        """(chunk, event rows, subscription ids) per chunk: one kernel call per chunk."""
        from ..matcher import Matcher  # the matcher does not need the store; import here to keep layers apart

        if not len(subscriptions) or not self._size:
            return
        m = Matcher("propagation")
        m.add_bulk(subscriptions)
        for c in self._chunks:
            res = m.match_encoded(c.batch)
            rows = np.repeat(np.arange(len(c.batch)), np.diff(res.offsets))
            live = c.alive[rows]
            if live.any():
                yield c, rows[live], res.ids[live]

    def stats(self) -> dict[str, int]:
        return {"events": self._size, "bytes": self._bytes, "chunks": len(self._chunks), "added": self.added,
                "expired": self.expired, "evicted": self.evicted}

    # --- snapshots --------------------------------------------------------------

    def to_arrays(self, prefix: str = "events.") -> dict[str, np.ndarray]:
        """The live events as flat arrays (see :meth:`load_arrays`)."""
        self._compact()
        c = self._chunks[0] if self._chunks else _Chunk.build(EventBatch.from_dicts([]), [], *[np.zeros(0, np.int64)] * 2, [])
        blob = np.frombuffer(b"".join(c.payloads), dtype=np.uint8)
        lengths = np.fromiter((len(p) for p in c.payloads), dtype=np.int64, count=len(c.payloads))
        ids_blob, ids_offsets = pack_strings(c.event_ids)
        return {**batch_to_arrays(c.batch, prefix), f"{prefix}ids": ids_blob, f"{prefix}ids.offsets": ids_offsets,
                f"{prefix}times": c.times, f"{prefix}valid_until": c.valid_until, f"{prefix}payloads": blob,
                f"{prefix}payloads.lengths": lengths}

    def load_arrays(self, arrays: Any, prefix: str = "events.") -> None:
        """Add the events :meth:`to_arrays` wrote (the bounds apply)."""
        batch = batch_from_arrays(EventBatch, arrays, prefix)
        batch.validate()
        blob = np.asarray(arrays[f"{prefix}payloads"]).tobytes()
        ends = np.cumsum(arrays[f"{prefix}payloads.lengths"]).tolist()
        payloads = [blob[a:b] for a, b in zip([0] + ends[:-1], ends)]
        until = np.asarray(arrays[f"{prefix}valid_until"], dtype=np.int64)
        ids = unpack_strings(arrays[f"{prefix}ids"], arrays[f"{prefix}ids.offsets"])
        if not len(batch) == len(ids) == len(payloads) == len(until):
            raise ValueError("stored events: arrays of different lengths")
        self.add(batch, ids, until, np.iinfo(np.int64).min, np.asarray(arrays[f"{prefix}times"]), payloads)

    # --- bounds -----------------------------------------------------------------

    def _evict(self) -> None:
        """Drop the soonest-to-expire events until both bounds hold."""
        until = np.concatenate([c.valid_until[c.alive] for c in self._chunks])
        sizes = np.concatenate([c.sizes[c.alive] for c in self._chunks])
        order = np.argsort(until, kind="stable")  # ties: the oldest chunk first
        kept_bytes = self._bytes - np.concatenate([[0], np.cumsum(sizes[order])])  # after dropping k
        k = max(self._size - self.max_events, int(np.argmax(kept_bytes <= self.max_bytes)))
        drop = np.zeros(len(until), dtype=bool)
        drop[order[:k]] = True
        start = 0
        for c in self._chunks:
            rows = np.flatnonzero(c.alive)
            gone = rows[drop[start : start + len(rows)]]
            start += len(rows)
            c.alive[gone] = False
            self._bytes -= int(c.sizes[gone].sum())
        self._size -= k
        self.evicted += k
        self._chunks = [c for c in self._chunks if c.alive.any()]

    def _compact(self) -> None:
        if len(self._chunks) <= 1 and all(c.alive.all() for c in self._chunks):
            return
        parts = [c.take(np.flatnonzero(c.alive)) for c in self._chunks]
        self._chunks = [_Chunk.build(
            concat_events([p[0] for p in parts]), [i for p in parts for i in p[1]],
            np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts]),
            [x for p in parts for x in p[4]],
        )] if parts else []
