"""The sink: the one stage that writes to Kafka, owning the producer, its transaction and the dead-letter path.

Outputs (notifications) and rejects (bad input, with the reason) go out
through one producer (``kafka.delivery``), in the transaction that also
commits the input offsets when the broker has transactions.  Whatever goes
wrong with oversized records, slow brokers or a fenced producer is handled
here, behind :meth:`send` and :meth:`commit`: the stages before it only hand
records over.
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

from confluent_kafka import Consumer, Message, TopicPartition

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.deadletter import DeadLetters
from fastpubsub.kafka.delivery import Delivery, RecordRefused
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.kafka.record_limits import RecordLimits
from fastpubsub.wire.topics import DEFAULT, TopicNames


class Output(NamedTuple):
    """One record to produce; ``record`` is the input it comes from, dead-lettered if the broker refuses the output.
    ``partition`` overrides the key's (a changelog partition belongs to its input partition)."""

    topic: str
    key: bytes | str | None
    value: bytes | None
    record: Message | None = None
    headers: list[tuple[str, bytes]] | None = None
    partition: int | None = None
    timestamp: int | None = None


class Rejected(NamedTuple):
    """An input record to dead-letter instead of processing it (too large, refused, invalid)."""

    record: Message
    reason: str


class SourceRecord(NamedTuple):
    """An input record known by its position, not as a consumed ``Message`` (a re-keyed event's source)."""

    source_topic: str
    source_partition: int
    source_offset: int
    source_key: bytes | None
    source_value: bytes | None

    def topic(self) -> str:
        return self.source_topic

    def partition(self) -> int:
        return self.source_partition

    def offset(self) -> int:
        return self.source_offset

    def key(self) -> bytes | None:
        return self.source_key

    def value(self) -> bytes | None:
        return self.source_value


#: (record, reason): input the sink sends to the dead-letter topic
Reject = tuple[Message, str]


class Sink:
    """Outputs and dead letters through one producer (``kafka.delivery.Delivery``), committed with the input offsets."""

    def __init__(self, clients: ClientFactory, mode: str, transactional_id: str, bounds: QueueBounds, fmt: str,
                 limits: RecordLimits = RecordLimits(), topics: TopicNames = DEFAULT) -> None:
        self.delivery = Delivery(clients, mode, transactional_id=transactional_id, bounds=bounds,
                                 record_config=limits.producer_config())
        self.dead_letters = DeadLetters(self.delivery, fmt, limits, topics.dead_letter)
        self._notifications = topics.notifications

    @property
    def mode(self) -> str:
        return self.delivery.mode

    def send(self, outputs: Iterable[Output | Rejected], rejects: Iterable[Reject] = ()) -> int:
        """Dead-letter ``rejects``, produce ``outputs``; the number of notifications produced.

        An output that ``produce`` refuses for what it is (librdkafka's size
        check: the topic takes less than it reported) dead-letters the input
        record it comes from; the batch goes on.
        """
        for msg, reason in rejects:
            self.dead_letters.send(msg, reason)
        n, refused = 0, set()
        for out in outputs:
            if isinstance(out, Rejected):
                self.dead_letters.send(out.record, out.reason)
                continue
            source = None if out.record is None else (out.record.topic(), out.record.partition(), out.record.offset())
            try:
                self.delivery.produce(out.topic, out.key, out.value, source, out.headers, out.partition,
                                      out.timestamp)
                n += out.topic == self._notifications
            except RecordRefused as exc:
                if out.record is None:
                    raise
                if source not in refused:
                    refused.add(source)
                    self.dead_letters.send(out.record, str(exc))
        return n

    def reject(self, msg: Message, reason: str) -> None:
        """Dead-letter one record (for inputs outside the batch flow, e.g. a statistics snapshot)."""
        self.dead_letters.send(msg, reason)

    def commit(self, consumer: Consumer | None = None, offsets: list[TopicPartition] | None = None,
               group_metadata: object | None = None) -> None:
        """Outputs durable, then ``offsets`` committed with them (``kafka.delivery.Delivery.commit``)."""
        self.delivery.commit(consumer, offsets, group_metadata=group_metadata)

    def pending(self) -> bool:
        return self.delivery.pending()

    def recover(self, consumer: Consumer, should_stop: Callable[[], bool], on_wait: Callable[[], None]) -> bool:
        return self.delivery.recover(consumer, should_stop, on_wait)

    def stats(self) -> dict:
        """Its part of the final statistics (``Host.stats``)."""
        return {"delivery": self.mode,
                "commit_seconds": {k: round(v, 3) for k, v in self.delivery.commit_seconds.items()},
                "dead_letters": dict(self.dead_letters.counts), "dead_letters_truncated": self.dead_letters.truncated}

    def queue(self) -> tuple[int, int, int]:
        """(records awaiting acknowledgement, the bound of that queue, times a produce found it full)."""
        return len(self.delivery.producer), self.delivery.bound, self.delivery.queue_full_waits

    def close(self) -> None:
        self.delivery.close()
