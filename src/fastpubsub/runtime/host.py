"""The host: the one loop that runs a service's task between Kafka topics (docs/design/runtime.md).

Like Kafka Streams' ``StreamThread``, one loop owns everything that is not the task's own logic: the start (the
task's hooks in their order, the record limits, the sink, the inputs, the kernels, the restore), each turn (state
changes, side inputs, a batch screened and processed, a commit when the checkpoint says so), replay after a failed
delivery (``kafka.delivery.DeliveryError``: the inputs and the task back at the committed offsets, a poison record
isolated and dead-lettered; ``kafka.delivery.Fenced`` stops the host), and what it shows (``/metrics``, progress
lines, the final statistics).  Its parts live beside it: the door to the task (``runtime.task``), the commit
(``runtime.commit``), the cluster's presence during outages (``runtime.presence``), what is uncommitted
(``runtime.checkpoint``), the inputs (``runtime.inputs``) and the sink (``runtime.sink``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, TypeVar

from confluent_kafka import Consumer, Message

from fastpubsub.engine import PeriodicRelease, map_large_blocks
from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.admin import check_access
from fastpubsub.kafka.record_limits import RecordLimits, discover

from .checkpoint import Checkpoint, Prepared, next_offsets
from .commit import CommitPath
from .compiles import Kernels
from .config import HostConfig
from .counters import PipelineCounters
from .gcwatch import GcWatch, collector_paused, freeze_long_lived
from .inputs import Inputs, has_data
from .instance import InstanceSlot
from .metrics import Metrics, consumer_lag
from .presence import Presence
from .progress import RateMeter, human
from .recovery import Recovery, isolating, while_away
from .sink import Sink
from .task import Context, Outputs, Task, TaskState, Topics
from .trace import LatencyTrace

T = TypeVar("T")

#: Seconds a service's start asks the cluster again while a question goes unanswered (a node down at start).
START_PATIENCE = 120.0


class Host:
    """Runs one task until :meth:`stop`; ``ready`` is set once its state is restored."""

    def __init__(self, task: Task, config: HostConfig) -> None:
        self.task, self.config = task, config
        self.log = logging.getLogger(task.name)
        # large blocks mapped apart, so that churn does not grow the heap around its holes (engine/heap.py)
        self.large_blocks_mapped = map_large_blocks()
        self.release_free_pages = PeriodicRelease()  # and the pages batches free between long-lived blocks
        self.counters = PipelineCounters()
        self.metrics = Metrics(config.stall_seconds, self.counters)  # served by runtime.metrics.MetricsServer
        self.ready = self.metrics.ready
        self.presence = Presence(self.metrics, self.log, self._check_access)
        # every client reports its errors here: the cluster's absence is what readiness needs from them
        self.clients = ClientFactory(config.bootstrap_servers,
                                     {"error_cb": self.presence.client_error, **config.client_config})
        self.limits = RecordLimits()  # learned at start (kafka.record_limits)
        self.sink: Sink | None = None  # built by run(): it opens the producer
        self.inputs: Inputs | None = None
        self.checkpoint = Checkpoint(config.commit_interval_ms, config.commit_linger_ms)
        self.commits: CommitPath | None = None  # built with the sink
        self.kernels = Kernels(self.log, self.metrics.beat)
        self.gc = GcWatch()  # the collector's pauses while the loop runs (runtime.gcwatch)
        self.trace = LatencyTrace(kept=config.latency_samples)  # batches followed to their commit (runtime.trace)
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self.recovery = Recovery(self.checkpoint, self.counters, self.metrics, self.presence, self.log,
                                 config.topics.dead_letter,
                                 lambda: self.sink, self._rewind, self._stop.is_set)
        self._guarded = self.recovery.guarded  # a step of the loop, replayed from the committed offsets if it fails
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
    def delivery(self):  # kafka.delivery.Delivery, once started
        return self.sink and self.sink.delivery

    @property
    def dead_letters(self):  # kafka.deadletter.DeadLetters, once started
        return self.sink and self.sink.dead_letters

    def _advance(self, to: TaskState) -> None:
        self.task_state = self.task_state.advance(to)

    # --- start and stop ------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Run until :meth:`stop`; return the final statistics."""
        cfg, task = self.config, self.task
        topics = task.topics()
        # a missing ACL named now, not a stalled loop; then the topics the task needs, or a clear error.  A node
        # down at start (a rolling restart, a crash) may leave a question unanswered for seconds: asked again.
        self._while_away(self._check_access, START_PATIENCE, "the access check")
        self._while_away(lambda: task.before_clients(self.context), START_PATIENCE, "the topics' check")
        self.kernels.warm_up(task.warm_up)  # on a thread, while the clients below connect
        slot = None if cfg.transactional_id else InstanceSlot(cfg.group_id)  # one set of slots per group
        self.limits = self._while_away(lambda: discover(self.clients, topics.outputs, topics.inputs,
                                                        cfg.max_output_bytes, cfg.max_record_bytes),
                                       START_PATIENCE, "the record limits")
        try:
            self._open_clients(cfg.transactional_id or slot.transactional_id, topics)
            task.after_clients(self.context)
            if topics.group:
                self.inputs.join(self._before_revoke, topics.group)
            self.kernels.wait()
            self._restore()
            self._loop()
        finally:
            self._close(slot)
        return self.stats()

    def _check_access(self) -> None:
        """A clear error naming each topic and operation the principal lacks (``kafka.admin.check_access``)."""
        topics = self.task.topics()
        check_access(self.clients, topics.inputs, topics.outputs)

    def _open_clients(self, transactional_id: str, topics: Topics) -> None:
        """The sink (the producer and its transaction), the commit path on it, and the consumers."""
        cfg = self.config
        self.sink = Sink(self.clients, cfg.delivery, transactional_id, cfg.queue_bounds, cfg.output_format,
                         self.limits, cfg.topics)
        self.commits = CommitPath(self.checkpoint, self.sink, self.task.before_commit, self.counters, self.metrics,
                                  self.trace)
        self.metrics.dead_letters = self.sink.dead_letters.by_reason
        self.log.info("delivery: %s%s", self.sink.mode, f" (transactional.id {transactional_id})"
                      if self.sink.mode == "transactional" else "")
        self.inputs = Inputs(self.clients, cfg.group_id, cfg.queue_bounds, cfg.session_timeout_ms,
                             cfg.start_from_groups, state_topic=topics.state)
        self._consumer = self.inputs.group

    def _restore(self) -> None:
        """The task's state restored, then frozen out of the collector's full passes (runtime.gcwatch); ready."""
        with collector_paused():  # no full passes over what the restore allocates
            self._advance(TaskState.RESTORING)
            self.task.restore(self.context)
        freeze_long_lived()
        self.gc.__enter__()
        self._publish()
        self._advance(TaskState.RUNNING)
        self.ready.set()

    def _close(self, slot: InstanceSlot | None) -> None:
        self.kernels.close()
        self.gc.__exit__()
        try:
            self.checkpoint.abandon_in_flight()
            if self.sink is not None:
                self.sink.close()
        finally:
            if self.inputs is not None:
                self.inputs.close()
            self.task.close()
            self._advance(TaskState.CLOSED)
            if slot is not None:
                slot.release()

    # --- the loop ------------------------------------------------------------------------

    def _loop(self) -> None:
        """Each turn its steps; a step that fails was replayed (:meth:`_guarded`) and the turn is no progress."""
        consumer, meter = self._consumer, RateMeter(self.config.progress_interval)
        while not self._stop.is_set():
            if self.presence.waiting():  # refused by the authorizer: no turn until the access is asked about again
                self.metrics.beat()
                continue
            done = [self._settle_in_flight(consumer), self._apply_state_changes(consumer),
                    self._guarded(consumer, self._poll)]
            batch, size = self._consume()
            if self.presence.returned(batch, consumer):
                self.recovery.renew(consumer, self.presence.renewed())  # the batch is consumed again, after the rewind
                continue
            if not self._guarded(consumer, self.task.assigned):  # replayed: the batch comes again after the rewind
                self._after_turn(False, meter)
                continue
            self._after_turn(all([*done, self._process_and_commit(consumer, batch, size)]), meter)
        if self.commits.open():
            self._guarded(consumer, self.commits.commit, consumer)  # a clean stop: what was processed is committed
        if self.task.snapshot_due(force=True):
            self._snapshot()  # a clean stop: the next start replays nothing

    def _settle_in_flight(self, consumer: Consumer) -> bool:
        """A commit in flight that has ended: what was prepared meanwhile goes out; a failed one is replayed now."""
        return self._guarded(consumer, self.commits.deliver_prepared) if self.checkpoint.in_flight.done() else True

    def _apply_state_changes(self, consumer: Consumer) -> bool:
        """State changes (subscriptions) that arrived: applied and committed apart from the batches' outputs (a
        failure replays only batches)."""
        changes = self.inputs.state_changes() if self.inputs.state is not None else None
        if not changes:
            return True
        done = self._guarded(consumer, self.commits.commit, consumer) if self.commits.open() else True
        out = Outputs()
        self.task.on_state(changes, out)
        self.counters.stored_notifications += self.send(out)
        return self._guarded(consumer, self.commits.commit, consumer) and done

    def _poll(self) -> None:
        out = Outputs()
        self.task.poll(out)
        if out.handed():
            self.send(out)

    def _consume(self) -> tuple[list[Message], int]:
        """A batch (of one record while suspects are tried), and the size asked for.  Nothing open: wait for input;
        a transaction open and the interval running: look without waiting; a commit in flight: look again soon, to
        produce what was prepared once it has ended."""
        cp = self.checkpoint
        size = 1 if cp.suspects else self.config.batch_size
        t = time.perf_counter()
        batch = self.inputs.batch(size, min(cp.uncommitted.lingering(), 0.02) if cp.uncommitted
                                  else 0.005 if cp.in_flight else 0.2)
        if batch:
            self.counters.lap("consume", t)
        return batch, size

    def _process_and_commit(self, consumer: Consumer, batch: list[Message], size: int) -> bool:
        """The batch processed, then a commit if one is due; records tried one by one (suspects) are committed
        alone, before the next one is taken."""
        cp, began, done = self.checkpoint, time.monotonic(), True
        if batch:
            done = self._guarded(consumer, self._on_batch, batch)
            self.metrics.batch_seconds.observe(time.monotonic() - began)
        commit = cp.due(drained=len(batch) < size, pending_outputs=self.sink.pending())
        if commit:
            overlap = self.config.overlap_commits and not cp.suspects and bool(cp.uncommitted)
            done = self._guarded(consumer, self.commits.commit, consumer, overlap) and done
        if batch or commit:
            self.counters.busy_seconds += time.monotonic() - began
        return done

    def _after_turn(self, progressed: bool, meter: RateMeter) -> None:
        """Liveness (a turn with nothing to do counts as progress, a failed step does not), gauges, progress line,
        snapshot, free heap pages handed back."""
        if progressed:
            self.metrics.beat()
        self._publish()
        self.metrics.after_iteration(self._consumer, self.task.gauges().get("engine"), self.checkpoint.known)
        if meter.due():
            self._log_progress(meter)
        if self.task.snapshot_due():
            self._snapshot()
        self.release_free_pages()

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
        processed = isolating(self.task.process, kept, out, rejects, self.log) if kept else 0
        if sample is not None:
            sample.decode, sample.match = stages.get("decode", 0.0) - decode, stages.get("match", 0.0) - match
        cp.prepare(Prepared(out, rejects, offsets, processed, len(msgs), stamp, sample))
        if not cp.in_flight or cp.in_flight.done() or cp.prepared_records >= self.config.batch_size:
            self.commits.deliver_prepared()

    # --- what the context does for a task ---------------------------------------------------

    def send(self, out: Outputs) -> int:
        """Produce what a task handed back outside a batch (its restore, its side inputs) into the open
        transaction, after the commit in flight; the number of notifications produced."""
        self.commits.settle()
        produced = self.sink.send(out)
        self.counters.notifications += produced
        return produced

    def commit_outputs(self) -> bool:
        """Commit what was produced without input offsets (a restore's dead letters); False if it failed."""
        return self._guarded(None, self.commits.commit, None)

    def _snapshot(self) -> None:
        """Snapshot the task's state; outputs not yet committed are committed first (the snapshot must not be
        ahead of them).  If that commit fails, the batches are replayed and the snapshot waits for its next turn."""
        if self.commits.open() and not self._guarded(self._consumer, self.commits.commit, self._consumer):
            return
        self.task.snapshot()
        freeze_long_lived()  # the state the snapshot covers is long-lived

    def _before_revoke(self, consumer: Consumer) -> None:
        """Partitions are about to be taken away: commit what was processed of them while they are still ours.

        A failure is recovered without a rewind (the next assignment starts from the committed offsets anyway).
        A fenced producer commits nothing: the instance that took over replays it.
        """
        if self.commits.open() and self.sink.delivery.fenced is None:
            self._guarded(None, self.commits.commit, consumer)
        self.checkpoint.known.clear()  # another instance may commit them next: the lag counts from the positions
        self.task.revoked()

    def _rewind(self) -> None:
        """The task's state back at the committed offsets (``Recovery.recover``), again while the cluster is away."""
        before, self.task_state = self.task_state, self.task_state.advance(TaskState.REWINDING)
        try:
            self._while_away(self.task.rewind)
        finally:
            self._advance(before)

    def _while_away(self, step: Callable[[], T], patience: float | None = None, what: str | None = None) -> T:
        return while_away(step, self._stop.is_set, self.log, patience, what)

    # --- what it shows ----------------------------------------------------------------------

    def _publish(self) -> None:
        """Gauges for /metrics, set from the loop's thread (the HTTP thread reads only what is published)."""
        g = self.task.gauges()
        self.metrics.publish(g.get("subscriptions", 0), g.get("changes", {}),
                             self.sink.queue() if self.sink else None,
                             delivery=self.sink.mode if self.sink else "", group_id=self.config.group_id,
                             **g.get("info", {}))

    def _log_progress(self, meter: RateMeter) -> None:
        rates = meter.tick({"events": self.counters.events, "notifications": self.counters.notifications})
        consumer = self._consumer
        lag, assignment = consumer_lag(consumer, self.checkpoint.known), consumer.assignment()
        self.log.info("%s records/s, %s notifications/s, lag %s, %d partitions, %s, %d dead letters",
                      human(rates["events"]), human(rates["notifications"]), human(lag), len(assignment),
                      self.task.progress(), self.sink.dead_letters.total)

    def stats(self) -> dict[str, Any]:
        """The final statistics: the runtime's counts, and the task's own under ``task``."""
        nothing_sent = {"delivery": None, "commit_seconds": {}, "dead_letters": {}, "dead_letters_truncated": 0}
        return {
            **self.counters.stats(), **(self.sink.stats() if self.sink else nothing_sent),
            "gc": self.gc.stats(),  # collections by generation while the loop ran, their seconds, the longest
            "limits": {"output": self.limits.output, "max_record_bytes": self.limits.max_record_bytes},
            "kernels_compiled": self.kernels.compiled,
            **({"latency_samples": self.trace.stats()} if self.trace.kept else {}),  # by part (runtime.trace)
            "task_state": self.task_state.value,
            "task": self.task.stats(),  # the task's own counts, apart from the host's (a task may count events too)
        }
