"""The event processor as a task of the runtime: an event batch flows one way through named stages.

    consume (the host) -> decode -> match -> encode -> deliver (the host)

``Decode`` turns records into columns and rejects, ``Match`` runs one ``match_encoded`` per batch against the
subscriptions (``ProcessorState``), ``Encode`` writes the notifications lazily, and the host produces them in the
transaction that commits the input offsets (``runtime.host``).  Subscription changes take the same way from
``match`` on: new subscriptions are matched against the stored valid events.

Subscriptions are state, not work: every instance rebuilds them from ``pubsub.subscriptions`` (or a snapshot and
what followed it) before it matches any event; events are shared between the instances of one consumer group.
A shard (``services.events.shard``, ``--shard I/K``) holds only the subscriptions whose id hashes to it and reads
every event in its own consumer group.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from confluent_kafka import Message

from fastpubsub.kafka.admin import require
from fastpubsub.kafka.schema_registry import event_decoders, output_subjects, register_outputs
from fastpubsub.runtime import (
    Context, Handoff, has_data, Host, human, Outputs, RateMeter, StaleSnapshot, TaskBase, too_large, Topics,
)
from fastpubsub.wire.codecs import DecodeError
from fastpubsub.wire.metadata import referenced
from fastpubsub.wire.subscription_decoder import DecodedSubscriptions, decode_subscriptions, parse_subscription_id

from ..warmup import PROCESSOR_STEPS, warm_up
from .config import ProcessorConfig
from .decode import Decode, ReferencedAttributes
from .encode import Encode
from .match import Match
from .state import ProcessorState
from .statistics_feed import StatisticsFeed

log = logging.getLogger("pubsub")

#: Subscription records applied per bulk step during a rebuild: each step is one batch decode and one
#: ``add_bulk`` whose index maintenance has a fixed cost, so a rebuild takes few large steps (a live change
#: is applied as soon as it is read).  The first step is a fifth of that: the bulk load starts once it is read
#: and decoded, instead of waiting idle for a whole step.
REBUILD_CHUNK = 100_000
#: Chunks read and decoded ahead of the bulk load during a rebuild (``runtime.handoff``).
REBUILD_AHEAD = 2


@dataclass
class Changes:
    """Subscription records taken out of their messages: to apply (key, value each), and passed (too large)."""

    records: list[Message] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    passed: list[Message] = field(default_factory=list)  # not applied, their offsets move on
    rejects: list[tuple[Message, str]] = field(default_factory=list)  # to dead-letter, with the reason
    decoded: DecodedSubscriptions | None = None  # keys and values decoded ahead (a rebuild's read thread)


class EventsTask(TaskBase):
    """Subscriptions x events -> notifications (Fabret et al.), as the host runs it."""

    name = "pubsub"

    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config
        self.reports_bad_input = config.shard.reports_unowned_input
        self.held = ProcessorState(config.algorithm, config.runs, config.max_valid_events, config.max_valid_event_bytes,
                                   config.snapshot_dir, config.snapshot_every, config.snapshot_changes, config.shard)
        self.ctx: Context | None = None  # given by the host's first hook
        self.statistics_feed: StatisticsFeed | None = None
        self.rebuild_records = 0  # subscription records read at start (all of them, or those after the snapshot)
        self.registry_ids: dict[int, int] | None = None  # with --schema-registry: its ids of the output schemas
        self._partitions = 0
        #: the attribute names the subscriptions test (prefix and derived ones by the attribute they read)
        self._referenced = ReferencedAttributes(lambda: self.state.matcher)
        self._names_seen, self._wanted = frozenset(), ()  # the referenced names last looked at (metadata)

    @property
    def state(self):
        return self.held.subscriptions

    @property
    def store(self):
        return self.held.events

    def _metadata(self) -> tuple[str, ...]:
        """The record metadata attributes the subscriptions name (``$topic``...), looked for again only when the
        referenced names changed.  From the names the decoder keeps (``ReferencedAttributes``), not the matcher's
        attribute dictionary alone: a ``prefix`` subscription is filed in the prefix index under its attribute,
        which the dictionary never names (``$topic prefix "ord"`` alone then matched nothing)."""
        names = self._referenced()
        if names is not self._names_seen:
            self._names_seen, self._wanted = names, referenced(names)
        return self._wanted

    def topics(self) -> Topics:
        names = self.config.host.topics
        return Topics(group=tuple(names.event_subscription), state=names.subscriptions,
                      inputs=(*names.events, names.subscriptions), outputs=(names.notifications, names.dead_letter))

    # --- start: snapshot, rebuild ------------------------------------------------------

    def before_clients(self, ctx: Context) -> None:
        self.ctx, counters = ctx, ctx.counters
        registered = self.registry_ids = None
        if self.config.schema_registry is not None:
            patience = {"waiting": ctx.registry_waiting, "stopped": ctx.stopping}
            registered = event_decoders(self.config.schema_registry, **patience)
            self.registry_ids = register_outputs(self.config.schema_registry,
                                                 output_subjects(self.config.host.topics.notifications, self.config.host.topics.dead_letter), **patience)
        self.decode = Decode(counters, self.reports_bad_input, self._metadata, registered, self._referenced)
        self.match = Match(self.held, counters, self.config.host.topics.notifications)
        self.encode = Encode(self.config.host.output_format, self.config.notification_event, counters,
                             self.config.host.topics.notifications, self.config.notification_event_format, registered)
        self.encode.registry_ids = self.registry_ids
        self.held.prefetch_snapshot()  # read and checksummed while the clients start and the kernels load
        names = self.config.host.topics  # the topics it cannot run without, or a clear error
        self._partitions = require(ctx.clients, names.required)[names.subscriptions]
        if self.config.shard.sharded:
            log.info("shard %s: holding the subscriptions whose id hashes to %d of %d; consumer group %s",
                     self.config.shard, self.config.shard.index, self.config.shard.count, self.config.group)

    def after_clients(self, ctx: Context) -> None:
        self.match.limits = self.encode.limits = ctx.limits
        ctx.dead_letter_schemas(self.registry_ids)
        # the rebuild's readers fetch while the statistics, the kernels and the snapshot load
        ctx.inputs.prefetch(self._partitions, self.held.start_offsets())
        # the latest snapshot of pubsub.statistics before the rebuild, so that the bulk load uses it; bad
        # statistics records are dead-lettered once, by shard 0
        names = self.config.host.topics
        self.statistics_feed = StatisticsFeed(ctx.clients, lambda: self.state.matcher, names.events_label,
                                              names.statistics, group=names.group("pubsub-statistics-feed"),
                                              dead_letter=self._reject_statistics if self.reports_bad_input else None)

    def warm_up(self, on_compile: Callable[..., None]) -> int:
        return warm_up((self.config.algorithm,), PROCESSOR_STEPS, self.config.runs, on_compile=on_compile).compiled

    def restore(self, ctx: Context) -> None:
        """The snapshot (if usable) plus the changes after its offsets, else a full rebuild; then a fresh snapshot.

        A change applied here is evaluated against the events the store holds, like a live one: without a
        snapshot the store starts empty, so a full rebuild notifies nothing; from a snapshot, the changes after
        its offsets are evaluated against the snapshot's events (repeats carry the same notification ids).
        """
        self.held.load_snapshot(self._partitions)
        try:
            self._rebuild(ctx)
        except StaleSnapshot as exc:
            log.warning("ignoring the snapshot, rebuilding from %s: %s", self.config.host.topics.subscriptions, exc)
            self.held.reset()
            self._rebuild(ctx)
        if self.config.snapshot_dir and self.held.unsnapshotted and not ctx.stopping():
            self.snapshot()
        self.statistics_feed.reapply()  # a state loaded from a snapshot starts with uniform statistics

    def _rebuild(self, ctx: Context) -> None:
        """Read the subscriptions topic to its end and apply it in bulk steps of ``REBUILD_CHUNK`` records.

        Reading and decoding run on a thread of their own (``runtime.handoff``), a chunk or two ahead of the bulk
        load on this one: the consumers fetch and the decoder's kernel runs without the GIL while ``add_bulk``
        loads the chunk before.  The chunks are applied in the order they were read.
        """
        started, before = time.monotonic(), self.held.unsnapshotted
        meter = RateMeter(self.config.host.progress_interval)
        offsets = dict(self.held.offsets)  # where the readers start (the loads below move these on)

        def chunks(stopped: Callable[[], bool]) -> Iterator[Changes]:
            pending: list[Message] = []
            size = max(1, REBUILD_CHUNK // 5)
            for msgs in ctx.inputs.replay(self._partitions, offsets, lambda: stopped() or ctx.stopping()):
                pending += msgs
                if len(pending) >= size:
                    yield self._split_changes(pending, decode=True)
                    pending, size = [], REBUILD_CHUNK
            if pending:
                yield self._split_changes(pending, decode=True)

        with Handoff(chunks, depth=REBUILD_AHEAD, idle=ctx.heartbeat, name="rebuild-read") as ahead:
            for changes in ahead:
                out = Outputs()
                self._apply_changes(changes, out)
                ctx.send(out)
                ctx.heartbeat()
                if meter.due():
                    meter.tick({})
                    log.info("rebuilding: %s subscriptions so far", human(len(self.state)))
        ctx.commit_outputs()  # dead letters of invalid subscriptions
        self.rebuild_records = self.held.unsnapshotted - before
        log.info("ready: %d subscriptions, %d records of %s read in %.1fs",
                 len(self.state), self.rebuild_records, self.config.host.topics.subscriptions, time.monotonic() - started)

    # --- the flows --------------------------------------------------------------------

    def process(self, msgs: list[Message], out: Outputs) -> int:
        """decode -> match -> encode; the host produces the outputs into the open transaction."""
        batch = self.decode(msgs)
        for record, reason in batch.rejects:
            out.reject(record, reason)
        matched = self.match.events(batch)
        out.extend(self.encode(matched))  # lazily: encoding counts with producing
        return len(batch.decoded)

    def on_state(self, msgs: list[Message], out: Outputs) -> None:
        """Subscription changes: applied in one bulk step, then new subscriptions x stored valid events."""
        self._apply_changes(self._split_changes(msgs), out)

    def _split_changes(self, msgs: list[Message], decode: bool = False) -> Changes:
        """The records to apply, their keys and values, and the ones too large to; with ``decode``, the keys and
        values decoded too (the rebuild does this on its read thread: nothing here touches the state)."""
        changes, limit = Changes(), self.ctx.limits.max_record_bytes
        records, keys, values, passed, rejects = changes.records, changes.keys, changes.values, changes.passed, \
            changes.rejects
        for msg in msgs:  # a rebuild runs this a million times: the common case in a few C calls
            if msg.error() is not None and not has_data(msg):
                continue
            key, value = msg.key(), msg.value()
            if (len(key) if key else 0) + (len(value) if value else 0) <= limit:
                records.append(msg)
                keys.append(key)
                values.append(value)
            else:
                passed.append(msg)
                if self._owns_record(msg):  # dead-lettered once: by its id's shard, else by shard 0
                    rejects.append((msg, too_large(msg, limit)))
        if decode:
            changes.decoded = decode_subscriptions(keys, values)
        return changes

    def _apply_changes(self, changes: Changes, out: Outputs) -> None:
        applied = self.held.apply_columns(changes.records, changes.keys, changes.values, changes.passed,
                                          changes.decoded)
        for record, reason in changes.rejects + [(changes.records[i], str(exc)) for i, exc in applied.errors]:
            out.reject(record, reason)
        out.extend(self.encode(self.match.stored(applied)))

    def _owns_record(self, msg: Message) -> bool:
        """Whether this shard dead-letters a subscription record it cannot decode: its id's shard, else shard 0."""
        shard = self.config.shard
        try:
            return shard.owns(parse_subscription_id(msg.key()))
        except DecodeError:
            return shard.reports_unowned_input

    def poll(self, out: Outputs) -> None:
        """The statistics snapshots (``services.events.statistics_feed``)."""
        self.statistics_feed.poll()

    def _reject_statistics(self, msg: Message, reason: str) -> None:
        """A bad statistics record is dead-lettered, into the next transaction (after the one in flight)."""
        out = Outputs()
        out.reject(msg, reason)
        self.ctx.send(out)

    # --- what the host asks of it ----------------------------------------------------------

    def rewind(self) -> None:
        pass  # events do not change the state: the replay meets the same subscriptions

    def snapshot_due(self, force: bool = False) -> bool:
        return bool(self.config.snapshot_dir) and self.held.snapshot_due(force)

    def snapshot(self) -> None:
        self.held.write_snapshot(self._partitions)

    def gauges(self) -> dict[str, Any]:
        st = self.state
        return {"subscriptions": len(st), "changes": {k: getattr(st, k) for k in ("added", "replaced", "removed",
                                                                                  "expired")},
                "engine": st.matcher, "info": {"algorithm": st.matcher.algorithm, "shard": str(self.config.shard)}}

    def progress(self) -> str:
        return f"{human(len(self.state))} subscriptions"

    def stats(self) -> dict[str, Any]:
        c = self.ctx.counters
        return {
            "notifications_by_reference": c.by_reference,
            "stored_events_not_notified": c.not_kept,
            **self.state.stats(),
            "shard": str(self.config.shard),
            "group": self.config.group,
            "other_shards_records": self.state.skipped,  # subscription records of ids other shards hold
            "stored_notifications": c.stored_notifications,
            "valid_events": self.store.stats(),
            "snapshots": self.held.snapshots,
            "matcher": self.state.matcher.algorithm,
            "runs": self.config.runs,
            "statistics": self.statistics_feed.stats() if self.statistics_feed else None,
        }

    def close(self) -> None:
        if self.statistics_feed is not None:
            self.statistics_feed.close()


class Processor(Host):
    """The event processor: :class:`EventsTask` on the one runtime (``pubsub run``)."""

    def __init__(self, config: ProcessorConfig) -> None:
        super().__init__(EventsTask(config), config.host_config())
        self.processor_config = config
