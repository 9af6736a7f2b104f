"""The pattern service's first stage with ``--repartition-by ATTR`` (docs/patterns.md 6.5): events re-keyed by an
attribute into a repartition topic, then released in event-time order behind a watermark.

As in a Kafka Streams application with a repartition topic: the re-keying produce and the events offsets commit in
one transaction; the second stage reads the repartition partitions, holds each record in a reorder buffer
(``patterns.reorder``) until the watermark passes it, dead-letters (and counts) events later than the grace, and
drops the repeats an aborted re-keying leaves.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.patterns.reorder import ReorderBuffer, event_id
from fastpubsub.runtime import Outputs, SourceRecord
from fastpubsub.wire import codecs
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.placement import partition_for, placement_text

from .config import PatternServiceConfig
from .partitions import Partition

SOURCE_HEADER = "fastpubsub.source"  # a re-keyed event's source partition and offset (>iq)
_SOURCE = struct.Struct(">iq")


class Repartition:
    def __init__(self, config: PatternServiceConfig, task: Any) -> None:
        self.config, self.task = config, task
        self.topic = config.input_topic
        self.rekeyed = self.late_events = self.repeated_events = 0
        self._source: dict[int, int] = {}  # events partition -> next offset to re-key
        self._source_time: dict[int, int] = {}  # events partition -> its event time so far (records without one)
        self._sources: set[int] = set()  # events partitions assigned
        self._partitions = 0

    def check(self, clients: ClientFactory, events_partitions: int) -> None:
        self._partitions = admin.partitions_of(clients, self.topic)
        if self._partitions != events_partitions:
            raise RuntimeError(f"{self.topic} has {self._partitions} partitions and {self.config.events_topic} {events_partitions}: "
                               f"delete both {self.topic} and {self.config.changelog_topic} (and the group's "
                               f"offsets) to start over with the events topic's count")

    def forget(self) -> None:
        self._source.clear()

    def assigned(self, events_partitions: set[int]) -> None:
        self._sources = events_partitions
        for p in [p for p in self._source if p not in events_partitions]:
            del self._source[p]

    def rekey(self, msgs: list[Message], out: Outputs) -> None:
        """Each event to the repartition partition of its attribute's value (``wire.placement``; an event without
        the attribute goes with the value null), keyed by that value, with its timestamp and its source position;
        in the open transaction, so the events offsets commit with the re-keyed records."""
        attr = self.config.repartition_by
        for m in msgs:
            p, offset = m.partition(), m.offset()
            if p not in self._sources or offset < self._source.get(p, -1):
                continue  # revoked meanwhile, or a replay of what this transaction already re-keyed
            self._source[p] = offset + 1
            kind, ms = m.timestamp()
            if kind != TIMESTAMP_NOT_AVAILABLE:
                self._source_time[p] = max(self._source_time.get(p, ms), ms)
            else:
                ms = self._source_time.get(p, 0)  # event time so far, never the clock
            try:
                value = dict(codecs.decode_event_pairs(m.value(), self.task.registered)).get(attr)
            except codecs.DecodeError:
                self.task.invalid_events += 1  # as for placed events: skipped and counted
                continue
            out.produce(self.topic, placement_text(value), m.value(), partition=partition_for(value, self._partitions),
                        timestamp=ms, headers=[(SOURCE_HEADER, _SOURCE.pack(p, offset))])
            self.rekeyed += 1

    def released(self, p: int, part: Partition, msgs: list[Message], out: Outputs) -> None:
        """A repartition partition's records: into its reorder buffer (late ones dead-lettered, repeats of an aborted
        re-keying dropped, both counted), then the released events through the engine, in event-time order."""
        msgs = [m for m in msgs if m.offset() >= part.position]
        if not msgs:
            return
        buf = part.reorder
        for m in msgs:
            header = dict(m.headers() or []).get(SOURCE_HEADER)
            if header is None:
                out.reject(m, f"no {SOURCE_HEADER} header: not written by the re-keying")
                continue
            src_p, src_off = _SOURCE.unpack(header)
            ms = m.timestamp()[1]
            verdict = buf.offer(ms, src_p, src_off, m.value())
            if verdict == "late":
                self.late_events += 1
                out.reject(SourceRecord(self.config.events_topic, src_p, src_off, None, m.value()),
                           f"late event: timestamp {ms} is behind the watermark {buf.frontier} of {self.topic} "
                           f"partition {p} (grace {self.config.grace_ms} ms)")
            elif verdict == "repeat":
                self.repeated_events += 1
        released = buf.release()
        tag = msgs[0].offset()  # the first input offset of this transaction: its changes are discarded if it aborts
        if released:
            decoded = decode_events([v for _, _, _, v in released], self.task.registered)
            self.task.invalid_events += len(decoded.errors)
            rows = decoded.rows.tolist()
            self.task.match(p, part, decoded, [event_id(released[r][1], released[r][2]) for r in rows],
                            [released[r][0] for r in rows], [released[r][3] for r in rows], tag, out)
        part.position = msgs[-1].offset() + 1
        self.task._write_changes(out, [p], tag)

    def stats(self, parts: Iterable[Partition]) -> dict[str, Any]:
        return {"attribute": self.config.repartition_by, "topic": self.topic, "grace_ms": self.config.grace_ms,
                "rekeyed": self.rekeyed, "late_events": self.late_events, "repeated_events": self.repeated_events,
                "held": sum(len(part.reorder) for part in parts if part.reorder is not None)}
