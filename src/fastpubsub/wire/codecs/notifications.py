"""Notification records: one per (event, subscription) matched, carrying the event's attributes or a reference
to the event's record (schema ids 3, 6 and 10)."""

from __future__ import annotations

import base64
import json
from typing import Any, Callable

from .framing import (_HEADER, _INT32_MAX, MAGIC, SCHEMA_IDS, SCHEMAS, DecodeError, _avro_long, _avro_read,
                      _avro_string, _avro_write, _json_read, _sniff, _wire)


def notification_id(event_id: str, subscription_id: int) -> str:
    """Deterministic identity: the same event and subscription always give the same id."""
    return f"{event_id}/{subscription_id}"


def original_event(value: bytes) -> dict[str, Any]:
    """A record's value as a notification carries it as it was: the bytes, and their schema id when framed."""
    framed = len(value) >= 5 and value[0] == MAGIC
    return {"schema_id": _HEADER.unpack_from(value)[1] if framed else None, "value": value}


def notification_encoder(event_id: str, attributes: bytes, fmt: str, source: tuple[str, int, int] | None = None,
                         original: bytes | None = None) -> Callable[[int, str], bytes]:
    """``encode_notification`` for the subscriptions one event matched: ``(subscription id, subscriber) -> value``.

    In Avro what does not depend on the subscription (the frame, the event id, source, original and attributes) is
    written once and each notification writes only its id, subscription id and subscriber: the bytes are the same
    (a record's encoding is its fields' in order; the ``event`` map, last, is ``attributes`` as it is), written here
    without fastavro, whose call per notification was most of the processor's time when events match several
    subscriptions each (docs/processor.md, "Notifications").
    """
    v2 = source is not None or original is not None
    if fmt == "json":
        return lambda sid, subscriber: _json_notification(sid, subscriber, event_id, attributes, source, original)
    name = "notification_v2" if v2 else "notification"
    part = [_avro_string(event_id)]
    if v2:  # two unions: null (branch 0) or their record (branch 1)
        part.append(b"\x00" if source is None else
                    b"\x02" + _avro_string(source[0]) + _avro_long(source[1]) + _avro_long(source[2]))
        if original is None:
            part.append(b"\x00")
        else:
            schema_id = original_event(original)["schema_id"]
            if schema_id is not None and schema_id > _INT32_MAX:  # an Avro int, as fastavro refuses it
                raise ValueError(f"schema id {schema_id} of the original value is out of range for an Avro int")
            part += [b"\x02", b"\x00" if schema_id is None else b"\x02" + _avro_long(schema_id),
                     _avro_long(len(original)), original]
    frame, tail = _HEADER.pack(MAGIC, SCHEMA_IDS[name]), b"".join(part) + attributes

    def encode(subscription_id: int, subscriber: str) -> bytes:
        return b"".join((frame, _avro_string(notification_id(event_id, subscription_id)), _avro_long(subscription_id),
                         _avro_string(subscriber), tail))
    return encode


def _json_notification(subscription_id: int, subscriber: str, event_id: str, attributes: bytes,
                       source: tuple[str, int, int] | None, original: bytes | None) -> bytes:
    head: dict[str, Any] = {"notification_id": notification_id(event_id, subscription_id),
                            "subscription_id": subscription_id, "subscriber": subscriber, "event_id": event_id}
    if source is not None or original is not None:
        head["source"] = None if source is None else dict(zip(("topic", "partition", "offset"), source))
        if original is not None:  # without "original": null, which would only lengthen every line
            head["original"] = {**original_event(original), "value": base64.b64encode(original).decode("ascii")}
    return json.dumps(head)[:-1].encode() + b', "event": ' + attributes + b"}"


def encode_notification(subscription_id: int, subscriber: str, event_id: str, attributes: bytes, fmt: str,
                        source: tuple[str, int, int] | None = None, original: bytes | None = None) -> bytes:
    """One notification; ``attributes`` is ``encode_attributes(event, fmt)`` (shared by all of an event's notifications).

    ``source``: the event's record (topic, partition, offset); ``original``: the record's value, carried as it was
    (``attributes`` is then the empty map).  With either, the notification is written with the schema that has them
    (``notification_v2``; JSON: the keys ``source`` and ``original``, the value in base64).  An event's several
    notifications: :func:`notification_encoder`.
    """
    return notification_encoder(event_id, attributes, fmt, source, original)(subscription_id, subscriber)


def encode_notification_reference(subscription_id: int, subscriber: str, event_id: str, topic: str, partition: int,
                                  offset: int, size: int, fmt: str) -> bytes:
    """A notification that points at the event's input record instead of embedding the event.

    For events whose full notification would not fit the notifications
    topic's record limit (``--notification-event auto``), or for every event
    (``reference``): the consumer reads the event from ``event_ref``.
    """
    datum = {"notification_id": notification_id(event_id, subscription_id), "subscription_id": subscription_id,
             "subscriber": subscriber, "event_id": event_id,
             "event_ref": {"topic": topic, "partition": partition, "offset": offset, "size": size}}
    if fmt == "json":
        return json.dumps(datum).encode()
    return _wire("notification_reference", _avro_write(SCHEMAS["notification_reference"], datum))


def decode_notification(value: bytes) -> dict[str, Any]:
    """A notification, full (with ``event``, and ``source`` and ``original`` when written with them) or by reference
    (with ``event_ref``); an ``original`` value is bytes whichever the format."""
    if _sniff(value, "notification") == "json":
        out = _json_read(value)
        if isinstance(out, dict) and "source" in out:
            out.setdefault("original", None)
        if isinstance(out.get("original"), dict) and isinstance(out["original"].get("value"), str):
            try:
                out["original"]["value"] = base64.b64decode(out["original"]["value"], validate=True)
            except ValueError as exc:
                raise DecodeError(f"notification original value is not base64: {exc}") from None
        return out
    schema_id = _HEADER.unpack_from(value)[1] if len(value) >= 5 else None
    if schema_id == SCHEMA_IDS["notification_reference"]:
        return _avro_read("notification_reference", value)
    if schema_id == SCHEMA_IDS["notification_v2"]:
        return _avro_read("notification_v2", value)
    return _avro_read("notification", value)
