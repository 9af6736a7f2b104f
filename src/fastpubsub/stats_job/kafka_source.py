"""A Spark data source reading offset ranges of the events topic, decoded.

PySpark's built-in Kafka source needs a Maven jar; this one is Spark 4's
Python data source API instead, so it runs wherever PySpark and
confluent-kafka are installed (``local[*]`` or a cluster: executors connect
to the brokers themselves).  The driver plans the window as offset ranges;
each range is cut into splits of at most ``split.size`` offsets so that every
core decodes.  Each split is read by a confluent-kafka consumer with
``assign`` (no consumer group, nothing committed), built by the job's
``kafka.ClientFactory`` (rebuilt in the worker from the source's options, so
the ``-X`` settings reach it), decoded in batches by
``fastpubsub.wire.event_decoder`` and counted by ``fastpubsub.stats_job.partial_counts``: the
rows Spark gets are partial counts (per batch: records, bad records by reason,
events per attribute value, per schema, per joint value combination), which
Spark merges across splits.

Stopping at the end offset: offsets that hold transaction markers (or were
compacted away) never reach the consumer, so "stop at the message with
offset end - 1" can wait forever.  The reader stops at the first message at
or past ``end`` (dropping it), at the last offset of the range, or at
end-of-partition once the consumer's position has reached ``end``; if the
log ends before ``end`` it raises instead of returning a short range silently.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.schema_registry import RegistryConfig

DEFAULT_SPLIT_SIZE = 50_000
DEFAULT_BATCH_SIZE = 50_000


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``start`` (inclusive) to ``end`` (exclusive) of one partition."""

    partition: int
    start: int
    end: int

    def split(self, size: int) -> list["OffsetRange"]:
        return [OffsetRange(self.partition, s, min(s + size, self.end)) for s in range(self.start, self.end, size)]


class KafkaSplit(InputPartition):
    """One Spark partition: an offset range of one topic partition."""

    def __init__(self, topic: str, offsets: OffsetRange) -> None:
        super().__init__((topic, offsets.partition, offsets.start, offsets.end))
        self.topic = topic
        self.offsets = offsets


def read_offset_range(clients: ClientFactory | str, topic: str, offsets: OffsetRange,
                      batch_size: int = DEFAULT_BATCH_SIZE, timeout: float = 60.0) -> Iterator[list]:
    """Yield the messages of ``offsets`` in lists of at most ``batch_size`` (see module docstring)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    if offsets.end <= offsets.start:
        return
    consumer = ClientFactory.of(clients).consumer(
        "fastpubsub-spark-statistics",  # required by librdkafka; never joined (assign only)
        {"fetch.max.bytes": 64 * 2**20,
         "fetch.wait.max.ms": 10,  # at the end of the log the broker holds an empty fetch this long
         "max.partition.fetch.bytes": 16 * 2**20},
        **{"enable.auto.commit": False, "enable.auto.offset.store": False, "enable.partition.eof": True,
           "auto.offset.reset": "error"},  # a range that is no longer in the log must fail, not read elsewhere
    )
    tp = TopicPartition(topic, offsets.partition, offsets.start)
    try:
        consumer.assign([tp])
        last_progress = time.monotonic()
        position = offsets.start
        done = False
        while not done:
            # never ask for more than the range holds: consume() waits its timeout for a full batch
            messages = consumer.consume(max(1, min(batch_size, offsets.end - position)), 1.0)
            out = []
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        position = max(position, msg.offset())
                        if position >= offsets.end:
                            done = True
                            break
                        continue
                    raise KafkaException(err)
                if msg.offset() >= offsets.end:
                    done = True
                    break
                out.append(msg)
                position = msg.offset() + 1
                if position >= offsets.end:
                    done = True
                    break
            if out:
                last_progress = time.monotonic()
                yield out
            elif not done and time.monotonic() - last_progress > timeout:
                raise TimeoutError(
                    f"{topic}[{offsets.partition}]: no record for {timeout:.0f}s at offset {position}, "
                    f"before the end of the range {offsets.start}..{offsets.end}"
                )
    finally:
        consumer.close()


@dataclass
class KafkaEventsReader(DataSourceReader):
    """What each Spark task needs to read its offset range and count it (pickled to the executors)."""

    topic: str
    ranges: list[OffsetRange]
    split_size: int
    batch_size: int
    clients: ClientFactory
    mode: str
    joint_sets: list[list[str]] | None
    joint_auto: tuple[int, float] | None
    registry: Any = None  # a kafka.schema_registry.RegistryConfig: records in producers' registered schemas

    def partitions(self) -> list[KafkaSplit]:
        return [KafkaSplit(self.topic, s) for r in self.ranges for s in r.split(self.split_size)]

    def read(self, partition: KafkaSplit):
        import numpy as np

        from .partial_counts import batch_counts

        registered = None
        if self.registry is not None:  # one per task: each schema fetched once, the registry waited for when down
            from fastpubsub.kafka.schema_registry import event_decoders

            registered = event_decoders(self.registry)
        for messages in read_offset_range(self.clients, partition.topic, partition.offsets, self.batch_size):
            stamps = [m.timestamp() for m in messages]
            ts = np.fromiter((t[1] for t in stamps if t[0] != 0), np.int64)  # 0: TIMESTAMP_NOT_AVAILABLE
            yield from batch_counts([m.value() for m in messages], ts, self.mode, self.joint_sets, self.joint_auto,
                                    registered)


class KafkaEventsDataSource(DataSource):
    """``spark.read.format("fastpubsub-kafka-events")`` with options:

    * ``bootstrap.servers``, ``topic``;
    * ``ranges``: JSON list of ``[partition, start, end]`` (end exclusive);
    * ``split.size`` (offsets per Spark partition), ``batch.size`` (messages decoded and counted at once);
    * ``pass``: ``first`` (default), ``joint`` or ``count`` (see :func:`fastpubsub.stats_job.partial_counts.batch_counts`);
    * ``joint.sets``: JSON list of sorted attribute lists; ``joint.auto``: JSON ``[k, min_support]``;
    * ``kafka.<property>``: a connection setting of every consumer (e.g. ``kafka.security.protocol``);
      with ``bootstrap.servers`` they make the worker's ``ClientFactory`` (``ClientFactory.to_options``);
    * ``registry.url`` and ``registry.<property>``: the Schema Registry of records in producers' registered schemas
      (``RegistryConfig.to_options``).
    """

    @classmethod
    def name(cls) -> str:
        return "fastpubsub-kafka-events"

    def schema(self) -> str:
        from .partial_counts import SCHEMA

        return SCHEMA

    def reader(self, schema) -> KafkaEventsReader:
        opts = self.options
        for required in ("bootstrap.servers", "topic", "ranges"):
            if required not in opts:
                raise ValueError(f"the fastpubsub-kafka-events source needs the option {required!r}")
        clients = ClientFactory.from_options(opts)
        ranges = [OffsetRange(int(p), int(s), int(e)) for p, s, e in json.loads(opts["ranges"])]
        return KafkaEventsReader(
            opts["topic"], ranges, int(opts.get("split.size", DEFAULT_SPLIT_SIZE)),
            int(opts.get("batch.size", DEFAULT_BATCH_SIZE)), clients,
            opts.get("pass", "first"), json.loads(opts["joint.sets"]) if "joint.sets" in opts else None,
            tuple(json.loads(opts["joint.auto"])) if "joint.auto" in opts else None,
            RegistryConfig.from_options(opts),
        )
