"""What a service is to the runtime: a task that restores its state, then turns input records into outputs.

Modelled on Kafka Streams' ``StreamTask``: the host (``runtime.host``) owns the consumers, the producer, the
transaction and the loop; a task never commits, produces or polls by itself.  It says what it reads and writes
(:class:`Topics`), restores what it holds before the host says ready (:meth:`Task.restore`) and whenever
partitions are assigned to it (:meth:`Task.assigned`), and hands back outputs (:class:`Outputs`) for each batch of
records, for each batch of changes of its state topic, and for side inputs it polls.  After a failed delivery the
host rewinds the inputs to the committed offsets and the task its state (:meth:`Task.rewind`), so that what is
replayed meets the state it met the first time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Protocol

from confluent_kafka import Consumer, Message

from .deliver import Output, Rejected


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


class Task(Protocol):
    """A service as the host runs it (``services.events``, ``services.patterns``, ``services.tables``)."""

    name: str  # the logger's and the progress line's name
    #: dead-letter input records too large to process (False: another instance reports them, e.g. a shard > 0)
    reports_bad_input: bool

    def topics(self) -> Topics: ...

    def prepare(self, host: Any) -> None:
        """Check or create the topics it needs (a clear error if one is missing), before any client reads."""

    def restore(self, host: Any) -> None:
        """Bring the state up to date before ready: replay the state topic, load a snapshot, read changelogs."""

    def assigned(self, consumer: Consumer, out: Outputs) -> None:
        """Called every turn: restore the partitions newly assigned, forget those taken away."""

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

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class TaskBase:
    """The hooks a task may leave alone, doing nothing (a task without side inputs, snapshots or assignment)."""

    reports_bad_input = True

    def start(self, host: Any) -> None:
        pass

    def warm_up(self, on_compile: Any) -> int:
        return 0

    def assigned(self, consumer: Consumer) -> None:
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
