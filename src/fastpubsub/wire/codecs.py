"""Record values on the wire: Avro (Confluent wire format) and JSON.

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

import base64
import hashlib
import io
import json
import re
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import fastavro
import orjson

from fastpubsub.engine import OPERATORS, AnyOf, Predicate, validate_event, validate_subscription

from .eventruler import RuleError, rule_to_subscription
from .paths import escape, flatten_counting, split

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"  # package data (pyproject: tool.setuptools.package-data)

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


@dataclass(frozen=True)
class Subscription:
    """A decoded, validated subscription value.

    ``predicates``: a list of predicates (a conjunction) or an ``AnyOf`` of
    such lists (JSON ``"any"``); see engine/semantics.py for the operators.
    """

    subscriber: str
    predicates: list[Predicate] | AnyOf
    valid_until: int | None = None  # milliseconds since the epoch, UTC, exclusive
    valid_from: int | None = None  # milliseconds since the epoch, UTC, inclusive


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


# --- subscriptions -----------------------------------------------------------


def _check_subscription(obj: Any) -> Subscription:
    if not isinstance(obj, dict):
        raise DecodeError(f"a subscription must be an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - {"subscriber", "predicates", "any", "rule", "valid_until", "valid_from"})
    if unknown:
        raise DecodeError(f"unknown subscription field(s): {', '.join(unknown)}")
    if "subscriber" not in obj:
        raise DecodeError("subscription is missing the field 'subscriber'")
    conjunction, disjunction, rule = obj.get("predicates"), obj.get("any"), obj.get("rule")
    given = sum(x is not None for x in (conjunction, disjunction, rule))
    if given != 1:
        if not given:
            raise DecodeError("subscription is missing the field 'predicates' (or 'any', or 'rule')")
        raise DecodeError("a subscription has exactly one of 'predicates' (a conjunction), 'any' (a disjunction) "
                          "and 'rule' (an Event Ruler rule)")
    subscriber = obj["subscriber"]
    if not isinstance(subscriber, str) or not subscriber:
        raise DecodeError(f"subscriber must be a non-empty string, got {str(subscriber)[:40]!r}")
    if len(subscriber) * 4 > MAX_SUBSCRIBER_BYTES and len(subscriber.encode("utf-8", "surrogatepass")) > MAX_SUBSCRIBER_BYTES:
        raise DecodeError(f"subscriber name too long: {len(subscriber.encode('utf-8', 'surrogatepass'))} bytes "
                          f"(at most {MAX_SUBSCRIBER_BYTES}), starting {subscriber[:40]!r}")
    valid_until, valid_from = obj.get("valid_until"), obj.get("valid_from")
    for field, t in (("valid_until", valid_until), ("valid_from", valid_from)):
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or not _INT64_MIN <= t <= _INT64_MAX):
            raise DecodeError(f"{field} must be null or milliseconds since the epoch (a 64-bit integer), "
                              f"got {str(t)[:40]}")
    if valid_from is not None and valid_until is not None and valid_from >= valid_until:
        raise DecodeError(f"valid_from ({valid_from}) must be before valid_until ({valid_until}): the subscription "
                          "would never match")
    try:
        if rule is not None:
            predicates = rule_to_subscription(rule)
        elif disjunction is not None:
            if isinstance(disjunction, (str, bytes)) or not isinstance(disjunction, list):
                raise ValueError("'any' must be a list of conjunctions (lists of predicates)")
            predicates = validate_subscription(AnyOf(disjunction))
        else:
            predicates = validate_subscription(conjunction)
    except RuleError as exc:
        raise DecodeError(f"invalid rule: {str(exc)[:500]}") from None
    except (ValueError, TypeError) as exc:
        raise DecodeError(f"invalid predicates: {str(exc)[:500]}") from None
    _check_pairs(_scalars(predicates), "invalid predicates")
    return Subscription(subscriber, predicates, valid_until, valid_from)


def _scalars(subscription: list[Predicate] | AnyOf):
    """(attribute, value) of every scalar value of a validated subscription (list values one by one)."""
    for group in subscription.disjuncts if isinstance(subscription, AnyOf) else [subscription]:
        for a, _, v in group:
            if isinstance(v, list):
                for x in v:
                    yield a, x
            else:
                yield a, v


def _is_v1(subscription: list[Predicate] | AnyOf) -> bool:
    """Whether schema id 1 can hold the subscription (a conjunction of the six comparisons)."""
    return not isinstance(subscription, AnyOf) and all(op in OPERATORS for _, op, _ in subscription)


def _avro_predicates(group: list[Predicate]) -> list[dict[str, Any]]:
    return [{"attribute": a, "operator": op,
             "value": [_avro_number(x) for x in v] if isinstance(v, list) else _avro_number(v)} for a, op, v in group]


def _triples(items: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [(p["attribute"], p["operator"], p["value"]) for p in items]


def decode_subscription(value: bytes) -> Subscription:
    """A subscription value (JSON or Avro) -> validated :class:`Subscription`."""
    if _sniff(value, "subscription") == "json":
        obj = _json_read(value)
    elif len(value) >= 5 and _HEADER.unpack_from(value)[1] == SCHEMA_IDS["subscription_v2"]:
        obj = _avro_read("subscription_v2", value)
        for field in ("predicates", "any"):
            if obj[field] is None:
                del obj[field]
        if "predicates" in obj:
            obj["predicates"] = _triples(obj["predicates"])
        if "any" in obj:
            obj["any"] = [_triples(group) for group in obj["any"]]
    else:
        obj = _avro_read("subscription", value)
        obj["predicates"] = _triples(obj["predicates"])
    return _check_subscription(obj)


def encode_subscription(sub: Subscription, fmt: str = "avro") -> bytes:
    """JSON, or Avro under schema id 1 when it can hold the subscription (readers that only know it keep
    working) and schema id 7 (``subscription_v2``) otherwise."""
    p = sub.predicates
    if fmt == "json":
        body: dict[str, Any] = {"subscriber": sub.subscriber}
        if isinstance(p, AnyOf):
            body["any"] = [[list(t) for t in group] for group in p.disjuncts]
        else:
            body["predicates"] = [list(t) for t in p]
        return json.dumps({**body, "valid_until": sub.valid_until, "valid_from": sub.valid_from}).encode()
    if _is_v1(p):
        datum = {"subscriber": sub.subscriber, "predicates": _avro_predicates(p),
                 "valid_until": sub.valid_until, "valid_from": sub.valid_from}
        return _wire("subscription", _avro_write(SCHEMAS["subscription"], datum))
    datum = {"subscriber": sub.subscriber, "valid_until": sub.valid_until, "valid_from": sub.valid_from,
             "predicates": None if isinstance(p, AnyOf) else _avro_predicates(p),
             "any": [_avro_predicates(group) for group in p.disjuncts] if isinstance(p, AnyOf) else None}
    return _wire("subscription_v2", _avro_write(SCHEMAS["subscription_v2"], datum))


# --- aggregate subscriptions (over tables) -------------------------------------


class AggregateDecodeError(DecodeError):
    """An aggregate subscription record that is invalid: the table service dead-letters it, the event processor
    ignores it (both tell the two kinds apart with :func:`decode_any_subscription`)."""


@dataclass(frozen=True)
class AggregateSubscription:
    """A decoded aggregate or select-join subscription: its owner and spec (``fastpubsub.aggregates``)."""

    subscriber: str
    spec: Any  # AggregateSpec | JoinSpec


def _definition(definition: Any, parse_text: Any, from_json: Any, error: type[DecodeError], what: str, field: str) -> Any:
    """A definition given as text or JSON (a JSON object, or its text), compiled; ``error`` names what is wrong."""
    try:
        if isinstance(definition, str):
            text = definition.strip()
            if text.startswith("{"):
                return from_json(_json_read(text.encode()))
            return parse_text(text)
        if isinstance(definition, dict):
            return from_json(definition)
    except DecodeError as exc:
        raise error(f"invalid {what}: {exc}") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise error(f"invalid {what}: {str(exc)[:500]}") from None
    raise error(f"invalid {what}: '{field}' must be the text or JSON form, got {type(definition).__name__}")


def _aggregate_spec(definition: Any) -> Any:
    from fastpubsub.aggregates import parse_subscription, spec_from_json  # numba-heavy: only when needed

    return _definition(definition, parse_subscription, spec_from_json, AggregateDecodeError, "aggregate subscription",
                       "aggregate")


def _owner(obj: dict[str, Any], fields: set[str], kind: str, error: type[DecodeError]) -> str:
    """The subscriber of an aggregate or pattern subscription (both are a subscriber and a definition)."""
    unknown = sorted(set(obj) - fields)
    if unknown:
        raise error(f"unknown {kind} subscription field(s): {', '.join(unknown)}")
    subscriber = obj.get("subscriber")
    if not isinstance(subscriber, str) or not subscriber:
        raise error(f"subscriber must be a non-empty string, got {str(subscriber)[:40]!r}")
    if len(subscriber.encode("utf-8", "surrogatepass")) > MAX_SUBSCRIBER_BYTES:
        raise error(f"subscriber name too long (at most {MAX_SUBSCRIBER_BYTES} bytes)")
    return subscriber


def _check_aggregate(obj: dict[str, Any]) -> AggregateSubscription:
    subscriber = _owner(obj, {"subscriber", "aggregate"}, "aggregate", AggregateDecodeError)
    return AggregateSubscription(subscriber, _aggregate_spec(obj.get("aggregate")))


# --- pattern subscriptions (sequences over the events) --------------------------


class PatternDecodeError(DecodeError):
    """A pattern subscription record that is invalid: the pattern service (``pubsub patterns``) dead-letters it,
    the event processor and the table service ignore it."""


@dataclass(frozen=True)
class PatternSubscription:
    """A decoded pattern subscription: its owner and compiled pattern (``fastpubsub.patterns.Pattern``)."""

    subscriber: str
    pattern: Any


def _pattern(definition: Any) -> Any:
    from fastpubsub.patterns import from_json, parse  # only when needed

    return _definition(definition, parse, from_json, PatternDecodeError, "pattern", "pattern")


def _check_pattern(obj: dict[str, Any]) -> PatternSubscription:
    subscriber = _owner(obj, {"subscriber", "pattern"}, "pattern", PatternDecodeError)
    return PatternSubscription(subscriber, _pattern(obj.get("pattern")))


def _kind_of(value: bytes | None) -> str | None:
    """"aggregate", "pattern" or None (a plain subscription, or not a subscription at all), before validity."""
    if not value:
        return None
    if value[:1] == b"{":
        try:
            obj = _json_read(value)
        except DecodeError:
            return None
        if isinstance(obj, dict):
            return "aggregate" if "aggregate" in obj else "pattern" if "pattern" in obj else None
        return None
    if value[0] == MAGIC and len(value) >= 5:
        return {SCHEMA_IDS["aggregate_subscription"]: "aggregate",
                SCHEMA_IDS["pattern_subscription"]: "pattern"}.get(_HEADER.unpack_from(value)[1])
    return None


def is_pattern_subscription(value: bytes | None) -> bool:
    """Whether a subscriptions-topic value is meant as a pattern subscription (valid or not)."""
    return _kind_of(value) == "pattern"


def encode_pattern_subscription(sub: PatternSubscription, fmt: str = "avro") -> bytes:
    """The pattern travels in its JSON form (``patterns.to_json``) in either format."""
    from fastpubsub.patterns import to_json

    if fmt == "json":
        return json.dumps({"subscriber": sub.subscriber, "pattern": to_json(sub.pattern)}).encode()
    datum = {"subscriber": sub.subscriber, "pattern": json.dumps(to_json(sub.pattern))}
    return _wire("pattern_subscription", _avro_write(SCHEMAS["pattern_subscription"], datum))


def is_aggregate_subscription(value: bytes | None) -> bool:
    """Whether a subscriptions-topic value is meant as an aggregate subscription (valid or not)."""
    return _kind_of(value) == "aggregate"


def decode_any_subscription(value: bytes) -> Subscription | AggregateSubscription | PatternSubscription:
    """A value of pubsub.subscriptions, plain, aggregate or pattern.

    The kind is decided before validity: a JSON object with an ``aggregate``
    field, or Avro with schema id 8, is an aggregate subscription, and if it is
    invalid the error is an :class:`AggregateDecodeError`; likewise a ``pattern``
    field or schema id 9 and :class:`PatternDecodeError` — so the event processor,
    the table service and the pattern service agree on whose record it is.
    """
    if _sniff(value, "subscription") == "json":
        obj = _json_read(value)
        if isinstance(obj, dict) and "aggregate" in obj:
            return _check_aggregate(obj)
        if isinstance(obj, dict) and "pattern" in obj:
            return _check_pattern(obj)
        return _check_subscription(obj)
    for name, error, check in (("aggregate_subscription", AggregateDecodeError, _check_aggregate),
                               ("pattern_subscription", PatternDecodeError, _check_pattern)):
        if len(value) >= 5 and _HEADER.unpack_from(value)[1] == SCHEMA_IDS[name]:
            try:
                obj = _avro_read(name, value)
            except DecodeError as exc:
                raise error(str(exc)) from None
            return check(obj)
    return decode_subscription(value)


def encode_aggregate_subscription(sub: AggregateSubscription, fmt: str = "avro") -> bytes:
    """The spec travels in its JSON form (``to_json``) in either format."""
    if fmt == "json":
        return json.dumps({"subscriber": sub.subscriber, "aggregate": sub.spec.to_json()}).encode()
    datum = {"subscriber": sub.subscriber, "aggregate": json.dumps(sub.spec.to_json())}
    return _wire("aggregate_subscription", _avro_write(SCHEMAS["aggregate_subscription"], datum))


# --- events ------------------------------------------------------------------


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


# --- notifications -----------------------------------------------------------


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


# --- dead letters --------------------------------------------------------------


@dataclass(frozen=True)
class DeadLetter:
    """An input record that could not be processed, and why.

    ``key`` and ``value`` are the original bytes, or prefixes of them when
    ``truncated``: a dead letter must fit the dead-letter topic's record
    limit like every other output, or the record that caused it would stall
    the pipeline (:func:`encode_dead_letter` with ``max_bytes``).
    ``original_size`` and ``value_sha256`` describe the whole original.
    """

    reason: str
    source_topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    original_size: int | None = None
    value_sha256: str | None = None
    truncated: bool = False

    @property
    def record_key(self) -> str:
        # Deterministic: replays (restarts, other instances) of the same input give the same key.
        return f"{self.source_topic}:{self.partition}:{self.offset}"


def dead_letter(reason: str, source_topic: str, partition: int, offset: int, key: bytes | None,
                value: bytes | None) -> DeadLetter:
    """A dead letter of the whole record, with its size and the SHA-256 of its value."""
    size = len(key or b"") + len(value or b"")
    digest = None if value is None else hashlib.sha256(value).hexdigest()
    return DeadLetter(reason, source_topic, partition, offset, key, value, size, digest)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


#: At most this many bytes of a reason are kept in a dead letter (reasons quote at most a few hundred bytes of input).
MAX_REASON_CHARS = 2000
#: A truncated dead letter keeps at most this much of the original key, the rest of the room goes to the value.
TRUNCATED_KEY_BYTES = 1024


def _encode_dead_letter(dl: DeadLetter, fmt: str) -> bytes:
    datum = {
        "reason": dl.reason,
        "source_topic": dl.source_topic,
        "partition": dl.partition,
        "offset": dl.offset,
        "key": dl.key,
        "value": dl.value,
        "original_size": dl.original_size,
        "value_sha256": dl.value_sha256,
        "truncated": dl.truncated,
    }
    if fmt == "json":  # bytes as base64 so the value stays valid JSON
        return json.dumps({**datum, "key": _b64(dl.key), "value": _b64(dl.value)}).encode()
    return _wire("dead_letter", _avro_write(SCHEMAS["dead_letter"], datum))


def encode_dead_letter(dl: DeadLetter, fmt: str = "avro", max_bytes: int | None = None) -> bytes:
    """The dead letter's value; with ``max_bytes``, key and value are cut to prefixes so that it fits."""
    return fit_dead_letter(dl, fmt, max_bytes)[0]


def fit_dead_letter(dl: DeadLetter, fmt: str = "avro", max_bytes: int | None = None) -> tuple[bytes, bool]:
    """(value, truncated): the dead letter encoded in at most ``max_bytes`` bytes.

    The cut is computed from the encoding of the dead letter without value
    (base64 takes 4 bytes per 3 in JSON; Avro adds a length of at most 10
    bytes), then checked; ``truncated`` is set in the record when anything was cut.
    """
    if len(dl.reason) > MAX_REASON_CHARS:
        dl = replace(dl, reason=dl.reason[:MAX_REASON_CHARS] + "...")
    carried = len(dl.key or b"") + len(dl.value or b"")
    if max_bytes is None or carried < max_bytes:  # else it cannot fit: never encode a large record whole
        out = _encode_dead_letter(dl, fmt)
        if max_bytes is None or len(out) <= max_bytes:
            return out, False
    key = dl.key if dl.key is None or len(dl.key) <= TRUNCATED_KEY_BYTES else dl.key[:TRUNCATED_KEY_BYTES]
    bare = replace(dl, key=key, value=None if dl.value is None else b"", truncated=True)
    room = max_bytes - len(_encode_dead_letter(bare, fmt)) - 16
    if room < 0:
        raise ValueError(f"a dead letter needs more than {max_bytes} bytes even without the record's bytes")
    keep = room * 3 // 4 if fmt == "json" else room
    while True:
        out = _encode_dead_letter(replace(bare, value=None if dl.value is None else dl.value[:keep]), fmt)
        if len(out) <= max_bytes:
            return out, True
        keep -= len(out) - max_bytes


def decode_dead_letter(value: bytes) -> DeadLetter:
    if _sniff(value, "dead letter") == "json":
        d = _json_read(value)
        for field in ("key", "value"):
            d[field] = None if d[field] is None else base64.b64decode(d[field])
    else:
        d = _avro_read("dead_letter", value)
    return DeadLetter(**d)


# --- statistics snapshots --------------------------------------------------------


def encode_statistics(record: dict[str, Any]) -> bytes:
    """An ``EventStatistics.to_record()`` dict -> value of pubsub.statistics (always Avro)."""
    return _wire("statistics", _avro_write(SCHEMAS["statistics"], record))


def decode_statistics(value: bytes) -> dict[str, Any]:
    """A pubsub.statistics value -> the record (``EventStatistics.from_record`` takes it)."""
    if _sniff(value, "statistics") == "json":
        return _json_read(value)
    return _avro_read("statistics", value)
