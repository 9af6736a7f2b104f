"""Decode: a batch of event records into columns for the matcher, and the records it cannot take.

Nothing here produces or matches: bad records come out as rejects (the record
and why), which the deliver stage dead-letters.  The offsets the batch moves
(bad records too: a bad record is committed once it is dead-lettered, never read
again) are the host's (``runtime.checkpoint.next_offsets``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message

from fastpubsub.runtime import event_id, event_time, has_data, PipelineCounters, Reject
from fastpubsub.wire.codecs import DecodeError
from fastpubsub.wire.event_decoder import DecodedEvents, decode_events
from fastpubsub.wire.metadata import attach
from fastpubsub.wire.registered import RegisteredDecoders

from .valid_events import valid_until_of



@dataclass
class EventBatch:
    """One consumed batch after decoding; ``decoded`` row ``e`` is record ``records[decoded.rows[e]]``."""

    records: list[Message]  # records with a usable key and headers (their values may still be bad)
    ids: list[str]  # event id of each of ``records``
    valid_until: list[int | None]  # the valid_until header of each of ``records``
    decoded: DecodedEvents
    times: list[int]  # event time (ms) of each decoded row
    rejects: list[Reject] = field(default_factory=list)


class ReferencedAttributes:
    """The event attributes the subscriptions of a matcher test (``matcher_of()``: the current one), derived
    attributes (prefix, suffix, contains) by the attribute they derive from.  Names are only added while the
    matcher lives (its dictionary never forgets one), so the set is rebuilt only when one is."""

    def __init__(self, matcher_of: Callable[[], Any]) -> None:
        self._matcher_of = matcher_of
        self._key: tuple | None = None
        self._names: frozenset[str] = frozenset()

    def __call__(self) -> frozenset[str]:
        matcher = self._matcher_of()
        matcher.flush()  # buffered single adds name attributes too
        ids, roots = matcher.attributes.ids, matcher.prefixes.roots
        key = (matcher, len(ids), frozenset(roots))
        if key != self._key:  # a derived attribute's name starts with NUL: its source is named in ``derived``
            names = {name for name in ids if name[:1] != "\0"} | roots.keys() | matcher.derived.by_attribute.keys()
            self._key, self._names = key, frozenset(names)
        return self._names


class Decode:
    """Records the host screened (``runtime.checkpoint``: none too large, none refused before) into columns.

    ``reports_bad_input`` False (every shard but shard 0, ``services.events.shard``): bad records are skipped, not
    rejected, since shard 0 dead-letters them.
    """

    def __init__(self, counters: PipelineCounters, reports_bad_input: bool = True,
                 metadata: Callable[[], Sequence[str]] = tuple, registered: RegisteredDecoders | None = None,
                 referenced: Callable[[], frozenset[str]] | None = None) -> None:
        """``metadata()``: the record metadata attributes the subscriptions name (``wire.metadata``), attached to
        every decoded event."""
        self._counters = counters
        self.reports_bad_input = reports_bad_input
        self._metadata = metadata
        self.registered = registered  # records in producers' registered schemas (--schema-registry)
        #: the attribute names the subscriptions reference now: an event is decoded for these only
        self.referenced = referenced

    def __call__(self, msgs: list[Message]) -> EventBatch:
        t = time.perf_counter()
        batch = self._plain(msgs)
        if batch is None:
            batch = self._each(msgs)
        wanted = self._metadata()
        if wanted:
            batch.decoded = attach(batch.decoded, batch.records, wanted)
        self._counters.lap("decode", t)
        return batch

    def _plain(self, msgs: list[Message]) -> EventBatch | None:
        """The common batch, a few C calls per record: every record has data, a UTF-8 key and a value, no header.
        None if any record is otherwise (:meth:`_each` then takes the batch, with the same verdicts)."""
        if not msgs:
            return None
        keys, values = [m.key() for m in msgs], [m.value() for m in msgs]
        if None in keys or None in values or any([m.error() is not None or m.headers() is not None for m in msgs]):
            return None
        try:
            ids = [k.decode("utf-8") for k in keys]
        except UnicodeDecodeError:
            return None
        wanted = self.referenced() if self.referenced is not None else None
        decoded = decode_events(values, self.registered, wanted)
        rejects = [(msgs[i], reason) for i, reason in sorted(decoded.errors.items())] if self.reports_bad_input else []
        stamps = [msgs[r].timestamp() for r in decoded.rows.tolist()]
        now = int(time.time() * 1000)
        times = [ms if kind != TIMESTAMP_NOT_AVAILABLE else now for kind, ms in stamps]
        return EventBatch(msgs, ids, [None] * len(msgs), decoded, times, rejects)

    def _each(self, msgs: list[Message]) -> EventBatch:
        """Any batch, record by record."""
        records, ids, until, rejects = [], [], [], []
        for msg in msgs:
            if not has_data(msg):
                continue
            try:
                eid, valid_until = event_id(msg), valid_until_of(msg.headers())
            except DecodeError as exc:
                if self.reports_bad_input:
                    rejects.append((msg, str(exc)))
                continue
            ids.append(eid)
            until.append(valid_until)
            records.append(msg)
        wanted = None  # an event kept for later subscriptions (a valid_until) keeps every attribute
        if self.referenced is not None and all(u is None for u in until):
            wanted = self.referenced()
        decoded = decode_events([msg.value() for msg in records], self.registered, wanted)
        if self.reports_bad_input:
            rejects += [(records[i], reason) for i, reason in sorted(decoded.errors.items())]
        times = [event_time(records[r]) for r in decoded.rows.tolist()]
        return EventBatch(records, ids, until, decoded, times, rejects)
