"""The commit path: the outputs of the batches since the last commit made durable with their input offsets.

:meth:`CommitPath.commit` is the one method that commits, in numbered steps as quix-streams' ``Checkpoint.commit``;
the checkpoint (``runtime.checkpoint``) says when, and what is uncommitted, in flight or prepared.  With
``--overlap-commits`` step 3 runs on the commit thread (``checkpoint.InFlight``) and the loop goes on with the next
batch; :meth:`CommitPath.settle` waits for it before anything else is produced, and counts it then.
"""

from __future__ import annotations

import functools
import time
from typing import Callable

from confluent_kafka import Consumer

from .checkpoint import Checkpoint, Uncommitted
from .counters import PipelineCounters
from .sink import Sink
from .metrics import Metrics
from .task import Outputs
from .trace import LatencyTrace


class CommitPath:
    """Produces what the checkpoint prepared and commits it, on the loop's thread or the commit thread."""

    def __init__(self, checkpoint: Checkpoint, sink: Sink, before_commit: Callable[[Outputs], None],
                 counters: PipelineCounters, metrics: Metrics, trace: LatencyTrace) -> None:
        self.checkpoint, self.sink, self.before_commit = checkpoint, sink, before_commit
        self.counters, self.metrics, self.trace = counters, metrics, trace

    def commit(self, consumer: Consumer | None, overlap: bool = False) -> None:
        """Commit the outputs delivered so far with the offsets of every batch since the last commit (none without
        a ``consumer``: outputs alone); wait for it, or with ``overlap`` leave it to the commit thread."""
        cp = self.checkpoint
        # 1. the commit in flight settled, and the batches prepared meanwhile produced into this transaction
        self.deliver_prepared()
        # 2. what the task writes with the commit (state changes not written with a batch)
        out = Outputs()
        self.before_commit(out)
        self.sink.send(out)
        if overlap:
            # 3. (overlapped) outputs and offsets committed on the commit thread, with the group's metadata taken
            #    here, on the consumer's thread; steps 4 and 5 come in settle()
            done, cp.uncommitted = cp.uncommitted, cp.new_uncommitted()
            metadata = (consumer.consumer_group_metadata() if consumer is not None and self.sink.mode == "transactional"
                        else None)
            cp.in_flight.start(functools.partial(self.sink.commit, consumer, done.topic_partitions(), metadata), done)
            return
        # 3. outputs durable, then the input offsets committed with them (kafka.delivery); /readyz fails meanwhile
        #    once it has waited too long
        t = time.perf_counter()
        done = cp.uncommitted
        self.metrics.committing_since = time.monotonic()
        try:
            self.sink.commit(consumer, done.topic_partitions() if consumer is not None else None)
        finally:
            self.metrics.committing_since = None
        self.counters.lap("commit", t)
        took = time.perf_counter() - t
        # 4. the batches it held counted as committed, their wait for it observed
        self.metrics.commit_seconds.observe(took)
        self._count(done, time.time())
        done.clear()
        # 5. the next drained commit paced by this one's duration
        cp.pace(took)

    def deliver_prepared(self) -> None:
        """Settle the commit in flight, then produce the prepared batches into the next transaction."""
        self.settle()
        for p in self.checkpoint.take_prepared():
            t = time.perf_counter()
            produced = self.sink.send(p.outputs, p.rejects)
            self.counters.lap("produce", t)
            if p.sample is not None:
                p.sample.produced = time.time()
            self.checkpoint.uncommitted.add(p.offsets, p.events, produced, p.stamp, p.sample)
            self.counters.sized(p.records)

    def settle(self) -> None:
        """Wait for the commit in flight, if any (the time the loop waits counts as its commit stage): steps 4 and
        5 of an overlapped commit.  If it failed, its ``DeliveryError`` is raised here and its batches replayed."""
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
        self._count(done, in_flight.ended)
        self.checkpoint.pace(took, time.monotonic() - (time.time() - in_flight.ended))

    def open(self) -> bool:
        """Anything not yet committed (``Checkpoint.open``)."""
        return self.checkpoint.open(self.sink.pending())

    def _count(self, done: Uncommitted, at: float) -> None:
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
