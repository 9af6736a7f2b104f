"""Aggregate and select-join subscription records (over tables): a subscriber and the spec's text or JSON form
(``fastpubsub.aggregates``); Avro (schema id 8) or JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .framing import SCHEMAS, DecodeError, _avro_write, _wire
from .subscriptions import _definition, _owner


class AggregateDecodeError(DecodeError):
    """An aggregate subscription record that is invalid: the table service dead-letters it, the event processor
    ignores it (both tell the two kinds apart with :func:`decode_any_subscription`)."""


@dataclass(frozen=True)
class AggregateSubscription:
    """A decoded aggregate or select-join subscription: its owner and spec (``fastpubsub.aggregates``)."""

    subscriber: str
    spec: Any  # AggregateSpec | JoinSpec


def _aggregate_spec(definition: Any) -> Any:
    from fastpubsub.aggregates import parse_subscription, spec_from_json  # numba-heavy: only when needed

    return _definition(definition, parse_subscription, spec_from_json, AggregateDecodeError, "aggregate subscription",
                       "aggregate")


def _check_aggregate(obj: dict[str, Any]) -> AggregateSubscription:
    subscriber = _owner(obj, {"subscriber", "aggregate"}, "aggregate", AggregateDecodeError)
    return AggregateSubscription(subscriber, _aggregate_spec(obj.get("aggregate")))


def encode_aggregate_subscription(sub: AggregateSubscription, fmt: str = "avro") -> bytes:
    """The spec travels in its JSON form (``to_json``) in either format."""
    if fmt == "json":
        return json.dumps({"subscriber": sub.subscriber, "aggregate": sub.spec.to_json()}).encode()
    datum = {"subscriber": sub.subscriber, "aggregate": json.dumps(sub.spec.to_json())}
    return _wire("aggregate_subscription", _avro_write(SCHEMAS["aggregate_subscription"], datum))
