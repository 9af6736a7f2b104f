"""Helpers for tests through a real broker: a processor on a thread, produce, read back."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.runtime import HostConfig
from fastpubsub.wire import codecs, topics
from fastpubsub.services.events.processor import Processor, ProcessorConfig


HOST_FIELDS = {f.name for f in dataclasses.fields(HostConfig)}


def service_config(cls, bootstrap_servers: str, *own: Any, group_id: str = "pubsub-test", **settings: Any):
    """``cls`` (a service's config) holding a ``HostConfig``: the settings that are the host's go to it, the rest
    to the service (tests name both kinds side by side)."""
    host = HostConfig(bootstrap_servers, group_id, **{k: v for k, v in settings.items() if k in HOST_FIELDS})
    return cls(host, *own, **{k: v for k, v in settings.items() if k not in HOST_FIELDS})


class RunningProcessor:
    """A processor on a thread, so that tests can stop it and look at its state."""

    def __init__(self, config: ProcessorConfig) -> None:
        self.processor = Processor(config)
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self.processor.ready.wait(60):
            raise TimeoutError(f"processor not ready within 60s (error: {self.error!r})")

    def _run(self) -> None:
        try:
            self.result = self.processor.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop()
            self.error = exc
            self.processor.ready.set()

    @property
    def state(self):
        return self.processor.task.state

    def wait_for(self, condition, timeout: float = 30.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.error is not None:
                raise self.error
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def stop(self) -> dict[str, Any]:
        self.processor.stop()
        self._thread.join(60)
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class RunningService:
    """A stateful service (``run``, ``stop``, ``stats``, ``ready``: the table or the pattern service) on a thread."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.service.ready.wait(60) or self.error, f"{type(service).__name__} not ready"
        assert self.error is None, self.error

    def _run(self) -> None:
        try:
            self.service.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
            self.service.ready.set()

    def stop(self) -> dict[str, Any]:
        self.service.stop()
        self.thread.join(60)
        assert self.error is None, self.error
        return self.service.stats()


def started_services(start):
    """A fixture's body: yields ``start`` (which returns a :class:`RunningService`), then stops what it started."""
    started: list[RunningService] = []

    def tracked(**kw) -> RunningService:
        r = start(**kw)
        started.append(r)
        return r

    yield tracked
    for r in started:
        if r.thread.is_alive():
            r.stop()


# --- producing and reading ----------------------------------------------------


def producer(bootstrap: ClientFactory | str) -> Producer:
    return ClientFactory.of(bootstrap).producer(None, **{"enable.idempotence": True, "linger.ms": 5})


def send(bootstrap: ClientFactory | str, topic: str, records: list[tuple[bytes | str | None, bytes | None]]) -> None:
    p = producer(bootstrap)
    for key, value in records:
        p.produce(topic, value, key)
    assert p.flush(30) == 0


_groups = itertools.count()


def end_offsets(bootstrap: ClientFactory | str, topic: str, timeout: float = 30.0) -> dict[int, int]:
    """Offset after the last record of each partition, from end-of-partition events.

    The end a reader reaches, past any transaction marker, as the tests' readers see it.  ``bootstrap``: a
    bootstrap string, or the client factory of a secured broker (so for the readers below).
    """
    c = ClientFactory.of(bootstrap).consumer(f"ends-{next(_groups)}", None, **{"enable.auto.commit": False,
                                                                                 "enable.partition.eof": True})
    try:
        parts = [TopicPartition(topic, p) for p in range(admin.partitions_of(bootstrap, topic))]
        # start at the (possibly short) reported end, minus one: few records to read
        c.assign([TopicPartition(topic, tp.partition, max(c.get_watermark_offsets(tp, timeout=10)[1] - 1, 0))
                  for tp in parts])
        ends: dict[int, int] = {}
        deadline = time.monotonic() + timeout
        while len(ends) < len(parts):
            assert time.monotonic() < deadline, f"no end of partition for {topic} within {timeout}s"
            msg = c.poll(0.2)
            if msg is not None and msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF:
                ends[msg.partition()] = msg.offset()
        return ends
    finally:
        c.close()


COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                      KafkaError.COORDINATOR_NOT_AVAILABLE)


def committed_events(bootstrap: str, group_id: str) -> int:
    """Events the group has committed, over all partitions (asked again while the group's coordinator moves or
    loads: a fresh broker answers NOT_COORDINATOR at first; and while a transaction holds offsets not yet stable: a
    killed producer's open transaction holds them until its successor fences it or transaction.timeout.ms, 60 s,
    passes)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False})
    try:
        parts = [TopicPartition(topics.EVENTS, p) for p in range(admin.partitions_of(bootstrap, topics.EVENTS))]
        deadline = time.monotonic() + 90
        while True:
            try:
                return sum(max(tp.offset, 0) for tp in c.committed(parts, timeout=10))
            except KafkaException as exc:
                moving = exc.args[0].retriable() or exc.args[0].code() in (*COORDINATOR_MOVING, KafkaError._TIMED_OUT)
                if not moving or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()


def alter_topic_config(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    """Set topic configurations (IncrementalAlterConfigs), as an operator would with kafka-configs."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    client = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for future in client.incremental_alter_configs([resource]).values():
        future.result(30)


def wait_committed(bootstrap: ClientFactory | str, group_id: str, topic: str, timeout: float = 90.0) -> None:
    """Until the group's committed offsets reach the end of every partition of ``topic`` (a coordinator that moves,
    loads or is too busy to answer within the request's timeout meanwhile is asked again)."""
    ends = end_offsets(bootstrap, topic)
    c = ClientFactory.of(bootstrap).consumer(group_id, None, **{"enable.auto.commit": False})
    try:
        parts = [TopicPartition(topic, p) for p in sorted(ends)]
        deadline = time.monotonic() + timeout
        done: dict[int, int] = {}
        while True:
            try:
                done = {tp.partition: max(tp.offset, 0) for tp in c.committed(parts, timeout=10)}
            except KafkaException as exc:
                if exc.args[0].code() not in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                              KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT) \
                        and not exc.args[0].retriable():
                    raise
            if done and all(done[p] >= e for p, e in ends.items()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not all processed: committed {done}, ends {ends}")
            time.sleep(0.1)
    finally:
        c.close()


def wait_processed(bootstrap: str, group_id: str, timeout: float = 60.0) -> None:
    """Until the group's committed offsets reach the end of every events partition."""
    wait_committed(bootstrap, group_id, topics.EVENTS, timeout)


def read_all(bootstrap: ClientFactory | str, topic: str, quiet: float = 0.5, timeout: float = 60.0) -> list[Any]:
    """Every record of ``topic`` (read_committed) up to its end, then until ``quiet`` seconds pass without one."""
    ends = end_offsets(bootstrap, topic)
    c = ClientFactory.of(bootstrap).consumer(f"reader-{next(_groups)}", None, **{
        "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        out: list[Any] = []
        at_end: set[int] = set()
        start = last = time.monotonic()
        while time.monotonic() < start + timeout:
            for msg in c.consume(num_messages=10_000, timeout=0.2):
                if msg.error() is None:
                    out.append(msg)
                    last = time.monotonic()
                elif msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= ends[msg.partition()]:
                    at_end.add(msg.partition())
            if len(at_end) == len(ends) and time.monotonic() - last >= quiet:
                break
        else:
            raise TimeoutError(f"{topic}: only partitions {sorted(at_end)} read to their end within {timeout}s")
        return out
    finally:
        c.close()


def notifications(bootstrap: ClientFactory | str, topic: str = topics.NOTIFICATIONS, **kwargs: Any
                  ) -> list[dict[str, Any]]:
    out = []
    for msg in read_all(bootstrap, topic, **kwargs):
        n = codecs.decode_notification(msg.value())
        assert msg.key().decode() == n["subscriber"]
        out.append(n)
    return out


def dead_letters(bootstrap: str, **kwargs: Any) -> list[codecs.DeadLetter]:
    return [codecs.decode_dead_letter(m.value()) for m in read_all(bootstrap, topics.DEAD_LETTER, **kwargs)]
