"""The pattern service: pattern subscriptions over the events topic, through the topics, exactly once.

Its own composition root beside the event processor (``processor.app``) and the table service
(``processor.tables``), run by ``pubsub patterns``:

    pubsub.events (a consumer group: partitions shared between instances)
    + pubsub.subscriptions (every instance reads them all: the pattern ones are the service's)
        -> one PatternEngine per owned events partition (fastpubsub.patterns)
        -> pubsub.notifications (one per completed pattern, JSON, keyed by subscriber)
        -> pubsub.changelog.patterns, partition p for events partition p (instances, bound events, event time)
        -> pubsub.dead-letter (bad pattern subscriptions)

all in one Kafka transaction with the events offsets (``kafka.delivery``).

With ``repartition_by`` (``pubsub patterns --repartition-by ATTR``, docs/patterns.md 6.5) the service is a Kafka
Streams-like two-stage application: it re-keys each event by the attribute into its own repartition topic (the
re-keying produce and the events offsets in one transaction), and the engines run on the repartition topic's
partitions, each behind a reorder buffer (``patterns.reorder``: event-time order behind a watermark, late events
dead-lettered and counted); the changelog is then the repartition topic's.  A partition's state is
restored from its changelog partition whenever the partition is assigned, before any of its events is
processed; changes tagged with a source offset at or past the committed one are discarded: at-least-once
delivery leaves them when it crashes between the outputs' acknowledgement and the offset commit, and the
replay from the committed offset produces them again (with transactions on Apache Kafka a read_committed
restore never meets one: tests/test_exactly_once.py).
"""

from __future__ import annotations

import gc
import json
import logging
import math
import re
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, Message, TopicPartition

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.deadletter import DeadLetters
from fastpubsub.kafka.delivery import Delivery, DeliveryError
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.kafka.readers import read_to_end
from fastpubsub.patterns import Pattern
from fastpubsub.patterns.contents import BoundContents, split
from fastpubsub.patterns.engine import PatternEngine, limits_from_bytes
from fastpubsub.patterns.witnesses import Witness, notification_id
from fastpubsub.patterns.reorder import ReorderBuffer, event_id, event_name
from fastpubsub.patterns.reorder import split as split_reorder
from fastpubsub.state import KeyedStore, StateChanges, from_records, to_records
from fastpubsub.wire import codecs
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.placement import partition_for, placement_text
from fastpubsub.wire.topics import (DEAD_LETTER, EVENTS, NOTIFICATIONS, PATTERN_CHANGELOG, SUBSCRIPTIONS,
                                    pattern_repartition_changelog, pattern_repartition_topic)

from .inputs import Inputs, has_data
from .instance import InstanceSlot
from .progress import RateMeter, human
from .subscriptions import parse_subscription_id

log = logging.getLogger("pubsub.patterns")
ATTRIBUTE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SOURCE_HEADER = "fastpubsub.source"  # a re-keyed event's source partition and offset (>iq)
_SOURCE = struct.Struct(">iq")


@dataclass
class PatternServiceConfig:
    bootstrap_servers: str
    group_id: str = "pubsub-patterns"  # the events consumer group: instances share the events partitions
    delivery: str = "auto"
    transactional_id: str | None = None  # default: a stable per-host slot of the group (processor.instance)
    batch_size: int = 1000
    max_per_subscription: int = 10_000  # live instances of one subscription, per events partition
    max_state_bytes: int = 1 << 30  # instance store of one events partition (docs/patterns.md 1.3)
    output_format: str = "avro"  # of dead letters (notifications are JSON)
    session_timeout_ms: int = 6000
    progress_interval: float = 5.0
    client_config: dict[str, Any] = field(default_factory=dict)
    repartition_by: str | None = None  # re-key the events by this attribute first (docs/patterns.md 6.5)
    grace_ms: int = 1000  # how far behind the repartition partition's largest timestamp an event may still arrive

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.max_per_subscription < 1 or self.max_state_bytes < 1:
            raise ValueError("batch size, instance cap and state bound must be positive")
        if self.repartition_by is not None and not ATTRIBUTE.fullmatch(self.repartition_by):
            raise ValueError(f"--repartition-by {self.repartition_by!r}: an attribute name (letters, digits and _, "
                             f"not starting with a digit) is expected")
        if self.grace_ms < 0:
            raise ValueError(f"--grace-ms {self.grace_ms}: the grace must not be negative")

    @property
    def input_topic(self) -> str:
        """The topic the engines read: the events, or the repartition topic."""
        if self.repartition_by is None:
            return EVENTS
        return pattern_repartition_topic(self.group_id, self.repartition_by)

    @property
    def changelog_topic(self) -> str:
        if self.repartition_by is None:
            return PATTERN_CHANGELOG
        return pattern_repartition_changelog(self.group_id, self.repartition_by)


def pattern_notification_id(sid: int, partition: int, bound: tuple[tuple[int, int], ...]) -> str:
    """``<sid>/<p>:<a's offset>|<p>:<r's offset>#<iterations>|...``: deterministic, unique over partitions."""
    return notification_id(sid, [(f"{partition}:{i}", n) for i, n in bound])


def repartitioned_notification_id(sid: int, bound: tuple[tuple[int, int], ...]) -> str:
    """``<sid>/<events partition>:<offset>|...`` of events that came through the repartition topic: each named by
    its source position, so the id does not depend on where or when the re-keying put it."""
    return notification_id(sid, [("%d:%d" % event_name(i), n) for i, n in bound])


@dataclass
class _Partition:
    """One owned events partition: its engine, the bound events' contents, the next offset to process."""

    engine: PatternEngine
    contents: BoundContents
    position: int
    event_time: int = 0
    reorder: ReorderBuffer | None = None  # a repartition partition's events, held until the watermark passes them


class PatternService:
    """Runs until :meth:`stop`; ``ready`` is set once the subscriptions are loaded."""

    def __init__(self, config: PatternServiceConfig) -> None:
        self.config = config
        self.clients = ClientFactory(config.bootstrap_servers, config.client_config)
        self.ready = threading.Event()
        self._stop = threading.Event()
        self.subs: dict[int, tuple[str, Pattern, int]] = {}  # sid -> (subscriber, pattern, since ms)
        self.parts: dict[int, _Partition] = {}
        self.delivery: Delivery | None = None
        self.dead_letters: DeadLetters | None = None
        self.inputs: Inputs | None = None
        self.events = self.invalid_events = self.notifications = self.changes_written = 0
        self.subscription_changes = 0
        self.restores = self.restored_instances = self.discarded_changes = 0
        self._counters: dict[str, int] = {}  # engine counters of partitions no longer owned
        self._unwritten: set[int] = set()  # partitions with state changes not yet written (subscriptions, restore)
        self.input_topic, self.changelog = config.input_topic, config.changelog_topic
        self.rekeyed = self.late_events = self.repeated_events = 0
        self._source: dict[int, int] = {}  # events partition -> next offset to re-key (repartitioning)
        self._source_time: dict[int, int] = {}  # events partition -> its event time so far (records without one)
        self._sources: set[int] = set()  # events partitions assigned (repartitioning)

    def stop(self) -> None:
        self._stop.set()

    # --- subscriptions ----------------------------------------------------------------

    def _on_subscriptions(self, msgs: list[Message]) -> None:
        """Apply subscription records in order: the latest per id counts; a replaced or deleted pattern loses its
        instances in every owned partition.  Bad pattern records are dead-lettered (keyed by their position, so the
        same record dead-lettered again, by a restart or another instance, collapses with the first)."""
        latest: dict[int, tuple[str, Pattern, int] | None] = {}
        for msg in msgs:
            if not has_data(msg):
                continue
            value = msg.value()
            try:
                sid = parse_subscription_id(msg.key())
            except codecs.DecodeError as exc:
                if codecs.is_pattern_subscription(value):
                    self.dead_letters.send(msg, str(exc))
                continue
            entry = None
            # another service's record (plain, aggregate, or a bad one of theirs): the id is no pattern now; the
            # kind is told from the Avro schema id or the JSON fields, without validating the others' records
            if codecs.is_pattern_subscription(value):
                try:
                    sub = codecs.decode_any_subscription(value)
                    kind, ms = msg.timestamp()
                    entry = (sub.subscriber, sub.pattern, ms if kind != TIMESTAMP_NOT_AVAILABLE else 0)
                except codecs.PatternDecodeError as exc:
                    self.dead_letters.send(msg, str(exc))
            if entry is None and sid not in self.subs and sid not in latest:
                continue  # not a pattern subscription, and the id held none
            latest.pop(sid, None)  # keep the order of the latest record per id
            latest[sid] = entry
        if not latest:
            return
        self.subscription_changes += len(latest)
        gone = [sid for sid, e in latest.items() if e is None and sid in self.subs]
        added = {sid: e for sid, e in latest.items() if e is not None}
        for sid in gone:
            del self.subs[sid]
        self.subs.update(added)
        self._unwritten.update(self.parts)
        for part in self.parts.values():
            for sid in gone:
                part.engine.unsubscribe(sid)
            part.engine.subscribe_many([(sid, pattern, since) for sid, (_, pattern, since) in added.items()])

    # --- partitions: restore on assignment ------------------------------------------------

    def _engine(self) -> PatternEngine:
        cfg = self.config
        engine = PatternEngine("dynamic", track_changes=True)
        engine.limits = limits_from_bytes(cfg.max_state_bytes, cfg.max_per_subscription, engine.instance_bytes())
        engine.subscribe_many([(sid, pattern, since) for sid, (_, pattern, since) in self.subs.items()])
        return engine

    def _restore(self, partitions: list[int], consumer: Consumer) -> None:
        """Each partition's state from its changelog partition, then its events from the committed offset."""
        found = consumer.committed([TopicPartition(self.input_topic, p) for p in partitions], timeout=30)
        logged: dict[int, list[Message]] = {p: [] for p in partitions}
        for m in read_to_end(self.clients, [TopicPartition(self.changelog, p, OFFSET_BEGINNING) for p in partitions],
                             group_id=f"{self.config.group_id}.restore"):
            logged[m.partition()].append(m)
        for tp in found:
            p, committed = tp.partition, max(tp.offset, 0)
            changes = from_records((m.key(), m.value(), m.headers()) for m in logged[p])
            store = KeyedStore()
            self.discarded_changes += store.apply(changes, committed)
            store, reorder_state = split_reorder(store)
            engine_state, contents_state = split(store)
            part = _Partition(self._engine(), BoundContents(), committed)
            if self.config.repartition_by is not None:
                part.reorder = ReorderBuffer(self.config.grace_ms)
                part.reorder.restore(reorder_state)
            self.restored_instances += part.engine.restore(engine_state)
            part.contents.restore(contents_state)
            # contents of instances that were not restored (their subscription is gone or changed) are released
            part.contents.settle(part.engine.bound_event_ids(), committed - 1)
            self.parts[p] = part
            self._unwritten.add(p)
            self.restores += 1
            log.info("partition %d restored: %d instances, %d bound events, %d changelog records (%d discarded), "
                     "from offset %d", p, part.engine.live(), len(part.contents), len(changes),
                     sum(1 for _, _, _, o in changes.sources() if o >= committed), committed)

    def _release(self, partitions: list[int] | None = None) -> None:
        """Forget owned partitions (all by default: revoked, or to be restored after a failed batch)."""
        if partitions is None:
            self._source.clear()  # re-keying resumes from the committed offsets
        for p in list(self.parts) if partitions is None else partitions:
            self._unwritten.discard(p)
            for k, v in self.parts.pop(p).engine.counters.items():
                self._counters[k] = self._counters.get(k, 0) + v

    def _sync_assignment(self, consumer: Consumer) -> None:
        assigned = consumer.assignment()
        owned = {tp.partition for tp in assigned if tp.topic == self.input_topic}
        if self.config.repartition_by is not None:
            self._sources = {tp.partition for tp in assigned if tp.topic == EVENTS}
            for p in [p for p in self._source if p not in self._sources]:
                del self._source[p]
        self._release([p for p in self.parts if p not in owned])
        new = sorted(owned - set(self.parts))
        if new:
            self._restore(new, consumer)

    # --- events -------------------------------------------------------------------------

    def _rekey(self, msgs: list[Message]) -> None:
        """Each event to the repartition partition of its attribute's value (``wire.placement``; an event without
        the attribute goes with the value null), keyed by that value, with its timestamp and its source position;
        in the open transaction, so the events offsets commit with the re-keyed records."""
        attr, n = self.config.repartition_by, self._repartitions
        for m in msgs:
            p, offset = m.partition(), m.offset()
            if offset < self._source.get(p, -1):
                continue  # a replay of what this transaction already re-keyed
            self._source[p] = offset + 1
            kind, ms = m.timestamp()
            if kind != TIMESTAMP_NOT_AVAILABLE:
                self._source_time[p] = max(self._source_time.get(p, ms), ms)
            else:
                ms = self._source_time.get(p, 0)  # event time so far, never the clock
            try:
                value = codecs.decode_event(m.value()).get(attr)
            except codecs.DecodeError:
                self.invalid_events += 1  # as for placed events: skipped and counted (pubsub run dead-letters them)
                continue
            self.delivery.produce(self.input_topic, placement_text(value), m.value(), partition=partition_for(value, n),
                                  timestamp=ms, headers=[(SOURCE_HEADER, _SOURCE.pack(p, offset))])
            self.rekeyed += 1

    def _on_repartitioned(self, p: int, msgs: list[Message]) -> None:
        """A repartition partition's records: into its reorder buffer (late ones dead-lettered, repeats of an aborted
        re-keying dropped, both counted), then the released events through the engine, in event-time order."""
        part = self.parts[p]
        msgs = [m for m in msgs if m.offset() >= part.position]
        if not msgs:
            return
        buf = part.reorder
        for m in msgs:
            header = dict(m.headers() or []).get(SOURCE_HEADER)
            if header is None:
                self.dead_letters.send(m, f"no {SOURCE_HEADER} header: not written by the re-keying")
                continue
            src_p, src_off = _SOURCE.unpack(header)
            ms = m.timestamp()[1]
            verdict = buf.offer(ms, src_p, src_off, m.value())
            if verdict == "late":
                self.late_events += 1
                self.dead_letters.send_record(
                    EVENTS, src_p, src_off, None, m.value(),
                    f"late event: timestamp {ms} is behind the watermark {buf.frontier} of {self.input_topic} "
                    f"partition {p} (grace {self.config.grace_ms} ms)")
            elif verdict == "repeat":
                self.repeated_events += 1
        released = buf.release()
        tag = msgs[0].offset()  # the first input offset of this transaction: its changes are discarded if it aborts
        if released:
            ids = [event_id(sp, so) for _, sp, so, _ in released]
            ts = [t for t, _, _, _ in released]
            values = [v for _, _, _, v in released]
            decoded = decode_events(values)
            self.invalid_events += len(decoded.errors)
            rows = decoded.rows.tolist()
            ids, ts, values = [ids[r] for r in rows], [ts[r] for r in rows], [values[r] for r in rows]
            if ids:
                part.contents.offer(ids, ts, values)
                witnesses = part.engine.process(decoded.event_batch(), np.array(ids, np.int64), np.array(ts, np.int64))
                for w in witnesses:
                    self._notify(p, part, w)
                part.contents.settle(part.engine.bound_event_ids(), tag)
                self.events += len(ids)
        part.position = msgs[-1].offset() + 1
        self._write_changes([p], tag)

    def _on_events(self, p: int, msgs: list[Message]) -> None:
        part = self.parts[p]
        msgs = [m for m in msgs if m.offset() >= part.position]  # a replay of what a restore already covers
        if not msgs:
            return
        decoded = decode_events([m.value() for m in msgs])  # the batch decoder: values straight into columns
        self.invalid_events += len(decoded.errors)  # the event processor (pubsub run) dead-letters invalid events
        ids, ts, values = [], [], []
        for r in decoded.rows.tolist():
            m = msgs[r]
            kind, ms = m.timestamp()
            if kind != TIMESTAMP_NOT_AVAILABLE:
                part.event_time = max(part.event_time, ms)
            ids.append(m.offset())
            ts.append(ms if kind != TIMESTAMP_NOT_AVAILABLE else part.event_time)  # event time, never the clock
            values.append(m.value())
        last = msgs[-1].offset()
        if ids:
            part.contents.offer(ids, ts, values)
            witnesses = part.engine.process(decoded.event_batch(), np.array(ids, np.int64), np.array(ts, np.int64))
            for w in witnesses:
                self._notify(p, part, w)
            part.contents.settle(part.engine.bound_event_ids(), last)
            self.events += len(ids)
        part.position = last + 1
        self._write_changes([p])

    def _notify(self, p: int, part: _Partition, w: Witness) -> None:
        subscriber, pattern, _ = self.subs[w.sid]
        names = [pattern.bind] + [s.bind for s in pattern.steps]
        bound = []
        for name, (eid, iterations) in zip(names, w.bound):
            item = part.contents.get(eid)
            src_p, offset = (p, eid) if part.reorder is None else event_name(eid)  # the events partition and offset
            bound.append({"bind": name, "event_id": f"{src_p}:{offset}", "offset": offset, "iterations": iterations,
                          "ts": None if item is None else item[0],
                          "event": None if item is None else codecs.decode_event(item[1])})
            if part.reorder is not None:
                bound[-1]["partition"] = src_p
        nid = (pattern_notification_id(w.sid, p, w.bound) if part.reorder is None
               else repartitioned_notification_id(w.sid, w.bound))
        body = {"notification_id": nid, "subscription_id": w.sid,
                "subscriber": subscriber, "kind": "pattern", "partition": p, "start_ts": w.start_ts,
                "end_ts": w.end_ts, "events": bound,
                "aggregates": {k: (None if v is None or (isinstance(v, float) and math.isnan(v)) else v)
                               for k, v in w.aggregates}}
        self.delivery.produce(NOTIFICATIONS, subscriber, json.dumps(body, separators=(",", ":")).encode())
        self.notifications += 1

    def _write_changes(self, partitions: list[int] | None = None, tag: int | None = None) -> None:
        """State changes of owned partitions (by default those changed by subscriptions or a restore) to their
        changelog partitions, in the open transaction: the events' offsets are committed with them.

        Behind a reorder buffer the events of a batch are not those read in it, so every change of the batch is
        tagged ``tag``, the first input offset read in the transaction: at or past the committed offset exactly
        when the transaction did not commit (changes without a batch: the last offset read)."""
        for p in sorted(self._unwritten) if partitions is None else partitions:
            self._unwritten.discard(p)
            part = self.parts.get(p)
            if part is None:
                continue
            parts = [part.engine.changes(), part.contents.changes()]
            if part.reorder is not None:
                at = part.position - 1 if tag is None else tag
                parts.append(part.reorder.changes(at))
                for c in parts:
                    c.offsets[:] = at
            changes = StateChanges.concat(parts)
            self.delivery.produce_many(self.changelog, to_records(changes), p)
            self.changes_written += len(changes)

    def _commit(self, consumer: Consumer) -> None:
        self._write_changes()
        offsets = [TopicPartition(self.input_topic, p, part.position) for p, part in self.parts.items()]
        offsets += [TopicPartition(EVENTS, p, position) for p, position in self._source.items()]
        if offsets or self.delivery.pending():
            self.delivery.commit(consumer, offsets)

    # --- the loop --------------------------------------------------------------------------

    def _check_topics(self) -> None:
        parts = admin.require(self.clients, (SUBSCRIPTIONS, EVENTS, NOTIFICATIONS, DEAD_LETTER))
        own = (self.changelog,) if self.input_topic == EVENTS else (self.input_topic, self.changelog)
        admin.create_topics(self.clients, partitions=parts[EVENTS], names=own)
        n = admin.partitions_of(self.clients, self.changelog)
        if n != parts[EVENTS]:
            raise RuntimeError(f"{self.changelog} has {n} partitions and {EVENTS} {parts[EVENTS]}: a partition's "
                               f"state lives in the changelog partition of the same number; recreate the changelog "
                               f"(the state is rebuilt from the committed offsets only if nothing was committed)")
        if self.input_topic != EVENTS:
            self._repartitions = admin.partitions_of(self.clients, self.input_topic)
            if self._repartitions != parts[EVENTS]:
                raise RuntimeError(f"{self.input_topic} has {self._repartitions} partitions and {EVENTS} "
                                   f"{parts[EVENTS]}: delete both {self.input_topic} and {self.changelog} "
                                   f"(and the group's offsets) to start over with the events topic's count")
        self._sub_partitions = parts[SUBSCRIPTIONS]

    def run(self) -> dict[str, Any]:
        cfg = self.config
        self._check_topics()
        slot = None if cfg.transactional_id else InstanceSlot(cfg.group_id)
        transactional_id = cfg.transactional_id or slot.transactional_id
        self.delivery = Delivery(self.clients, cfg.delivery, transactional_id)
        self.dead_letters = DeadLetters(self.delivery, cfg.output_format)
        log.info("delivery: %s%s", self.delivery.mode,
                 f" (transactional.id {transactional_id})" if self.delivery.mode == "transactional" else "")
        self.inputs = Inputs(self.clients, cfg.group_id, QueueBounds(), cfg.session_timeout_ms)
        consumer = self.inputs.events
        try:
            for msgs in self.inputs.replay(self._sub_partitions, {}, self._stop.is_set):
                self._on_subscriptions(msgs)
            gc.collect()
            gc.freeze()  # compiled patterns are long-lived: keep them out of the collector's full passes
            log.info("%d pattern subscriptions loaded", len(self.subs))
            self.inputs.join(before_revoke=self._before_revoke,
                             topics=(EVENTS,) if self.input_topic == EVENTS else (EVENTS, self.input_topic))
            self.ready.set()
            meter = RateMeter(cfg.progress_interval)
            while not self._stop.is_set():
                try:
                    self._step(consumer)
                except DeliveryError as exc:  # not Fenced (another instance took over): that one ends the run
                    log.error("not delivered (%s): restoring the partitions from the committed offsets", exc)
                    self._release()
                    if not self.delivery.recover(consumer, self._stop.is_set):
                        break
                if meter.due():
                    rates = meter.tick({"events": self.events, "notifications": self.notifications})
                    log.info("%s events/s, %s notifications/s, %s pattern subscriptions, partitions %s, "
                             "%d live instances, %d dead letters", human(rates["events"]),
                             human(rates["notifications"]), human(len(self.subs)), sorted(self.parts),
                             sum(part.engine.live() for part in self.parts.values()), self.dead_letters.total)
        finally:
            try:
                self.delivery.close()
            finally:
                self.inputs.close()
                if slot is not None:
                    slot.release()
        return self.stats()

    def _step(self, consumer: Consumer) -> None:
        changes = self.inputs.changes()  # subscriptions first: they apply to the events of this batch on
        if changes:
            self._on_subscriptions(changes)
        msgs = [m for m in self.inputs.batch(self.config.batch_size) if has_data(m)]
        self._sync_assignment(consumer)
        by_partition: dict[int, list[Message]] = {}
        rekey = []
        for m in msgs:
            if m.topic() == self.input_topic:
                by_partition.setdefault(m.partition(), []).append(m)
            elif m.topic() == EVENTS and m.partition() in self._sources:  # not one revoked meanwhile
                rekey.append(m)
        if rekey:
            self._rekey(rekey)
        for p, part_msgs in sorted(by_partition.items()):
            if p in self.parts:  # events of a partition revoked meanwhile are its next owner's
                (self._on_events if self.parts[p].reorder is None else self._on_repartitioned)(p, part_msgs)
        if msgs or changes or self.delivery.pending():
            self._commit(consumer)

    def _before_revoke(self, consumer: Consumer) -> None:
        """Partitions are taken away: commit what was processed of them while this instance owns them, then
        forget them (the next assignment restores them from the changelog)."""
        try:
            if self.parts:
                self._commit(consumer)
        except DeliveryError as exc:
            log.warning("commit before revoke failed (%s): the next owner replays from the committed offsets", exc)
            self.delivery.recover(None, self._stop.is_set)
        self._release()

    def stats(self) -> dict[str, Any]:
        counters = dict(self._counters)
        for part in self.parts.values():
            for k, v in part.engine.counters.items():
                counters[k] = counters.get(k, 0) + v
        return {"delivery": self.delivery.mode if self.delivery else None, "events": self.events,
                "invalid_events": self.invalid_events, "notifications": self.notifications,
                "subscriptions": len(self.subs), "subscription_changes": self.subscription_changes,
                "partitions": sorted(self.parts), "restores": self.restores,
                "restored_instances": self.restored_instances, "discarded_changes": self.discarded_changes,
                "changelog_records": self.changes_written,
                "repartition": None if self.config.repartition_by is None else {
                    "attribute": self.config.repartition_by, "topic": self.input_topic,
                    "grace_ms": self.config.grace_ms, "rekeyed": self.rekeyed, "late_events": self.late_events,
                    "repeated_events": self.repeated_events,
                    "held": sum(len(part.reorder) for part in self.parts.values() if part.reorder is not None)},
                "instances": {k: counters.get(k, 0) for k in ("started", "completed", "killed", "expired", "refused",
                                                              "dropped")},
                "dead_letters": dict(self.dead_letters.counts) if self.dead_letters else {}}
