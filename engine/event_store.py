"""Still-valid events, so that a new subscription sees them (Fabret et al., section 1).

"When a new subscription comes in, the system evaluates the subscription
against the valid events."  Events that carry a ``valid_until`` (event time,
milliseconds) are kept here until then; :meth:`ValidEventStore.match`
evaluates one subscription against all of them, vectorised per predicate over
a per-attribute index of each stored chunk, so a subscription costs a handful
of numpy operations, not a Python loop over events.

The store is bounded by ``max_events``: past it, the events closest to their
expiry are dropped first and counted in ``stats()["evicted"]`` (they are the
ones that would have left soonest anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .columnar import EventBatch, concat_events, take_events
from .semantics import (
    KIND_BOOL,
    KIND_NUMBER,
    KIND_STRING,
    OP_EQ,
    OP_GE,
    OP_GT,
    OP_LE,
    OP_LT,
    OP_CODE,
    Predicate,
    validate_predicates,
    value_kind,
)

_COMPARE = {
    OP_EQ: np.equal,
    OP_CODE["!="]: np.not_equal,
    OP_LT: np.less,
    OP_LE: np.less_equal,
    OP_GT: np.greater,
    OP_GE: np.greater_equal,
}


@dataclass
class _Chunk:
    """A batch of stored events with a per-attribute index over its pairs."""

    batch: EventBatch
    event_ids: list[str]
    valid_until: np.ndarray  # int64 [n]
    alive: np.ndarray  # bool [n]
    index: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # name -> rows, kinds, numbers, strings

    @classmethod
    def build(cls, batch: EventBatch, event_ids: list[str], valid_until: np.ndarray) -> "_Chunk":
        n = len(batch)
        lengths = np.diff(batch.offsets)
        rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
        kinds = np.asarray(batch.kinds)
        strings = np.empty(len(kinds), dtype=object)
        strings[kinds == KIND_STRING] = list(batch.strings)
        order = np.argsort(batch.attributes, kind="stable")
        attrs = batch.attributes[order]
        bounds = np.flatnonzero(np.diff(attrs)) + 1
        index = {}
        for part in np.split(order, bounds) if len(order) else []:
            name = batch.attribute_names[int(batch.attributes[part[0]])]
            index[name] = (rows[part], kinds[part], batch.numbers[part], strings[part])
        return cls(batch, event_ids, valid_until, np.ones(n, dtype=bool), index)

    def matching_rows(self, predicates: list[tuple[str, int, int, Any]]) -> np.ndarray:
        mask = self.alive.copy()
        for attribute, op, kind, value in predicates:
            entry = self.index.get(attribute)
            if entry is None:
                return np.zeros(0, dtype=np.int64)
            rows, kinds, numbers, strings = entry
            sel = kinds == kind
            if kind == KIND_STRING:
                held = _COMPARE[op](strings[sel], value).astype(bool)
            else:
                x = numbers[sel]
                held = _COMPARE[op](x, float(value)) & ~np.isnan(x)
            hit = np.zeros(len(mask), dtype=bool)
            hit[rows[sel][held]] = True
            mask &= hit
            if not mask.any():
                break
        return np.flatnonzero(mask)


class ValidEventStore:
    """Bounded store of events that are still valid in event time."""

    def __init__(self, max_events: int = 100_000, max_chunks: int = 64) -> None:
        if max_events <= 0:
            raise ValueError("max_events must be positive")
        self.max_events = max_events
        self.max_chunks = max_chunks
        self._chunks: list[_Chunk] = []
        self._size = 0
        self.expired = 0
        self.evicted = 0

    def __len__(self) -> int:
        return self._size

    def add(self, batch: EventBatch, event_ids: Sequence[str], valid_until: np.ndarray, now: int) -> int:
        """Keep the events of ``batch`` whose ``valid_until`` lies after ``now``; returns how many."""
        valid_until = np.asarray(valid_until, dtype=np.int64)
        if len(valid_until) != len(batch) or len(event_ids) != len(batch):
            raise ValueError("one event id and one valid_until are needed per event")
        keep = np.flatnonzero(valid_until > now)
        if len(keep) == 0:
            return 0
        if len(keep) < len(batch):
            batch = take_events(batch, keep)
        ids = [event_ids[i] for i in keep.tolist()]
        self._chunks.append(_Chunk.build(batch, ids, valid_until[keep]))
        self._size += len(keep)
        if self._size > self.max_events:
            self._evict(self._size - self.max_events)
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
        self._size -= dropped
        self.expired += dropped
        self._chunks = [c for c in self._chunks if c.alive.any()]
        return dropped

    def match(self, predicates: list[Predicate]) -> list[tuple[str, dict[str, Any]]]:
        """(event id, event) of every stored event that satisfies all ``predicates``."""
        preds = [(a, OP_CODE[op], value_kind(v), v) for a, op, v in validate_predicates(predicates)]
        out: list[tuple[str, dict[str, Any]]] = []
        for c in self._chunks:
            rows = c.matching_rows(preds)
            if len(rows):
                events = take_events(c.batch, rows).to_dicts()
                out.extend((c.event_ids[r], e) for r, e in zip(rows.tolist(), events))
        return out

    def stats(self) -> dict[str, int]:
        return {"events": self._size, "chunks": len(self._chunks), "expired": self.expired, "evicted": self.evicted}

    def _evict(self, count: int) -> None:
        deadlines = np.concatenate([np.where(c.alive, c.valid_until, np.iinfo(np.int64).max) for c in self._chunks])
        cut = np.partition(deadlines, count - 1)[count - 1]
        # drop everything strictly before the cut, then just enough at the cut
        need = count
        for c in self._chunks:
            early = c.alive & (c.valid_until < cut)
            k = int(early.sum())
            c.alive &= ~early
            need -= k
        for c in self._chunks:
            if need <= 0:
                break
            at = np.flatnonzero(c.alive & (c.valid_until == cut))[:need]
            c.alive[at] = False
            need -= len(at)
        self._size -= count
        self.evicted += count
        self._chunks = [c for c in self._chunks if c.alive.any()]

    def _compact(self) -> None:
        parts, ids, until = [], [], []
        for c in self._chunks:
            rows = np.flatnonzero(c.alive)
            parts.append(take_events(c.batch, rows))
            ids.extend(c.event_ids[r] for r in rows.tolist())
            until.append(c.valid_until[rows])
        self._chunks = [_Chunk.build(concat_events(parts), ids, np.concatenate(until))]
