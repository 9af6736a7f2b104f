"""Subscription records: a subscriber and its predicates (a conjunction or an ``any`` of them), with an optional
validity window; Avro (schema ids 1 and 7) or JSON.  The checks of the predicates are the engine's
(``engine.semantics``), so the processor and the matcher agree on what is valid."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastpubsub.engine import OPERATORS, AnyOf, Predicate, validate_subscription

from ..eventruler import RuleError, rule_to_subscription
from .framing import (_HEADER, _INT64_MAX, _INT64_MIN, MAX_SUBSCRIBER_BYTES, SCHEMA_IDS, SCHEMAS, DecodeError,
                      _avro_number, _avro_read, _avro_write, _check_pairs, _json_read, _sniff, _wire)


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
