"""Bounds of the processor's in-memory queues: it never buffers without limit.

Three queues hold records in memory, each bounded here (librdkafka settings):

* the producer's queue of notifications and dead letters not yet acknowledged
  (``queue.buffering.max.messages`` / ``queue.buffering.max.kbytes``).  When
  it is full, ``produce`` raises ``BufferError``; ``kafka.delivery`` then
  serves delivery reports (``poll``) and retries, so a slow broker slows the
  loop down instead of growing memory, and nothing is dropped;
* the events consumer's pre-fetch queue (``queued.max.messages.kbytes``,
  ``fetch.max.bytes``): librdkafka stops fetching while it is full, so a
  backlog stays in Kafka, not in the process;
* the subscriptions consumer's pre-fetch queue, the same way.

Between them the loop holds at most one batch (``--batch-size`` events) and
its notifications, which go straight into the bounded producer queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


#: librdkafka wants fetch.max.bytes >= message.max.bytes (1,000,000 by default), so a fetch can hold a largest record
MIN_CONSUMER_KBYTES = 1024


@dataclass(frozen=True)
class QueueBounds:
    #: notifications and dead letters waiting for the broker's acknowledgement
    producer_messages: int = 100_000
    producer_kbytes: int = 65_536
    #: records fetched ahead by each consumer, per partition (librdkafka's default is 64 MB): with records of up
    #: to 10 MB this bound dominates the processor's peak memory (benchmarks/pipeline/poison.py, docs/guide/reliability.md)
    consumer_kbytes: int = 4_096
    #: largest fetch response (librdkafka's default is 50 MB)
    fetch_max_bytes: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        for name, least in (("producer_messages", 1), ("producer_kbytes", 1), ("consumer_kbytes", MIN_CONSUMER_KBYTES),
                            ("fetch_max_bytes", MIN_CONSUMER_KBYTES * 1024)):
            if getattr(self, name) < least:
                raise ValueError(f"{name} must be at least {least}, got {getattr(self, name)}")

    def producer(self) -> dict[str, Any]:
        return {"queue.buffering.max.messages": self.producer_messages,
                "queue.buffering.max.kbytes": self.producer_kbytes}

    def consumer(self) -> dict[str, Any]:
        # fetch.max.bytes must not exceed the queue; a single larger record is still fetched (KIP-74)
        return {"queued.max.messages.kbytes": self.consumer_kbytes,
                "fetch.max.bytes": min(self.fetch_max_bytes, self.consumer_kbytes * 1024)}
