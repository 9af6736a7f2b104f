"""pubsub.statistics: the compacted topic of statistics snapshots.

The key of a snapshot is the events topic it was computed from, so
compaction keeps the latest snapshot per source topic; the topic has one
partition, so "latest" is simply the last record.  The value is
``wire/schemas/statistics.avsc`` in the Confluent wire format (schema id 5).

The batch job reads its own last snapshot back to know where the previous run
stopped (the snapshot's ``window.offsets`` end offsets): the state lives with
the output, so there is no state file to lose or to share between machines.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from fastpubsub.engine import EventStatistics

from fastpubsub.wire.codecs import DecodeError, decode_statistics, encode_statistics
from fastpubsub.wire.topics import CONFIGS, STATISTICS

from .clients import ClientFactory

CONFIG = CONFIGS[STATISTICS]

log = logging.getLogger(__name__)


def ensure_statistics_topic(clients: ClientFactory | str, topic: str = STATISTICS, timeout: float = 30.0) -> bool:
    """Create the compacted, single-partition topic if missing; True if it was created."""
    client = ClientFactory.of(clients).admin()
    future = client.create_topics([NewTopic(topic, 1, 1, config=CONFIG)], operation_timeout=timeout, request_timeout=timeout)[topic]
    try:
        future.result(timeout)
        return True
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        return False


def publish_snapshot(clients: ClientFactory | str, stats: EventStatistics, topic: str = STATISTICS,
                     timeout: float = 30.0) -> tuple[int, int]:
    """Produce one snapshot (key: its source topic) and wait for the broker's ack: (partition, offset)."""
    if stats.window is None:
        raise ValueError("only snapshots with a source window can be published (the key is the source topic)")
    clients = ClientFactory.of(clients)
    producer = clients.producer({"message.max.bytes": 16 * 2**20}, **{"enable.idempotence": True})
    result: list = []
    producer.produce(topic, key=stats.window.topic.encode(), value=encode_statistics(stats.to_record()),
                     on_delivery=lambda err, msg: result.append((err, msg)))
    remaining = producer.flush(timeout)
    if remaining or not result:
        raise RuntimeError(f"the snapshot was not acknowledged by {clients.bootstrap_servers} within {timeout:.0f}s")
    err, msg = result[0]
    if err is not None:
        raise KafkaException(err)
    return msg.partition(), msg.offset()


def latest_snapshot(clients: ClientFactory | str, source_topic: str, topic: str = STATISTICS,
                    timeout: float = 30.0) -> EventStatistics | None:
    """The last snapshot computed from ``source_topic``, or None (no topic, no snapshot yet)."""
    consumer = ClientFactory.of(clients).consumer(
        "fastpubsub-statistics-reader",  # never joins: assign() only, nothing committed
        {"auto.offset.reset": "earliest",
         "fetch.wait.max.ms": 10},  # the read ends at end-of-partition: do not let the broker hold the last fetch
        **{"enable.auto.commit": False, "enable.partition.eof": True},
    )
    try:
        # all topics, not this one by name: naming it may auto-create it, uncompacted (src/fastpubsub/stats_job/window.py)
        metadata = consumer.list_topics(timeout=timeout).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return None
        latest = None
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout, cached=False)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            position = low
            while True:  # to end-of-partition: the embedded broker's reported end can be short (src/fastpubsub/stats_job/window.py)
                msg = consumer.poll(timeout)
                if msg is None:
                    raise RuntimeError(f"no record from {topic}[{partition}] within {timeout:.0f}s (stopped at offset {position}, end {high})")
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaException(msg.error())
                position = msg.offset() + 1
                if msg.key() != source_topic.encode() or msg.value() is None:
                    continue
                try:
                    latest = EventStatistics.from_record(decode_statistics(msg.value()))
                except (DecodeError, KeyError, TypeError, ValueError) as exc:
                    log.warning("skipping an undecodable snapshot at %s[%d]@%d: %s", topic, partition, msg.offset(), exc)
        return latest
    finally:
        consumer.close()
