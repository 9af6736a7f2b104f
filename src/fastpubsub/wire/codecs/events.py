"""Event records: a flat or nested JSON object, or an Avro attribute map (schema id 2), validated by the engine's
rules for events."""

from __future__ import annotations

import json
from typing import Any

import orjson

from fastpubsub.engine import validate_event

from ..paths import escape, flatten_counting, split
from .framing import (_ATTRIBUTE_MAP, _HEADER, MAX_JSON_DEPTH, DecodeError, _avro_number, _avro_read, _avro_write,
                      _check_pairs, _json_depth, _json_read, _sniff, _wire)


def decode_event(value: bytes, registered: Any = None) -> dict[str, Any]:
    """An event value (JSON object, nested or flat, or Avro) -> validated dict.

    A nested JSON event is flattened by the path rule (wire/paths.py); an
    attribute it carries several times (an array) maps to the list of its
    values, the form ``Matcher.match`` takes.  ``registered``: as for
    :func:`decode_event_pairs`, records in producers' registered schemas too.
    """
    if registered is not None:
        return _as_dict(decode_event_pairs(value, registered))
    if _sniff(value, "event") == "json":
        return _as_dict(decode_json_event(value))
    event = _avro_read("event", value)["attributes"]
    try:
        event = validate_event(event)
    except ValueError as exc:
        raise DecodeError(f"invalid event: {str(exc)[:500]}") from None
    _check_pairs(event.items(), "invalid event")
    return event


def decode_json_event(value: bytes) -> list[tuple[str, Any]]:
    """The attribute pairs of a JSON event (nested or flat), by the path rule (wire/paths.py).

    The batch decoder reads most JSON events with a compiled scanner
    (``wire.json_kernel``) that gives the same pairs; this is the path of the
    records it cannot prove, and the scanner's specification.

    orjson parses (faster than the standard library, most for nested events:
    ``python -m benchmarks.processor.json_events``); a text it refuses, or whose colons
    outnumber the keys it returned (a duplicate key, which it would silently
    drop -- or merely a colon inside a string), is parsed again by the
    standard library, strictly, so that the result and the reasons are the
    same as with the standard library alone.
    """
    if value.count(b"[") + value.count(b"{") > MAX_JSON_DEPTH and _json_depth(value) > MAX_JSON_DEPTH:
        raise DecodeError(f"invalid JSON: nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        obj = None
    if type(obj) is not dict:
        obj = _json_read(value)
    try:
        pairs, keys = flatten_counting(obj)
        if keys != value.count(b":"):
            pairs, keys = flatten_counting(_json_read(value))  # a duplicate key is refused here
        for name, _ in pairs:
            if name[0] == "\x00":
                raise ValueError(f"event attribute names must be non-empty strings not starting with NUL, got {name!r}")
    except ValueError as exc:
        raise DecodeError(f"invalid event: {str(exc)[:500]}") from None
    _check_pairs(pairs, "invalid event")
    return pairs


def decode_event_pairs(value: bytes, registered: Any = None) -> list[tuple[str, Any]]:
    """An event value's validated (attribute, value) pairs, named by the path rule (wire/paths.py): a JSON event's
    leaves, fastpubsub's Avro event's keys escaped as path segments, or, for a record framed with a registered schema
    id (``registered``: a ``wire.registered.RegisteredDecoders``), its leaves by path, arrays as repeated pairs."""
    if registered is None or not registered.handles(value):
        if registered is not None and value[:1] == b"\x00" and len(value) >= 5 \
                and _HEADER.unpack_from(value)[1] == registered.native_event_id:
            value = _wire("event", value[5:])  # fastpubsub's own event under the registry's id
        if _sniff(value, "event") == "json":
            return decode_json_event(value)
        return [(escape(name), v) for name, v in decode_event(value).items()]  # raw map keys, as paths
    pairs = registered.pairs(value)
    for name, v in pairs:
        if not name or name[0] == "\0":
            raise DecodeError(f"invalid event: attribute names must be non-empty and not start with NUL, got {name!r}")
        try:
            validate_event({name: v})
        except ValueError as exc:
            raise DecodeError(f"invalid event: {str(exc)[:500]}") from None
    _check_pairs(pairs, "invalid event")
    return pairs


def _as_dict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Pairs as an event dict: an attribute carried several times maps to the list of its values."""
    out: dict[str, Any] = {}
    for name, v in pairs:
        if name in out:
            old = out[name]
            out[name] = old + [v] if type(old) is list else [old, v]
        else:
            out[name] = v
    return out


def encode_attributes(event: dict[str, Any], fmt: str) -> bytes:
    """The attribute/value pairs alone: the ``event`` part of notifications.

    In Avro, whose attribute map holds one scalar per name, an attribute with
    several values (a list: an array of a nested event) is the JSON text of
    the list.
    """
    if fmt == "json":
        return json.dumps(event).encode()
    return _avro_write(_ATTRIBUTE_MAP, {k: json.dumps(v) if type(v) is list else _avro_number(v)
                                        for k, v in event.items()})


def native_attributes(event: dict[str, Any]) -> dict[str, Any]:
    """Attributes named by path (what :func:`decode_event` gives) as fastpubsub's flat Avro event holds them: each
    key the one raw name its path stands for, which the decoders escape again (``{"a\\.b": 1}`` -> ``{"a.b": 1}``).
    A path of several segments (a field of a nested record) has no place in the flat map: ``ValueError``."""
    out = {}
    for path, v in event.items():
        segments = split(path)
        if len(segments) != 1:
            raise ValueError(f"{path!r} is a nested field: fastpubsub's Avro event is one flat map of names; "
                             f"publish a nested event as JSON (--format json) or in a registered schema")
        out[segments[0]] = v
    return out


def encode_event(event: dict[str, Any], fmt: str = "avro") -> bytes:
    if fmt == "json":
        return encode_attributes(event, "json")
    return _wire("event", encode_attributes(event, "avro"))
