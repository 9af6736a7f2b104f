"""Consume: a task's two kinds of input, read by consumers from the one client factory.

The work input (the events, a table's rows) is shared between the instances of one consumer group and committed
with the outputs it caused (``kafka.delivery``): :attr:`Inputs.group`.  The state topic (the subscriptions) is
state, not work: every instance reads all its partitions by manual assignment (no group, no committed offsets),
from the beginning or from a snapshot's offsets, and rebuilds before it processes any input: :attr:`Inputs.state`,
:meth:`Inputs.replay`, :meth:`Inputs.state_changes`.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterator, Sequence

from confluent_kafka import (
    OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, TopicPartition,
)

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.delivery import denied
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.wire.codecs import DecodeError

log = logging.getLogger("pubsub")

#: Subscription records taken per poll (they are applied in one bulk step).
CHANGES_PER_POLL = 10_000
#: Read-ahead of the state topic's reader (librdkafka's queued.max.messages.kbytes), at least: it fetches while
#: the rebuild decodes and bulk-loads (the subscriptions held take more memory than this anyway).
STATE_READ_AHEAD_KBYTES = 65_536

#: The group consumer's fetch settings (``-X`` overrides them).  ``fetch.wait.max.ms`` (librdkafka: 500): how long
#: the broker holds a fetch that finds fewer than ``fetch.min.bytes``; Apache Kafka answers as soon as records
#: arrive, so a short wait costs only more empty fetches while the input is idle.
#: ``fetch.queue.backoff.ms`` (librdkafka: 1000): once the pre-fetch queue is full (``kafka.queues``), the next
#: fetch waits this long, and the loop drains the queue long before, so with the default a consumer draining a
#: backlog sits idle most of the time (``python -m benchmarks.pipeline.fetch_backoff``).
GROUP_FETCH = {"fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10}


class StaleSnapshot(Exception):
    """The subscriptions topic is behind the snapshot (recreated or truncated): the snapshot does not apply."""


def event_id(msg: Message) -> str:
    """The record key, or ``topic:partition:offset`` when there is none."""
    key = msg.key()
    if key is None:
        return f"{msg.topic()}:{msg.partition()}:{msg.offset()}"
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        raise DecodeError(f"event key {key[:40]!r} is not UTF-8") from None


def event_time(msg: Message) -> int:
    """The record timestamp in ms (producer or broker time); now if the record has none."""
    kind, ms = msg.timestamp()
    return ms if kind != TIMESTAMP_NOT_AVAILABLE else int(time.time() * 1000)


def has_data(msg: Message) -> bool:
    """True if ``msg`` carries data; logs transient consumer errors, raises fatal ones and the authorizer's refusals
    (the host waits for the access: ``runtime.presence``)."""
    err = msg.error()
    if err is None:
        return True
    if err.code() == KafkaError._PARTITION_EOF:
        return False
    if err.fatal() or err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART or denied(err):
        raise KafkaException(err)
    log.warning("consumer: %s", err)
    return False


def _log_assignment(what: str):
    def callback(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        log.info("%s %d partitions: %s", what, len(partitions),
                 "; ".join(f"{t} {sorted(ps)}" for t, ps in sorted(by_topic.items())) or "none")

    return callback


def committed_offsets(clients: ClientFactory, group_id: str,
                      partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the offset ``group_id`` committed there (negative: none)."""
    reader = clients.consumer(group_id, None, **{"enable.auto.commit": False})  # never joins: an offset fetch only
    try:
        found = reader.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
        return {(tp.topic, tp.partition): tp.offset for tp in found}
    finally:
        reader.close()


class Inputs:
    """The state topic's reader (assign only, never commits) and the work input's consumer (the group).

    ``start_from``: groups whose committed offsets start a partition this
    group has never committed (``--start-from-group``), e.g. the groups of
    the shards this one replaces, instead of the earliest retained event.
    """

    def __init__(self, clients: ClientFactory, group_id: str, bounds: QueueBounds, session_timeout_ms: int,
                 start_from: Sequence[str] = (), state_topic: str | None = None) -> None:
        self._clients, self._group, self._start_from = clients, group_id, tuple(start_from)
        self._state_topic = state_topic
        defaults = {"auto.offset.reset": "earliest", **bounds.consumer()}
        required = {"enable.auto.commit": False, "isolation.level": "read_committed"}
        # end-of-partition events mark the end of the rebuild
        # the rebuild applies 100K-record steps; meanwhile librdkafka keeps fetching into a read-ahead this large
        # and an empty fetch (the end of the topic: how a start from a snapshot ends) is answered after 100 ms,
        # not the broker's default 500; a reader of one partition fetches up to the whole fetch from it (not the
        # default 1 MB per partition) and goes on until that read-ahead is full, not 100,000 records deep, so that
        # fetch round trips do not bound the rebuild (python -m benchmarks.pipeline.topic_read compares the settings)
        read_ahead = {"queued.max.messages.kbytes": max(bounds.consumer_kbytes, STATE_READ_AHEAD_KBYTES),
                      "fetch.max.bytes": max(bounds.consumer()["fetch.max.bytes"], 16 << 20),
                      "max.partition.fetch.bytes": 16 << 20, "queued.min.messages": 10_000_000,
                      "fetch.wait.max.ms": 100}
        self._reader_required = {**required, "enable.partition.eof": True}
        self._reader_settings = lambda n: {**defaults, **read_ahead, "queued.max.messages.kbytes": max(
            bounds.consumer_kbytes, STATE_READ_AHEAD_KBYTES // n)}  # a rebuild's reader of 1 partition of n
        # every instance reads the state topic whole, never committing (None: a task without one)
        self.state = None if state_topic is None else clients.consumer(
            f"{group_id}.subscriptions-reader", {**defaults, **read_ahead}, **self._reader_required)
        self.group = clients.consumer(group_id, {**defaults, **GROUP_FETCH}, **required,
                                       **{"session.timeout.ms": session_timeout_ms})
        self._early: tuple[dict[int, int], dict[int, Consumer]] | None = None  # rebuild readers started by prefetch()

    def prefetch(self, partitions: int, offsets: dict[int, int] | None = None) -> None:
        """Start the rebuild's readers now, from ``offsets`` (else the beginning of the topic), so that they fetch
        into their read-ahead while the rest of the start (statistics, kernels, a snapshot) runs; :meth:`replay`
        from the same offsets takes them over (from others it closes them and starts its own)."""
        if partitions > 1 and self._early is None:
            start = {p: (offsets or {}).get(p, OFFSET_BEGINNING) for p in range(partitions)}
            self._early = (start, self._readers(start))

    def join(self, before_revoke: Callable[[Consumer], None], topics: Sequence[str]) -> None:
        """Join the group; the join proceeds in the background during the rebuild.

        ``before_revoke`` runs (on the loop's thread, inside a consume) before
        partitions are taken away, so that what was processed of them is
        committed while this instance still owns them.  ``topics``: the group's input topics (the pattern
        service adds its repartition topic, as a Kafka Streams application subscribes to its own); a name that
        starts with ``^`` is a regular expression, and topics created later that match it join the subscription
        at the consumer's next metadata refresh.
        """
        revoked = _log_assignment("revoked")

        def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            before_revoke(consumer)
            revoked(consumer, partitions)

        self.group.subscribe(list(topics), on_assign=self._on_assign, on_revoke=on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log_assignment("assigned")(consumer, partitions)
        starts = self.start_offsets([(tp.topic, tp.partition) for tp in partitions]) if self._start_from else {}
        if starts:
            for tp in partitions:
                tp.offset = starts.get((tp.topic, tp.partition), tp.offset)
            consumer.assign(partitions)

    def start_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """(topic, partition)s this group never committed -> the smallest offset the ``start_from`` groups committed
        there.

        The smallest, so that no event is skipped that one of those groups
        had not yet processed (some may be notified again, with the same
        notification ids).  A partition that one of them never committed
        starts as without them (``auto.offset.reset``: the earliest event).
        """
        own = committed_offsets(self._clients, self._group, partitions)
        missing = [p for p, offset in own.items() if offset < 0]
        if not missing:
            return {}
        theirs = [committed_offsets(self._clients, g, missing) for g in self._start_from]
        starts = {p: min(t[p] for t in theirs) for p in missing if all(t.get(p, -1) >= 0 for t in theirs)}
        if starts:
            log.info("%s: partitions %s start at the offsets of %s: %s", self._group, sorted(starts),
                     ", ".join(self._start_from), dict(sorted(starts.items())))
        if len(starts) < len(missing):
            log.warning("%s: partitions %s start at the earliest event: not committed by every one of %s",
                        self._group, sorted(set(missing) - set(starts)), ", ".join(self._start_from))
        return starts

    def replay(self, partitions: int, offsets: dict[int, int], stopped) -> Iterator[list[Message]]:
        """Every partition of the state topic from ``offsets`` (else the beginning) to its end, in chunks.

        The end is the consumer's end-of-partition event (the end of a fetch,
        for a read_committed reader the last stable offset), so no separate
        ListOffsets round trip is needed.  Raises :class:`StaleSnapshot` if a partition is behind ``offsets``.

        Each partition is read by a consumer of its own, all fetching at once:
        one consumer's fetches are answered one after the other, so consumers
        of one partition each read the topic faster than one consumer of all
        (``benchmarks.pipeline.topic_read``; docs/benchmarks.md, "End to end on Apache Kafka").  Afterwards the
        state reader goes on from where they stopped (:meth:`state_changes`).
        """
        start = {p: offsets.get(p, OFFSET_BEGINNING) for p in range(partitions)}
        after = dict(start)  # partition -> the next offset to read: where the state reader goes on
        early, self._early = self._early, None
        if early is not None and early[0] != start:  # started for another start (a snapshot was loaded meanwhile)
            for reader in early[1].values():
                reader.close()
            early = None
        readers = early[1] if early else self._readers(start) if partitions > 1 else {p: self.state
                                                                                      for p in start}
        if partitions <= 1:
            self.state.assign([TopicPartition(self._state_topic, p, o) for p, o in start.items()])
        todo = set(start)
        unchecked = {p for p, o in start.items() if o >= 0}  # from a snapshot: first record still to compare
        try:
            while todo and not stopped():
                got = False
                for p in sorted(todo):
                    # a consume returns at CHANGES_PER_POLL records or at its timeout; the readers are taken in
                    # turn without waiting, and only a turn that found nothing waits (on one of them)
                    msgs = readers[p].consume(num_messages=CHANGES_PER_POLL, timeout=0)
                    if not msgs:
                        continue
                    got = True
                    self._check(msgs, start, unchecked, todo, after)
                    yield msgs
                if not got and todo:
                    p = min(todo)
                    msgs = readers[p].consume(num_messages=CHANGES_PER_POLL, timeout=0.05)
                    if msgs:
                        self._check(msgs, start, unchecked, todo, after)
                        yield msgs
        finally:
            if partitions > 1:
                for reader in readers.values():
                    reader.close()
                self.state.assign([TopicPartition(self._state_topic, p, o) for p, o in after.items()])

    def _readers(self, start: dict[int, int]) -> dict[int, Consumer]:
        """A consumer per partition, assigned at its start (the read-ahead shared out between them)."""
        readers = {}
        for p, offset in start.items():
            reader = self._clients.consumer(f"{self._group}.subscriptions-reader", self._reader_settings(len(start)),
                                            **self._reader_required)
            reader.assign([TopicPartition(self._state_topic, p, offset)])
            readers[p] = reader
        return readers

    @staticmethod
    def _check(msgs: list[Message], start: dict[int, int], unchecked: set[int], todo: set[int],
               after: dict[int, int]) -> None:
        """End-of-partition events end a partition; a partition's first record is compared with the snapshot's
        offset (no Python step per record beyond that); ``after`` moves past what was read.  ``msgs`` come from
        one partition's reader (or from the one reader of a one-partition topic)."""
        for msg in (msgs if unchecked else [m for m in msgs if m.error() is not None]):
            eof = msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF
            if eof or msg.error() is None:
                if msg.offset() < start.get(msg.partition(), 0):
                    raise StaleSnapshot(f"partition {msg.partition()} is at offset {msg.offset()}, "
                                        f"before the snapshot's {start[msg.partition()]}")
                unchecked.discard(msg.partition())
            if eof:
                todo.discard(msg.partition())
                after[msg.partition()] = max(after[msg.partition()], msg.offset())
        for msg in reversed(msgs):  # one partition's records (a reader each), in order: the last gives the next
            if msg.error() is None:
                after[msg.partition()] = max(after[msg.partition()], msg.offset() + 1)
                break

    def state_changes(self) -> list[Message]:
        """Records of the state topic (subscription changes) that arrived since the last call (non-blocking)."""
        return self.state.consume(num_messages=CHANGES_PER_POLL, timeout=0)

    def batch(self, size: int, timeout: float = 0.2) -> list[Message]:
        """The records of the group already fetched, at most ``size``, without waiting; if there are none, the first to arrive
        within ``timeout`` and what came with it.

        ``consume(num_messages=size, timeout)`` alone waits until ``size``
        records are there or the timeout passes: under a quiet input every
        event would wait out the timeout.  So a batch is what is available,
        small when the input is quiet, ``size`` under a backlog; a batch
        shorter than ``size`` means the input is drained (``processor.app``
        commits then).
        """
        msgs = self.group.consume(num_messages=size, timeout=0)
        if msgs or timeout <= 0:
            return msgs
        msgs = self.group.consume(num_messages=1, timeout=timeout)
        if msgs and size > 1:
            msgs += self.group.consume(num_messages=size - 1, timeout=0)
        return msgs

    def close(self) -> None:
        if self._early is not None:
            for reader in self._early[1].values():
                reader.close()
            self._early = None
        self.group.close()
        if self.state is not None:
            self.state.close()
