"""Match: decoded events against the subscriptions, and new subscriptions against the stored valid events.

Both directions end in the same :class:`Matched` (which subscriber gets which
event), so the encode stage writes the fan-out once.  A live match counts
only within the subscription's validity interval (``valid_at`` at the event's
time); the batch's events that carry a ``valid_until`` are then kept for
subscriptions still to come (``processor.valid_events``, Fabret et al. section 1).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from confluent_kafka import Message

from fastpubsub.engine import take_events

from fastpubsub.kafka.record_limits import RecordLimits
from fastpubsub.wire.topics import NOTIFICATIONS

from fastpubsub.runtime import PipelineCounters
from .decode import EventBatch
from .state import ProcessorState
from .subscriptions import Applied
from .valid_events import due


#: Room left beside a kept valid event for its later notification's other fields (ids and subscriber name).
STORED_HEADROOM = 4096


@dataclass
class Matched:
    """Notifications to send, by event: ``(event id, event value, [(subscription id, subscriber), ...], record)``.

    ``record`` is the event's input record (None for a stored valid event):
    a notification too large to embed the event refers to it.
    """

    groups: list[tuple[str, bytes, list[tuple[int, str]], Message | None]] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(group[2]) for group in self.groups)


class Match:
    def __init__(self, state: ProcessorState, counters: PipelineCounters, notifications: str = NOTIFICATIONS) -> None:
        self._notifications = notifications
        self._state = state
        self._counters = counters
        self.limits = RecordLimits()  # set when the processor has learned them

    def events(self, batch: EventBatch) -> Matched:
        """One ``match_encoded`` call for the whole batch; matches outside a validity interval dropped."""
        if not len(batch.decoded):
            return Matched()
        t = time.perf_counter()
        subscriptions, store = self._state.subscriptions, self._state.events
        earliest = min(batch.times)
        subscriptions.expire(earliest)  # later events of the batch are checked with valid_at below
        store.expire(earliest)
        matches = subscriptions.matcher.match_encoded(batch.decoded.event_batch())
        owners, valid_at = subscriptions.subscribers, subscriptions.valid_at
        rows, off, groups = batch.decoded.rows.tolist(), matches.offsets, []
        for e in np.flatnonzero(np.diff(off)).tolist():  # only the events that matched something
            when, r = batch.times[e], rows[e]
            pairs = [(sid, owners[sid]) for sid in matches.ids[off[e]:off[e + 1]].tolist() if valid_at(sid, when)]
            if pairs:
                groups.append((batch.ids[r], batch.records[r].value(), pairs, batch.records[r]))
        self._keep_valid_events(batch)
        self._counters.lap("match", t)
        return Matched(groups)

    def stored(self, applied: Applied) -> Matched:
        """New (or replaced) subscriptions x the stored valid events (``processor.valid_events`` says which count).

        The subscriptions' record times are asked for only when events are stored (a rebuild has none)."""
        store, subscriptions, added = self._state.events, self._state.subscriptions, applied.added
        if not len(added) or not len(store):
            return Matched()
        times = applied.times
        found = store.match_bulk(added)
        owners = subscriptions.subscribers
        groups = []
        for j in due(found, dict(zip(added.ids.tolist(), times.tolist())), subscriptions.valid_mask).tolist():
            sid = int(found.subscription_ids[j])
            groups.append((found.event_ids[j], found.payloads[j], [(sid, owners[sid])], None))
        return Matched(groups)

    def _keep_valid_events(self, batch: EventBatch) -> None:
        """Store the batch's events that carry a ``valid_until`` after their own time (for new subscriptions)."""
        rows, times, until = batch.decoded.rows.tolist(), batch.times, batch.valid_until
        # a kept event is notified later with no record to refer to: only events whose notification will fit
        room = self.limits.value_budget(self._notifications, None) - STORED_HEADROOM
        keep = [e for e, r in enumerate(rows) if until[r] is not None and until[r] > times[e]
                and len(batch.records[r].value()) <= room]
        if not keep:
            return
        picked = np.array(keep, dtype=np.int64)
        self._state.events.add(take_events(batch.decoded.event_batch(), picked), [batch.ids[rows[e]] for e in keep],
                               np.array([until[rows[e]] for e in keep], dtype=np.int64), np.asarray(times)[picked],
                               payloads=[batch.records[rows[e]].value() for e in keep])
