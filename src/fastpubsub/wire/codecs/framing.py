"""Framing of record values on the wire, shared by every kind of record: Avro (Confluent wire format) and JSON.

Every input topic accepts both formats record by record: a value whose first
byte is ``{`` is JSON, a value whose first byte is 0 is Avro in the Confluent
wire format (magic byte 0, 4-byte big-endian schema id, Avro binary).  Without
a schema registry the schema ids are fixed per schema file (``SCHEMA_IDS``) so
that Schema Registry tooling can be pointed at the same schemas.

Decoders raise :class:`DecodeError` whose message is the reason written to the
dead-letter topic; the checks on predicates and events are the engine's
(``engine.semantics``), so the processor and the matcher agree on what is valid.
"""

from __future__ import annotations

import io
import json
import re
import struct
from pathlib import Path
from typing import Any

import fastavro

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"  # package data (pyproject: tool.setuptools.package-data)

#: Confluent wire-format schema id of each schema file (fixed, documented in docs/guide/formats.md).
SCHEMA_IDS: dict[str, int] = {
    "subscription": 1,
    "event": 2,
    "notification": 3,
    "dead_letter": 4,
    "statistics": 5,
    "notification_reference": 6,
    "subscription_v2": 7,
    "aggregate_subscription": 8,
    "pattern_subscription": 9,
    "notification_v2": 10,
}

FORMATS = ("avro", "json")
MAGIC = 0
#: Longest attribute name, in UTF-8 bytes, in events and subscriptions.  Names of
#: subscriptions are interned by the matcher for good; an untrusted producer must
#: not be able to grow that dictionary by megabytes per record.  Whole records are
#: bounded by the broker (``message.max.bytes``, 1 MB by default).
MAX_ATTRIBUTE_BYTES = 1024
#: Longest subscriber name, in UTF-8 bytes: it is the key of every notification of the subscription, which
#: must leave room for the notification itself within the topic's record limit.
MAX_SUBSCRIBER_BYTES = 1024
#: Deepest JSON nesting accepted (a valid record needs 3: subscription, predicates, predicate).
MAX_JSON_DEPTH = 32
_HEADER = struct.Struct(">bI")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT32_MAX = 2**31 - 1


class DecodeError(ValueError):
    """A record value that cannot be processed; the message is the reason."""


def _schema_json(name: str) -> dict[str, Any]:
    with open(SCHEMA_DIR / f"{name}.avsc", encoding="utf-8") as f:
        return json.load(f)


SCHEMAS: dict[str, Any] = {name: fastavro.parse_schema(_schema_json(name)) for name in SCHEMA_IDS}
# Earlier versions of a schema, still accepted under the same schema id: a value
# written without the fields added since is read with the old schema as the
# writer's and the current one as the reader's (Avro schema resolution fills
# the defaults).  Fields were only ever appended, so an old value is a strict
# prefix of what the current schema expects and the two readings never both succeed.
def _without(name: str, *fields: str) -> Any:
    return fastavro.parse_schema({**_schema_json(name), "fields": [f for f in _schema_json(name)["fields"]
                                                                   if f["name"] not in fields]})


_PREVIOUS: dict[str, list[Any]] = {
    "subscription": [_without("subscription", "valid_from")],
    "dead_letter": [_without("dead_letter", "original_size", "value_sha256", "truncated")],
}
_ATTRIBUTE_MAP = fastavro.parse_schema({"type": "map", "values": ["long", "double", "string", "boolean"]})


# --- low-level helpers -------------------------------------------------------


def _avro_number(value: Any) -> Any:
    # Avro longs are 64-bit; larger integers compare as doubles anyway (engine.semantics).
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64_MIN <= value <= _INT64_MAX:
        return float(value)
    return value


def _avro_write(schema: Any, datum: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, datum)
    return buf.getvalue()


def _avro_long(n: int) -> bytes:
    """An Avro long (zig-zag, then base-128 varint, low groups first)."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _avro_string(text: str) -> bytes:
    raw = text.encode()
    return _avro_long(len(raw)) + raw


def _wire(name: str, body: bytes) -> bytes:
    return _HEADER.pack(MAGIC, SCHEMA_IDS[name]) + body


def reframed(value: bytes, registry_ids: dict[int, int] | None) -> bytes:
    """An Avro value of fastpubsub's with its fixed schema id replaced by the id a Schema Registry gave the same
    schema (``registry_ids``: fixed id -> registry id), so that registry clients read it; others as they are."""
    if not registry_ids or value[:1] != b"\x00" or len(value) < 5:
        return value
    found = registry_ids.get(_HEADER.unpack_from(value)[1])
    return value if found is None else _HEADER.pack(MAGIC, found) + value[5:]


def _avro_read(name: str, value: bytes) -> Any:
    if len(value) < 5:
        raise DecodeError(f"Avro value too short: {len(value)} bytes, the wire format header alone is 5")
    schema_id = _HEADER.unpack_from(value)[1]
    if schema_id != SCHEMA_IDS[name]:
        expected = f"{SCHEMA_IDS[name]} or {SCHEMA_IDS['subscription_v2']}" if name == "subscription" else SCHEMA_IDS[name]
        raise DecodeError(
            f"unexpected Avro schema id {schema_id} for a {name.replace('_', ' ')} (expected {expected})"
        )
    try:
        return _avro_body(SCHEMAS[name], None, value)
    except DecodeError as exc:
        for writer in _PREVIOUS.get(name, ()):
            try:
                return _avro_body(writer, SCHEMAS[name], value)
            except DecodeError:
                pass
        raise DecodeError(f"invalid Avro {name.replace('_', ' ')}: {exc}") from None


_OBJECT_AT = re.compile(r" (?:from|in) <[\w.]+ object at 0x[0-9a-f]+>")


def _avro_body(writer: Any, reader: Any, value: bytes) -> Any:
    buf = io.BytesIO(value[5:])
    try:
        datum = fastavro.schemaless_reader(buf, writer, reader)
    except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeDecodeError...
        # fastavro names the buffer object ("... from <_io.BytesIO object at 0x7f...>"): an address differs per
        # run, and a reason must not (replays dead-letter the same record with the same reason)
        raise DecodeError(f"{type(exc).__name__}: {_OBJECT_AT.sub('', str(exc))}") from None
    if buf.tell() != len(value) - 5:
        raise DecodeError(f"{len(value) - 5 - buf.tell()} trailing bytes")
    return datum


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DecodeError(f"duplicate JSON key {k!r}")
        out[k] = v
    return out


def _json_read(value: bytes) -> Any:
    # json.loads recurses per nesting level: check the depth bound first (cheap: only for values with many brackets)
    if value.count(b"[") + value.count(b"{") > MAX_JSON_DEPTH and _json_depth(value) > MAX_JSON_DEPTH:
        raise DecodeError(f"invalid JSON: nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        text = value.decode("utf-8")
        obj = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except UnicodeDecodeError as exc:
        raise DecodeError(f"JSON value is not UTF-8: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DecodeError(f"invalid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        raise DecodeError(f"invalid JSON: {exc}") from None
    if "\\u" in text:  # escapes may spell lone surrogates, which no UTF-8 output can carry
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise DecodeError("invalid JSON: a string holds a lone surrogate (\\ud800-\\udfff escape)") from None
    return obj


def _json_depth(value: bytes) -> int:
    """Deepest bracket nesting outside strings (an upper bound is enough: escapes are skipped roughly)."""
    depth = deepest = 0
    in_string = escaped = False
    for c in value:
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:  # backslash
                escaped = True
            elif c == 0x22:
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif c in (0x5D, 0x7D):
            depth -= 1
    return deepest


def _check_pairs(pairs: Any, what: str) -> None:
    """Limits beyond engine.semantics: attribute name length, integers a double can hold (JSON has no bound)."""
    for name, value in pairs:
        if len(name) * 4 > MAX_ATTRIBUTE_BYTES and len(name.encode("utf-8", "surrogatepass")) > MAX_ATTRIBUTE_BYTES:
            raise DecodeError(f"{what}: attribute name too long: {len(name.encode('utf-8', 'surrogatepass'))} bytes "
                              f"(at most {MAX_ATTRIBUTE_BYTES}), starting {name[:40]!r}")
        if type(value) is int and value.bit_length() > 1000:
            try:
                float(value)
            except OverflowError:
                raise DecodeError(f"{what}: {name!r}: integer too large for a double "
                                  f"({len(str(abs(value)))} digits)") from None


def _sniff(value: bytes | None, what: str) -> str:
    if not value:
        raise DecodeError(f"empty {what} value")
    if value[:1] == b"{":
        return "json"
    if value[0] == MAGIC:
        return "avro"
    raise DecodeError(
        f"{what} value is neither JSON (first byte '{{') nor Avro in the Confluent wire format "
        f"(first byte 0); first byte is 0x{value[0]:02x}"
    )
