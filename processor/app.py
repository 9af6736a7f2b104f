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

from .codecs import DecodeError, decode_event, encode_attributes, encode_notification
from .deadletter import DeadLetters
from .delivery import Delivery, DeliveryError
from .event_decoder import decode_events
from .instance import InstanceSlot
from .metrics import Metrics, consumer_lag
from .progress import RateMeter, human
from .queues import QueueBounds
from .subscriptions import SubscriptionState
from .topics import EVENTS, NOTIFICATIONS, SUBSCRIPTIONS, require

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
    transactional_id: str | None = None  # default: a stable per-host slot (processor.instance)
    client_config: dict[str, Any] = field(default_factory=dict)
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


class Processor:
    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config
        self.state = SubscriptionState(config.algorithm)
        self.events = 0
        self.notifications = 0
        self.batches = 0
        self.busy_seconds = 0.0  # time spent decoding, matching, producing, committing
        self._stop = threading.Event()
        self.ready = threading.Event()
        self.delivery: Delivery | None = None
        self.dead_letters: DeadLetters | None = None
        self.metrics = Metrics()  # read by processor.metrics.MetricsServer

    def stop(self) -> None:
        """Ask the loop to finish its batch, commit and close (safe from signal handlers and threads)."""
        self._stop.set()

    # --- clients -------------------------------------------------------------

    def _consumer(self, group_id: str, **extra: Any) -> Consumer:
        return Consumer({
            "bootstrap.servers": self.config.bootstrap_servers,
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **self.config.queue_bounds.consumer(),
            **self.config.client_config,
            **extra,
        })

    # --- subscriptions -------------------------------------------------------

    def _apply_subscriptions(self, msgs: list[Message]) -> None:
        records = [msg for msg in msgs if _raise_if_fatal(msg)]
        for i, exc in self.state.apply_many((msg.key(), msg.value()) for msg in records):
            self.dead_letters.send(records[i], str(exc))

    def _rebuild(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Read every partition of the subscriptions topic to its end.

        The end is the consumer's end-of-partition event (the high watermark of
        a fetch), not ListOffsets: Tansu 0.6 answers ListOffsets with the last
        batch's base offset + 1, short of the end when that batch holds several records.
        """
        started = time.monotonic()
        todo = {tp.partition for tp in partitions}
        meter = RateMeter(self.config.progress_interval)
        while todo and not self._stop.is_set():
            msgs = consumer.consume(num_messages=10_000, timeout=0.5)
            for msg in msgs:
                if msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF:
                    todo.discard(msg.partition())
            self._apply_subscriptions(msgs)
            self.metrics.beat()
            if meter.due():
                meter.tick({})
                log.info("rebuilding: %s subscriptions so far", human(len(self.state)))
        self.delivery.commit()  # dead letters of invalid subscriptions
        log.info(
            "ready: %d subscriptions rebuilt from %s in %.1fs",
            len(self.state), SUBSCRIPTIONS, time.monotonic() - started,
        )

    # --- events --------------------------------------------------------------

    def _process_events(self, msgs: list[Message], consumer: Consumer) -> None:
        """Decode a batch into columns, match it in one call, produce its notifications, commit."""
        fmt = self.config.output_format
        records, ids, next_offsets = [], [], {}
        for msg in msgs:
            if not _raise_if_fatal(msg):
                continue
            next_offsets[(msg.topic(), msg.partition())] = msg.offset() + 1
            try:
                ids.append(event_id(msg))
                records.append(msg)
            except DecodeError as exc:
                self.dead_letters.send(msg, str(exc))
        decoded = decode_events([msg.value() for msg in records])
        for i, reason in sorted(decoded.errors.items()):
            self.dead_letters.send(records[i], reason)
        produced = 0
        if len(decoded):
            rows = decoded.rows.tolist()
            times = [event_time(records[r]) for r in rows]
            self.state.expire(min(times))  # later events of the batch are checked with valid_at below
            matches = self.state.matcher.match_encoded(decoded.event_batch())
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
        offsets = [TopicPartition(t, p, o) for (t, p), o in next_offsets.items()]
        self.delivery.commit(consumer, offsets)
        self.events += len(decoded)
        self.notifications += produced
        self.batches += 1

    # --- the loop ------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Run until :meth:`stop`; return the final statistics."""
        cfg = self.config
        client = {"bootstrap.servers": cfg.bootstrap_servers, **cfg.client_config}
        slot = None if cfg.transactional_id else InstanceSlot(cfg.group_id)
        transactional_id = cfg.transactional_id or slot.transactional_id
        self.delivery = Delivery(client, cfg.delivery, transactional_id=transactional_id, bounds=cfg.queue_bounds)
        self.dead_letters = DeadLetters(self.delivery, cfg.output_format)
        log.info("delivery: %s%s", self.delivery.mode,
                 f" (transactional.id {transactional_id})" if self.delivery.mode == "transactional" else "")
        # never commits, always from the beginning; end-of-partition events mark the end of the rebuild
        subs = self._consumer(f"{cfg.group_id}.subscriptions-reader", **{"enable.partition.eof": True})
        events = self._consumer(cfg.group_id, **{"session.timeout.ms": cfg.session_timeout_ms})
        try:
            n_partitions = require(cfg.bootstrap_servers)  # all four topics, or a clear error
            partitions = [TopicPartition(SUBSCRIPTIONS, p, OFFSET_BEGINNING) for p in range(n_partitions[SUBSCRIPTIONS])]
            subs.assign(partitions)
            # The group join proceeds in the background during the rebuild.
            events.subscribe([EVENTS], on_assign=_log_assignment("assigned"), on_revoke=_log_assignment("revoked"))
            self._rebuild(subs, partitions)
            self.ready.set()
            meter = RateMeter(cfg.progress_interval)
            while not self._stop.is_set():
                changes = subs.consume(num_messages=10_000, timeout=0)
                if changes:
                    self._apply_subscriptions(changes)
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
        finally:
            try:
                self.delivery.close()
            finally:
                events.close()
                subs.close()
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
            "dead_letters": dict(self.dead_letters.counts) if self.dead_letters else {},
            **self.state.stats(),
            "matcher": self.state.matcher.algorithm,
        }


def stats_json(stats: dict[str, Any]) -> str:
    return json.dumps(stats, sort_keys=True)
