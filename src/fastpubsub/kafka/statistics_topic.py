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
from fastpubsub.engine import MAX_PART_BYTES, SnapshotParts, split_record

from fastpubsub.wire.codecs import DecodeError, decode_statistics, encode_statistics
from fastpubsub.wire.topics import CONFIGS, STATISTICS

from .clients import ClientFactory

CONFIG = CONFIGS[STATISTICS]

log = logging.getLogger(__name__)


def ensure_statistics_topic(clients: ClientFactory | str, topic: str = STATISTICS, timeout: float = 30.0) -> bool:
    """Create the compacted, single-partition topic if missing; True if it was created.  An existing one is not
    created again: a principal that may write it need not be allowed to create it."""
    client = ClientFactory.of(clients).admin()
    if topic in client.list_topics(timeout=timeout).topics:
        return False
    future = client.create_topics([NewTopic(topic, 1, -1, config=CONFIG)], operation_timeout=timeout, request_timeout=timeout)[topic]
    try:
        future.result(timeout)
        return True
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        return False


def part_key(source_topic: str, index: int, count: int) -> bytes:
    """Key of a snapshot record: the source topic, or for one part of a split snapshot ``topic#part<i>of<n>``
    (distinct per part, so that compaction keeps every part; ``#`` is not allowed in topic names)."""
    return (source_topic if count == 1 else f"{source_topic}#part{index}of{count}").encode()


def is_snapshot_key(key: bytes | None, source_topic: str) -> bool:
    """True for the key of a snapshot (whole or a part) of ``source_topic``."""
    return key is not None and (key == source_topic.encode() or key.startswith(source_topic.encode() + b"#part"))


def publish_snapshot(clients: ClientFactory | str, stats: EventStatistics, topic: str = STATISTICS,
                     timeout: float = 30.0, max_bytes: int = MAX_PART_BYTES) -> tuple[int, int]:
    """Produce one snapshot and wait for the broker's acks: (partition, offset of its last record).

    A snapshot that encodes over ``max_bytes`` (default: under Kafka's default
    1 MB record limit) is split into parts (``engine.costmodel.statistics.split_record``),
    produced in order, each keyed by :func:`part_key`.
    """
    if stats.window is None:
        raise ValueError("only snapshots with a source window can be published (the key is the source topic)")
    clients = ClientFactory.of(clients)
    parts = split_record(stats.to_record(), lambda r: len(encode_statistics(r)), max_bytes)
    producer = clients.producer({"message.max.bytes": 16 * 2**20}, **{"enable.idempotence": True})
    result: list = []
    for i, part in enumerate(parts):
        producer.produce(topic, key=part_key(stats.window.topic, i, len(parts)), value=encode_statistics(part),
                         on_delivery=lambda err, msg: result.append((err, msg)))
    remaining = producer.flush(timeout)
    if remaining or len(result) < len(parts):
        raise RuntimeError(f"the snapshot was not acknowledged by {clients.bootstrap_servers} within {timeout:.0f}s")
    for err, _ in result:
        if err is not None:
            raise KafkaException(err)
    last = max(result, key=lambda r: r[1].offset())[1]
    return last.partition(), last.offset()


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
        parts = SnapshotParts()
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
                if not is_snapshot_key(msg.key(), source_topic) or msg.value() is None:
                    continue
                try:
                    whole = parts.add(decode_statistics(msg.value()))
                    if whole is not None:
                        latest = EventStatistics.from_record(whole)
                except (DecodeError, KeyError, TypeError, ValueError) as exc:
                    log.warning("skipping an undecodable snapshot at %s[%d]@%d: %s", topic, partition, msg.offset(), exc)
        return latest
    finally:
        consumer.close()
