"""How large a record may be, on the way in and on the way out.

A record the broker refuses is not a transient failure: produced again after
a replay it is refused again, and the batch that holds it never commits.  So
every record the processor writes (notification, dead letter) is sized
against the target topic's limit before it is produced, and every input
record is sized against ``max_record_bytes`` before it is decoded.

The output limit of a topic is the smaller of the topic's ``max.message.bytes``
(asked from the broker at start; a broker that does not say, such as the
embedded one, leaves only the producer's own bound) and the producer's
``message.max.bytes`` (librdkafka refuses larger records in ``produce``).
The producer's ``message.max.bytes`` and ``batch.size`` are then set to the
smallest output limit, so that a batch of many small records cannot exceed a
topic's limit either.  ``--max-output-bytes`` replaces what the broker says.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from .admin import transient
from .clients import ClientFactory

log = logging.getLogger(__name__)

#: librdkafka's default ``message.max.bytes``: the largest record a producer accepts.
PRODUCER_DEFAULT_BYTES = 1_000_000
#: Apache Kafka's default ``max.message.bytes`` of a topic, used for the input when the broker does not say.
KAFKA_DEFAULT_BYTES = 1_048_588
#: Bytes a record needs besides its key, value and headers: librdkafka counts the record batch header (61 bytes)
#: and a record's own framing (at most about 30) against ``message.max.bytes``; the rest is margin.
RECORD_OVERHEAD = 128
#: The smallest limit a flag may set: a dead letter must still fit with its reason and position.
MIN_RECORD_LIMIT = 16_384


@dataclass(frozen=True)
class RecordLimits:
    """Largest record per output topic, and the largest input record the processor decodes."""

    output: dict[str, int] = field(default_factory=dict)
    max_record_bytes: int = KAFKA_DEFAULT_BYTES

    def value_budget(self, topic: str, key: bytes | None) -> int:
        """The most bytes a value may take in a record of ``topic`` with this ``key``."""
        return self.output.get(topic, PRODUCER_DEFAULT_BYTES) - len(key or b"") - RECORD_OVERHEAD

    def producer_config(self) -> dict[str, int]:
        """Producer settings that keep every batch under the smallest output limit."""
        least = min(self.output.values(), default=PRODUCER_DEFAULT_BYTES)
        return {"message.max.bytes": least, "batch.size": least}


def input_size(key: bytes | None, value: bytes | None) -> int:
    """What an input record weighs against ``max_record_bytes``: its key plus its value."""
    return len(key or b"") + len(value or b"")


def topic_limits(admin: AdminClient, topics: Iterable[str], timeout: float = 10.0) -> dict[str, int]:
    """``max.message.bytes`` of each topic that reports one (a user may lack DescribeConfigs rights)."""
    out: dict[str, int] = {}
    names = list(topics)
    try:
        futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in names])
    except (KafkaException, ValueError) as exc:
        log.warning("cannot describe topic configs (%s): record limits from the producer only", exc)
        return out
    for resource, future in futures.items():
        try:
            entry = future.result(timeout).get("max.message.bytes")
        except KafkaException as exc:
            if transient(exc.args[0]):
                raise  # "not now" (a node down): the caller asks again rather than work with a guessed limit
            log.warning("cannot read max.message.bytes of %s (%s)", resource.name, exc)
            continue
        if entry is not None and entry.value is not None and str(entry.value).isdigit():
            out[resource.name] = int(entry.value)
    return out


def discover(clients: ClientFactory, outputs: Iterable[str], inputs: Iterable[str],
             max_output_bytes: int | None = None, max_record_bytes: int | None = None) -> RecordLimits:
    """The limits this processor works with, from the broker, its producer settings (``-X``) and the flags."""
    outputs, inputs = list(outputs), list(inputs)
    producer = int(clients.settings.get("message.max.bytes", PRODUCER_DEFAULT_BYTES))
    reported = topic_limits(clients.admin(), outputs + inputs)
    output = {}
    for topic in outputs:
        limit = max_output_bytes if max_output_bytes is not None else reported.get(topic, producer)
        output[topic] = min(limit, producer)
    if max_record_bytes is None:
        max_record_bytes = min((reported.get(t, KAFKA_DEFAULT_BYTES) for t in inputs), default=KAFKA_DEFAULT_BYTES)
    limits = RecordLimits(output, max_record_bytes)
    log.info("record limits: outputs %s (broker reported %s, producer message.max.bytes %d); inputs above %d bytes "
             "are dead-lettered", output, reported or "nothing", producer, max_record_bytes)
    return limits
