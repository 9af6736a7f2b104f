"""Deliver: the one stage that writes to Kafka, owning the producer, its transaction and the dead-letter path.

Outputs (notifications) and rejects (bad input, with the reason) go out
through one producer (``kafka.delivery``), in the transaction that also
commits the input offsets when the broker has transactions.  Whatever goes
wrong with oversized records, slow brokers or a fenced producer is handled
here, behind :meth:`send` and :meth:`commit`: the stages before it only hand
records over.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable, NamedTuple

from confluent_kafka import Consumer, Message, TopicPartition

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.deadletter import DeadLetters
from fastpubsub.kafka.delivery import Delivery, RecordRefused
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.kafka.record_limits import RecordLimits



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


#: (record, reason): input the deliver stage sends to the dead-letter topic
Reject = tuple[Message, str]


#: Longest --commit-interval-ms: half the producer's transaction.timeout.ms (kafka.delivery), so that a
#: transaction held open that long, plus its commit, is not aborted by the broker.
MAX_COMMIT_INTERVAL_MS = 30_000


class Uncommitted:
    """What the open transaction (or, at-least-once, the next commit) holds: the input offsets, since when, how much.

    Batches are delivered into it one after another; :meth:`due` says when
    to commit: ``interval`` seconds after its first batch, at once when the
    input is drained (a batch shorter than the largest, so that a quiet input
    waits for one batch and one commit, not for the interval), or after every
    batch if ``interval`` is 0.  With a ``linger``, a drained input is
    committed only once the transaction is that old: under a steady moderate
    load every batch comes back short, and a commit per batch costs the
    processor and the broker more per event than the matching
    (``--commit-linger-ms``, docs/processor.md).
    """

    def __init__(self, interval: float, linger: float = 0.0) -> None:
        self.interval = interval
        self.linger = min(linger, interval)  # drained, it still stays open this long after its first batch
        self.offsets: dict[tuple[str, int], int] = {}  # (topic, partition) -> next offset to commit
        self.since: float | None = None  # time.monotonic() of its first batch
        self.events = self.notifications = self.batches = 0

    def add(self, offsets: dict[tuple[str, int], int], events: int, notifications: int) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self.offsets.update(offsets)  # a partition's records come in order: the later batch's offset wins
        self.events += events
        self.notifications += notifications
        self.batches += 1

    def __bool__(self) -> bool:
        return self.since is not None

    def due(self, drained: bool, now: float | None = None) -> bool:
        if self.since is None:
            return False
        if self.interval <= 0:
            return True
        age = (time.monotonic() if now is None else now) - self.since
        return age >= (self.linger if drained else self.interval)

    def lingering(self, now: float | None = None) -> float:
        """Seconds the loop may wait for more input before this is due when drained (0 without a linger)."""
        if self.since is None or self.linger <= 0:
            return 0.0
        return max(0.0, self.since + self.linger - (time.monotonic() if now is None else now))

    def topic_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p, o) for (topic, p), o in self.offsets.items()]

    def clear(self) -> None:
        self.offsets = {}
        self.since = None
        self.events = self.notifications = self.batches = 0


class InFlight:
    """A commit under way on a thread of its own, while the loop consumes, decodes, matches and encodes the next batch.

    A commit is mostly waiting for the broker (the outputs acknowledged, the
    offsets, the transaction's end: ``kafka.delivery``), and confluent-kafka
    releases the GIL while it waits; the loop's next batch needs the CPU, not
    the producer, until its notifications are produced.  Those go into the
    next transaction, which can only begin once this one has ended, so the
    loop settles the commit (:meth:`result`) before it produces anything:
    at most one commit is in flight, and outputs and offsets stay as atomic
    as when the loop waited for each commit.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="pubsub-commit")
        self.future: Future | None = None
        self.batches: Uncommitted | None = None  # what the commit holds: counted once it has succeeded
        self.began = 0.0

    def start(self, commit: Callable[[], None], batches: Uncommitted) -> None:
        assert self.future is None, "one commit in flight at a time"
        self.began, self.batches = time.perf_counter(), batches
        self.future = self._pool.submit(commit)

    def __bool__(self) -> bool:
        return self.future is not None

    def done(self) -> bool:
        return self.future is not None and self.future.done()

    def result(self) -> Uncommitted:
        """Wait for the commit; its batches once it succeeded, or its ``DeliveryError`` (then they are replayed)."""
        future, batches, self.future, self.batches = self.future, self.batches, None, None
        future.result()
        return batches

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class Deliver:
    def __init__(self, clients: ClientFactory, mode: str, transactional_id: str, bounds: QueueBounds, fmt: str,
                 limits: RecordLimits = RecordLimits()) -> None:
        self.delivery = Delivery(clients, mode, transactional_id=transactional_id, bounds=bounds,
                                 record_config=limits.producer_config())
        self.dead_letters = DeadLetters(self.delivery, fmt, limits)

    @property
    def mode(self) -> str:
        return self.delivery.mode

    def send(self, outputs: Iterable[Output | Rejected], rejects: Iterable[Reject] = ()) -> int:
        """Dead-letter ``rejects``, produce ``outputs``; the number of outputs produced.

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
                n += 1
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

    def commit(self, consumer: Consumer | None = None, offsets: list[TopicPartition] | None = None) -> None:
        """Outputs durable, then ``offsets`` committed with them (``kafka.delivery.Delivery.commit``)."""
        self.delivery.commit(consumer, offsets)

    def pending(self) -> bool:
        return self.delivery.pending()

    def recover(self, consumer: Consumer, should_stop: Callable[[], bool], on_wait: Callable[[], None]) -> bool:
        return self.delivery.recover(consumer, should_stop, on_wait)

    def queue(self) -> tuple[int, int, int]:
        """(records awaiting acknowledgement, the bound of that queue, times a produce found it full)."""
        return len(self.delivery.producer), self.delivery.bound, self.delivery.queue_full_waits

    def close(self) -> None:
        self.delivery.close()
