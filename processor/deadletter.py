"""Bad input goes to ``pubsub.dead-letter`` with its reason, position and bytes.

The record key is ``source_topic:partition:offset``: a replay of the same
input (a restart re-reading the subscriptions topic, another instance, an
at-least-once redelivery) yields the same key, so compaction and readers can
collapse duplicates.
"""

from __future__ import annotations

import logging
from collections import Counter

from confluent_kafka import Message

from .codecs import DeadLetter, encode_dead_letter
from .delivery import Delivery
from .topics import DEAD_LETTER

log = logging.getLogger(__name__)


class DeadLetters:
    def __init__(self, delivery: Delivery, fmt: str = "avro") -> None:
        self._delivery = delivery
        self._fmt = fmt
        self.counts: Counter[str] = Counter()  # per source topic

    def send(self, msg: Message, reason: str) -> None:
        dl = DeadLetter(reason, msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value())
        self._delivery.produce(DEAD_LETTER, dl.record_key, encode_dead_letter(dl, self._fmt))
        self.counts[dl.source_topic] += 1
        log.info("dead letter %s: %s", dl.record_key, reason)

    @property
    def total(self) -> int:
        return sum(self.counts.values())
