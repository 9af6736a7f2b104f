"""Bad input goes to ``pubsub.dead-letter`` with its reason, position and bytes.

The record key is ``source_topic:partition:offset``: a replay of the same
input (a restart re-reading the subscriptions topic, another instance, an
at-least-once redelivery) yields the same key, so compaction and readers can
collapse duplicates.
"""

from __future__ import annotations

import logging
import re
from collections import Counter

from confluent_kafka import Message

from fastpubsub.wire.codecs import DeadLetter, encode_dead_letter
from fastpubsub.wire.topics import DEAD_LETTER

from .delivery import Delivery

log = logging.getLogger(__name__)

#: Reason classes for metrics, first match wins (the reason text itself stays in the dead letter).
REASON_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(pattern)) for name, pattern in (
    ("key", r"^(subscription record has no key|subscription key|event key)"),
    ("too_large", r"too (large|long|many)"),
    ("not_json_or_avro", r"^(empty \w+ value|\w+ value is neither JSON)"),
    ("json", r"^(JSON value|invalid JSON|duplicate JSON key)"),
    ("avro", r"^(Avro value too short|unexpected Avro schema id|invalid Avro)"),
    ("event", r"^invalid event"),
    ("predicates", r"^invalid predicates"),
    ("subscription", r"subscription|subscriber|valid_until"),
))


def reason_class(reason: str) -> str:
    """A short, bounded label for a dead-letter reason (``other`` when none fits)."""
    for name, pattern in REASON_CLASSES:
        if pattern.search(reason):
            return name
    return "other"


class DeadLetters:
    def __init__(self, delivery: Delivery, fmt: str = "avro") -> None:
        self._delivery = delivery
        self._fmt = fmt
        self.counts: Counter[str] = Counter()  # per source topic
        self.by_reason: Counter[tuple[str, str]] = Counter()  # (source topic, reason_class)

    def send(self, msg: Message, reason: str) -> None:
        dl = DeadLetter(reason, msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value())
        self._delivery.produce(DEAD_LETTER, dl.record_key, encode_dead_letter(dl, self._fmt))
        self.counts[dl.source_topic] += 1
        self.by_reason[dl.source_topic, reason_class(reason)] += 1
        log.info("dead letter %s: %s", dl.record_key, reason)

    @property
    def total(self) -> int:
        return sum(self.counts.values())
