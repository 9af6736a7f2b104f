"""The table service: aggregate subscriptions over tables, through the topics, exactly once.

Its own composition root beside the event processor (``processor.app``), run by ``pubsub tables``:

    table topics + pubsub.subscriptions -> AggregateService.apply / subscribe
        -> pubsub.notifications (S-UN, and every subscription's initial answer)
        -> pubsub.reformulated (S-CN)
        -> pubsub.changelog.tables.<name> (the row, with its source partition and offset)
        -> pubsub.dead-letter (bad rows, refused subscriptions)

all in one Kafka transaction with the input offsets (``kafka.delivery``).  A range aggregate needs the
whole table in one place, so one service owns every partition of its tables: it assigns them
itself (no group rebalancing) and its fixed ``transactional.id`` fences an older instance.  State is
restored before any input is processed: the rows from the changelogs (changes at or past the
committed offset of their source partition are discarded: at-least-once delivery leaves them when
it crashes before the offset commit, and the replay writes them again; a read_committed restore of
transactional changes on Apache Kafka meets none), then the subscriptions up to their
committed offsets, silently (their initial answers were delivered then).  A failed batch restores
everything again from there.

The event processor and this service read the same subscriptions topic and tell the two kinds apart
with the same codec (``wire.codecs.decode_any_subscription``): each ignores the other's records.
"""

from __future__ import annotations

import gc
import json
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import NewTopic

from fastpubsub.aggregates import AggregateService, Notification, TableSchema
from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.deadletter import DeadLetters
from fastpubsub.kafka.delivery import Delivery, DeliveryError, RecordRefused
from fastpubsub.kafka.readers import read_to_end
from fastpubsub.aggregates.changelog import row_record
from fastpubsub.state import from_records
from fastpubsub.wire import codecs
from fastpubsub.wire.topics import (
    DEAD_LETTER, NOTIFICATIONS, REFORMULATED, SUBSCRIPTIONS, TABLE_SCHEMAS, TABLE_SERVICE, changelog_topic,
)

from fastpubsub.runtime.progress import RateMeter, human
from fastpubsub.services.events.subscriptions import parse_subscription_id

log = logging.getLogger("pubsub.tables")

MODES = ("s-un", "s-cn")
KINDS = ("number", "string", "bool")
_NAME = re.compile(r"^[A-Za-z_][\w]*$")
_PLAIN = re.compile(r"[\w.:/@-]*", re.ASCII)  # strings JSON writes as they are


@dataclass(frozen=True)
class TableDeclaration:
    """A table as declared to the service: ``NAME:TOPIC:KEY[:ATTR=KIND,...]`` on the command line."""

    name: str
    topic: str
    key: str
    kinds: dict[str, str] | None = None  # None: attributes are not checked at subscription time

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"table name {self.name!r} must be a letter or _ followed by letters, digits or _")
        if not self.topic or not self.key:
            raise ValueError(f"table {self.name}: topic and key attribute must not be empty")
        if self.kinds is not None:
            bad = {a: k for a, k in self.kinds.items() if k not in KINDS}
            if bad:
                raise ValueError(f"table {self.name}: unknown attribute kind(s) {bad}; expected one of {', '.join(KINDS)}")

    @staticmethod
    def parse(text: str) -> "TableDeclaration":
        parts = text.split(":", 3)
        if len(parts) < 3:
            raise ValueError(f"a table is NAME:TOPIC:KEY[:ATTR=KIND,...], got {text!r}")
        kinds = None
        if len(parts) == 4:
            kinds = {}
            for item in parts[3].split(","):
                attr, sep, kind = item.partition("=")
                if not sep or not attr.strip():
                    raise ValueError(f"table {parts[0]}: attribute kinds are ATTR=KIND, got {item!r}")
                kinds[attr.strip()] = kind.strip()
            kinds.setdefault(parts[2], "string")  # the key attribute is declared even when its kind is not given
        return TableDeclaration(parts[0], parts[1], parts[2], kinds)

    def schema(self) -> TableSchema:
        return TableSchema(self.name, self.key, self.kinds)

    def to_json(self) -> bytes:
        return json.dumps({"name": self.name, "topic": self.topic, "key": self.key, "kinds": self.kinds}).encode()

    @staticmethod
    def from_json(value: bytes) -> "TableDeclaration":
        d = json.loads(value)
        return TableDeclaration(d["name"], d["topic"], d["key"], d.get("kinds"))


def declared_tables(clients: ClientFactory | str, timeout: float = 10.0) -> dict[str, TableDeclaration] | None:
    """The tables the table service declared on ``pubsub.table-schemas`` (None if the topic does not exist)."""
    clients = ClientFactory.of(clients)
    try:
        n = admin.partitions_of(clients, TABLE_SCHEMAS)
    except RuntimeError:
        return None
    out: dict[str, TableDeclaration] = {}
    for msg in read_to_end(clients, [TopicPartition(TABLE_SCHEMAS, p, OFFSET_BEGINNING) for p in range(n)], timeout):
        name = msg.key().decode()
        if msg.value():
            out[name] = TableDeclaration.from_json(msg.value())
        else:
            out.pop(name, None)
    return out


def _key_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return str(v) if type(v) is int else json.dumps(v)


@dataclass
class TableServiceConfig:
    bootstrap_servers: str
    tables: list[TableDeclaration]
    mode: str = "s-un"  # s-un: a notification per affected subscription; s-cn: the reformulated messages
    group_id: str = "pubsub-tables"  # committed offsets of the table topics and subscriptions
    delivery: str = "auto"
    transactional_id: str | None = None  # default: <group_id>-tables (a restarted instance fences the old one)
    batch_size: int = 1000
    output_format: str = "avro"  # of dead letters
    progress_interval: float = 5.0
    client_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.tables:
            raise ValueError("declare at least one table")
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ValueError(f"a table is declared twice: {names}")
        topics = [t.topic for t in self.tables]
        if len(set(topics)) != len(topics):
            raise ValueError(f"two tables share a topic: {topics}")


class TableService:
    """Runs until :meth:`stop`; ``ready`` is set once the state is restored."""

    def __init__(self, config: TableServiceConfig) -> None:
        self.config = config
        self.clients = ClientFactory(config.bootstrap_servers, config.client_config)
        self.by_topic = {t.topic: t for t in config.tables}
        self.changelogs = {t.name: changelog_topic(t.name) for t in config.tables}
        self.ready = threading.Event()
        self._stop = threading.Event()
        self.svc = AggregateService([t.schema() for t in config.tables], notify=config.mode == "s-un")
        self.subscribers: dict[int, str] = {}
        self.positions: dict[tuple[str, int], int] = {}  # next offset to process, per input partition
        self.delivery: Delivery | None = None
        self.dead_letters: DeadLetters | None = None
        self.updates = self.notifications = self.records = self.subscription_changes = 0
        self.restores = 0
        self.restored_rows = 0
        self.discarded_changes = 0  # changelog changes past the committed offsets, left out on restore

    def stop(self) -> None:
        self._stop.set()

    # --- start ----------------------------------------------------------------------

    def _partitions(self) -> dict[str, int]:
        return admin.require(self.clients, (SUBSCRIPTIONS, NOTIFICATIONS, DEAD_LETTER, REFORMULATED,
                                            *self.by_topic, *(changelog_topic(t.name) for t in self.config.tables)))

    def _restore(self, consumer: Consumer) -> None:
        """Tables from their changelogs, subscriptions up to their committed offsets; then assign the inputs."""
        gc.disable()  # building millions of long-lived objects: no collector passes over them meanwhile
        try:
            self._load(consumer)
        finally:
            gc.enable()
        # Keep them out of the cyclic collector's full passes, which would otherwise walk them all every few
        # thousand updates
        gc.collect()
        gc.freeze()
        log.info("restored: %d rows of %d table(s), %d subscriptions", self.restored_rows, len(self.config.tables),
                 len(self.subscribers))

    def _load(self, consumer: Consumer) -> None:
        parts = self._partitions()
        inputs = [TopicPartition(t, p) for t in (*self.by_topic, SUBSCRIPTIONS) for p in range(parts[t])]
        committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(inputs, timeout=30)}
        self.svc = AggregateService([t.schema() for t in self.config.tables], notify=self.config.mode == "s-un")
        self.subscribers.clear()
        self.restored_rows = 0
        for table in self.config.tables:
            log_topic = changelog_topic(table.name)
            msgs = read_to_end(self.clients, [TopicPartition(log_topic, p, OFFSET_BEGINNING) for p in range(parts[log_topic])])
            changes = from_records((m.key(), m.value(), m.headers()) for m in msgs)
            done = {p: max(committed[table.topic, p], 0) for p in range(parts[table.topic])}
            self.discarded_changes += sum(1 for _, _, p, o in changes.sources() if o >= done.get(p, 0))
            self.restored_rows += self.svc.restore(changes, done)
        upto = {(SUBSCRIPTIONS, p): max(committed[SUBSCRIPTIONS, p], 0) for p in range(parts[SUBSCRIPTIONS])}
        subs = read_to_end(self.clients, [TopicPartition(SUBSCRIPTIONS, p, OFFSET_BEGINNING) for p in range(parts[SUBSCRIPTIONS])],
                            stop_at=upto)
        self._on_subscriptions(subs, replay=True)
        self.positions = {k: (v if v >= 0 else 0) for k, v in committed.items()}
        consumer.assign([TopicPartition(t, p, o if o >= 0 else OFFSET_BEGINNING) for (t, p), o in committed.items()])
        self.restores += 1

    # --- subscriptions ---------------------------------------------------------------

    def _drop(self, sid: int) -> None:
        if self.subscribers.pop(sid, None) is not None:
            self.svc.unsubscribe(sid)

    def _on_subscriptions(self, msgs: list[Message], replay: bool = False) -> None:
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
                    self._notify(Notification(f"{sid}/init/{msg.topic()}:{msg.partition()}:{msg.offset()}", sid, n.value,
                                              f"{msg.topic()}:{msg.partition()}:{msg.offset()}"), subscriber, init=True)
            if len(pending) >= 10_000:
                gc.freeze()  # as after a restore: a bulk of long-lived objects
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
                    self.dead_letters.send(msg, str(exc))
                continue
            if sid in pending_ids:  # a second record of the same id: the first one registered before it
                flush()
            self._drop(sid)
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
                    self.dead_letters.send(msg, str(exc))
                continue
            except codecs.DecodeError:
                continue  # an invalid plain subscription: the event processor dead-letters it
            except ValueError as exc:  # a table or attribute this service does not know
                if not replay:
                    self.dead_letters.send(msg, f"invalid aggregate subscription: {exc}")
                continue
            pending.append((sid, sub.spec, msg, sub.subscriber))
            pending_ids.add(sid)
        flush()

    # --- rows ----------------------------------------------------------------------------

    def _notify(self, n: Notification, subscriber: str, init: bool = False, row: bytes | None = None) -> None:
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
        self.delivery.produce(NOTIFICATIONS, subscriber, head + b"," + body[1:])
        self.notifications += 1

    def _on_row(self, msg: Message) -> None:
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        self.positions[topic, partition] = offset + 1
        table = self.by_topic[topic]
        key, value = msg.key(), msg.value()
        if key is None:
            self.dead_letters.send(msg, f"table {table.name}: row record has no key (the key is the row key)")
            return
        try:
            key_s = key.decode("utf-8")
        except UnicodeDecodeError:
            self.dead_letters.send(msg, f"table {table.name}: row key {key[:40]!r} is not UTF-8")
            return
        row = None
        if value:
            try:
                row = codecs.decode_event(value)
            except codecs.DecodeError as exc:
                self.dead_letters.send(msg, f"table {table.name}: invalid row: {exc}")
                return
            if table.key not in row:
                self.dead_letters.send(msg, f"table {table.name}: row lacks its key attribute {table.key!r}")
                return
            if _key_text(row[table.key]) != key_s:
                self.dead_letters.send(msg, f"table {table.name}: row key attribute {table.key}={row[table.key]!r} "
                                            f"differs from the record key {key_s!r}")
                return
        update_id = f"{topic}:{partition}:{offset}"
        try:
            out = self.svc.apply(table.name, key_s, row, update_id, source=(partition, offset))
        except ValueError as exc:
            self.dead_letters.send(msg, f"table {table.name}: {exc}")
            return
        self.updates += 1
        k, v, headers = row_record(*out.change)
        self.delivery.produce(self.changelogs[table.name], k, v, headers=headers)
        try:
            if self.config.mode == "s-cn":
                for r in out.records:
                    self.delivery.produce(REFORMULATED, r.group, r.to_bytes())
                self.records += len(out.records)
            for n in out.notifications:
                self._notify(n, self.subscribers[n.subscription], row=v)
        except RecordRefused as exc:  # an output too large for the producer (a huge distinct set or join answer)
            self.dead_letters.send(msg, f"table {table.name}: an output of this update was refused, the rest of its "
                                        f"outputs are not sent: {exc}")
        if out.rejected:
            self.dead_letters.send(msg, f"table {table.name}: row kept out of an aggregate: " + "; ".join(out.rejected))

    def _process(self, msgs: list[Message], consumer: Consumer) -> None:
        run: list[Message] = []
        for msg in msgs:
            if msg.topic() == SUBSCRIPTIONS:
                run.append(msg)
                continue
            if run:
                self._on_subscriptions(run)
                run = []
            self._on_row(msg)
        if run:
            self._on_subscriptions(run)
        self.delivery.commit(consumer, [TopicPartition(t, p, o) for (t, p), o in self.positions.items()])

    def _create_table_topics(self) -> None:
        """A table topic that does not exist yet is created with one partition (a table's update order), compacted
        (the latest row per key is the table)."""
        client = self.clients.admin()
        existing = set(client.list_topics(timeout=10).topics)
        missing = [t.topic for t in self.config.tables if t.topic not in existing]
        if not missing:
            return
        futures = client.create_topics([NewTopic(t, 1, -1, config={"cleanup.policy": "compact"}) for t in missing],
                                       operation_timeout=30)
        for topic, future in futures.items():
            try:
                future.result(30)
                log.info("created the table topic %s (one partition, compacted)", topic)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise

    # --- the loop --------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        cfg = self.config
        admin.create_topics(self.clients, names=TABLE_SERVICE)
        admin.create_topics(self.clients, partitions=1, names=tuple(changelog_topic(t.name) for t in cfg.tables))
        self._create_table_topics()
        self._partitions()  # every topic it needs, or a clear error
        announce = self.clients.producer(**{"enable.idempotence": True})
        for t in cfg.tables:
            announce.produce(TABLE_SCHEMAS, t.to_json(), t.name)
        if announce.flush(30):
            raise RuntimeError(f"could not declare the tables on {TABLE_SCHEMAS}")
        # the fixed transactional.id ends (aborts) what a previous instance left open, and fences it
        self.delivery = Delivery(self.clients, cfg.delivery, cfg.transactional_id or f"{cfg.group_id}-tables")
        self.dead_letters = DeadLetters(self.delivery, cfg.output_format)
        log.info("delivery: %s, mode %s, tables %s", self.delivery.mode, cfg.mode,
                 ", ".join(f"{t.name} ({t.topic})" for t in cfg.tables))
        consumer = self.clients.consumer(cfg.group_id, {"auto.offset.reset": "earliest"},
                                         **{"enable.auto.commit": False, "isolation.level": "read_committed"})
        try:
            self._restore(consumer)
            self.ready.set()
            meter = RateMeter(cfg.progress_interval)
            while not self._stop.is_set():
                msgs = [m for m in consumer.consume(cfg.batch_size, 0.2) if m.error() is None]
                if msgs:
                    try:
                        self._process(msgs, consumer)
                    except DeliveryError as exc:  # not Fenced (another instance took over): that one ends the run
                        log.error("not delivered (%s): restoring the state from the committed offsets", exc)
                        if not self.delivery.recover(None, self._stop.is_set):
                            break
                        self._restore(consumer)
                if meter.due():
                    rates = meter.tick({"updates": self.updates, "notifications": self.notifications})
                    log.info("%s updates/s, %s notifications/s, %s subscriptions, %d dead letters",
                             human(rates["updates"]), human(rates["notifications"]), human(len(self.subscribers)),
                             self.dead_letters.total)
        finally:
            try:
                self.delivery.close()
            finally:
                consumer.close()
        return self.stats()

    def stats(self) -> dict[str, Any]:
        return {"mode": self.config.mode, "delivery": self.delivery.mode if self.delivery else None,
                "updates": self.updates, "notifications": self.notifications, "reformulated": self.records,
                "subscriptions": len(self.subscribers), "subscription_changes": self.subscription_changes,
                "rows": {t.name: len(self.svc.tables[t.name]) for t in self.config.tables},
                "restores": self.restores, "restored_rows": self.restored_rows,
                "discarded_changes": self.discarded_changes,
                "dead_letters": dict(self.dead_letters.counts) if self.dead_letters else {}}
