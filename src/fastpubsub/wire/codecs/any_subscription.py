"""The three kinds of record of the subscriptions topic told apart: plain, aggregate and pattern subscriptions."""

from __future__ import annotations

from .aggregate_subscriptions import AggregateDecodeError, AggregateSubscription, _check_aggregate
from .framing import _HEADER, MAGIC, SCHEMA_IDS, DecodeError, _avro_read, _json_read, _sniff
from .pattern_subscriptions import PatternDecodeError, PatternSubscription, _check_pattern
from .subscriptions import Subscription, _check_subscription, decode_subscription


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
