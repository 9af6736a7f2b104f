"""Encode: matches into notification records, lazily (the deliver stage pulls them into the bounded producer queue).

The ``event`` part of a notification is encoded once per event and appended
to each of its notifications; it re-uses the input bytes when the formats
agree (``notification_attributes``).  Lazy, so that a batch's notifications
are never all in memory at once: back-pressure (``kafka.queues``) reaches the loop.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from fastpubsub.wire.codecs import decode_event, encode_attributes, encode_notification
from fastpubsub.wire.topics import NOTIFICATIONS

from .match import Matched


class Output(NamedTuple):
    """One record to produce."""

    topic: str
    key: bytes
    value: bytes


def notification_attributes(value: bytes, fmt: str) -> bytes:
    """The ``event`` part of a notification, re-using the input bytes when the formats agree.

    An Avro event record's encoding is its one field's, the attribute map the
    notification ends with; a JSON event is the object the JSON notification
    embeds.  Otherwise the event is decoded and encoded in the output format.
    """
    if fmt == "avro" and value[:1] == b"\x00":
        return value[5:]
    if fmt == "json" and value[:1] == b"{":
        return value
    return encode_attributes(decode_event(value), fmt)


class Encode:
    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def __call__(self, matched: Matched) -> Iterator[Output]:
        fmt = self.fmt
        for event_id, value, pairs in matched.groups:
            attributes = notification_attributes(value, fmt)
            for sid, owner in pairs:
                yield Output(NOTIFICATIONS, owner.encode(), encode_notification(sid, owner, event_id, attributes, fmt))
