"""Bad input goes to ``pubsub.dead-letter`` with its reason, position and bytes.

The record key is ``source_topic:partition:offset``: a replay of the same
input (a restart re-reading the subscriptions topic, another instance, an
at-least-once redelivery) yields the same key, so compaction and readers can
collapse duplicates.  A reason quotes the record (field names, values): its
control characters are escaped (``wire.printable``) before it is written or
logged.
"""

from __future__ import annotations

import logging
import re
from collections import Counter

from confluent_kafka import Message

from fastpubsub.wire.codecs import dead_letter, fit_dead_letter, reframed
from fastpubsub.wire.printable import printable
from fastpubsub.wire.topics import DEAD_LETTER

from .delivery import Delivery, RecordRefused
from .record_limits import RecordLimits

log = logging.getLogger(__name__)

#: Reason classes for metrics, first match wins (the reason text itself stays in the dead letter).
REASON_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(pattern)) for name, pattern in (
    ("key", r"^(subscription record has no key|subscription key|event key)"),
    ("too_large", r"too (large|long|many)|larger than"),
    ("not_json_or_avro", r"^(empty \w+ value|\w+ value is neither JSON)"),
    ("json", r"^(JSON value|invalid JSON|duplicate JSON key)"),
    ("avro", r"^(Avro value too short|unexpected Avro schema id|invalid Avro)"),
    ("schema", r"^(schema id|record of schema id|the references of subject)"),  # registered schemas (--schema-registry)
    ("event", r"^invalid event"),
    ("predicates", r"^invalid predicates"),
    ("subscription", r"subscription|subscriber|valid_until"),
    ("row", r"^table [^:]+: "),  # a table service's row (the rows' own reasons follow the table's name)
    ("refused", r"^output refused"),  # the broker refused what the record produced
    ("processing", r"^processing failed"),  # the service raised on the record (runtime.host)
))


def reason_class(reason: str) -> str:
    """A short, bounded label for a dead-letter reason (``other`` when none fits)."""
    for name, pattern in REASON_CLASSES:
        if pattern.search(reason):
            return name
    return "other"


class DeadLetters:
    """Writes dead letters that always fit the dead-letter topic (cut to a prefix of the record when needed)."""

    def __init__(self, delivery: Delivery, fmt: str = "avro", limits: RecordLimits = RecordLimits(),
                 topic: str = DEAD_LETTER) -> None:
        self._delivery = delivery
        self.topic = topic
        self._fmt = fmt
        self._limits = limits
        self.counts: Counter[str] = Counter()  # per source topic
        self.by_reason: Counter[tuple[str, str]] = Counter()  # (source topic, reason_class)
        self.truncated = 0  # dead letters that carry only a prefix of their record
        self.registry_ids: dict[int, int] | None = None  # with a Schema Registry: its id of the dead-letter schema

    def send(self, msg: Message, reason: str) -> None:
        self.send_record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), reason)

    def send_record(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                    reason: str) -> None:
        reason = printable(reason)  # it quotes the record's field names and values
        dl = dead_letter(reason, topic, partition, offset, key, value)
        record_key = dl.record_key.encode()
        budget = self._limits.value_budget(self.topic, record_key)
        out, cut = fit_dead_letter(dl, self._fmt, budget)
        out = reframed(out, self.registry_ids)
        try:
            self._delivery.produce(self.topic, record_key, out)
        except RecordRefused:  # the topic takes less than it said: a quarter of the room still tells the story
            out, cut = fit_dead_letter(dl, self._fmt, budget // 4)
            out = reframed(out, self.registry_ids)
            self._delivery.produce(self.topic, record_key, out)
        self.counts[dl.source_topic] += 1
        self.by_reason[dl.source_topic, reason_class(reason)] += 1
        self.truncated += cut
        log.info("dead letter %s%s: %s", dl.record_key, " (truncated)" if cut else "", reason[:300])

    @property
    def total(self) -> int:
        return sum(self.counts.values())
