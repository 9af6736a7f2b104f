"""One history checker for every crash and fault test: what went in, what the oracle says, what came out.

A run's history is the input records produced and acknowledged, the notification ids the oracle derives from them,
and the ids a read_committed consumer read back without de-duplication.  Exactly once means: none lost (expected,
never read), none duplicated (read more than once), none unexpected (read, never expected).  A run is also over only
when nothing is stuck: every input partition's committed offset reached its end, and no output partition holds an
open transaction (its last stable offset is its high watermark), so that a read_committed reader sees everything.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Hashable, Iterable

from confluent_kafka import Consumer, TopicPartition

from fastpubsub.kafka import admin

EXAMPLES = 5  # of each kind of fault, in a report


@dataclass
class History:
    """What one service was given and gave back; ``lost``, ``duplicated`` and ``unexpected`` are derived."""

    name: str
    inputs: int  # input records produced and acknowledged
    expected: set
    read: list  # ids read back, read_committed, repeats included
    stuck: list[str] = field(default_factory=list)  # partitions not at their end (:func:`stuck_partitions`)
    lost: list = field(init=False)
    duplicated: dict = field(init=False)  # id -> times read
    unexpected: list = field(init=False)

    def __post_init__(self) -> None:
        seen = Counter(self.read)
        self.lost = sorted(self.expected - set(seen), key=repr)
        self.duplicated = {k: n for k, n in seen.items() if n > 1}
        self.unexpected = sorted(set(seen) - self.expected, key=repr)

    @property
    def exactly_once(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.stuck)

    def report(self, faults: str = "") -> str:
        """One line of figures, then a few examples of each fault found."""
        line = (f"{self.name}: {self.inputs} inputs{f', {faults}' if faults else ''}; {len(self.expected)} "
                f"notifications expected, {len(self.read)} read (read_committed, no de-duplication): "
                f"{len(self.lost)} lost, {len(self.duplicated)} duplicated, {len(self.unexpected)} unexpected, "
                f"{len(self.stuck)} partitions stuck")
        for what, items in (("lost", self.lost), ("duplicated", list(self.duplicated.items())),
                            ("unexpected", self.unexpected), ("stuck", self.stuck)):
            if items:
                line += f"\n  {what}, e.g. {items[:EXAMPLES]}"
        return line

    def assert_exactly_once(self) -> None:
        assert self.exactly_once, self.report()

    def assert_at_least_once(self, most: int = 2) -> None:
        """Nothing lost, nothing unexpected, nothing stuck; repeats allowed, at most ``most`` copies of one."""
        assert not (self.lost or self.unexpected or self.stuck), self.report()
        assert max(self.duplicated.values(), default=1) <= most, self.report()


def check(name: str, inputs: int, expected: Iterable[Hashable], read: Iterable[Hashable], bootstrap: str | None = None,
          groups: dict[str, Iterable[str]] | None = None, outputs: Iterable[str] = ()) -> History:
    """The history of one service; with ``bootstrap``, its consumer groups' input topics (``groups``: group ->
    topics) and its output topics checked for stuck partitions."""
    stuck = stuck_partitions(bootstrap, groups or {}, outputs) if bootstrap else []
    return History(name, inputs, set(expected), list(read), stuck)


def stuck_partitions(bootstrap: str, groups: dict[str, Iterable[str]], outputs: Iterable[str] = ()) -> list[str]:
    """Partitions a finished run left behind: an input partition whose group's committed offset is short of its
    end, an output partition whose last stable offset is short of its high watermark (a transaction left open)."""
    out = []
    for group, topics in groups.items():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            for topic in topics:
                parts = [TopicPartition(topic, p) for p in range(admin.partitions_of(bootstrap, topic))]
                for tp in c.committed(parts, timeout=10):
                    end = end_of(c, tp)
                    if max(tp.offset, 0) < end:
                        out.append(f"{topic}[{tp.partition}] committed by {group} at {max(tp.offset, 0)} of {end}")
        finally:
            c.close()
    for topic in outputs:
        committed = Consumer({"bootstrap.servers": bootstrap, "group.id": "history-lso",
                              "isolation.level": "read_committed"})
        uncommitted = Consumer({"bootstrap.servers": bootstrap, "group.id": "history-hw",
                                "isolation.level": "read_uncommitted"})
        try:
            for p in range(admin.partitions_of(bootstrap, topic)):
                tp = TopicPartition(topic, p)
                lso, hw = end_of(committed, tp), end_of(uncommitted, tp)
                if lso < hw:
                    out.append(f"{topic}[{p}] last stable offset {lso} of {hw}: a transaction left open")
        finally:
            committed.close()
            uncommitted.close()
    return out


def end_of(consumer: Consumer, tp: TopicPartition) -> int:
    """The end ``consumer`` reaches: the last stable offset read_committed (librdkafka's default), the high
    watermark read_uncommitted."""
    return consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10, cached=False)[1]
