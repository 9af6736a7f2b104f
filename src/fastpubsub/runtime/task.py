"""The one door between the runtime and a service: the :class:`Task` protocol, the :class:`Context` a task is given,
and the task's lifecycle (:class:`TaskState`).

Modelled on Kafka Streams' ``StreamTask`` and ``ProcessorContext``: the host (``runtime.host``) owns the consumers,
the producer, the transaction and the loop; a task never commits, produces or polls by itself, and never sees the
host.  It says what it reads and writes (:class:`Topics`), restores what it holds before the host says ready
(:meth:`Task.restore`) and whenever partitions are assigned to it (:meth:`Task.assigned`), and hands back outputs
(:class:`Outputs`) for each batch of records, for each batch of changes of its state topic, and for side inputs it
polls.  After a failed delivery the host rewinds the inputs to the committed offsets and the task its state
(:meth:`Task.rewind`), so that what is replayed meets the state it met the first time.

:class:`Task` is the exact list of what the host calls (``tests/runtime/test_task_protocol.py`` holds the host to it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from confluent_kafka import Message

from .sink import Output, Rejected

if TYPE_CHECKING:
    from fastpubsub.kafka import ClientFactory
    from fastpubsub.kafka.record_limits import RecordLimits

    from .counters import PipelineCounters
    from .inputs import Inputs


@dataclass(frozen=True)
class Topics:
    """What a task reads and writes.

    ``group``: the work input, subscribed in the host's consumer group (partitions shared between instances); empty
    when the task assigns its partitions itself (:meth:`Task.restore`).  ``state``: a topic every instance reads
    whole and never commits (the subscriptions), replayed before ready and polled for changes after.
    ``inputs`` and ``outputs`` bound the record sizes (``kafka.record_limits``).
    """

    group: tuple[str, ...]
    state: str | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


class Outputs:
    """The records a task hands back: outputs to produce and input records to dead-letter, in order.

    ``extend`` takes a lazy iterable too (the event processor's notifications), so that back-pressure reaches the
    task's encoder while the host produces.
    """

    def __init__(self) -> None:
        self.parts: list[Iterable[Output | Rejected]] = []
        self._list: list[Output | Rejected] = []
        self.parts.append(self._list)

    def produce(self, topic: str, key: bytes | str | None, value: bytes | None, record: Message | None = None, *,
                headers: list[tuple[str, bytes]] | None = None, partition: int | None = None,
                timestamp: int | None = None) -> None:
        self._list.append(Output(topic, key, value, record, headers, partition, timestamp))

    def reject(self, record: Any, reason: str) -> None:
        """Dead-letter ``record`` (a ``Message``, or anything with its accessors, e.g. ``deliver.SourceRecord``)."""
        self._list.append(Rejected(record, reason))

    def extend(self, items: Iterable[Output | Rejected]) -> None:
        self.parts.append(items)
        self._list = []
        self.parts.append(self._list)

    def handed(self) -> bool:
        """Whether the task handed anything back (a lazy part counts, whatever it will yield)."""
        return len(self.parts) > 1 or bool(self._list)

    def clear(self) -> None:
        """Drop everything handed back so far (the outputs of a record that is dead-lettered instead)."""
        self._list = []
        self.parts = [self._list]

    def __iter__(self):
        for part in self.parts:
            yield from part


class TaskState(enum.Enum):
    """Where a task is in its life, as Kafka Streams' ``Task.State``; the host moves it (:meth:`advance`)."""

    CREATED = "created"  # constructed; the start hooks run in this state
    RESTORING = "restoring"  # Task.restore: the state brought up to date before ready
    RUNNING = "running"  # the loop: batches, state changes, side inputs, commits
    REWINDING = "rewinding"  # a failed delivery or an outage: the state back to the committed offsets
    CLOSED = "closed"

    def advance(self, to: "TaskState") -> "TaskState":
        """``to``, if the lifecycle allows it from here; else a ``RuntimeError`` (a host bug, not a task's)."""
        if to not in _NEXT[self]:
            raise RuntimeError(f"a task cannot go from {self.value} to {to.value}")
        return to


_NEXT = {
    TaskState.CREATED: {TaskState.RESTORING, TaskState.REWINDING, TaskState.CLOSED},  # a failure before the restore
    TaskState.RESTORING: {TaskState.RUNNING, TaskState.REWINDING, TaskState.CLOSED},  # a restore's commit failed
    TaskState.RUNNING: {TaskState.REWINDING, TaskState.CLOSED},
    TaskState.REWINDING: {TaskState.CREATED, TaskState.RESTORING, TaskState.RUNNING, TaskState.CLOSED},  # back
    TaskState.CLOSED: set(),
}


class Context:
    """What a task may use of the runtime, and nothing else (Kafka Streams gives a task a context, never the thread).

    ``inputs`` and ``limits`` are there from :meth:`Task.after_clients` on; the rest from the first hook.
    """

    def __init__(self, host: Any) -> None:
        self._host = host  # runtime.host.Host: read through the members below only

    @property
    def clients(self) -> "ClientFactory":
        """Kafka clients with the service's settings (admin questions, readers of changelogs)."""
        return self._host.clients

    @property
    def inputs(self) -> "Inputs":
        """The group's consumer (``inputs.group``) and the state topic's reader (``replay``, ``prefetch``)."""
        return self._host.inputs

    @property
    def limits(self) -> "RecordLimits":
        """The record limits learned from the broker (``kafka.record_limits``)."""
        return self._host.limits

    @property
    def counters(self) -> "PipelineCounters":
        """The pipeline's counters and stage timings, shared with the host's statistics."""
        return self._host.counters

    def stopping(self) -> bool:
        """Whether the service was asked to stop (long restores end early)."""
        return self._host.stopping

    def heartbeat(self) -> None:
        """Progress for /healthz during long work outside the loop (a rebuild)."""
        self._host.metrics.beat()

    def registry_waiting(self, waiting: bool) -> None:
        """The schema registry does not answer yet: /readyz says so meanwhile."""
        self._host.metrics.registry_waiting(waiting)

    def send(self, out: Outputs) -> int:
        """Produce outputs handed back outside a batch (a restore, a side input) into the open transaction."""
        return self._host.send(out)

    def commit_outputs(self) -> bool:
        """Commit what was sent without input offsets (a restore's dead letters); False if it failed."""
        return self._host.commit_outputs()

    def dead_letter_schemas(self, registry_ids: dict[int, int] | None) -> None:
        """The schema registry's ids of the dead-letter schema, for dead letters written in its framing."""
        self._host.sink.dead_letters.registry_ids = registry_ids


class Task(Protocol):
    """A service as the host runs it (``services.events``, ``services.patterns``, ``services.tables``).

    The start hooks, in the order the host calls them: :meth:`before_clients`, :meth:`warm_up` (on a thread while
    the clients connect), :meth:`after_clients`, :meth:`restore`.  Then, each turn of the loop: :meth:`on_state`,
    :meth:`poll`, :meth:`assigned`, :meth:`process`, :meth:`before_commit` (with each commit), :meth:`gauges`,
    :meth:`snapshot_due` / :meth:`snapshot`; :meth:`revoked` and :meth:`rewind` when they happen; :meth:`close`
    at the end.
    """

    name: str  # the logger's and the progress line's name
    #: dead-letter input records too large to process (False: another instance reports them, e.g. a shard > 0)
    reports_bad_input: bool

    def topics(self) -> Topics: ...

    def before_clients(self, ctx: Context) -> None:
        """Check or create the topics it needs (a clear error if one is missing), before any client reads."""

    def warm_up(self, on_compile: Callable[..., None]) -> int:
        """Load or compile its numba kernels (on a thread of its own); the number compiled."""

    def after_clients(self, ctx: Context) -> None:
        """The producer and the consumers exist, the group is not joined yet: start side readers, prefetch."""

    def restore(self, ctx: Context) -> None:
        """Bring the state up to date before ready: replay the state topic, load a snapshot, read changelogs."""

    def assigned(self) -> None:
        """Called every turn: restore the partitions newly assigned (``ctx.inputs.group``), forget those taken away."""

    def revoked(self) -> None:
        """Partitions are taken away (after the host committed what was processed of them)."""

    def on_state(self, msgs: list[Message], out: Outputs) -> None:
        """Records of the state topic (subscription changes), applied before the next batch."""

    def process(self, msgs: list[Message], out: Outputs) -> int:
        """A batch of input records in, outputs out; the number of records processed (events, rows)."""

    def poll(self, out: Outputs) -> None:
        """Side inputs (the statistics snapshots), once a turn."""

    def before_commit(self, out: Outputs) -> None:
        """Outputs that go with the next commit (state changes not written with a batch)."""

    def rewind(self) -> None:
        """A delivery failed: the state back to what the committed offsets say (replayed from there)."""

    def snapshot_due(self, force: bool = False) -> bool: ...

    def snapshot(self) -> None:
        """Write a snapshot of the state (called right after a commit)."""

    def gauges(self) -> dict[str, Any]:
        """``subscriptions`` and ``changes`` (by kind) for ``/metrics``; ``engine``: the matcher, if any."""

    def progress(self) -> str:
        """The task's part of the progress line."""

    def stats(self) -> dict[str, Any]:
        """The task's own counts: the host's statistics hold them under ``task``."""

    def close(self) -> None: ...


class TaskBase:
    """The hooks a task may leave alone, doing nothing (a task without side inputs, snapshots or assignment)."""

    reports_bad_input = True

    def before_clients(self, ctx: Context) -> None:
        pass

    def warm_up(self, on_compile: Callable[..., None]) -> int:
        return 0

    def after_clients(self, ctx: Context) -> None:
        pass

    def assigned(self) -> None:
        pass

    def revoked(self) -> None:
        pass

    def on_state(self, msgs: list[Message], out: Outputs) -> None:
        pass

    def poll(self, out: Outputs) -> None:
        pass

    def before_commit(self, out: Outputs) -> None:
        pass

    def snapshot_due(self, force: bool = False) -> bool:
        return False

    def snapshot(self) -> None:
        pass

    def close(self) -> None:
        pass
