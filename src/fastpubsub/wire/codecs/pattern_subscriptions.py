"""Pattern subscription records (sequences over the events): a subscriber and the pattern's text or JSON form
(``fastpubsub.patterns``); Avro (schema id 9) or JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .framing import SCHEMAS, DecodeError, _avro_write, _wire
from .subscriptions import _definition, _owner


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


def encode_pattern_subscription(sub: PatternSubscription, fmt: str = "avro") -> bytes:
    """The pattern travels in its JSON form (``patterns.to_json``) in either format."""
    from fastpubsub.patterns import to_json

    if fmt == "json":
        return json.dumps({"subscriber": sub.subscriber, "pattern": to_json(sub.pattern)}).encode()
    datum = {"subscriber": sub.subscriber, "pattern": json.dumps(to_json(sub.pattern))}
    return _wire("pattern_subscription", _avro_write(SCHEMAS["pattern_subscription"], datum))
