"""The host: the one loop that runs a service's task between Kafka topics.

Like Kafka Streams' ``StreamThread``, one loop owns everything that is not the task's own logic:

* start: the task's topics checked, the record limits learned from the broker (``kafka.record_limits``), the
  producer and its transaction (``runtime.deliver``), the consumers (``runtime.inputs``), the group joined, the
  numba kernels loaded meanwhile on a thread (``services.warmup``: after ``pubsub warmup`` nothing compiles),
  the state restored;
  then long-lived objects frozen out of the collector's full passes (``runtime.gcwatch``) and ready;
* each turn: state changes (subscriptions) applied in their own commit, side inputs polled, a batch consumed,
  screened (records above ``--max-record-bytes`` or refused before are dead-lettered, never shown to the task),
  processed into outputs, and committed with its input offsets when the checkpoint says so
  (``runtime.checkpoint``);
* failures: a failed delivery (``kafka.delivery.DeliveryError``) rewinds the inputs to the committed offsets and
  the task's state with them; records the broker refused are dead-lettered on the replay, and a refusal shared by
  many records (or a task that raises on a batch) replays one record per batch until the one at fault is
  dead-lettered alone, so one poison record never holds the pipeline; ``kafka.delivery.Fenced`` (another instance
  took over the transactional.id) stops the host;
* a cluster that went away (no broker answers any client: librdkafka's ``_ALL_BROKERS_DOWN``, or no answer to the
  metadata request an idle loop sends every few seconds) is waited for, the loop turning and /readyz saying not
  ready, until a batch or a metadata probe a second shows it back; then the producer is replaced and the inputs
  rewound, as after a failed delivery;
* ``/metrics``, ``/healthz`` and ``/readyz`` (``runtime.metrics``) read what the loop publishes; progress lines
  every ``--progress-interval`` seconds; a clean stop commits what was processed.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from fastpubsub.kafka import ClientFactory, Settings
from fastpubsub.kafka.admin import check_access, transient
from fastpubsub.kafka.delivery import DeliveryError
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.kafka.record_limits import MIN_RECORD_LIMIT, RecordLimits, discover
from fastpubsub.wire.topics import DEFAULT, TopicNames

from .checkpoint import MAX_COMMIT_INTERVAL_MS, Checkpoint, Prepared, Uncommitted, next_offsets
from .compiles import CompileWatch, WarmUp
from .counters import PipelineCounters
from .deliver import Deliver
from .gcwatch import GcWatch, collector_paused, freeze_long_lived
from .inputs import Inputs, has_data
from .instance import InstanceSlot
from .metrics import DEFAULT_STALL_SECONDS, Metrics, consumer_lag
from .progress import RateMeter, human
from .task import Context, Outputs, Task, TaskState
from .trace import LatencyTrace

T = TypeVar("T")

#: Seconds without input after which the loop asks the cluster whether it is there (no more often than that).
IDLE_PROBE = 3.0
PROBE_TIMEOUT = 5.0
#: Seconds a service's start asks the cluster again while a question goes unanswered (a node down at start).
START_PATIENCE = 120.0


@dataclass
class HostConfig:
    """What every service shares: the connection, the group, delivery, batching, commits, limits, health."""

    bootstrap_servers: str
    group_id: str  # the consumer group of the task's inputs (and the default transactional.id's prefix)
    client_config: dict[str, Any] = field(default_factory=dict)  # the -X settings of every Kafka client
    delivery: str = "auto"
    transactional_id: str | None = None  # default: a stable per-host slot of the group (runtime.instance)
    batch_size: int = 1000  # most records per batch; fewer when fewer are there
    session_timeout_ms: int = 6000
    progress_interval: float = 5.0
    output_format: str = "avro"  # of dead letters
    queue_bounds: QueueBounds = field(default_factory=QueueBounds)  # back-pressure (kafka.queues)
    stall_seconds: float = DEFAULT_STALL_SECONDS  # /healthz fails after this long without progress
    commit_interval_ms: int = 100  # a transaction is open this long at most
    commit_linger_ms: int = 0  # ... and, when the input is drained, at least this long
    overlap_commits: bool = False  # commit on a thread while the next batch is processed
    latency_samples: int = 0  # the last this many sampled batches, their latency by part, in the statistics
    max_output_bytes: int | None = None  # None: each output topic's max.message.bytes as the broker reports it
    max_record_bytes: int | None = None  # None: the input topics' max.message.bytes
    start_from_groups: tuple[str, ...] = ()  # where a partition the group never committed starts (runtime.inputs)
    topics: TopicNames = DEFAULT  # the deployment's topic names (wire.topics)

    def __post_init__(self) -> None:
        self.client_config = Settings(self.client_config)  # its repr hides the secrets
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a whole number of records, at least 1, got {self.batch_size!r}")
        if not isinstance(self.commit_interval_ms, int) or not 0 <= self.commit_interval_ms <= MAX_COMMIT_INTERVAL_MS:
            raise ValueError(f"commit_interval_ms must be a whole number of milliseconds from 0 (commit every batch) "
                             f"to {MAX_COMMIT_INTERVAL_MS} (half the producer's transaction timeout), "
                             f"got {self.commit_interval_ms!r}")
        if not isinstance(self.latency_samples, int) or self.latency_samples < 0:
            raise ValueError(f"latency_samples must be a whole number, at least 0, got {self.latency_samples!r}")
        if not isinstance(self.commit_linger_ms, int) or not 0 <= self.commit_linger_ms <= self.commit_interval_ms:
            raise ValueError(f"commit_linger_ms must be a whole number of milliseconds from 0 to the commit interval "
                             f"({self.commit_interval_ms}), got {self.commit_linger_ms!r}")
        for name in ("max_output_bytes", "max_record_bytes"):
            value = getattr(self, name)
            if value is not None and value < MIN_RECORD_LIMIT:
                raise ValueError(f"{name} must be at least {MIN_RECORD_LIMIT} bytes, got {value}")


class Host:
    """Runs one task until :meth:`stop`; ``ready`` is set once its state is restored."""

    def __init__(self, task: Task, config: HostConfig) -> None:
        self.task, self.config = task, config
        self.log = logging.getLogger(task.name)
        # every client reports its errors here: the cluster's absence is what readiness needs from them
        self.clients = ClientFactory(config.bootstrap_servers, {"error_cb": self._client_error, **config.client_config})
        self._probed = 0.0  # when the loop last asked for metadata (idle, or while the cluster was unreachable)
        self._heard = time.monotonic()  # when the loop last had input or an answer from the cluster
        self.counters = PipelineCounters()
        self.metrics = Metrics(config.stall_seconds, self.counters)  # served by runtime.metrics.MetricsServer
        self.ready = self.metrics.ready
        self.limits = RecordLimits()  # learned at start (kafka.record_limits)
        self.deliver: Deliver | None = None  # built by run(): it opens the producer
        self.inputs: Inputs | None = None
        self.checkpoint = Checkpoint(config.commit_interval_ms, config.commit_linger_ms)
        self.kernels_compiled = 0  # numba kernels this run compiled (0 when all came from the cache)
        self._late_compiles = CompileWatch(self._compiled_late)
        self._compile_logged = 0.0  # when the warm-up's last "compiling numba kernels" line was logged
        self.gc = GcWatch()  # the collector's pauses while the loop runs (runtime.gcwatch)
        self.trace = LatencyTrace(kept=config.latency_samples)  # batches followed to their commit (runtime.trace)
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self.context = Context(self)  # all a task sees of the host (runtime.task)
        self.task_state = TaskState.CREATED

    def stop(self) -> None:
        """Ask the loop to finish its batch, commit and close (safe from signal handlers and threads)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def events(self) -> int:
        """Input records processed and committed."""
        return self.counters.events

    @property
    def delivery(self):
        return self.deliver.delivery if self.deliver else None

    @property
    def dead_letters(self):
        return self.deliver.dead_letters if self.deliver else None

    def _advance(self, to: TaskState) -> None:
        self.task_state = self.task_state.advance(to)

    # --- start --------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Run until :meth:`stop`; return the final statistics."""
        cfg, task = self.config, self.task
        topics = task.topics()
        # a missing ACL named now, not a stalled loop; then the topics the task needs, or a clear error.  A node
        # down at start (a rolling restart, a crash) may leave a question unanswered for seconds: asked again.
        self._while_away(lambda: check_access(self.clients, topics.inputs, topics.outputs), START_PATIENCE,
                         "the access check")
        self._while_away(lambda: task.before_clients(self.context), START_PATIENCE, "the topics' check")
        warming = WarmUp(task.warm_up, self._compiling)  # while the clients below connect
        slot = None if cfg.transactional_id else InstanceSlot(cfg.group_id)  # one set of slots per group
        transactional_id = cfg.transactional_id or slot.transactional_id
        self.limits = self._while_away(lambda: discover(self.clients, topics.outputs, topics.inputs,
                                                        cfg.max_output_bytes, cfg.max_record_bytes),
                                       START_PATIENCE, "the record limits")
        try:
            self.deliver = Deliver(self.clients, cfg.delivery, transactional_id, cfg.queue_bounds, cfg.output_format,
                                   self.limits, cfg.topics)
            self.metrics.dead_letters = self.deliver.dead_letters.by_reason
            self.log.info("delivery: %s%s", self.deliver.mode, f" (transactional.id {transactional_id})"
                          if self.deliver.mode == "transactional" else "")
            self.inputs = Inputs(self.clients, cfg.group_id, cfg.queue_bounds, cfg.session_timeout_ms,
                                 cfg.start_from_groups, state_topic=topics.state)
            self._consumer = self.inputs.events
            task.after_clients(self.context)
            if topics.group:
                self.inputs.join(self._before_revoke, topics.group)
            self._warmed_up(warming)
            with collector_paused():  # no full passes over what the restore allocates (runtime.gcwatch)
                self._advance(TaskState.RESTORING)
                task.restore(self.context)
            freeze_long_lived()  # the state just restored out of the collector's full passes (runtime.gcwatch)
            self.gc.__enter__()
            self._publish()
            self._advance(TaskState.RUNNING)
            self.ready.set()
            self._loop()
        finally:
            self._late_compiles.__exit__()
            self.gc.__exit__()
            try:
                self._abandon_in_flight()
                if self.deliver is not None:
                    self.deliver.close()
            finally:
                if self.inputs is not None:
                    self.inputs.close()
                task.close()
                self._advance(TaskState.CLOSED)
                if slot is not None:
                    slot.release()
        return self.stats()

    def _compiling(self, step: int, steps: int, name: str, kernel: str, count: int) -> None:
        """A kernel of the warm-up starts compiling (on the warm-up's thread): logged, a line a second at most."""
        self.metrics.beat()
        if time.monotonic() - self._compile_logged >= 1.0 or count == 1:
            self._compile_logged = time.monotonic()
            self.log.info("compiling numba kernels: step %d/%d (%s), %d compiled so far (%s)", step, steps, name,
                          count, kernel)

    def _warmed_up(self, warming: WarmUp) -> None:
        """Wait for the task's kernels, from numba's cache or compiled with each one logged; kernels compiled later
        (first use of a code path) are logged too, so a slow batch is never a silent one."""
        started = time.monotonic()
        self.kernels_compiled = compiled = warming.compiled()
        waited = time.monotonic() - started
        if compiled:
            self.log.info("kernels ready (%d compiled, the start waited %.1fs for them; `pubsub warmup` compiles "
                          "them once per installation)", compiled, waited)
        else:
            self.log.info("kernels ready (from numba's cache, the start waited %.1fs for them)", waited)
        self._late_compiles.__enter__()

    def _compiled_late(self, kernel: str, count: int) -> None:
        self.kernels_compiled += 1
        self.log.info("compiling numba kernel %s (its first use since installation; `pubsub warmup` compiles it "
                      "ahead)", kernel)

    def send(self, out: Outputs) -> int:
        """Produce what a task handed back outside a batch (its restore, its side inputs) into the open
        transaction, after the commit in flight; the number of notifications produced."""
        self._settle()
        produced = self.deliver.send(out)
        self.counters.notifications += produced
        return produced

    def commit_outputs(self) -> bool:
        """Commit what was produced without input offsets (a restore's dead letters); False if it failed."""
        return self._guarded(None, self._commit, None)

    # --- the cluster's presence ---------------------------------------------------------

    def _client_error(self, err: KafkaError) -> None:
        """librdkafka's error callback (every client's): all brokers down makes the service not ready."""
        if err.code() == KafkaError._ALL_BROKERS_DOWN and not self.metrics.unreachable:
            self.metrics.unreachable = True
            self.log.warning("the Kafka cluster is unreachable (%s): waiting for it, not ready", err.str())

    def _check_presence(self) -> None:
        """No input for :data:`IDLE_PROBE` seconds: a metadata request, at most that often.  librdkafka says
        ``_ALL_BROKERS_DOWN`` only once every broker it knows has failed a connection, and a broker it has not
        needed since the start is not counted as down: after a whole cluster's loss that can take long, or never
        come, while /readyz ought to say so within seconds."""
        now = time.monotonic()
        if now - self._heard < IDLE_PROBE or now - self._probed < IDLE_PROBE:
            return
        self._probed = now
        try:
            self._consumer.list_topics(timeout=PROBE_TIMEOUT)
        except KafkaException as exc:
            if not self.metrics.unreachable:
                self.metrics.unreachable = True
                self.log.warning("the Kafka cluster is unreachable (no broker answered a metadata request in %.0fs: "
                                 "%s): waiting for it, not ready", PROBE_TIMEOUT, exc.args[0].str())
            return
        self._heard = time.monotonic()

    def _answers(self) -> bool:
        """While the cluster is unreachable, a metadata request a second: whether it answers again."""
        if time.monotonic() - self._probed < 1.0:
            return False
        self._probed = time.monotonic()
        try:
            self._consumer.list_topics(timeout=1.0)
        except KafkaException:
            return False
        return True

    def _renew(self, consumer: Consumer) -> None:
        """The cluster answers again after an outage.  A producer that knew its old coordinators can wait on them
        for good (``send_offsets_to_transaction``, confluentinc/librdkafka#5456; 15 s until its watchdog): start
        afresh at once instead, as after a failed delivery, with a new producer and the inputs and the task back at
        the committed offsets (what was consumed and not committed is consumed again)."""
        self.metrics.unreachable = False
        self.log.info("the Kafka cluster answers again: ready; a new producer, input again from the committed offsets")
        self._abandon_in_flight(close=False)
        self.checkpoint.failed(DeliveryError("the cluster came back"))
        self._recover(consumer)

    # --- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        cfg, task, consumer = self.config, self.task, self._consumer
        cp = self.checkpoint
        state = task.topics().state
        meter = RateMeter(cfg.progress_interval)
        while not self._stop.is_set():
            progressed = True  # a turn with nothing to do counts as progress, a failed delivery does not
            if cp.in_flight.done():  # what was prepared meanwhile goes out; a failed commit is replayed now
                progressed = self._guarded(consumer, self._deliver_prepared)
            if state is not None:
                changes = self.inputs.changes()
                if changes:
                    # the batches' outputs are committed apart from the changes' (a failure replays only batches)
                    if self._open():
                        progressed = self._guarded(consumer, self._commit, consumer)
                    out = Outputs()
                    task.on_state(changes, out)
                    self.counters.stored_notifications += self.send(out)
                    progressed = self._guarded(consumer, self._commit, consumer) and progressed
            progressed = self._guarded(consumer, self._poll) and progressed
            size = 1 if cp.suspects else cfg.batch_size
            # nothing open: wait for input; a transaction open and the interval running: look without waiting;
            # a commit in flight: look again soon, to produce what was prepared once it has ended
            t = time.perf_counter()
            batch = self.inputs.batch(size, min(cp.uncommitted.lingering(), 0.02) if cp.uncommitted
                                      else 0.005 if cp.in_flight else 0.2)
            if batch:
                self.counters.lap("consume", t)
                self._heard = time.monotonic()
            elif not self.metrics.unreachable:
                self._check_presence()
            if self.metrics.unreachable and (batch or self._answers()):
                self._renew(consumer)  # the batch is consumed again, after the rewind
                continue
            progressed = self._guarded(consumer, task.assigned) and progressed
            began = time.monotonic()
            if batch:
                progressed = self._guarded(consumer, self._on_batch, batch) and progressed
                self.metrics.batch_seconds.observe(time.monotonic() - began)
            commit = cp.due(drained=len(batch) < size, pending_outputs=self.deliver.pending())
            if commit:
                # records tried one by one (suspects) are committed alone, before the next one is taken
                overlap = cfg.overlap_commits and not cp.suspects and cp.uncommitted
                progressed = self._guarded(consumer, self._start_commit if overlap else self._commit,
                                           consumer) and progressed
            if batch or commit:
                self.counters.busy_seconds += time.monotonic() - began
            if progressed:
                self.metrics.beat()
            self._publish()
            self.metrics.after_iteration(consumer, task.gauges().get("engine"), cp.known)
            if meter.due():
                self._log_progress(meter)
            if task.snapshot_due():
                self._snapshot()
        if self._open():
            self._guarded(consumer, self._commit, consumer)  # a clean stop: what was processed is committed
        if task.snapshot_due(force=True):
            self._snapshot()  # a clean stop: the next start replays nothing

    def _poll(self) -> None:
        out = Outputs()
        self.task.poll(out)
        if out.handed():
            self.send(out)

    def _on_batch(self, msgs: list[Message]) -> None:
        """screen -> the task -> prepared; produced at once unless a commit is in flight (then kept for the next
        transaction, at most a batch of it: back-pressure)."""
        cp = self.checkpoint
        if cp.in_flight:
            self.counters.overlapped += 1
        if any([m.error() is not None for m in msgs]):
            msgs = [m for m in msgs if has_data(m)]  # end-of-partition events; fatal errors raise
        offsets = next_offsets(msgs)
        self.metrics.batch_records.observe(len(msgs))
        kind, stamp = msgs[0].timestamp() if msgs else (0, 0)
        stamp = stamp if kind else 0
        sample = self.trace.start(msgs[0].key(), stamp, time.time()) if msgs else None
        stages = self.counters.stage_seconds
        decode, match = stages.get("decode", 0.0), stages.get("match", 0.0)
        kept, rejects = cp.screen(msgs, self.limits.max_record_bytes, self.task.reports_bad_input)
        out = Outputs()
        processed = self._process(kept, out, rejects) if kept else 0
        if sample is not None:
            sample.decode, sample.match = stages.get("decode", 0.0) - decode, stages.get("match", 0.0) - match
        cp.prepare(Prepared(out, rejects, offsets, processed, len(msgs), stamp, sample))
        if not cp.in_flight or cp.in_flight.done() or cp.prepared_records >= self.config.batch_size:
            self._deliver_prepared()

    def _process(self, kept: list[Message], out: Outputs, rejects: list) -> int:
        """The task on a batch.  If it raises, the batch is a suspect: alone, its record is dead-lettered with the
        reason; with others, they are replayed one by one (as a refusal of many records is) to find it."""
        try:
            return self.task.process(kept, out)
        except (DeliveryError, KafkaException):
            raise
        except Exception as exc:  # noqa: BLE001 -- a record the task cannot process must not stop the pipeline
            reason = f"processing failed: {type(exc).__name__}: {exc}"
            self.log.exception("%s (%d records)", reason, len(kept))
            if len(kept) == 1:
                rejects.append((kept[0], reason))
                out.clear()  # the task's partial outputs are dropped with the record
                return 0
            raise DeliveryError(reason, {(m.topic(), m.partition(), m.offset()): reason for m in kept}) from exc

    def _deliver_prepared(self) -> None:
        """Settle the commit in flight, then produce the prepared batches into the next transaction."""
        self._settle()
        for p in self.checkpoint.take_prepared():
            t = time.perf_counter()
            produced = self.deliver.send(p.outputs, p.rejects)
            self.counters.lap("produce", t)
            if p.sample is not None:
                p.sample.produced = time.time()
            self.checkpoint.uncommitted.add(p.offsets, p.events, produced, p.stamp, p.sample)
            self.counters.sized(p.records)

    def _commit(self, consumer: Consumer | None) -> None:
        """Commit the outputs delivered so far with the offsets of every batch since the last commit; wait for it."""
        self._deliver_prepared()
        self._before_commit()
        t = time.perf_counter()
        done = self.checkpoint.uncommitted
        self.metrics.committing_since = time.monotonic()  # /readyz: not ready once it has waited too long
        try:
            self.deliver.commit(consumer, done.topic_partitions() if consumer is not None else None)
        finally:
            self.metrics.committing_since = None
        self.counters.lap("commit", t)
        took = time.perf_counter() - t
        self.metrics.commit_seconds.observe(took)
        self._count_committed(done, time.time())
        done.clear()
        self.checkpoint.pace(took)

    def _start_commit(self, consumer: Consumer) -> None:
        """:meth:`_commit` on the commit thread (``checkpoint.InFlight``): the loop goes on with the next batch.

        The batches it holds are counted once it has succeeded (:meth:`_settle`); if it fails, the
        ``DeliveryError`` comes out of the settle, inside a guarded step, and every batch since the last
        successful commit is replayed as when the loop waited for it.
        """
        self._deliver_prepared()
        self._before_commit()
        cp = self.checkpoint
        done, cp.uncommitted = cp.uncommitted, cp.new_uncommitted()
        cp.in_flight.start(functools.partial(self.deliver.commit, consumer, done.topic_partitions()), done)

    def _before_commit(self) -> None:
        """What the task writes with the next commit (state changes not written with a batch), into it."""
        out = Outputs()
        self.task.before_commit(out)
        self.deliver.send(out)

    def _settle(self) -> None:
        """Wait for the commit in flight, if any (the time the loop waits counts as its commit stage)."""
        in_flight = self.checkpoint.in_flight
        if not in_flight:
            return
        t = time.perf_counter()
        try:
            done = in_flight.result()
        finally:
            self.counters.lap("commit", t)
        took = in_flight.took
        self.metrics.commit_seconds.observe(took)
        self._count_committed(done, in_flight.ended)
        self.checkpoint.pace(took, time.monotonic() - (time.time() - in_flight.ended))

    def _count_committed(self, done: Uncommitted, at: float) -> None:
        """A commit succeeded at ``at`` (``time.time()``): its batches counted, their wait for it observed."""
        self.checkpoint.committed(done.offsets)
        observe = self.metrics.event_commit_seconds.observe
        for stamp in done.stamps:
            if stamp > 0:
                observe(max(at - stamp / 1000, 0.0))
        if done.samples:
            self.trace.committed(done.samples, at)
        self.counters.events += done.events
        self.counters.notifications += done.notifications
        self.counters.batches += done.batches
        self.counters.commits += 1

    def _open(self) -> bool:
        return self.checkpoint.open(self.deliver.pending())

    def _snapshot(self) -> None:
        """Snapshot the task's state; outputs not yet committed are committed first (the snapshot must not be
        ahead of them).  If that commit fails, the batches are replayed and the snapshot waits for its next turn."""
        if self._open() and not self._guarded(self._consumer, self._commit, self._consumer):
            return
        self.task.snapshot()
        freeze_long_lived()  # the state the snapshot covers is long-lived

    def _before_revoke(self, consumer: Consumer) -> None:
        """Partitions are about to be taken away: commit what was processed of them while they are still ours.

        A failure is recovered without a rewind (the next assignment starts from the committed offsets anyway).
        A fenced producer commits nothing: the instance that took over replays it.
        """
        if self._open() and self.deliver.delivery.fenced is None:
            self._guarded(None, self._commit, consumer)
        self.checkpoint.known.clear()  # another instance may commit them next: the lag counts from the positions
        self.task.revoked()

    def _abandon_in_flight(self, close: bool = True) -> None:
        """After a failure or on the way out: let a commit in flight end; what it held is replayed if it failed."""
        in_flight = self.checkpoint.in_flight
        if in_flight:
            try:
                in_flight.result()
            except Exception as exc:  # noqa: BLE001 -- replayed from the committed offsets, here or by the next start
                self.log.debug("commit in flight abandoned: %s", exc)
        if close:
            in_flight.close()

    def _guarded(self, consumer: Consumer | None, step: Callable[..., None], *args: Any) -> bool:
        """Run a step that produces and commits; if it fails, replay from the committed offsets (kafka.delivery).

        Input records whose outputs the broker refused for what they are (``DeliveryError.refused``) are
        dead-lettered on the replay (``Checkpoint.screen``); a refusal shared by several records splits the replay
        into batches of one record until the committed offsets pass them.  Other failures (a broker gone, or a
        consumer's call that failed for want of the cluster) are retried as long as they last, and /healthz turns
        unhealthy meanwhile.  False if the step failed.  A fenced producer (``kafka.delivery.Fenced``) is not a
        ``DeliveryError``: it stops the host.
        """
        try:
            step(*args)
            return True
        except KafkaException as exc:  # a consumer's call (a restore, a rewind) while the cluster is away
            return self._replay(consumer, DeliveryError(f"{getattr(step, '__name__', 'step')} failed: {exc.args[0]}"))
        except DeliveryError as exc:
            return self._replay(consumer, exc)

    def _replay(self, consumer: Consumer | None, exc: DeliveryError) -> bool:
        """What :meth:`_guarded` does with a failed step: the inputs and the task back at the committed offsets."""
        self._abandon_in_flight(close=False)  # nothing is in flight when a step fails, but be sure of it
        self.checkpoint.failed(exc)
        self.counters.replays += 1
        self.log.error("not delivered (%s): new producer, input again from the committed offsets%s", exc,
                       f"; {len(exc.refused)} refused records go to {self.config.topics.dead_letter}" if exc.refused else "")
        self._recover(consumer)
        return False

    def _recover(self, consumer: Consumer | None) -> None:
        """The producer and the consumer first: recover waits for the cluster (a new transactional producer may wait
        minutes for its coordinator), and a task's rewind may read it (the table service restores from its
        changelog).  Not ready meanwhile: the loop serves nothing, and polls no client whose error callback would
        say the cluster is away."""
        self.metrics.recovering = True
        before, self.task_state = self.task_state, self.task_state.advance(TaskState.REWINDING)
        try:
            if self.deliver.recover(consumer, self._stop.is_set, lambda: None):
                self._while_away(self.task.rewind)
        finally:
            self.metrics.recovering = False
            self._advance(before)

    def _while_away(self, step: Callable[[], T], patience: float | None = None, what: str | None = None) -> T:
        """``step()``, again every second while the cluster does not answer it (until :meth:`stop`); its result.

        ``patience`` (seconds): only a transient failure (a timeout, a retriable error) is retried, for that long;
        then, or for any other error, the step's error is raised with what the cluster last said."""
        deadline = None if patience is None else time.monotonic() + patience
        while True:
            try:
                return step()
            except (KafkaException, FutureTimeout) as exc:
                error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
                said = error if error is not None else "no answer in time"
                if self._stop.is_set():
                    raise
                if deadline is not None:
                    if error is not None and not transient(error):
                        raise
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{what or 'a step'}: the Kafka cluster did not answer within "
                                           f"{patience:.0f}s: {said}") from exc
                self.log.warning("%s: %s; again in 1s", what or getattr(step, "__name__", "step"), said)
                time.sleep(1)

    # --- what it shows ----------------------------------------------------------------

    def _publish(self) -> None:
        """Gauges for /metrics, set from the loop's thread (the HTTP thread reads only what is published)."""
        g = self.task.gauges()
        self.metrics.publish(g.get("subscriptions", 0), g.get("changes", {}),
                             self.deliver.queue() if self.deliver else None,
                             delivery=self.deliver.mode if self.deliver else "", group_id=self.config.group_id,
                             **g.get("info", {}))

    def _log_progress(self, meter: RateMeter) -> None:
        rates = meter.tick({"events": self.counters.events, "notifications": self.counters.notifications})
        consumer = self._consumer
        lag, assignment = consumer_lag(consumer, self.checkpoint.known), consumer.assignment()
        self.log.info("%s records/s, %s notifications/s, lag %s, %d partitions, %s, %d dead letters",
                      human(rates["events"]), human(rates["notifications"]), human(lag), len(assignment),
                      self.task.progress(), self.deliver.dead_letters.total)

    def stats(self) -> dict[str, Any]:
        c, d = self.counters, self.deliver
        return {
            "delivery": d.mode if d else None,
            "events": c.events,
            "notifications": c.notifications,
            "batches": c.batches,
            "commits": c.commits,
            "busy_seconds": round(c.busy_seconds, 3),
            "stage_seconds": {k: round(v, 3) for k, v in c.stage_seconds.items()},
            "commit_seconds": {k: round(v, 3) for k, v in d.delivery.commit_seconds.items()} if d else {},
            "batch_sizes": dict(c.batch_sizes),
            "dead_letters": dict(d.dead_letters.counts) if d else {},
            "dead_letters_truncated": d.dead_letters.truncated if d else 0,
            "replays": c.replays,
            "overlapped_batches": c.overlapped,
            "gc": self.gc.stats(),  # collections by generation while the loop ran, their seconds, the longest
            "limits": {"output": self.limits.output, "max_record_bytes": self.limits.max_record_bytes},
            "kernels_compiled": self.kernels_compiled,
            **({"latency_samples": self.trace.stats()} if self.trace.kept else {}),  # by part (runtime.trace)
            "task_state": self.task_state.value,
            "task": self.task.stats(),  # the task's own counts, apart from the host's (a task may count events too)
        }
