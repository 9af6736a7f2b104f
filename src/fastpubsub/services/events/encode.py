"""Encode: matches into notification records, lazily (the deliver stage pulls them into the bounded producer queue).

The ``event`` part of a notification is encoded once per event and appended
to each of its notifications; it re-uses the input bytes when the formats
agree (``notification_attributes``).  In Avro, the parts that would be decoded
and encoded again (records in a producer's registered schema, JSON events) are
written for the whole batch first by one kernel (``wire.attribute_map``), the
same bytes; what it does not take, and JSON output of registered records, stay
on the per-record path.  Lazy, so that a batch's notifications are never all
in memory at once: back-pressure (``kafka.queues``) reaches the loop.
"""

from __future__ import annotations

import logging
from typing import Iterator

from confluent_kafka import Message

from fastpubsub.kafka.record_limits import RecordLimits
from fastpubsub.runtime import Output, PipelineCounters, Rejected
from fastpubsub.wire.attribute_map import attribute_maps
from fastpubsub.wire.codecs import (decode_event, encode_attributes, encode_notification, encode_notification_reference,
                                   notification_encoder, reframed)
from fastpubsub.wire.registered import RegisteredDecoders, indexed_attributes
from fastpubsub.wire.topics import NOTIFICATIONS

from .match import Matched

log = logging.getLogger("pubsub")

#: How a notification carries its event: ``full`` embeds it (an event whose notification would not fit the
#: notifications topic is dead-lettered instead), ``reference`` never embeds it (topic, partition, offset),
#: ``auto`` embeds it when it fits and refers to it otherwise.
NOTIFICATION_EVENT_MODES = ("auto", "full", "reference")
#: What an embedded event is: ``decoded``, its attribute/value pairs in the output format; ``original``, the record's
#: value as it was (bytes, with its schema id when framed), for consumers that read the producer's own format.
NOTIFICATION_EVENT_FORMATS = ("decoded", "original")


def notification_attributes(value: bytes, fmt: str, registered: RegisteredDecoders | None = None) -> bytes:
    """The ``event`` part of a notification, re-using the input bytes when the formats agree.

    An Avro event record's encoding is its one field's, the attribute map the
    notification ends with; a JSON event is the object the JSON notification
    embeds.  Otherwise the event is decoded and encoded in the output format.
    A record in a registered schema (``registered``) is carried as its attributes by path, an array's elements
    under ``path[0]``, ``path[1]``... so that the flat map loses none of them.
    """
    if registered is not None and registered.handles(value):
        return encode_attributes(indexed_attributes(registered.pairs(value)), fmt)
    if fmt == "avro" and value[:1] == b"\x00":
        return value[5:]
    if fmt == "json" and value[:1] == b"{":
        return value
    return encode_attributes(decode_event(value), fmt)


class Encode:
    """Notifications within the notifications topic's record limit (docs/guide/reliability.md, "Oversized records").

    ``fast``: write the Avro event parts of a batch's registered records and JSON events with the kernel
    (module docstring); False keeps every part on the per-record path (which defines the bytes: tests compare).
    """

    def __init__(self, fmt: str, mode: str = "auto", counters: PipelineCounters | None = None,
                 topic: str = NOTIFICATIONS, event_format: str = "decoded",
                 registered: RegisteredDecoders | None = None, fast: bool = True) -> None:
        if event_format not in NOTIFICATION_EVENT_FORMATS:
            raise ValueError(f"notification_event_format must be one of {', '.join(NOTIFICATION_EVENT_FORMATS)}, "
                             f"got {event_format!r}")
        self.topic = topic  # the notifications topic
        self.original = event_format == "original"
        self._empty = encode_attributes({}, fmt)
        if mode not in NOTIFICATION_EVENT_MODES:
            raise ValueError(f"notification_event must be one of {', '.join(NOTIFICATION_EVENT_MODES)}, got {mode!r}")
        self.fmt, self.mode = fmt, mode
        self.limits = RecordLimits()  # set when the processor has learned them
        self._counters = counters or PipelineCounters()
        self.registered = registered
        self.fast = fast
        self.registry_ids: dict[int, int] | None = None  # with a Schema Registry: its ids of the notification schemas

    def _batch_attributes(self, matched: Matched) -> dict[int, bytes]:
        """Group index -> its event part, for the groups whose part the per-record path would decode and encode
        again, written by one kernel call (``wire.attribute_map``; a group it does not take is left out)."""
        if self.fmt != "avro" or not self.fast:
            return {}
        registered, at, values = self.registered, [], []
        for i, (_, value, _, record) in enumerate(matched.groups):
            if (self.mode == "reference" and record is not None) or (self.original and record is not None):
                continue  # not embedded, or carried as it was
            if value[:1] == b"{" or (registered is not None and registered.handles(value)):
                at.append(i)
                values.append(value)
        if not values:
            return {}
        return {i: part for i, part in zip(at, attribute_maps(values, registered)) if part is not None}

    def __call__(self, matched: Matched) -> Iterator[Output | Rejected]:
        fmt, mode, budget, topic = self.fmt, self.mode, self.limits.value_budget, self.topic
        original = self.original
        written = self._batch_attributes(matched)
        for g, (event_id, value, pairs, record) in enumerate(matched.groups):
            embed = mode != "reference" or record is None
            # an event read from a record says which (a stored valid event is notified without it)
            source = None if record is None else (record.topic(), record.partition(), record.offset())
            carried = value if original and source is not None else None
            if not embed:
                attributes = b""
            elif carried is not None:
                attributes = self._empty
            else:
                attributes = written[g] if g in written else notification_attributes(value, fmt, self.registered)
            if mode == "full" and record is not None:
                longest = max((owner for _, owner in pairs), key=lambda o: len(o.encode()))
                worst = len(encode_notification(max(sid for sid, _ in pairs), longest, event_id, attributes, fmt,
                                                source, carried))
                if worst > budget(topic, longest.encode()):
                    yield Rejected(record, f"notification too large: {worst} bytes with the event embedded, more than "
                                           f"{topic} takes (--notification-event full)")
                    continue
            encode = notification_encoder(event_id, attributes, fmt, source, carried) if embed else None
            for sid, owner in pairs:
                key = owner.encode()
                if encode is not None:
                    out = reframed(encode(sid, owner), self.registry_ids)
                    if len(out) <= budget(topic, key):
                        yield Output(topic, key, out, record)
                        continue
                if record is None:  # a stored valid event: nothing to refer to (kept events fit, but for long names)
                    self._counters.not_kept += 1
                    log.warning("not notified: stored event %s for subscription %d: %d bytes exceed %s's limit",
                                event_id, sid, len(out), topic)
                    continue
                self._counters.by_reference += 1
                yield Output(topic, key, reframed(encode_notification_reference(
                    sid, owner, event_id, record.topic(), record.partition(), record.offset(), len(value), fmt),
                    self.registry_ids), record)
