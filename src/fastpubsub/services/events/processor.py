"""The processor: a short composition root in which an event batch flows one way through named stages.

    consume (``inputs``) -> decode -> match -> encode -> deliver

Each stage hands its result to the next and none calls back into another:
``Decode`` turns records into columns and rejects, ``Match`` runs one
``match_encoded`` per batch against the subscriptions (``ProcessorState``),
``Encode`` writes the notifications, ``Deliver`` owns the producer, the
transaction that commits the input offsets with their outputs, and the
dead-letter path.  A transaction holds as many batches as arrive within
``--commit-interval-ms``, and is committed as soon as the input is drained
(``deliver.Uncommitted``): small batches and a commit each when the input is
quiet, large batches and few commits under a backlog.  Subscription changes take the same way from ``match``
on: new subscriptions are matched against the stored valid events.  Metrics
read only what the stages publish (``processor.counters``, ``processor.metrics``).

Subscriptions are state, not work: every instance rebuilds them from
``pubsub.subscriptions`` (or a snapshot and what followed it) before it
matches any event; events are shared between the instances of one consumer group.
A shard (``processor.shard``, ``--shard I/K``) holds only the subscriptions
whose id hashes to it and reads every event in its own consumer group.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from confluent_kafka import Consumer, Message

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.admin import require
from fastpubsub.kafka.deadletter import DeadLetters
from fastpubsub.kafka.delivery import Delivery, DeliveryError
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.kafka.record_limits import MIN_RECORD_LIMIT, RecordLimits, discover
from fastpubsub.wire.codecs import DecodeError
from fastpubsub.wire.subscription_decoder import DecodedSubscriptions, decode_subscriptions
from fastpubsub.wire.topics import DEAD_LETTER, EVENTS, NOTIFICATIONS, SUBSCRIPTIONS

from fastpubsub.runtime.counters import PipelineCounters
from .decode import Decode, too_large
from fastpubsub.runtime.deliver import MAX_COMMIT_INTERVAL_MS, Deliver, InFlight, Uncommitted
from .encode import NOTIFICATION_EVENT_MODES, Encode
from fastpubsub.runtime.gcwatch import GcWatch, freeze_long_lived
from fastpubsub.runtime.handoff import Handoff
from fastpubsub.runtime.inputs import Inputs, StaleSnapshot, has_data
from fastpubsub.runtime.instance import InstanceSlot
from .match import Match
from fastpubsub.runtime.metrics import DEFAULT_STALL_SECONDS, Metrics, consumer_lag
from fastpubsub.runtime.progress import RateMeter, human
from .shard import UNSHARDED, Shard
from .state import ProcessorState
from .statistics_feed import StatisticsFeed
from .subscriptions import SubscriptionState, parse_subscription_id
from fastpubsub.services.warmup import PROCESSOR_STEPS, CompileWatch, warm_up

log = logging.getLogger("pubsub")

#: Subscription records applied per bulk step during a rebuild: each step is one batch decode and one
#: ``add_bulk`` whose index maintenance has a fixed cost, so a rebuild takes few large steps (a live change
#: is applied as soon as it is read).
REBUILD_CHUNK = 100_000
#: Chunks read and decoded ahead of the bulk load during a rebuild (``processor.handoff``).
REBUILD_AHEAD = 2


@dataclass
class Changes:
    """Subscription records taken out of their messages: to apply (key, value each), and passed (too large)."""

    records: list[Message] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    passed: list[Message] = field(default_factory=list)  # not applied, their offsets move on
    rejects: list[tuple[Message, str]] = field(default_factory=list)  # to dead-letter, with the reason
    decoded: DecodedSubscriptions | None = None  # keys and values decoded ahead (a rebuild's read thread)


@dataclass
class ProcessorConfig:
    bootstrap_servers: str
    group_id: str = "pubsub-processor"
    output_format: str = "avro"
    delivery: str = "auto"
    batch_size: int = 1000  # most events per consumed batch (one match_encoded); fewer when fewer are there
    session_timeout_ms: int = 6000
    progress_interval: float = 5.0
    algorithm: str = "dynamic"
    runs: int | None = None  # static/dynamic: clusters of this many entries keep sorted runs (0: off; None: engine RUN_MIN)
    transactional_id: str | None = None  # default: a stable per-host slot (processor.instance)
    client_config: dict[str, Any] = field(default_factory=dict)  # the -X settings of every Kafka client
    max_valid_events: int = 100_000  # the valid-event store's bounds (engine ValidEventStore)
    max_valid_event_bytes: int = 256 << 20
    snapshot_dir: str | None = None  # None: no snapshots, every start rebuilds from the topic
    snapshot_every: float = 300.0  # seconds between snapshots (when something changed)
    snapshot_changes: int = 100_000  # ... or after this many subscription changes, whichever comes first
    queue_bounds: QueueBounds = field(default_factory=QueueBounds)  # back-pressure (kafka.queues)
    stall_seconds: float = DEFAULT_STALL_SECONDS  # /healthz fails after this long without progress
    notification_event: str = "auto"  # full | reference | auto (processor.encode.NOTIFICATION_EVENT_MODES)
    max_output_bytes: int | None = None  # None: each output topic's max.message.bytes as the broker reports it
    max_record_bytes: int | None = None  # None: the input topics' max.message.bytes (Kafka's default if unreported)
    shard: Shard = UNSHARDED  # or "I/K": hold only the subscriptions of shard I of K (processor.shard)
    commit_interval_ms: int = 100  # a transaction (at-least-once: the outputs before an offset commit) is open this long at most
    commit_linger_ms: int = 0  # ... and, when the input is drained, at least this long (0: committed at once)
    start_from_groups: tuple[str, ...] = ()  # where a partition this group never committed starts (processor.inputs)
    overlap_commits: bool = False  # commit on a thread while the next batch is consumed, decoded, matched, encoded

    def __post_init__(self) -> None:
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a whole number of events, at least 1, got {self.batch_size!r}")
        if not isinstance(self.commit_interval_ms, int) or not 0 <= self.commit_interval_ms <= MAX_COMMIT_INTERVAL_MS:
            raise ValueError(f"commit_interval_ms must be a whole number of milliseconds from 0 (commit every batch) "
                             f"to {MAX_COMMIT_INTERVAL_MS} (half the producer's transaction timeout), "
                             f"got {self.commit_interval_ms!r}")
        if not isinstance(self.commit_linger_ms, int) or not 0 <= self.commit_linger_ms <= self.commit_interval_ms:
            raise ValueError(f"commit_linger_ms must be a whole number of milliseconds from 0 to the commit interval "
                             f"({self.commit_interval_ms}), got {self.commit_linger_ms!r}")
        if isinstance(self.shard, str):
            self.shard = Shard.parse(self.shard)
        self.start_from_groups = tuple(self.start_from_groups)
        if "" in self.start_from_groups:
            raise ValueError("--start-from-group needs a consumer group name, got an empty one")
        if self.group in self.start_from_groups:
            raise ValueError(f"--start-from-group {self.group} is this instance's own consumer group; name the "
                             f"groups it takes over from (e.g. the unsharded --group-id, or the old shards' groups)")
        if self.notification_event not in NOTIFICATION_EVENT_MODES:
            raise ValueError(f"notification_event must be one of {', '.join(NOTIFICATION_EVENT_MODES)}, "
                             f"got {self.notification_event!r}")
        for name in ("max_output_bytes", "max_record_bytes"):
            value = getattr(self, name)
            if value is not None and value < MIN_RECORD_LIMIT:
                raise ValueError(f"{name} must be at least {MIN_RECORD_LIMIT} bytes, got {value}")

    @property
    def group(self) -> str:
        """The consumer group this instance joins: ``group_id``, or ``<group_id>.shard-I-of-K`` for a shard."""
        return self.shard.group(self.group_id)


class Processor:
    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config
        self.clients = ClientFactory(config.bootstrap_servers, config.client_config)
        self.held = ProcessorState(config.algorithm, config.runs, config.max_valid_events, config.max_valid_event_bytes,
                                   config.snapshot_dir, config.snapshot_every, config.snapshot_changes, config.shard)
        self.counters = PipelineCounters()
        self.metrics = Metrics(config.stall_seconds, self.counters)  # served by processor.metrics.MetricsServer
        self.ready = self.metrics.ready
        self.decode = Decode(self.counters, config.shard.reports_unowned_input)
        self.match = Match(self.held, self.counters)
        self.encode = Encode(config.output_format, config.notification_event, self.counters)
        self.limits = RecordLimits()  # learned at start (kafka.record_limits)
        self.deliver: Deliver | None = None  # built by run(): it opens the producer
        self.statistics_feed: StatisticsFeed | None = None
        self.rebuild_records = 0  # subscription records read at start (all of them, or those after the snapshot)
        self._partitions = 0
        #: (topic, partition) -> last offset of records the broker refused together (one refusal for a whole
        #: produce batch): until the committed offsets pass them, batches of one record find the one at fault
        self.suspects: dict[tuple[str, int], int] = {}
        #: the batches delivered since the last commit (their offsets go with the next commit)
        self.uncommitted = self._new_uncommitted()
        #: the commit under way while the loop prepares the next batches (``--overlap-commits``)
        self.in_flight = InFlight()
        #: batches decoded, matched and encoded while a commit was in flight, produced once it has ended:
        #: (outputs, rejects, offsets, events decoded, records taken)
        self._prepared: list[tuple[list, list, dict, int, int]] = []
        self._prepared_records = 0
        self._events_consumer: Consumer | None = None
        self._stop = threading.Event()
        self.kernels_compiled = 0  # numba kernels this run compiled (0 when all came from the cache)
        self._late_compiles = CompileWatch(self._compiled_late)
        self.gc = GcWatch()  # the collector's pauses while the loop runs (processor.gcwatch)
        self._publish()

    def stop(self) -> None:
        """Ask the loop to finish its batch, commit and close (safe from signal handlers and threads)."""
        self._stop.set()

    # --- the parts, for callers and tests -------------------------------------------

    @property
    def state(self) -> SubscriptionState:
        return self.held.subscriptions

    @property
    def store(self):
        return self.held.events

    @property
    def delivery(self) -> Delivery | None:
        return self.deliver.delivery if self.deliver else None

    @property
    def dead_letters(self) -> DeadLetters | None:
        return self.deliver.dead_letters if self.deliver else None

    @property
    def events(self) -> int:
        return self.counters.events

    # --- the flows --------------------------------------------------------------------

    def _on_events(self, msgs: list[Message]) -> None:
        """consume -> decode -> match -> encode -> deliver; the batch's offsets join the open transaction.

        A commit in flight (:meth:`_start_commit`) is settled only before the
        batch's outputs are produced: they belong to the next transaction.
        """
        if self.in_flight:
            self.counters.overlapped += 1
        batch = self.decode(msgs)
        matched = self.match.events(batch)
        t = time.perf_counter()
        outputs = list(self.encode(matched))
        self.counters.lap("produce", t)  # encoding counts with producing
        self._prepared.append((outputs, batch.rejects, batch.offsets, len(batch.decoded), len(msgs)))
        self._prepared_records += len(msgs)
        # while the commit is in flight, what arrives is prepared and kept for the next transaction; at most a
        # full batch of it (back-pressure), then the loop waits for the commit
        if not self.in_flight or self.in_flight.done() or self._prepared_records >= self.config.batch_size:
            self._deliver_prepared()

    def _deliver_prepared(self) -> None:
        """Settle the commit in flight, then produce the prepared batches into the next transaction."""
        self._settle()
        prepared, self._prepared, self._prepared_records = self._prepared, [], 0
        for outputs, rejects, offsets, events, records in prepared:
            t = time.perf_counter()
            produced = self.deliver.send(outputs, rejects)
            self.counters.lap("produce", t)
            self.uncommitted.add(offsets, events, produced)
            self.counters.sized(records)

    def _commit(self, consumer: Consumer | None) -> None:
        """Commit the outputs delivered so far with the offsets of every batch since the last commit; wait for it."""
        self._deliver_prepared()
        t = time.perf_counter()
        done = self.uncommitted
        self.deliver.commit(consumer, done.topic_partitions() if consumer is not None else None)
        self.counters.lap("commit", t)
        self.metrics.commit_seconds.observe(time.perf_counter() - t)
        self._count_committed(done)
        done.clear()

    def _start_commit(self, consumer: Consumer) -> None:
        """:meth:`_commit` on the commit thread (``deliver.InFlight``): the loop goes on with the next batch.

        The batches it holds are counted once it has succeeded (:meth:`_settle`);
        if it fails, the ``DeliveryError`` comes out of the settle, inside a
        guarded step, and every batch since the last successful commit is
        replayed as when the loop waited for it.
        """
        self._deliver_prepared()
        done, self.uncommitted = self.uncommitted, self._new_uncommitted()
        self.in_flight.start(functools.partial(self.deliver.commit, consumer, done.topic_partitions()), done)

    def _new_uncommitted(self) -> Uncommitted:
        return Uncommitted(self.config.commit_interval_ms / 1000, self.config.commit_linger_ms / 1000)

    def _settle(self) -> None:
        """Wait for the commit in flight, if any (the time the loop waits counts as its commit stage)."""
        if not self.in_flight:
            return
        t, began = time.perf_counter(), self.in_flight.began
        try:
            done = self.in_flight.result()
        finally:
            self.counters.lap("commit", t)
        self.metrics.commit_seconds.observe(time.perf_counter() - began)
        self._count_committed(done)

    def _count_committed(self, done: Uncommitted) -> None:
        self._committed(done.offsets)
        self.counters.events += done.events
        self.counters.notifications += done.notifications
        self.counters.batches += done.batches
        self.counters.commits += 1

    def _open(self) -> bool:
        """Anything not yet committed: a commit in flight, batches, or outputs without input offsets."""
        return bool(self.in_flight) or bool(self._prepared) or bool(self.uncommitted) or self.deliver.pending()

    def _committed(self, offsets: dict[tuple[str, int], int]) -> None:
        """Records the committed offsets have passed are no longer suspects, nor known to be refused."""
        for tp, next_offset in offsets.items():
            if self.suspects.get(tp, next_offset) < next_offset:
                del self.suspects[tp]
        if self.decode.refused:
            for source in [s for s in self.decode.refused if s[2] < offsets.get(s[:2], -1)]:
                del self.decode.refused[source]

    def _commit_due(self, drained: bool) -> bool:
        """Commit now: the interval has passed, the input is drained, or records are being tried one by one."""
        if self.uncommitted:
            return self.uncommitted.due(drained or bool(self.suspects))
        return drained and not self.in_flight and not self._prepared and self.deliver.pending()  # outputs without input offsets (dead letters of the statistics feed)

    def _on_changes(self, msgs: list[Message]) -> None:
        """Subscription changes: applied in one bulk step, then new subscriptions x stored valid events -> deliver."""
        self._apply_changes(self._split_changes(msgs))

    def _split_changes(self, msgs: list[Message], decode: bool = False) -> Changes:
        """The records to apply, their keys and values, and the ones too large to; with ``decode``, the keys and
        values decoded too (the rebuild does this on its read thread: nothing here touches the state)."""
        changes, limit = Changes(), self.limits.max_record_bytes
        records, keys, values, passed, rejects = changes.records, changes.keys, changes.values, changes.passed, \
            changes.rejects
        for msg in msgs:  # a rebuild runs this a million times: the common case in a few C calls
            if msg.error() is not None and not has_data(msg):
                continue
            key, value = msg.key(), msg.value()
            if (len(key) if key else 0) + (len(value) if value else 0) <= limit:
                records.append(msg)
                keys.append(key)
                values.append(value)
            else:
                passed.append(msg)
                if self._owns_record(msg):  # dead-lettered once: by its id's shard, else by shard 0
                    rejects.append((msg, too_large(msg, limit)))
        if decode:
            changes.decoded = decode_subscriptions(keys, values)
        return changes

    def _apply_changes(self, changes: Changes) -> None:
        applied = self.held.apply_columns(changes.records, changes.keys, changes.values, changes.passed,
                                          changes.decoded)
        rejects = changes.rejects + [(changes.records[i], str(exc)) for i, exc in applied.errors]
        produced = self.deliver.send(self.encode(self.match.stored(applied)), rejects)
        self.counters.stored_notifications += produced
        self.counters.notifications += produced

    def _owns_record(self, msg: Message) -> bool:
        """Whether this shard dead-letters a subscription record it cannot decode: its id's shard, else shard 0."""
        shard = self.config.shard
        try:
            return shard.owns(parse_subscription_id(msg.key()))
        except DecodeError:
            return shard.reports_unowned_input

    # --- start: snapshot, rebuild ------------------------------------------------------

    def _start(self, inputs: Inputs) -> None:
        """The snapshot (if usable) plus the changes after its offsets, else a full rebuild; then a fresh snapshot.

        Valid events: a change applied here is evaluated against the events the
        store holds, like a live one.  Without a snapshot the store starts
        empty, so a full rebuild notifies nothing; from a snapshot, the changes
        after its offsets (which the previous run may not have got to) are
        evaluated against the snapshot's events — repeats carry the same
        notification ids.
        """
        self.held.load_snapshot(self._partitions)
        try:
            self._rebuild(inputs)
        except StaleSnapshot as exc:
            log.warning("ignoring the snapshot, rebuilding from %s: %s", SUBSCRIPTIONS, exc)
            self.held.reset()
            self._rebuild(inputs)
        if self.config.snapshot_dir and self.held.unsnapshotted and not self._stop.is_set():
            self.write_snapshot()

    def _warm_up(self) -> None:
        """The kernels a run needs, from numba's cache or compiled now with each one logged (``processor.warmup``);
        kernels compiled later (first use of a code path) are logged too, so a slow batch is never a silent one."""
        started = last = time.monotonic()

        def compiling(step: int, steps: int, name: str, kernel: str, count: int) -> None:
            nonlocal last
            self.metrics.beat()
            if time.monotonic() - last >= 1.0 or count == 1:  # a line a second at most: there are ~160 of them
                last = time.monotonic()
                log.info("compiling numba kernels: step %d/%d (%s), %d compiled so far (%s)", step, steps, name,
                         count, kernel)

        report = warm_up((self.config.algorithm,), PROCESSOR_STEPS, self.config.runs, on_compile=compiling)
        self.kernels_compiled = report.compiled
        if report.compiled:
            log.info("kernels ready: %d compiled in %.1fs (`pubsub warmup` compiles them once per installation)",
                     report.compiled, time.monotonic() - started)
        else:
            log.info("kernels ready in %.1fs (from numba's cache)", time.monotonic() - started)
        self._late_compiles.__enter__()

    def _compiled_late(self, kernel: str, count: int) -> None:
        self.kernels_compiled += 1
        log.info("compiling numba kernel %s (its first use since installation; `pubsub warmup` compiles it ahead)",
                 kernel)

    def _rebuild(self, inputs: Inputs) -> None:
        """Read the subscriptions topic to its end and apply it in bulk steps of ``REBUILD_CHUNK`` records.

        Reading and decoding run on a thread of their own (``processor.handoff``), a chunk or two ahead of the
        bulk load on this one: the consumers fetch and the decoder's kernel runs without the GIL while
        ``add_bulk`` loads the chunk before.  The chunks are applied in the order they were read.
        """
        started, before = time.monotonic(), self.held.unsnapshotted
        meter = RateMeter(self.config.progress_interval)
        offsets = dict(self.held.offsets)  # where the readers start (the loads below move these on)

        def chunks(stopped: Callable[[], bool]) -> Iterator[Changes]:
            pending: list[Message] = []
            for msgs in inputs.replay(self._partitions, offsets, lambda: stopped() or self._stop.is_set()):
                pending += msgs
                if len(pending) >= REBUILD_CHUNK:
                    yield self._split_changes(pending, decode=True)
                    pending = []
            if pending:
                yield self._split_changes(pending, decode=True)

        with Handoff(chunks, depth=REBUILD_AHEAD, idle=self.metrics.beat, name="rebuild-read") as ahead:
            for changes in ahead:
                self._apply_changes(changes)
                self.metrics.beat()
                if meter.due():
                    meter.tick({})
                    log.info("rebuilding: %s subscriptions so far", human(len(self.state)))
        self.deliver.commit()  # dead letters of invalid subscriptions
        self.rebuild_records = self.held.unsnapshotted - before
        log.info("ready: %d subscriptions, %d records of %s read in %.1fs",
                 len(self.state), self.rebuild_records, SUBSCRIPTIONS, time.monotonic() - started)

    def write_snapshot(self) -> None:
        """Snapshot the state; outputs not yet committed are committed first (the snapshot must not be ahead of them).

        If that commit fails, the batches are replayed and the snapshot waits for the next turn.
        """
        if self._open():
            if not self._guarded(self._events_consumer, self._commit, self._events_consumer):
                return
        self.held.write_snapshot(self._partitions)
        freeze_long_lived()  # the state the snapshot covers is long-lived: out of the collector's full passes

    def _before_revoke(self, consumer: Consumer) -> None:
        """Partitions are about to be taken away: commit what was processed of them while they are still ours.

        A failure is recovered without a rewind (the next assignment starts
        from the committed offsets anyway).  A fenced producer commits
        nothing: the instance that took over replays it.
        """
        if self._open() and self.deliver.delivery.fenced is None:
            self._guarded(None, self._commit, consumer)

    # --- the loop ----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Run until :meth:`stop`; return the final statistics."""
        cfg = self.config
        self.held.prefetch_snapshot()  # read and checksummed while the clients start and the kernels load
        slot = None if cfg.transactional_id else InstanceSlot(cfg.group)  # one set of slots per shard
        transactional_id = cfg.transactional_id or slot.transactional_id
        self.limits = discover(self.clients, (NOTIFICATIONS, DEAD_LETTER), (EVENTS, SUBSCRIPTIONS), cfg.max_output_bytes,
                               cfg.max_record_bytes)
        self.decode.limits = self.match.limits = self.encode.limits = self.limits
        self.deliver = Deliver(self.clients, cfg.delivery, transactional_id, cfg.queue_bounds, cfg.output_format,
                               self.limits)
        self.metrics.dead_letters = self.deliver.dead_letters.by_reason
        log.info("delivery: %s%s", self.deliver.mode,
                 f" (transactional.id {transactional_id})" if self.deliver.mode == "transactional" else "")
        if cfg.shard.sharded:
            log.info("shard %s: holding the subscriptions whose id hashes to %d of %d; consumer group %s",
                     cfg.shard, cfg.shard.index, cfg.shard.count, cfg.group)
        inputs = Inputs(self.clients, cfg.group, cfg.queue_bounds, cfg.session_timeout_ms, cfg.start_from_groups)
        try:
            self._partitions = require(self.clients)[SUBSCRIPTIONS]  # the topics it cannot run without, or a clear error
            if self.held.rebuilds_from_start:  # the rebuild's readers fetch while the statistics and kernels load
                inputs.prefetch(self._partitions)
            # the latest snapshot of pubsub.statistics before the rebuild, so that the bulk load uses it
            self.statistics_feed = StatisticsFeed(  # bad statistics records are dead-lettered once, by shard 0
                self.clients, lambda: self.state.matcher,
                dead_letter=self._reject_statistics if cfg.shard.reports_unowned_input else None)
            self._events_consumer = inputs.events
            inputs.join(self._before_revoke)
            self._warm_up()
            self._start(inputs)
            freeze_long_lived()  # a million subscriptions out of the collector's full passes (processor.gcwatch)
            self.gc.__enter__()
            self.statistics_feed.reapply()  # a state loaded from a snapshot starts with uniform statistics
            self._publish()
            self.ready.set()
            meter = RateMeter(cfg.progress_interval)
            events = inputs.events
            while not self._stop.is_set():
                progressed = True  # a turn with nothing to do counts as progress, a failed delivery does not
                if self.in_flight.done():  # what was prepared meanwhile goes out; a failed commit is replayed now
                    progressed = self._guarded(events, self._deliver_prepared)
                changes = inputs.changes()
                if changes:
                    # the events' outputs are committed apart from the changes' (a failure replays only events)
                    if self._open():
                        progressed = self._guarded(events, self._commit, events)
                    self._on_changes(changes)
                    progressed = self._guarded(events, self._commit, events) and progressed
                # a bad statistics record is dead-lettered (_reject_statistics), which may settle a failed commit
                progressed = self._guarded(events, self.statistics_feed.poll) and progressed
                size = 1 if self.suspects else cfg.batch_size
                # nothing open: wait for events; a transaction open and the interval running: look without waiting;
                # a commit in flight: look again soon, to produce what was prepared once it has ended
                t = time.perf_counter()
                # (lingering: a drained transaction stays open; wait for input meanwhile rather than spin)
                batch = inputs.batch(size, min(self.uncommitted.lingering(), 0.02) if self.uncommitted
                                     else 0.005 if self.in_flight else 0.2)
                if batch:
                    self.counters.lap("consume", t)
                began = time.monotonic()
                if batch:
                    progressed = self._guarded(events, self._on_events, batch) and progressed
                    self.metrics.batch_seconds.observe(time.monotonic() - began)
                commit = self._commit_due(drained=len(batch) < size)
                if commit:
                    # records tried one by one (suspects) are committed alone, before the next one is taken
                    overlap = cfg.overlap_commits and not self.suspects and self.uncommitted
                    progressed = self._guarded(events, self._start_commit if overlap else self._commit,
                                               events) and progressed
                if batch or commit:
                    self.counters.busy_seconds += time.monotonic() - began
                if progressed:
                    self.metrics.beat()
                self._publish()
                self.metrics.after_iteration(inputs.events, self.state.matcher)
                if meter.due():
                    self._log_progress(meter, inputs.events)
                if self.held.snapshot_due():
                    self.write_snapshot()
            if self._open():
                self._guarded(events, self._commit, events)  # a clean stop: what was processed is committed
            if cfg.snapshot_dir and self.held.snapshot_due(force=True):
                self.write_snapshot()  # a clean stop: the next start replays nothing
        finally:
            self._late_compiles.__exit__()
            self.gc.__exit__()
            try:
                self._abandon_in_flight()
                self.deliver.close()
            finally:
                inputs.close()
                if self.statistics_feed is not None:
                    self.statistics_feed.close()
                if slot is not None:
                    slot.release()
        return self.stats()

    def _reject_statistics(self, msg: Message, reason: str) -> None:
        """A bad statistics record is dead-lettered: produced, so into the next transaction, after the one in flight."""
        self._settle()
        self.deliver.reject(msg, reason)

    def _abandon_in_flight(self, close: bool = True) -> None:
        """After a failure or on the way out: let a commit in flight end; what it held is replayed if it failed."""
        if self.in_flight:
            try:
                self.in_flight.result()
            except Exception as exc:  # noqa: BLE001 -- replayed from the committed offsets, here or by the next start
                log.debug("commit in flight abandoned: %s", exc)
        if close:
            self.in_flight.close()

    def _guarded(self, events: Consumer, step: Callable[..., None], *args: Any) -> bool:
        """Run a step that produces and commits; if it fails, replay from the committed offsets (kafka.delivery).

        An input record whose outputs the broker refused for what they are
        (``DeliveryError.refused``) is dead-lettered on the replay (``Decode``),
        so one record cannot hold the pipeline.  A refusal shared by several
        records (a whole produce batch) splits the replay into batches of one
        record until the committed offsets pass them, so that the record at
        fault is named alone and the others go through.  Other failures (a
        broker gone) are retried as long as they last, and /healthz turns
        unhealthy meanwhile.  False if the step failed.  A fenced producer
        (``kafka.delivery.Fenced``: another instance took over the
        transactional.id) is not a ``DeliveryError``: it stops the processor.
        """
        try:
            step(*args)
            return True
        except DeliveryError as exc:
            self._abandon_in_flight(close=False)  # nothing is in flight when a step fails, but be sure of it
            self.uncommitted.clear()  # every batch since the last commit is consumed again
            self._prepared, self._prepared_records = [], 0
            if len(exc.refused) == 1:
                self.decode.refused.update(exc.refused)  # the record at fault is known: dead-lettered on the replay
            else:  # several records refused at once: replay one record per batch until the one at fault shows
                for topic, partition, offset in exc.refused:
                    self.suspects[topic, partition] = max(self.suspects.get((topic, partition), -1), offset)
            self.counters.replays += 1
            log.error("not delivered (%s): new producer, events again from the committed offsets%s", exc,
                      f"; {len(exc.refused)} refused records go to {DEAD_LETTER}" if exc.refused else "")
            self.deliver.recover(events, self._stop.is_set, lambda: None)
            return False

    def _publish(self) -> None:
        """Gauges for /metrics, set from the loop's thread (the HTTP thread reads only what is published)."""
        st = self.state
        self.metrics.publish(len(st), {k: getattr(st, k) for k in ("added", "replaced", "removed", "expired")},
                             self.deliver.queue() if self.deliver else None, algorithm=st.matcher.algorithm,
                             delivery=self.deliver.mode if self.deliver else "", group_id=self.config.group,
                             shard=str(self.config.shard))

    def _log_progress(self, meter: RateMeter, consumer: Consumer) -> None:
        rates = meter.tick({"events": self.counters.events, "notifications": self.counters.notifications})
        lag, assignment = consumer_lag(consumer), consumer.assignment()
        log.info(
            "%s events/s, %s notifications/s, lag %s, %d partitions, %s subscriptions, %d dead letters",
            human(rates["events"]), human(rates["notifications"]), human(lag), len(assignment),
            human(len(self.state)), self.deliver.dead_letters.total,
        )

    def stats(self) -> dict[str, Any]:
        c = self.counters
        return {
            "delivery": self.deliver.mode if self.deliver else None,
            "events": c.events,
            "notifications": c.notifications,
            "batches": c.batches,
            "commits": c.commits,
            "busy_seconds": round(c.busy_seconds, 3),
            "stage_seconds": {k: round(v, 3) for k, v in c.stage_seconds.items()},
            "commit_seconds": {k: round(v, 3) for k, v in self.deliver.delivery.commit_seconds.items()}
            if self.deliver else {},
            "batch_sizes": dict(c.batch_sizes),
            "dead_letters": dict(self.deliver.dead_letters.counts) if self.deliver else {},
            "dead_letters_truncated": self.deliver.dead_letters.truncated if self.deliver else 0,
            "notifications_by_reference": c.by_reference,
            "stored_events_not_notified": c.not_kept,
            "replays": c.replays,
            "overlapped_batches": c.overlapped,
            "gc": self.gc.stats(),  # collections by generation while the loop ran, their seconds, the longest
            "limits": {"output": self.limits.output, "max_record_bytes": self.limits.max_record_bytes},
            **self.state.stats(),
            "shard": str(self.config.shard),
            "group": self.config.group,
            "other_shards_records": self.state.skipped,  # subscription records of ids other shards hold
            "stored_notifications": c.stored_notifications,
            "valid_events": self.store.stats(),
            "snapshots": self.held.snapshots,
            "kernels_compiled": self.kernels_compiled,
            "matcher": self.state.matcher.algorithm,
            "runs": self.config.runs,
            "statistics": self.statistics_feed.stats() if self.statistics_feed else None,
        }


def stats_json(stats: dict[str, Any]) -> str:
    return json.dumps(stats, sort_keys=True)
