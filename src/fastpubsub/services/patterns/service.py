"""The pattern service as a task of the runtime: pattern subscriptions over the events topic, exactly once.

    pubsub.events (a consumer group: partitions shared between instances)
    + pubsub.subscriptions (every instance reads them all: the pattern ones are the service's)
        -> one PatternEngine per owned events partition (fastpubsub.patterns, Cayuga's automata)
        -> pubsub.notifications (one per completed pattern, JSON, keyed by subscriber)
        -> pubsub.changelog.patterns, partition p for events partition p (instances, bound events, event time)
        -> pubsub.dead-letter (bad pattern subscriptions)

all in one Kafka transaction with the events offsets (the host, ``runtime.host``).  With ``repartition_by``
(``--repartition-by ATTR``, docs/patterns.md 6.5) it is a two-stage application as Kafka Streams builds one: it
re-keys each event by the attribute into its own repartition topic (``services.patterns.repartition``), and the
engines run on the repartition partitions behind reorder buffers; the changelog is then the repartition topic's.
A partition's state is restored from its changelog partition whenever the partition is assigned, before any of its
events is processed; changes tagged with a source offset at or past the committed one are discarded (what an
at-least-once crash between the outputs and the offset commit leaves; the replay writes them again).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, Message

from fastpubsub.kafka import admin
from fastpubsub.patterns import Pattern
from fastpubsub.patterns.engine import PatternEngine, limits_from_bytes
from fastpubsub.patterns.reorder import event_name
from fastpubsub.runtime import Context, Host, human, Outputs, SourceRecord, TaskBase, Topics
from fastpubsub.state import StateChanges, to_records
from fastpubsub.wire import codecs
from fastpubsub.kafka.schema_registry import event_decoders
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.metadata import attach, referenced
from fastpubsub.wire.registered import RegisteredDecoders
from fastpubsub.wire.subscription_decoder import parse_subscription_id

from .config import PatternServiceConfig
from .notifications import notification, pattern_notification_id, repartitioned_notification_id  # noqa: F401
from .partitions import Partition, restore_partitions
from .repartition import Repartition

log = logging.getLogger("pubsub.patterns")


class PatternsTask(TaskBase):
    name = "pubsub.patterns"

    def __init__(self, config: PatternServiceConfig) -> None:
        self.config = config
        self.ctx: Context | None = None  # given by the host's first hook
        self.registered: RegisteredDecoders | None = None  # with --schema-registry (set in prepare)
        self.subs: dict[int, tuple[str, Pattern, int]] = {}  # sid -> (subscriber, pattern, since ms)
        self.parts: dict[int, Partition] = {}
        self.events = self.invalid_events = self.notifications = self.changes_written = 0
        self.subscription_changes = 0
        self.restores = self.restored_instances = self.discarded_changes = 0
        self._counters: dict[str, int] = {}  # engine counters of partitions no longer owned
        self._unwritten: set[int] = set()  # partitions with state changes not yet written (subscriptions, restore)
        self.input_topic, self.changelog = config.input_topic, config.changelog_topic
        self.repartition = None if config.repartition_by is None else Repartition(config, self)

    def topics(self) -> Topics:
        own = () if self.repartition is None else (self.input_topic,)
        names, events = self.config.host.topics, self.config.events_topic
        return Topics(group=(events, *own), state=names.subscriptions, inputs=(events, names.subscriptions, *own),
                      outputs=(names.notifications, names.dead_letter, self.changelog, *own))

    # --- start -------------------------------------------------------------------------

    def before_clients(self, ctx: Context) -> None:
        self.ctx = ctx
        if self.config.schema_registry is not None:
            self.registered = event_decoders(self.config.schema_registry, waiting=ctx.registry_waiting,
                                             stopped=ctx.stopping)
        names, events = self.config.host.topics, self.config.events_topic
        parts = admin.require(ctx.clients, (names.subscriptions, events, names.notifications, names.dead_letter))
        own = (self.changelog,) if self.repartition is None else (self.input_topic, self.changelog)
        admin.create_topics(ctx.clients, partitions=parts[events], names=own, topics=names)
        n = admin.partitions_of(ctx.clients, self.changelog)
        if n != parts[events]:
            raise RuntimeError(f"{self.changelog} has {n} partitions and {events} {parts[events]}: a partition's "
                               f"state lives in the changelog partition of the same number; recreate the changelog "
                               f"(the state is rebuilt from the committed offsets only if nothing was committed)")
        if self.repartition is not None:
            self.repartition.check(ctx.clients, parts[events])
        self._sub_partitions = parts[names.subscriptions]

    def restore(self, ctx: Context) -> None:
        """Every pattern subscription, before the group's partitions are restored on assignment."""
        for msgs in ctx.inputs.replay(self._sub_partitions, {}, ctx.stopping):
            out = Outputs()
            self.on_state(msgs, out)
            ctx.send(out)
        ctx.commit_outputs()  # dead letters of bad pattern subscriptions
        log.info("%d pattern subscriptions loaded", len(self.subs))

    # --- subscriptions ----------------------------------------------------------------

    def on_state(self, msgs: list[Message], out: Outputs) -> None:
        """Apply subscription records in order: the latest per id counts; a replaced or deleted pattern loses its
        instances in every owned partition.  Bad pattern records are dead-lettered (keyed by their position, so the
        same record dead-lettered again, by a restart or another instance, collapses with the first)."""
        latest: dict[int, tuple[str, Pattern, int] | None] = {}
        for msg in msgs:
            if msg.error() is not None:
                continue
            value = msg.value()
            try:
                sid = parse_subscription_id(msg.key())
            except codecs.DecodeError as exc:
                if codecs.is_pattern_subscription(value):
                    out.reject(msg, str(exc))
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
                    out.reject(msg, str(exc))
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
        for p, part in restore_partitions(self.ctx.clients, consumer, partitions, self.input_topic, self.changelog,
                                          self.config, self._engine, self).items():
            self.parts[p] = part
            self._unwritten.add(p)
            self.restores += 1

    def _release(self, partitions: list[int] | None = None) -> None:
        """Forget owned partitions (all by default: revoked, or to be restored after a failed delivery)."""
        if partitions is None and self.repartition is not None:
            self.repartition.forget()  # re-keying resumes from the committed offsets
        for p in list(self.parts) if partitions is None else partitions:
            self._unwritten.discard(p)
            for k, v in self.parts.pop(p).engine.counters.items():
                self._counters[k] = self._counters.get(k, 0) + v

    def assigned(self) -> None:
        consumer = self.ctx.inputs.group
        assigned = consumer.assignment()
        owned = {tp.partition for tp in assigned if tp.topic == self.input_topic}
        if self.repartition is not None:
            self.repartition.assigned({tp.partition for tp in assigned if tp.topic == self.config.events_topic})
        self._release([p for p in self.parts if p not in owned])
        new = sorted(owned - set(self.parts))
        if new:
            self._restore(new, consumer)

    def revoked(self) -> None:
        self._release()

    def rewind(self) -> None:
        self._release()  # restored from the changelogs at the committed offsets on the next turn

    # --- events -------------------------------------------------------------------------

    def process(self, msgs: list[Message], out: Outputs) -> int:
        before = self.events
        by_partition: dict[int, list[Message]] = {}
        rekey = []
        for m in msgs:
            if m.topic() == self.input_topic:
                by_partition.setdefault(m.partition(), []).append(m)
            elif self.repartition is not None and m.topic() == self.config.events_topic:
                rekey.append(m)
        if rekey:
            self.repartition.rekey(rekey, out)
        for p, part_msgs in sorted(by_partition.items()):
            if p in self.parts:  # events of a partition revoked meanwhile are its next owner's
                if self.parts[p].reorder is None:
                    self._on_events(p, part_msgs, out)
                else:
                    self.repartition.released(p, self.parts[p], part_msgs, out)
        return self.events - before

    def _on_events(self, p: int, msgs: list[Message], out: Outputs) -> None:
        part = self.parts[p]
        msgs = [m for m in msgs if m.offset() >= part.position]  # a replay of what a restore already covers
        if not msgs:
            return
        ids, ts = [], []
        decoded = decode_events([m.value() for m in msgs], self.registered)  # values straight into columns
        decoded = attach(decoded, msgs, referenced(part.engine.attr_cols))  # $topic, $key...: what patterns name
        self.invalid_events += len(decoded.errors)  # the event processor (pubsub run) dead-letters invalid events
        for r in decoded.rows.tolist():
            kind, ms = msgs[r].timestamp()
            if kind != TIMESTAMP_NOT_AVAILABLE:
                part.event_time = max(part.event_time, ms)
            ids.append(msgs[r].offset())
            ts.append(ms if kind != TIMESTAMP_NOT_AVAILABLE else part.event_time)  # event time, never the clock
        self.match(p, part, decoded, ids, ts, [msgs[r].value() for r in decoded.rows.tolist()], msgs[-1].offset(), out)
        part.position = msgs[-1].offset() + 1
        self._write_changes(out, [p])

    def match(self, p: int, part: Partition, decoded, ids: list[int], ts: list[int], values: list[bytes],
              settled: int, out: Outputs) -> None:
        """Decoded events through a partition's engine: a notification per completed pattern."""
        if not ids:
            return
        part.contents.offer(ids, ts, values)
        for w in part.engine.process(decoded.event_batch(), np.array(ids, np.int64), np.array(ts, np.int64)):
            subscriber, pattern, _ = self.subs[w.sid]
            out.produce(self.config.host.topics.notifications, subscriber,
                        notification(w, subscriber, pattern, p, part.contents, part.reorder is not None,
                                     self.registered),
                        self._completing(p, part, w.bound[-1][0]))
            self.notifications += 1
        part.contents.settle(part.engine.bound_event_ids(), settled)
        self.events += len(ids)

    def _completing(self, p: int, part: Partition, eid: int) -> SourceRecord:
        """The event that completed a pattern: dead-lettered if the broker refuses its notification."""
        item = part.contents.get(eid)
        where = (self.config.events_topic, *event_name(eid)) if part.reorder is not None else (self.input_topic, p, eid)
        return SourceRecord(*where, None, None if item is None else item[1])

    def _write_changes(self, out: Outputs, partitions: list[int] | None = None, tag: int | None = None) -> None:
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
            for key, value, headers in to_records(changes):
                out.produce(self.changelog, key, value, headers=headers, partition=p)
            self.changes_written += len(changes)

    def before_commit(self, out: Outputs) -> None:
        self._write_changes(out)

    # --- what the host asks of it ----------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        return {"subscriptions": len(self.subs), "changes": {}, "info": {}, "engine": _Engines(self.parts)}

    def progress(self) -> str:
        return (f"{human(len(self.subs))} pattern subscriptions, partitions {sorted(self.parts)}, "
                f"{sum(part.engine.live() for part in self.parts.values())} live instances")

    def stats(self) -> dict[str, Any]:
        counters = dict(self._counters)
        for part in self.parts.values():
            for k, v in part.engine.counters.items():
                counters[k] = counters.get(k, 0) + v
        return {"events": self.events, "invalid_events": self.invalid_events, "notifications": self.notifications,
                "subscriptions": len(self.subs), "subscription_changes": self.subscription_changes,
                "partitions": sorted(self.parts), "restores": self.restores,
                "restored_instances": self.restored_instances, "discarded_changes": self.discarded_changes,
                "changelog_records": self.changes_written,
                "repartition": None if self.repartition is None else self.repartition.stats(self.parts.values()),
                "instances": {k: counters.get(k, 0) for k in ("started", "completed", "killed", "expired", "refused",
                                                              "dropped")}}



class _Engines:
    """The owned partitions' engines as ``/metrics`` reads an engine (``stats()``, sampled by the host): memory by
    structure summed over the partitions, the pattern rows, live instances and bound events' contents."""

    def __init__(self, parts: dict[int, Partition]) -> None:
        self.parts = parts

    def stats(self) -> dict[str, Any]:
        memory: dict[str, int] = {}
        for part in self.parts.values():
            for k, v in part.engine.memory_by_structure().items():
                memory[k] = memory.get(k, 0) + v
        engines = [part.engine for part in self.parts.values()]
        return {"memory": memory, "memory_bytes": sum(memory.values()), "rows": sum(e.rows() for e in engines),
                "live_instances": sum(e.live() for e in engines),
                "bound_events": sum(len(part.contents) for part in self.parts.values())}


class PatternService(Host):
    """The pattern service: :class:`PatternsTask` on the one runtime (``pubsub patterns``)."""

    def __init__(self, config: PatternServiceConfig) -> None:
        super().__init__(PatternsTask(config), config.host_config())
