"""Decode: a batch of event records into columns for the matcher, and the records it cannot take.

Nothing here produces or matches: bad records come out as rejects (the record
and why), which the deliver stage dead-letters, and every record read,
good or bad, moves the batch's next offsets (a bad record is committed once it
is dead-lettered, never read again).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from confluent_kafka import Message, TopicPartition

from fastpubsub.kafka.record_limits import RecordLimits, input_size
from fastpubsub.wire.codecs import DecodeError
from fastpubsub.wire.event_decoder import DecodedEvents, decode_events

from .counters import PipelineCounters
from .inputs import event_id, event_time, has_data
from .valid_events import valid_until_of

#: (record, reason): input the deliver stage sends to the dead-letter topic
Reject = tuple[Message, str]


@dataclass
class EventBatch:
    """One consumed batch after decoding; ``decoded`` row ``e`` is record ``records[decoded.rows[e]]``."""

    records: list[Message]  # records with a usable key and headers (their values may still be bad)
    ids: list[str]  # event id of each of ``records``
    valid_until: list[int | None]  # the valid_until header of each of ``records``
    decoded: DecodedEvents
    times: list[int]  # event time (ms) of each decoded row
    offsets: dict[tuple[str, int], int]  # (topic, partition) -> next offset to commit
    rejects: list[Reject] = field(default_factory=list)

    def commit_offsets(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p, o) for (topic, p), o in self.offsets.items()]


def too_large(msg: Message, limit: int) -> str | None:
    """Why ``msg`` is not decoded at all (key plus value above ``--max-record-bytes``), or None."""
    size = input_size(msg.key(), msg.value())
    if size <= limit:
        return None
    return f"record too large: {size} bytes (key and value), larger than the limit of {limit} (--max-record-bytes)"


class Decode:
    """Records above the input limit and records whose outputs the broker refused are rejected before decoding.

    ``reports_bad_input`` False (every shard but shard 0, ``processor.shard``):
    bad records are skipped, not rejected, since shard 0 dead-letters them;
    records whose own outputs the broker refused are still rejected here.
    """

    def __init__(self, counters: PipelineCounters, reports_bad_input: bool = True) -> None:
        self._counters = counters
        self.reports_bad_input = reports_bad_input
        self.limits = RecordLimits()  # set when the processor has learned them
        #: (topic, partition, offset) -> reason: records whose outputs the broker refused (``kafka.delivery``)
        self.refused: dict[tuple[str, int, int], str] = {}

    def __call__(self, msgs: list[Message]) -> EventBatch:
        t = time.perf_counter()
        records, ids, until, offsets, rejects = [], [], [], {}, []
        for msg in msgs:
            if not has_data(msg):
                continue
            offsets[(msg.topic(), msg.partition())] = msg.offset() + 1
            refused = self.refused.get((msg.topic(), msg.partition(), msg.offset()))
            reason = too_large(msg, self.limits.max_record_bytes) or refused
            if reason is not None:
                if refused is not None or self.reports_bad_input:
                    rejects.append((msg, reason))
                continue
            try:
                eid, valid_until = event_id(msg), valid_until_of(msg.headers())
            except DecodeError as exc:
                if self.reports_bad_input:
                    rejects.append((msg, str(exc)))
                continue
            ids.append(eid)
            until.append(valid_until)
            records.append(msg)
        decoded = decode_events([msg.value() for msg in records])
        if self.reports_bad_input:
            rejects += [(records[i], reason) for i, reason in sorted(decoded.errors.items())]
        times = [event_time(records[r]) for r in decoded.rows.tolist()]
        self._counters.lap("decode", t)
        return EventBatch(records, ids, until, decoded, times, offsets, rejects)
