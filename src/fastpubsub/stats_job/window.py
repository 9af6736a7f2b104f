"""Which records a run reads: the window, resolved to offset ranges per partition.

Start, per partition, by precedence: an explicit offset (``--start-offsets``),
the first offset at or after ``--start-time``, the end offset of the last
snapshot computed from this topic (``--from last-run``, the default; a
partition the last snapshot does not mention starts at the beginning), or the
beginning of the log (``--from earliest``).  End: an explicit offset
(``--end-offsets``), the first offset at or after ``--end-time`` (exclusive),
or the current end of the log.  Starts before the log's beginning (records
deleted by retention) are moved up to it with a warning.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from fastpubsub.engine import EventStatistics

from .kafka_source import OffsetRange

log = logging.getLogger(__name__)

FROM_CHOICES = ("last-run", "earliest")


@dataclass
class WindowSpec:
    """The user's description of the window (all optional)."""

    start_from: str = "last-run"
    start_offsets: dict[int, int] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)
    start_time_ms: int | None = None
    end_time_ms: int | None = None

    def __post_init__(self) -> None:
        if self.start_from not in FROM_CHOICES:
            raise ValueError(f"--from must be one of {', '.join(FROM_CHOICES)}, got {self.start_from!r}")
        if self.start_time_ms is not None and self.end_time_ms is not None and self.end_time_ms < self.start_time_ms:
            raise ValueError("the end time is before the start time")


def parse_offsets(text: str | None) -> dict[int, int]:
    """``"0:100,1:250"`` -> ``{0: 100, 1: 250}``."""
    out: dict[int, int] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        try:
            p, o = item.split(":")
            out[int(p)] = int(o)
        except ValueError:
            raise ValueError(f"offsets must look like PARTITION:OFFSET[,PARTITION:OFFSET...], got {item!r}") from None
        if out[int(p)] < 0:
            raise ValueError(f"offset {o} of partition {p} is negative")
    return out


def parse_time(text: str | None) -> int | None:
    """ISO-8601 (UTC if no zone) or milliseconds since the epoch -> milliseconds since the epoch."""
    if text is None or text == "":
        return None
    if text.isdigit():
        return int(text)
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"a time must be ISO-8601 (2026-11-22T08:00:00Z) or milliseconds since the epoch, got {text!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return int(t.timestamp() * 1000)


def log_bounds(consumer, topic: str, partition: int, timeout: float = 30.0) -> tuple[int, int]:
    """(first offset, end offset) of a partition, the end as fetch responses report it.

    The high watermark from ListOffsets is where a read_committed reader may
    never arrive (a transaction still open before it).  Fetching from just
    before the reported end until end-of-partition gives the end the
    consumers see (one record read).
    """
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout, cached=False)
    consumer.assign([TopicPartition(topic, partition, max(low, high - 1))])
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(min(1.0, timeout))
            if msg is None:
                continue
            if msg.error() is None:
                continue
            if msg.error().code() == KafkaError._PARTITION_EOF:
                return low, max(high, msg.offset())
            raise KafkaException(msg.error())
        raise TimeoutError(f"{topic}[{partition}]: no end-of-partition within {timeout:.0f}s")
    finally:
        consumer.unassign()


def resolve_window(consumer, topic: str, spec: WindowSpec, last: EventStatistics | None, timeout: float = 30.0) -> list[OffsetRange]:
    """Offset ranges of ``topic`` for ``spec``; ``consumer`` is a confluent-kafka Consumer (used for metadata only)."""
    from confluent_kafka import TopicPartition

    # all topics, not this one by name: a metadata request naming it auto-creates it, unconfigured, on a broker
    # with auto.create.topics.enable if the client allows it (-X allow.auto.create.topics=true)
    metadata = consumer.list_topics(timeout=timeout).topics.get(topic)
    if metadata is None or metadata.error is not None:
        raise RuntimeError(f"topic {topic} does not exist ({metadata.error if metadata else 'no metadata'})")
    partitions = sorted(metadata.partitions)
    unknown = sorted((set(spec.start_offsets) | set(spec.end_offsets)) - set(partitions))
    if unknown:
        raise ValueError(f"topic {topic} has partitions {partitions}; no partition {unknown}")
    marks = {p: log_bounds(consumer, topic, p, timeout) for p in partitions}

    def at_time(ms: int) -> dict[int, int]:
        found = consumer.offsets_for_times([TopicPartition(topic, p, ms) for p in partitions], timeout=timeout)
        # -1: no record at or after the time -> the end of the log
        return {tp.partition: (tp.offset if tp.offset >= 0 else marks[tp.partition][1]) for tp in found}

    start_times = at_time(spec.start_time_ms) if spec.start_time_ms is not None else {}
    end_times = at_time(spec.end_time_ms) if spec.end_time_ms is not None else {}
    previous = {}
    if spec.start_from == "last-run" and last is not None and last.window is not None:
        previous = {o.partition: o.end for o in last.window.offsets}
    ranges = []
    for p in partitions:
        low, high = marks[p]
        if p in spec.start_offsets:
            start = spec.start_offsets[p]
        elif p in start_times:
            start = start_times[p]
        else:
            start = previous.get(p, low)
        end = spec.end_offsets.get(p, end_times.get(p, high))
        if start > high:
            log.warning("%s[%d]: the last run ended at offset %d, past the end of the log (%d): the topic was "
                        "recreated? reading from the beginning", topic, p, start, high)
            start = low
        if start < low:
            log.warning("%s[%d]: offsets %d..%d were deleted from the log; starting at %d", topic, p, start, low - 1, low)
            start = low
        if end > high:
            raise ValueError(f"{topic}[{p}]: end offset {end} is past the end of the log ({high})")
        ranges.append(OffsetRange(p, start, max(start, end)))
    return ranges
