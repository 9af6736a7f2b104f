"""The checkpoint: what the host has processed but not yet committed, the commit under way, and when to commit.

Kafka Streams commits a task's offsets with its outputs every ``commit.interval.ms``; here a transaction holds
as many batches as arrive within ``--commit-interval-ms`` and is committed as soon as the input is drained, but no
sooner after the last commit than a few times what that commit took (:class:`Uncommitted`), with an optional linger.  A commit may run on a thread of its own while the next batches
are prepared (:class:`InFlight`, ``--overlap-commits``).  The checkpoint also keeps the records a failed delivery
named: refused ones (dead-lettered when they come again) and suspects (a refusal shared by a whole produce batch:
replayed one record per batch until the one at fault shows), so that one record never holds a pipeline.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable, NamedTuple

from confluent_kafka import Message, TopicPartition

from fastpubsub.kafka.delivery import DeliveryError
from fastpubsub.kafka.record_limits import input_size

from .sink import Output, Reject, Rejected
from .trace import BatchSample

log = logging.getLogger(__name__)

#: Longest --commit-interval-ms: half the producer's transaction.timeout.ms (kafka.delivery), so that a
#: transaction held open that long, plus its commit, is not aborted by the broker.
MAX_COMMIT_INTERVAL_MS = 30_000

#: After a commit that took d seconds, a drained input's next commit waits until PACE x d have passed (at most
#: the interval), so that commits take at most about 1 / (1 + PACE) of the loop's time under a steady load.  A
#: transaction costs the broker and the loop about the same whatever it carries: committed after every short
#: batch, a trickle of events makes hundreds of transactions a second, and at half the maximum the loop spends
#: half its time committing and queues what arrives meanwhile; a wait of a few commits' length costs an event
#: a few milliseconds and frees the loop and the broker (docs/processor.md, "Drained commits are paced").
PACE = 3.0


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
    (``--commit-linger-ms``, docs/processor.md).  Drained commits are also
    paced: one is not due before ``paced`` (``time.monotonic()``), which the
    checkpoint sets to the end of the last commit plus :data:`PACE` times
    that commit's duration, so that under a steady load commits take at most
    about a quarter of the loop's time and the rest goes to the batches,
    while the first event after a quiet spell is committed at once.
    """

    def __init__(self, interval: float, linger: float = 0.0, paced: float = 0.0) -> None:
        self.interval = interval
        self.linger = min(linger, interval)  # drained, it still stays open this long after its first batch
        self.paced = paced  # drained, it is not due before this time.monotonic() (the last commit's pace)
        self.offsets: dict[tuple[str, int], int] = {}  # (topic, partition) -> next offset to commit
        self.since: float | None = None  # time.monotonic() of its first batch
        self.events = self.notifications = self.batches = 0
        #: each batch's first record's timestamp (ms since the epoch; 0 if it has none): event-to-commit latency
        self.stamps: list[int] = []
        self.samples: list[BatchSample] = []  # the batches the latency trace follows to their commit

    def add(self, offsets: dict[tuple[str, int], int], events: int, notifications: int, stamp: int = 0,
            sample: BatchSample | None = None) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self.offsets.update(offsets)  # a partition's records come in order: the later batch's offset wins
        self.events += events
        self.notifications += notifications
        self.batches += 1
        self.stamps.append(stamp)
        if sample is not None:
            self.samples.append(sample)

    def __bool__(self) -> bool:
        return self.since is not None

    def due(self, drained: bool, now: float | None = None) -> bool:
        if self.since is None:
            return False
        if self.interval <= 0:
            return True
        now = time.monotonic() if now is None else now
        age = now - self.since
        if age >= self.interval:
            return True
        return drained and age >= self.linger and now >= self.paced

    def lingering(self, now: float | None = None) -> float:
        """Seconds the loop may wait for more input before this is due when drained (0 without a linger or pace)."""
        if self.since is None:
            return 0.0
        due = min(max(self.since + self.linger, self.paced), self.since + self.interval)
        return max(0.0, due - (time.monotonic() if now is None else now))

    def topic_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p, o) for (topic, p), o in self.offsets.items()]

    def clear(self) -> None:
        self.offsets = {}
        self.since = None
        self.events = self.notifications = self.batches = 0
        self.stamps, self.samples = [], []


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
        self.ended = 0.0  # time.time() when the last commit returned (its batches' wait ends there, not at settling)
        self.took = 0.0  # seconds the last commit took

    def start(self, commit: Callable[[], None], batches: Uncommitted) -> None:
        assert self.future is None, "one commit in flight at a time"
        self.began, self.batches = time.perf_counter(), batches
        self.future = self._pool.submit(self._timed, commit)

    def _timed(self, commit: Callable[[], None]) -> None:
        commit()
        self.ended, self.took = time.time(), time.perf_counter() - self.began

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


class Prepared(NamedTuple):
    """A batch processed while a commit was in flight (or not yet produced): delivered into the next transaction."""

    outputs: Iterable[Output | Rejected]
    rejects: list[Reject]
    offsets: dict[tuple[str, int], int]
    events: int  # input records the task counted as processed (events, rows)
    records: int  # records taken from the consumer
    stamp: int = 0  # the first record's timestamp, ms (0: none)
    sample: BatchSample | None = None  # followed by the latency trace (runtime.trace)


def next_offsets(msgs: list[Message]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the offset after the last of ``msgs`` there (a partition's records come in order)."""
    offsets: dict[tuple[str, int], int] = {}
    partitions = {(m.topic(), m.partition()) for m in msgs} if len(msgs) > 64 else None
    for m in reversed(msgs):
        tp = (m.topic(), m.partition())
        if tp not in offsets:
            offsets[tp] = m.offset() + 1
            if partitions is not None and len(offsets) == len(partitions):
                break  # every partition of a large batch has its last record
    return offsets


def too_large(msg: Message, limit: int) -> str | None:
    """Why ``msg`` is not processed at all (key plus value above ``--max-record-bytes``), or None."""
    size = input_size(msg.key(), msg.value())
    if size <= limit:
        return None
    return f"record too large: {size} bytes (key and value), larger than the limit of {limit} (--max-record-bytes)"


class Checkpoint:
    """What is uncommitted, in flight and prepared, and which input records a failed delivery named."""

    def __init__(self, interval_ms: int, linger_ms: int = 0) -> None:
        self.interval, self.linger = interval_ms / 1000, linger_ms / 1000
        self.paced = 0.0  # drained, the next commit waits until this time.monotonic() (:meth:`pace`)
        self.uncommitted = self.new_uncommitted()
        self.in_flight = InFlight()
        self.prepared: list[Prepared] = []
        self.prepared_records = 0
        #: (topic, partition) -> last offset of records the broker refused together (one refusal for a whole
        #: produce batch): until the committed offsets pass them, batches of one record find the one at fault
        self.suspects: dict[tuple[str, int], int] = {}
        #: (topic, partition, offset) -> reason: records whose outputs the broker refused (``kafka.delivery``)
        self.refused: dict[tuple[str, int, int], str] = {}
        #: (topic, partition) -> next offset this instance committed there since the partition was assigned:
        #: the lag is read from it without asking the broker (``metrics.consumer_lag``)
        self.known: dict[tuple[str, int], int] = {}

    def new_uncommitted(self) -> Uncommitted:
        return Uncommitted(self.interval, self.linger, self.paced)

    def pace(self, seconds: float, ended: float | None = None) -> None:
        """A commit took ``seconds`` and ended at ``ended`` (``time.monotonic()``, default now): the next drained
        commit waits :data:`PACE` times as long."""
        self.paced = (time.monotonic() if ended is None else ended) + PACE * seconds
        self.uncommitted.paced = self.paced

    def abandon_in_flight(self, close: bool = True) -> None:
        """After a failure or on the way out: let a commit in flight end; what it held is replayed if it failed."""
        if self.in_flight:
            try:
                self.in_flight.result()
            except Exception as exc:  # noqa: BLE001 -- replayed from the committed offsets, here or by the next start
                log.debug("commit in flight abandoned: %s", exc)
        if close:
            self.in_flight.close()

    def prepare(self, batch: Prepared) -> None:
        self.prepared.append(batch)
        self.prepared_records += batch.records

    def take_prepared(self) -> list[Prepared]:
        prepared, self.prepared, self.prepared_records = self.prepared, [], 0
        return prepared

    def open(self, pending_outputs: bool) -> bool:
        """Anything not yet committed: a commit in flight, batches, or outputs without input offsets."""
        return bool(self.in_flight) or bool(self.prepared) or bool(self.uncommitted) or pending_outputs

    def due(self, drained: bool, pending_outputs: bool) -> bool:
        """Commit now: the interval has passed, the input is drained, or records are being tried one by one."""
        if self.uncommitted:
            return self.uncommitted.due(drained or bool(self.suspects))
        # outputs without input offsets (dead letters of a side input, state written on assignment)
        return drained and not self.in_flight and not self.prepared and pending_outputs

    def committed(self, offsets: dict[tuple[str, int], int]) -> None:
        """Records the committed offsets have passed are no longer suspects, nor known to be refused."""
        self.known.update(offsets)
        for tp, next_offset in offsets.items():
            if self.suspects.get(tp, next_offset) < next_offset:
                del self.suspects[tp]
        if self.refused:
            for source in [s for s in self.refused if s[2] < offsets.get(s[:2], -1)]:
                del self.refused[source]

    def failed(self, exc: DeliveryError) -> None:
        """Everything since the last commit is consumed again; the records the failure named are remembered."""
        self.uncommitted.clear()
        self.prepared, self.prepared_records = [], 0
        if len(exc.refused) == 1:
            self.refused.update(exc.refused)  # the record at fault is known: dead-lettered on the replay
        else:  # several records refused at once: replay one record per batch until the one at fault shows
            for topic, partition, offset in exc.refused:
                self.suspects[topic, partition] = max(self.suspects.get((topic, partition), -1), offset)

    def screen(self, msgs: list[Message], limit: int, report_oversized: bool = True
               ) -> tuple[list[Message], list[Reject]]:
        """The records a task may see, and those it must not: above the input limit, or refused before.

        The common batch passes with a few C calls per record; any other is taken record by record.  Without
        ``report_oversized`` (a shard other than 0, which dead-letters them) records too large are skipped.
        """
        if not self.refused:
            keys, values = [m.key() for m in msgs], [m.value() for m in msgs]
            if max(map(len, filter(None, keys)), default=0) + max(map(len, filter(None, values)), default=0) <= limit:
                return msgs, []
        kept, rejects = [], []
        for msg in msgs:
            refused = self.refused.get((msg.topic(), msg.partition(), msg.offset()))
            reason = too_large(msg, limit) or refused
            if reason is None:
                kept.append(msg)
            elif refused is not None or report_oversized:
                rejects.append((msg, reason))
        return kept, rejects
