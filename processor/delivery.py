"""How outputs and input offsets are committed together.

``transactional``: notifications, dead letters and the consumed event offsets
go in one Kafka transaction (``send_offsets_to_transaction``); on Apache Kafka
read_committed consumers see each notification once.

``at-least-once``: for brokers without transactions.  Outputs are produced
with an idempotent producer, then flushed until every one is acknowledged,
and only then are the input offsets committed.  A crash in between replays
the batch; the replayed notifications carry the same ``notification_id``.

Either way nothing is lost: offsets never move past unacknowledged output.

Back-pressure: the producer's queue is bounded (``processor.queues``); when it
is full, :meth:`Delivery.produce` waits for acknowledgements and retries, never
drops, and counts the waits (``queue_full_waits``, a metric).
"""

from __future__ import annotations

import logging
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .queues import QueueBounds

log = logging.getLogger(__name__)

MODES = ("auto", "transactional", "at-least-once")


class DeliveryError(RuntimeError):
    """Output the broker did not acknowledge; offsets were not committed."""


class Delivery:
    def __init__(self, config: dict, mode: str = "auto", transactional_id: str = "pubsub", init_timeout: float = 15.0,
                 bounds: QueueBounds = QueueBounds()) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown delivery mode {mode!r}; expected one of {', '.join(MODES)}")
        base = {"linger.ms": 5, **bounds.producer(), **config, "acks": "all"}
        self.mode = "at-least-once"
        if mode in ("auto", "transactional"):
            producer = Producer({**base, "transactional.id": transactional_id, "transaction.timeout.ms": 60_000})
            try:
                producer.init_transactions(init_timeout)
                self.producer, self.mode = producer, "transactional"
            except KafkaException as exc:
                if mode == "transactional":
                    raise
                log.warning("broker does not support transactions (%s); falling back to at-least-once", exc.args[0])
        if self.mode == "at-least-once":
            self.producer = Producer({**base, "enable.idempotence": True})
        self._in_transaction = False
        self._failures: list[str] = []
        self.bound = bounds.producer_messages
        self.queue_full_waits = 0  # produce() found the queue full and waited: back-pressure at work

    def _on_delivery(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self._failures.append(str(err))

    def produce(self, topic: str, key: bytes | str | None, value: bytes) -> None:
        if self.mode == "transactional" and not self._in_transaction:
            self.producer.begin_transaction()
            self._in_transaction = True
        while True:
            try:
                self.producer.produce(topic, value, key, on_delivery=self._on_delivery)
                break
            except BufferError:  # local queue full: serve acknowledgements until there is room, never drop
                self.queue_full_waits += 1
                self.producer.poll(0.05)

    def pending(self) -> bool:
        return self._in_transaction or len(self.producer) > 0

    def commit(self, consumer: Consumer | None = None, offsets: list[TopicPartition] | None = None, timeout: float = 60.0) -> None:
        """Make the outputs durable, then (atomically, if transactional) commit ``offsets`` of ``consumer``."""
        if self.mode == "transactional":
            if offsets:
                if not self._in_transaction:
                    self.producer.begin_transaction()
                    self._in_transaction = True
                self.producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), timeout)
            if self._in_transaction:
                try:
                    self.producer.commit_transaction(timeout)
                except KafkaException as exc:
                    raise DeliveryError(f"transaction commit failed: {exc.args[0]}") from None
                finally:
                    self._in_transaction = False
            self._raise_failures()
            return
        remaining = self.producer.flush(timeout)
        if remaining:
            raise DeliveryError(f"{remaining} records not acknowledged within {timeout:.0f}s")
        self._raise_failures()
        if offsets:
            consumer.commit(offsets=offsets, asynchronous=False)

    def _raise_failures(self) -> None:
        if self._failures:
            first, n = self._failures[0], len(self._failures)
            self._failures.clear()
            raise DeliveryError(f"{n} records failed delivery, first: {first}")

    def close(self) -> None:
        if self.mode == "transactional" and self._in_transaction:
            self.producer.abort_transaction(10)
            self._in_transaction = False
        self.producer.flush(10)
