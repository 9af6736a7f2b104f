"""The table service as a task of the runtime: aggregate subscriptions over tables, exactly once.

    table topics + pubsub.subscriptions -> AggregateService.apply / subscribe (Chandramouli et al.)
        -> pubsub.notifications (S-UN, and every subscription's initial answer)
        -> pubsub.reformulated (S-CN)
        -> pubsub.changelog.tables.<name> (the row, with its source partition and offset)
        -> pubsub.dead-letter (bad rows, refused subscriptions)

all in one Kafka transaction with the input offsets (the host, ``runtime.host``).  A range aggregate needs the
whole table in one place, so one instance owns every partition of its tables: it assigns them itself (no group
rebalancing) and its fixed ``transactional.id`` fences an older instance.  State is restored before any input is
processed: the rows from the changelogs (changes at or past the committed offset of their source partition are
discarded: an at-least-once crash before the offset commit leaves them, and the replay writes them again), then
the subscriptions up to their committed offsets, silently (their initial answers were delivered then).  A failed
delivery restores everything again from there.

The event processor and this service read the same subscriptions topic and tell the two kinds apart with the same
codec (``wire.codecs.decode_any_subscription``): each ignores the other's records.
"""

from __future__ import annotations

import gc
import json
import logging
import re
from collections.abc import Iterator
from typing import Any, Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from fastpubsub.aggregates import AggregateService, Notification
from fastpubsub.aggregates.changelog import row_record
from fastpubsub.kafka import admin
from fastpubsub.kafka.readers import committed_offsets, read_to_end
from fastpubsub.kafka.schema_registry import event_decoders
from fastpubsub.runtime import Context, Host, human, Outputs, TaskBase, Topics, restore_changelog
from fastpubsub.state import StateChanges
from fastpubsub.wire import codecs
from fastpubsub.wire.subscription_decoder import parse_subscription_id

from .config import TableServiceConfig
from .declarations import TableDeclaration, announce, create_table_topics, declared_tables  # noqa: F401

log = logging.getLogger("pubsub.tables")

_PLAIN = re.compile(r"[\w.:/@-]*", re.ASCII)  # strings JSON writes as they are


def _key_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return str(v) if type(v) is int else json.dumps(v)


class TablesTask(TaskBase):
    name = "pubsub.tables"

    def __init__(self, config: TableServiceConfig) -> None:
        self.config = config
        self.ctx: Context | None = None  # given by the host's first hook
        self.by_topic = {t.topic: t for t in config.tables}
        self.changelogs = {t.name: config.host.topics.changelog_topic(t.name) for t in config.tables}
        self.svc = AggregateService([t.schema() for t in config.tables], notify=config.mode == "s-un")
        self.subscribers: dict[int, str] = {}
        self.positions: dict[tuple[str, int], int] = {}  # next offset to process, per input partition
        self.updates = self.notifications = self.records = self.subscription_changes = 0
        self.restores = self.restored_rows = 0
        self.discarded_changes = 0  # changelog changes past the committed offsets, left out on restore
        self.registered = None  # with --schema-registry: a wire.registered.RegisteredDecoders (set in prepare)

    def topics(self) -> Topics:
        logs = tuple(self.changelogs.values())
        names = self.config.host.topics
        return Topics(group=(), state=None, inputs=(*self.by_topic, names.subscriptions),
                      outputs=(names.notifications, names.dead_letter, names.reformulated, *logs))

    # --- start ----------------------------------------------------------------------

    def before_clients(self, ctx: Context) -> None:
        """The service's topics and the table topics, then the tables announced on ``pubsub.table-schemas``."""
        self.ctx, clients = ctx, ctx.clients
        names = self.config.host.topics
        if self.config.schema_registry is not None:  # rows in producers' registered schemas, read by path
            self.registered = event_decoders(self.config.schema_registry, waiting=ctx.registry_waiting,
                                             stopped=ctx.stopping)
        admin.create_topics(clients, names=(names.reformulated, names.table_schemas), topics=names)
        admin.create_topics(clients, partitions=1, names=tuple(self.changelogs.values()), topics=names)
        create_table_topics(clients, self.config.tables)
        self._partitions()  # every topic it needs, or a clear error
        announce(clients, self.config.tables, names.table_schemas)
        log.info("mode %s, tables %s", self.config.mode, ", ".join(f"{t.name} ({t.topic})" for t in self.config.tables))

    def _partitions(self) -> dict[str, int]:
        names = self.config.host.topics
        return admin.require(self.ctx.clients, (names.subscriptions, names.notifications, names.dead_letter,
                                                 names.reformulated,
                                                 *self.by_topic, *self.changelogs.values()))

    def restore(self, ctx: Context) -> None:
        """Tables from their changelogs, subscriptions up to their committed offsets; then assign the inputs."""
        gc.disable()  # building millions of long-lived objects: no collector passes over them meanwhile
        try:
            self._load(ctx.inputs.group)
        finally:
            gc.enable()
        log.info("restored: %d rows of %d table(s), %d subscriptions", self.restored_rows, len(self.config.tables),
                 len(self.subscribers))

    def _load(self, consumer: Consumer) -> None:
        parts, clients, subscriptions = self._partitions(), self.ctx.clients, self.config.host.topics.subscriptions
        inputs = [TopicPartition(t, p) for t in (*self.by_topic, subscriptions) for p in range(parts[t])]
        committed = {(tp.topic, tp.partition): tp.offset for tp in committed_offsets(consumer, inputs)}
        self.svc = AggregateService([t.schema() for t in self.config.tables], notify=self.config.mode == "s-un")
        self.subscribers.clear()
        self.restored_rows = 0
        for table in self.config.tables:
            log_topic = self.changelogs[table.name]
            done = {p: max(committed[table.topic, p], 0) for p in range(parts[table.topic])}
            logs = restore_changelog(clients, log_topic, range(parts[log_topic]),
                                     lambda _p, source: done.get(source, 0)).values()
            self.discarded_changes += sum(r.discarded for r in logs)
            self.restored_rows += self.svc.restore(StateChanges.concat([r.changes for r in logs]))
        upto = {(subscriptions, p): max(committed[subscriptions, p], 0) for p in range(parts[subscriptions])}
        subs = read_to_end(clients, [TopicPartition(subscriptions, p, OFFSET_BEGINNING)
                                     for p in range(parts[subscriptions])], stop_at=upto)
        self._on_subscriptions(subs, Outputs(), replay=True)
        self.positions = {k: (v if v >= 0 else 0) for k, v in committed.items()}
        consumer.assign([TopicPartition(t, p, o if o >= 0 else OFFSET_BEGINNING) for (t, p), o in committed.items()])
        self.restores += 1

    def rewind(self) -> None:
        self.restore(self.ctx)  # everything again from the committed offsets

    # --- subscriptions ---------------------------------------------------------------

    def _on_subscriptions(self, msgs: list[Message], out: Outputs, replay: bool = False) -> None:
        """Apply subscription records in order; runs of new ones are registered in bulk.

        ``replay``: records already processed before a restart: no output (their initial answers and dead
        letters were delivered then)."""
        pending: list[tuple[int, Any, Message, str]] = []
        pending_ids: set[int] = set()

        def flush() -> None:
            if not pending:
                return
            inits = self.svc.subscribe_many([(sid, spec) for sid, spec, _, _ in pending])
            for (sid, _, msg, subscriber), n in zip(pending, inits):
                self.subscribers[sid] = subscriber
                if not replay:
                    where = f"{msg.topic()}:{msg.partition()}:{msg.offset()}"
                    self._notify(Notification(f"{sid}/init/{where}", sid, n.value, where), subscriber, out, msg,
                                 init=True)
            pending.clear()
            pending_ids.clear()

        for msg in msgs:
            if not replay:
                self.positions[msg.topic(), msg.partition()] = msg.offset() + 1
            value = msg.value()
            try:
                sid = parse_subscription_id(msg.key())
            except codecs.DecodeError as exc:
                if not replay and codecs.is_aggregate_subscription(value):
                    out.reject(msg, str(exc))
                continue
            if sid in pending_ids:  # a second record of the same id: the first one registered before it
                flush()
            if self.subscribers.pop(sid, None) is not None:
                self.svc.unsubscribe(sid)
            self.subscription_changes += 1
            if not value:
                continue  # a tombstone
            try:
                sub = codecs.decode_any_subscription(value)
                if not isinstance(sub, codecs.AggregateSubscription):
                    continue  # a plain subscription (the event processor's): the id is no aggregate one now
                self.svc.check(sub.spec)
            except codecs.AggregateDecodeError as exc:
                if not replay:
                    out.reject(msg, str(exc))
                continue
            except codecs.DecodeError:
                continue  # an invalid plain subscription: the event processor dead-letters it
            except ValueError as exc:  # a table or attribute this service does not know
                if not replay:
                    out.reject(msg, f"invalid aggregate subscription: {exc}")
                continue
            pending.append((sid, sub.spec, msg, sub.subscriber))
            pending_ids.add(sid)
        flush()

    # --- rows ----------------------------------------------------------------------------

    def _notify(self, n: Notification, subscriber: str, out: Outputs, source: Message, init: bool = False,
                row: bytes | None = None) -> None:
        """One notification on pubsub.notifications: the service's JSON plus the subscriber and, for an update, the
        row that caused it (``row``: its JSON, encoded once per update; ``null`` for a delete)."""
        body = n.to_bytes()
        if init:  # an S-CN client (aggregates.client.Follower) applies the reformulated messages from here on
            extra: dict[str, Any] = {"subscriber": subscriber}
            extra["position"] = {f"{t}:{p}": o for (t, p), o in self.positions.items() if t in self.by_topic}
            extra.update(self.svc.client_state(n.subscription))
            head = json.dumps(extra, separators=(",", ":"))[:-1].encode()
        else:
            head = ('{"subscriber":' + (f'"{subscriber}"' if _PLAIN.fullmatch(subscriber) else json.dumps(subscriber))
                    + ',"row":').encode() + (b"null" if row is None else row)
        out.produce(self.config.host.topics.notifications, subscriber, head + b"," + body[1:], source)
        self.notifications += 1

    def _decode_row(self, msg: Message, out: Outputs) -> tuple[TableDeclaration, str, dict[str, Any] | None] | None:
        """A row record's table, key and row (None for a tombstone), or None after dead-lettering it."""
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        self.positions[topic, partition] = offset + 1
        table = self.by_topic[topic]
        key, value = msg.key(), msg.value()
        if key is None:
            return out.reject(msg, f"table {table.name}: row record has no key (the key is the row key)")
        try:
            key_s = key.decode("utf-8")
        except UnicodeDecodeError:
            return out.reject(msg, f"table {table.name}: row key {key[:40]!r} is not UTF-8")
        row = None
        if value:
            try:
                row = codecs.decode_event(value, self.registered)
            except codecs.DecodeError as exc:
                return out.reject(msg, f"table {table.name}: invalid row: {exc}")
            if table.key not in row:
                return out.reject(msg, f"table {table.name}: row lacks its key attribute {table.key!r}")
            if _key_text(row[table.key]) != key_s:
                return out.reject(msg, f"table {table.name}: row key attribute {table.key}={row[table.key]!r} "
                                       f"differs from the record key {key_s!r}")
        try:
            self.svc.check_row(table.name, key_s, row)
        except ValueError as exc:
            return out.reject(msg, f"table {table.name}: {exc}")
        return table, key_s, row

    def _on_rows(self, msgs: list[Message], out: Outputs) -> None:
        """A run of row records, in order; the rows of each table are matched against its row filters at once."""
        rows = [(msg, decoded) for msg in msgs if (decoded := self._decode_row(msg, out)) is not None]
        passing: dict[str, Iterator[frozenset[int]]] = {}
        for name in {table.name for _, (table, _, _) in rows}:
            passing[name] = iter(self.svc.filters_passed(name, [r for _, (t, _, r) in rows if t.name == name]))
        for msg, (table, key_s, row) in rows:
            self._apply_row(msg, table, key_s, row, next(passing[table.name]), out)

    def _apply_row(self, msg: Message, table: TableDeclaration, key_s: str, row: dict[str, Any] | None, passing: frozenset[int],
                   out: Outputs) -> None:
        result = self.svc.apply(table.name, key_s, row, f"{msg.topic()}:{msg.partition()}:{msg.offset()}",
                                source=(msg.partition(), msg.offset()), passing=passing)
        self.updates += 1
        k, v, headers = row_record(*result.change)
        out.produce(self.changelogs[table.name], k, v, headers=headers)
        if self.config.mode == "s-cn":
            for r in result.records:
                out.produce(self.config.host.topics.reformulated, r.group, r.to_bytes(), msg)
            self.records += len(result.records)
        for n in result.notifications:
            self._notify(n, self.subscribers[n.subscription], out, msg, row=v)
        if result.rejected:
            out.reject(msg, f"table {table.name}: row kept out of an aggregate: " + "; ".join(result.rejected))

    def process(self, msgs: list[Message], out: Outputs) -> int:
        """Runs of subscription records and runs of row records, in their order (a row sees every subscription
        before it and none after it)."""
        subscriptions = self.config.host.topics.subscriptions
        start = 0
        for i in range(1, len(msgs) + 1):
            if i == len(msgs) or (msgs[i].topic() == subscriptions) != (msgs[start].topic() == subscriptions):
                run = msgs[start:i]
                (self._on_subscriptions if run[0].topic() == subscriptions else self._on_rows)(run, out)
                start = i
        return len(msgs)

    # --- what the host asks of it ----------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        return {"subscriptions": len(self.subscribers), "changes": {}, "info": {"mode": self.config.mode},
                "engine": self.svc}

    def progress(self) -> str:
        return f"{human(self.updates)} updates, {human(len(self.subscribers))} subscriptions"

    def stats(self) -> dict[str, Any]:
        return {"mode": self.config.mode, "updates": self.updates, "notifications": self.notifications,
                "reformulated": self.records, "subscriptions": len(self.subscribers),
                "subscription_changes": self.subscription_changes,
                "rows": {t.name: len(self.svc.tables[t.name]) for t in self.config.tables},
                "restores": self.restores, "restored_rows": self.restored_rows,
                "discarded_changes": self.discarded_changes}



class TableService(Host):
    """The table service: :class:`TablesTask` on the one runtime (``pubsub tables``)."""

    def __init__(self, config: TableServiceConfig) -> None:
        super().__init__(TablesTask(config), config.host_config())
