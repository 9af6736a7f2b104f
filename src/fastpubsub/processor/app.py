"""The processor: consume subscription changes and events, match, produce notifications.

Data flows one way per batch: decode events, one ``match_batch``, encode and
produce notifications, then commit the batch's input offsets with the outputs
(see ``processor.delivery``).  Subscriptions are state, not work: every
instance reads all partitions of ``pubsub.subscriptions`` by manual assignment
(no group, no committed offsets) and rebuilds from the beginning on start
before it matches any event.  Events are shared between the instances of one
consumer group.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from confluent_kafka import (
    OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, TopicPartition,
)

from fastpubsub.engine import take_events
from fastpubsub.engine import ValidEventStore

from . import snapshot
from fastpubsub.wire.codecs import DecodeError, decode_event, encode_attributes, encode_notification
from fastpubsub.kafka.deadletter import DeadLetters
from fastpubsub.kafka.delivery import Delivery, DeliveryError
from fastpubsub.wire.event_decoder import decode_events
from .instance import InstanceSlot
from .metrics import Metrics, consumer_lag
from .progress import RateMeter, human
from .statistics_feed import StatisticsFeed
from fastpubsub.kafka.queues import QueueBounds
from .subscriptions import SubscriptionState
from .valid_events import due, valid_until_of
from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.admin import require
from fastpubsub.wire.topics import EVENTS, NOTIFICATIONS, SUBSCRIPTIONS

log = logging.getLogger("pubsub")


@dataclass
class ProcessorConfig:
    bootstrap_servers: str
    group_id: str = "pubsub-processor"
    output_format: str = "avro"
    delivery: str = "auto"
    batch_size: int = 1000
    session_timeout_ms: int = 6000
    progress_interval: float = 5.0
    algorithm: str = "dynamic"
    runs: int = 0  # static/dynamic: clusters of this many entries keep sorted runs (0: off; engine.clusters.RUN_MIN)
    transactional_id: str | None = None  # default: a stable per-host slot (processor.instance)
    client_config: dict[str, Any] = field(default_factory=dict)
    max_valid_events: int = 100_000  # the valid-event store's bounds (engine.event_store)
    max_valid_event_bytes: int = 256 << 20
    snapshot_dir: str | None = None  # None: no snapshots, every start rebuilds from the topic
    snapshot_every: float = 300.0  # seconds between snapshots (when something changed)
    snapshot_changes: int = 100_000  # ... or after this many subscription changes, whichever comes first
    queue_bounds: QueueBounds = field(default_factory=QueueBounds)  # back-pressure (processor.queues)


def event_id(msg: Message) -> str:
    """The record key, or ``topic:partition:offset`` when there is none."""
    key = msg.key()
    if key is None:
        return f"{msg.topic()}:{msg.partition()}:{msg.offset()}"
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        raise DecodeError(f"event key {key[:40]!r} is not UTF-8") from None


def event_time(msg: Message) -> int:
    """The record timestamp in ms (producer or broker time); now if the record has none."""
    kind, ms = msg.timestamp()
    return ms if kind != TIMESTAMP_NOT_AVAILABLE else int(time.time() * 1000)


def notification_attributes(value: bytes, fmt: str) -> bytes:
    """The ``event`` part of a notification, re-using the input bytes when the formats agree.

    An Avro event record's encoding is its one field's, the attribute map the
    notification ends with; a JSON event is the object the JSON notification
    embeds.  Otherwise the event is decoded and encoded in the output format.
    """
    if fmt == "avro" and value[:1] == b"\x00":
        return value[5:]
    if fmt == "json" and value[:1] == b"{":
        return value
    return encode_attributes(decode_event(value), fmt)


def _log_assignment(what: str):
    def callback(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s %d partitions of %s: %s", what, len(partitions), EVENTS, sorted(tp.partition for tp in partitions))

    return callback


def _raise_if_fatal(msg: Message) -> bool:
    """True if ``msg`` carries data; logs transient consumer errors, raises fatal ones."""
    err = msg.error()
    if err is None:
        return True
    if err.code() == KafkaError._PARTITION_EOF:
        return False
    if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED):
        raise KafkaException(err)
    log.warning("consumer: %s", err)
    return False


class _StaleSnapshot(Exception):
    """The subscriptions topic is behind the snapshot (recreated or truncated): the snapshot does not apply."""


class Processor:
    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config
        self.state = SubscriptionState(config.algorithm, config.runs)
        self.store = self._new_store()
        self.sub_offsets: dict[int, int] = {}  # partition of the subscriptions topic -> next offset to apply
        self.stored_notifications = 0  # notifications of new subscriptions for stored valid events
        self.snapshots = 0
        self.rebuild_records = 0  # subscription records read at start (all of them, or those after the snapshot)
        self._unsnapshotted = 0  # subscription records applied since the last snapshot
        self._store_mark = self._store_state()
        self._last_snapshot = time.monotonic()
        self._partitions = 0
        self.events = 0
        self.notifications = 0
        self.batches = 0
        self.busy_seconds = 0.0  # time spent decoding, matching, producing, committing
        # busy time by stage, to say what bounds the throughput (docs/benchmarks.md, issue 5)
        self.stage_seconds = {"decode": 0.0, "match": 0.0, "produce": 0.0, "commit": 0.0}
        self._stop = threading.Event()
        self.ready = threading.Event()
        self.delivery: Delivery | None = None
        self.dead_letters: DeadLetters | None = None
        self.statistics_feed: StatisticsFeed | None = None
        self.metrics = Metrics()  # read by processor.metrics.MetricsServer
        self.clients = ClientFactory(config.bootstrap_servers, config.client_config)

    def stop(self) -> None:
        """Ask the loop to finish its batch, commit and close (safe from signal handlers and threads)."""
        self._stop.set()

    # --- clients -------------------------------------------------------------

    def _consumer(self, group_id: str, **extra: Any) -> Consumer:
        return self.clients.consumer(group_id, {"auto.offset.reset": "earliest", **self.config.queue_bounds.consumer()},
                                     **{"enable.auto.commit": False, "isolation.level": "read_committed", **extra})

    # --- subscriptions -------------------------------------------------------

    def _new_store(self) -> ValidEventStore:
        return ValidEventStore(self.config.max_valid_events, self.config.max_valid_event_bytes)

    def _apply_subscriptions(self, msgs: list[Message]) -> None:
        """Apply changes in one bulk step, then evaluate the new subscriptions against the stored valid events."""
        records = [msg for msg in msgs if _raise_if_fatal(msg)]
        for msg in records:
            self.sub_offsets[msg.partition()] = msg.offset() + 1
        applied = self.state.apply_records([(msg.key(), msg.value()) for msg in records],
                                           [event_time(msg) for msg in records])
        for i, exc in applied.errors:
            self.dead_letters.send(records[i], str(exc))
        self._unsnapshotted += len(records)
        if len(applied.added) and len(self.store):
            self._notify_stored(applied.added, dict(zip(applied.added.ids.tolist(), applied.times.tolist())))

    def _notify_stored(self, added, times: dict[int, int]) -> None:
        """New subscriptions x stored valid events, with the engine (processor.valid_events says which count)."""
        fmt = self.config.output_format
        found = self.store.match_bulk(added)
        for j in due(found, times, self.state.valid_mask).tolist():
            sid = int(found.subscription_ids[j])
            owner = self.state.subscribers[sid]
            self.delivery.produce(NOTIFICATIONS, owner.encode(), encode_notification(
                sid, owner, found.event_ids[j], notification_attributes(found.payloads[j], fmt), fmt))
            self.stored_notifications += 1
            self.notifications += 1

    def _load_snapshot(self, n_partitions: int) -> None:
        """Start from the snapshot if there is a usable one (else log why not and start empty)."""
        if not self.config.snapshot_dir:
            return
        started = time.monotonic()
        if not snapshot.path_of(self.config.snapshot_dir).exists():
            log.info("no snapshot in %s yet: rebuilding from %s", self.config.snapshot_dir, SUBSCRIPTIONS)
            return
        try:
            snap = snapshot.read(self.config.snapshot_dir, n_partitions, self.config.algorithm, self._new_store(),
                                 self.config.runs)
        except snapshot.SnapshotError as exc:
            log.warning("ignoring the snapshot, rebuilding from %s: %s", SUBSCRIPTIONS, exc)
            return
        self.state, self.store, self.sub_offsets = snap.state, snap.store, snap.offsets
        self._store_mark = self._store_state()
        log.info("snapshot loaded in %.1fs: %d subscriptions, %d valid events, offsets %s",
                 time.monotonic() - started, len(self.state), len(self.store), snap.offsets)

    def _reset_state(self) -> None:
        self.state = SubscriptionState(self.config.algorithm, self.config.runs)
        self.store = self._new_store()
        self.sub_offsets = {}
        self._store_mark = self._store_state()

    def _start_state(self, consumer: Consumer) -> None:
        """The snapshot (if usable) plus the changes after its offsets, else a full rebuild; then a fresh snapshot.

        Valid events: a change applied here is evaluated against the events the
        store holds, like a live one.  Without a snapshot the store starts
        empty, so a full rebuild notifies nothing; from a snapshot, the changes
        after its offsets (which the previous run may not have got to) are
        evaluated against the snapshot's events — repeats carry the same
        notification ids.
        """
        self._load_snapshot(self._partitions)
        try:
            self._rebuild(consumer, self._assign(consumer))
        except _StaleSnapshot as exc:
            log.warning("ignoring the snapshot, rebuilding from %s: %s", SUBSCRIPTIONS, exc)
            self._reset_state()
            self._rebuild(consumer, self._assign(consumer))
        if self.config.snapshot_dir and self._unsnapshotted and not self._stop.is_set():
            self.write_snapshot()

    def _assign(self, consumer: Consumer) -> list[TopicPartition]:
        partitions = [TopicPartition(SUBSCRIPTIONS, p, self.sub_offsets.get(p, OFFSET_BEGINNING))
                      for p in range(self._partitions)]
        consumer.assign(partitions)
        return partitions

    def _snapshot_due(self, force: bool = False) -> bool:
        if not self.config.snapshot_dir:
            return False
        changed = self._unsnapshotted > 0 or self._store_mark != self._store_state()
        return changed and (force or self._unsnapshotted >= self.config.snapshot_changes
                            or time.monotonic() - self._last_snapshot >= self.config.snapshot_every)

    def _store_state(self) -> tuple:
        s = self.store.stats()
        return s["added"], s["expired"], s["evicted"]

    def write_snapshot(self) -> None:
        """Snapshot the state; outputs not yet committed are committed first (the snapshot must not be ahead of them)."""
        if self.delivery.pending():
            self.delivery.commit()
        meta = snapshot.write(self.config.snapshot_dir, self.state, self.store, self.sub_offsets, self._partitions)
        self.snapshots += 1
        self._unsnapshotted = 0
        self._store_mark = self._store_state()
        self._last_snapshot = time.monotonic()
        log.info("snapshot written in %.1fs: %d subscriptions, %d valid events, %s bytes",
                 meta["seconds"], meta["subscriptions"], meta["events"], human(meta["bytes"]))

    def _rebuild(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Read every partition of the subscriptions topic to its end.

        The end is the consumer's end-of-partition event (the high watermark of
        a fetch), not ListOffsets: Tansu 0.6 answers ListOffsets with the last
        batch's base offset + 1, short of the end when that batch holds several records.
        """
        started = time.monotonic()
        todo = {tp.partition for tp in partitions}
        start = {tp.partition: tp.offset for tp in partitions if tp.offset >= 0}  # from a snapshot
        before = self._unsnapshotted
        meter = RateMeter(self.config.progress_interval)
        while todo and not self._stop.is_set():
            msgs = consumer.consume(num_messages=10_000, timeout=0.5)
            for msg in msgs:
                eof = msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF
                if (eof or msg.error() is None) and msg.offset() < start.get(msg.partition(), 0):
                    raise _StaleSnapshot(f"partition {msg.partition()} is at offset {msg.offset()}, "
                                         f"before the snapshot's {start[msg.partition()]}")
                if eof:
                    todo.discard(msg.partition())
            self._apply_subscriptions(msgs)
            self.metrics.beat()
            if meter.due():
                meter.tick({})
                log.info("rebuilding: %s subscriptions so far", human(len(self.state)))
        self.delivery.commit()  # dead letters of invalid subscriptions
        self.rebuild_records = self._unsnapshotted - before
        log.info(
            "ready: %d subscriptions, %d records of %s read in %.1fs",
            len(self.state), self.rebuild_records, SUBSCRIPTIONS, time.monotonic() - started,
        )

    # --- events --------------------------------------------------------------

    def _process_events(self, msgs: list[Message], consumer: Consumer) -> None:
        """Decode a batch into columns, match it in one call, produce its notifications, commit."""
        fmt = self.config.output_format
        t = time.perf_counter()
        records, ids, until, next_offsets = [], [], [], {}
        for msg in msgs:
            if not _raise_if_fatal(msg):
                continue
            next_offsets[(msg.topic(), msg.partition())] = msg.offset() + 1
            try:
                eid, valid_until = event_id(msg), valid_until_of(msg.headers())
            except DecodeError as exc:
                self.dead_letters.send(msg, str(exc))
                continue
            ids.append(eid)
            until.append(valid_until)
            records.append(msg)
        decoded = decode_events([msg.value() for msg in records])
        for i, reason in sorted(decoded.errors.items()):
            self.dead_letters.send(records[i], reason)
        produced = 0
        t = self._lap("decode", t)
        if len(decoded):
            rows = decoded.rows.tolist()
            times = [event_time(records[r]) for r in rows]
            self.state.expire(min(times))  # later events of the batch are checked with valid_at below
            self.store.expire(min(times))
            matches = self.state.matcher.match_encoded(decoded.event_batch())
            t = self._lap("match", t)
            subscribers, valid_at = self.state.subscribers, self.state.valid_at
            off = matches.offsets
            for e in np.flatnonzero(np.diff(off)).tolist():  # only the events that matched something
                msg, when = records[rows[e]], times[e]
                attributes = notification_attributes(msg.value(), fmt)
                for sid in matches.ids[off[e] : off[e + 1]].tolist():
                    if not valid_at(sid, when):
                        continue
                    owner = subscribers[sid]
                    self.delivery.produce(NOTIFICATIONS, owner.encode(),
                                          encode_notification(sid, owner, ids[rows[e]], attributes, fmt))
                    produced += 1
            self._keep_valid_events(decoded, records, ids, until, times)
        t = self._lap("produce", t)
        self.delivery.commit(consumer, [TopicPartition(tp, p, o) for (tp, p), o in next_offsets.items()])
        self._lap("commit", t)
        self.events += len(decoded)
        self.notifications += produced
        self.batches += 1

    def _lap(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.stage_seconds[stage] += now - since
        return now

    def _keep_valid_events(self, decoded, records: list[Message], ids: list[str], until: list[int | None],
                           times: list[int]) -> None:
        """Store the batch's events that carry a ``valid_until`` after their own time (for new subscriptions)."""
        rows = decoded.rows.tolist()
        keep = [e for e, r in enumerate(rows) if until[r] is not None and until[r] > times[e]]
        if not keep:
            return
        picked = np.array(keep, dtype=np.int64)
        self.store.add(take_events(decoded.event_batch(), picked), [ids[rows[e]] for e in keep],
                       np.array([until[rows[e]] for e in keep], dtype=np.int64), np.asarray(times)[picked],
                       payloads=[records[rows[e]].value() for e in keep])

    # --- the loop ------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Run until :meth:`stop`; return the final statistics."""
        cfg = self.config
        slot = None if cfg.transactional_id else InstanceSlot(cfg.group_id)
        transactional_id = cfg.transactional_id or slot.transactional_id
        self.delivery = Delivery(self.clients, cfg.delivery, transactional_id=transactional_id, bounds=cfg.queue_bounds)
        self.dead_letters = DeadLetters(self.delivery, cfg.output_format)
        log.info("delivery: %s%s", self.delivery.mode,
                 f" (transactional.id {transactional_id})" if self.delivery.mode == "transactional" else "")
        # never commits; from the beginning or the snapshot's offsets; end-of-partition events mark the end of the rebuild
        subs = self._consumer(f"{cfg.group_id}.subscriptions-reader", **{"enable.partition.eof": True})
        events = self._consumer(cfg.group_id, **{"session.timeout.ms": cfg.session_timeout_ms})
        try:
            n_partitions = require(self.clients)  # the four topics it cannot run without, or a clear error
            self._partitions = n_partitions[SUBSCRIPTIONS]
            # the latest snapshot of pubsub.statistics before the rebuild, so that the bulk load uses it
            self.statistics_feed = StatisticsFeed(self.clients, lambda: self.state.matcher,
                                                  dead_letter=self.dead_letters.send)
            # The group join proceeds in the background during the rebuild.
            events.subscribe([EVENTS], on_assign=_log_assignment("assigned"), on_revoke=_log_assignment("revoked"))
            self._start_state(subs)
            self.statistics_feed.reapply()  # a state loaded from a snapshot starts with uniform statistics
            self.ready.set()
            meter = RateMeter(cfg.progress_interval)
            while not self._stop.is_set():
                changes = subs.consume(num_messages=10_000, timeout=0)
                if changes:
                    self._apply_subscriptions(changes)
                self.statistics_feed.poll()
                if self.delivery.pending():
                    self._deliver(events, self.delivery.commit)
                batch = events.consume(num_messages=cfg.batch_size, timeout=0.2)
                if batch:
                    began = time.monotonic()
                    self._deliver(events, self._process_events, batch, events)
                    self.busy_seconds += time.monotonic() - began
                    self.metrics.batch_seconds.observe(time.monotonic() - began)
                self.metrics.after_iteration(self, events)
                if meter.due():
                    self._log_progress(meter, events)
                if self._snapshot_due():
                    self.write_snapshot()
            if self.config.snapshot_dir and self._snapshot_due(force=True):
                self.write_snapshot()  # a clean stop: the next start replays nothing
        finally:
            try:
                self.delivery.close()
            finally:
                events.close()
                subs.close()
                if self.statistics_feed is not None:
                    self.statistics_feed.close()
                if slot is not None:
                    slot.release()
        return self.stats()

    def _deliver(self, events: Consumer, step, *args: Any) -> None:
        """Run a step that produces and commits; if it fails, replay from the committed offsets (processor.delivery)."""
        try:
            step(*args)
        except DeliveryError as exc:
            log.error("not delivered (%s): new producer, events again from the committed offsets", exc)
            self.delivery.recover(events, self._stop.is_set, self.metrics.beat)

    def _log_progress(self, meter: RateMeter, consumer: Consumer) -> None:
        rates = meter.tick({"events": self.events, "notifications": self.notifications})
        lag, assignment = consumer_lag(consumer), consumer.assignment()
        log.info(
            "%s events/s, %s notifications/s, lag %s, %d partitions, %s subscriptions, %d dead letters",
            human(rates["events"]), human(rates["notifications"]), human(lag), len(assignment),
            human(len(self.state)), self.dead_letters.total,
        )

    def stats(self) -> dict[str, Any]:
        return {
            "delivery": self.delivery.mode if self.delivery else None,
            "events": self.events,
            "notifications": self.notifications,
            "batches": self.batches,
            "busy_seconds": round(self.busy_seconds, 3),
            "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
            "dead_letters": dict(self.dead_letters.counts) if self.dead_letters else {},
            **self.state.stats(),
            "stored_notifications": self.stored_notifications,
            "valid_events": self.store.stats(),
            "snapshots": self.snapshots,
            "matcher": self.state.matcher.algorithm,
            "runs": self.config.runs,
            "statistics": self.statistics_feed.stats() if self.statistics_feed else None,
        }


def stats_json(stats: dict[str, Any]) -> str:
    return json.dumps(stats, sort_keys=True)
