"""The processor's side of ``pubsub.statistics``: each new snapshot goes to the engine's cost model.

The Spark job (``fastpubsub.stats_job``) publishes one snapshot per run, keyed by the
events topic it was computed from, to a compacted single-partition topic.
The feed owns a consumer of its own: manual assignment from the beginning
(no group, nothing ever committed: like the subscriptions, the snapshots are
state, and the latest one is all that matters), a blocking read to
end-of-partition at startup so that the processor starts with the latest
snapshot, then a non-blocking poll per loop iteration for new ones.

Adopting a snapshot is ``Matcher.set_statistics``: the clustered algorithms
recompute the probabilities, and ``dynamic`` runs maintenance until it is
quiet, creating and dropping hash tables whose benefit changed (Fabret et al.
section 4).  The configuration before and after is logged and kept in
:meth:`StatisticsFeed.stats`.

Statistics are an optimisation, never a reason to stop matching: a snapshot
that does not decode or that the engine refuses is dead-lettered (if the
processor gave a ``dead_letter`` callback) and logged, and the processor
goes on with the statistics it had; a missing topic is looked for again
every ``recheck_seconds``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from confluent_kafka import OFFSET_BEGINNING, KafkaError, Message, TopicPartition

from fastpubsub.engine import Matcher
from fastpubsub.engine import N_KINDS
from fastpubsub.engine import KIND_NUMBER, KINDS
from fastpubsub.engine import EventStatistics, SnapshotParts

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.statistics_topic import is_snapshot_key
from fastpubsub.wire.codecs import decode_statistics
from fastpubsub.wire.topics import EVENTS, STATISTICS

log = logging.getLogger("pubsub.statistics")

ADOPTED = "statistics snapshot adopted"  # the start of the log line of each adoption (the demo waits for it)


def hash_tables(matcher: Matcher, stats: dict[str, Any] | None = None) -> dict[str, int]:
    """The multi-attribute hash tables of ``matcher``'s configuration: ``{"a0,a1": subscriptions}``.

    Empty for the algorithms without clustering.  Attributes of another type
    than number carry it (``movie:string``).  ``stats``: ``matcher.stats()`` if already at hand.
    """
    tables = (stats or matcher.stats()).get("hash_tables", {}).get("schemas", [])
    names = list(matcher.attributes.ids)

    def name(field: int) -> str:
        attr, kind = divmod(field, N_KINDS)
        return names[attr] if kind == KIND_NUMBER else f"{names[attr]}:{KINDS[kind]}"

    return {",".join(name(f) for f in t["fields"]): t["subscriptions"] for t in tables}


def describe_change(before: dict[str, int], after: dict[str, int]) -> str:
    """``+a0,a1 -a2,a3 (4 kept)`` for the log: tables created (+) and dropped (-)."""
    created = sorted(set(after) - set(before))
    dropped = sorted(set(before) - set(after))
    parts = [f"+{t}" for t in created] + [f"-{t}" for t in dropped]
    kept = len(set(before) & set(after))
    return (" ".join(parts) + f" ({kept} kept)") if parts else f"unchanged ({kept} tables)"


class StatisticsFeed:
    def __init__(self, clients: ClientFactory, matcher: Callable[[], Matcher], source_topic: str = EVENTS, topic: str = STATISTICS,
                 dead_letter: Callable[[Message, str], None] | None = None,
                 startup_timeout: float = 10.0, recheck_seconds: float = 30.0,
                 group: str = "pubsub-statistics-feed") -> None:
        """``matcher()``: the matcher to hand snapshots to (a callable, since the processor may replace it);
        ``source_topic``: the key of the snapshots to adopt (``TopicNames.events_label``: the events input)."""
        self._matcher = matcher
        self._source = source_topic.encode()
        self._topic = topic
        self._dead_letter = dead_letter
        self._recheck = recheck_seconds
        self._consumer = clients.consumer(
            group,  # required by librdkafka; never joined (assign only), never committed
            {"auto.offset.reset": "earliest", "fetch.wait.max.ms": 100},
            **{"enable.auto.commit": False, "enable.auto.offset.store": False, "enable.partition.eof": True},
        )
        self._assigned = False
        self._partitions: list[int] = []
        self._next_look = 0.0
        self.adopted = 0
        self.bad = 0
        self.last: dict[str, Any] | None = None
        self.current: EventStatistics | None = None  # the snapshot last adopted
        self._parts = SnapshotParts()  # parts of a split snapshot read so far
        self._catch_up(startup_timeout)

    # --- reading ---------------------------------------------------------------

    def _assign(self) -> bool:
        """Assign the topic's one partition if it exists (looked for in the full metadata: naming a
        topic auto-creates it on some brokers, uncompacted)."""
        if self._assigned:
            return True
        if time.monotonic() < self._next_look:
            return False
        self._next_look = time.monotonic() + self._recheck
        try:
            metadata = self._consumer.list_topics(timeout=10).topics.get(self._topic)
        except Exception as exc:  # noqa: BLE001 - broker unreachable: try again later
            log.warning("statistics: cannot list topics (%s); trying again in %.0fs", exc, self._recheck)
            return False
        if metadata is None or metadata.error is not None:
            log.warning("no topic %s (run `pubsub topics`): the engine uses its own statistics; "
                        "looking again every %.0fs", self._topic, self._recheck)
            return False
        self._partitions = sorted(metadata.partitions)
        self._consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in self._partitions])
        self._assigned = True
        return True

    def _catch_up(self, timeout: float) -> None:
        """Read to end-of-partition and adopt the latest snapshot, if any (startup)."""
        if not self._assign():
            return
        mine, at_end, deadline = [], set(), time.monotonic() + timeout
        while time.monotonic() < deadline:
            # a short wait per call: consume() returns only at 1,000 records or at its timeout, so a small topic's
            # end-of-partition would otherwise wait out the whole timeout (0.5 s of every start)
            for msg in self._consumer.consume(num_messages=1000, timeout=0.05):
                if msg.error() is not None:
                    if self._consumer_error(msg):
                        at_end.add(msg.partition())
                elif self._mine(msg):
                    mine.append(msg)
            if not self._assigned or at_end >= set(self._partitions):
                break
        else:
            log.warning("statistics: no end of %s within %.0fs; later snapshots are read as they come", self._topic, timeout)
        if not mine:
            log.info("no statistics snapshot of %s yet on %s", self._source.decode(), self._topic)
        self._adopt_newest(mine)

    def poll(self) -> bool:
        """Adopt the newest snapshot that arrived since the last call (non-blocking); True if one was adopted."""
        if not self._assign():
            return False
        mine = []
        for msg in self._consumer.consume(num_messages=1000, timeout=0):
            if msg.error() is not None:
                self._consumer_error(msg)
            elif self._mine(msg):
                mine.append(msg)
        return self._adopt_newest(mine)

    def _mine(self, msg: Message) -> bool:
        return is_snapshot_key(msg.key(), self._source.decode()) and msg.value() is not None

    def _consumer_error(self, msg: Message) -> bool:
        """True at end-of-partition; a vanished topic is looked for again later, anything else logged."""
        err = msg.error()
        if err.code() == KafkaError._PARTITION_EOF:
            return True
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            log.warning("statistics topic %s is gone; looking for it again every %.0fs", self._topic, self._recheck)
            self._consumer.unassign()
            self._assigned = False
            return True
        log.warning("statistics consumer: %s", err)
        return False

    # --- adopting --------------------------------------------------------------

    def _adopt_newest(self, msgs: list[Message]) -> bool:
        """Adopt the newest snapshot of ``msgs`` that decodes and that the engine takes (older ones are superseded).

        The parts of a split snapshot are put together first (they may span
        calls); the snapshot counts as arriving with its last part.
        """
        whole: list[tuple[Message, dict[str, Any] | None]] = []
        for msg in msgs:
            if msg.key() == self._source:
                whole.append((msg, None))  # decoded when adopted: a bad one is dead-lettered there
                continue
            try:
                record = self._parts.add(decode_statistics(msg.value()))
            except Exception as exc:  # noqa: BLE001 - a bad part must not stop the processor
                self._reject(msg, f"statistics snapshot part not adopted: {type(exc).__name__}: {exc}")
                continue
            if record is not None:
                whole.append((msg, record))
        for msg, record in reversed(whole):
            if self._adopt(msg, record):
                return True
        return False

    def _reject(self, msg: Message, reason: str) -> None:
        self.bad += 1
        log.warning("%s at %s[%d]@%d; keeping the statistics in use", reason, msg.topic(), msg.partition(), msg.offset())
        if self._dead_letter is not None:
            self._dead_letter(msg, reason)

    def _adopt(self, msg: Message, record: dict[str, Any] | None = None) -> bool:
        where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
        started = time.monotonic()
        try:
            stats = EventStatistics.from_record(record if record is not None else decode_statistics(msg.value()))
            matcher = self._matcher()
            was = matcher.stats()
            matcher.set_statistics(stats)
            now = matcher.stats()
            before, after = hash_tables(matcher, was), hash_tables(matcher, now)
        except Exception as exc:  # noqa: BLE001 - a bad snapshot must not stop the processor
            self.bad += 1
            reason = f"statistics snapshot not adopted: {type(exc).__name__}: {exc}"
            log.warning("%s at %s; keeping the statistics in use", reason, where)
            if self._dead_letter is not None:
                self._dead_letter(msg, reason)
            return False
        self.adopted += 1
        self.current = stats
        self.last = {
            "at": where,
            "event_count": stats.event_count,
            "computed_at_ms": stats.window.computed_at_ms if stats.window else None,
            "tables_before": before,
            "tables_after": after,
            **{k: now.get("maintenance", {}).get(k, 0) - was.get("maintenance", {}).get(k, 0)
               for k in ("tables_created", "tables_dropped")},
            "seconds": round(time.monotonic() - started, 3),
        }
        log.info("%s from %s: %d events, %d attributes, %d attribute sets; %s in %.2fs; hash tables %s; "
                 "before %s, after %s", ADOPTED, where, stats.event_count, len(stats.attributes), len(stats.schemas),
                 matcher.algorithm, self.last["seconds"], describe_change(before, after), before, after)
        return True

    def reapply(self) -> None:
        """Hand the snapshot last adopted to the matcher in use, if that one does not have it (a replaced matcher)."""
        matcher = self._matcher()
        if self.current is not None and matcher.statistics is not self.current:
            matcher.set_statistics(self.current)

    def stats(self) -> dict[str, Any]:
        return {"snapshots_adopted": self.adopted, "bad_snapshots": self.bad, "last_snapshot": self.last}

    def close(self) -> None:
        self._consumer.close()
