"""The one runtime gives every service what it owns: record limits, poison isolation, exactly-once delivery.

The pattern service and the table service have no code of their own for these: an input record above
``max_record_bytes`` is dead-lettered by the host before the task sees it, a record whose output the broker
refuses is dead-lettered with its reason, and a record a task raises on is isolated (replayed one record per
batch) and dead-lettered alone; in every case the records around it go through, once.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from tests.support.kafka_helpers import RunningService, dead_letters, read_all, send, started_services, wait_processed

from fastpubsub.runtime.host import Host, HostConfig
from fastpubsub.runtime.task import Outputs, TaskBase, Topics
from fastpubsub.services.patterns.service import PatternService, PatternServiceConfig
from fastpubsub.services.tables.service import TableDeclaration, TableService, TableServiceConfig
from fastpubsub.wire import topics


class Echo(TaskBase):
    """The smallest task: each event's value to the notifications topic; it raises on the value ``poison``."""

    name = "pubsub.echo"

    def topics(self) -> Topics:
        return Topics(group=(topics.EVENTS,), state=None, inputs=(topics.EVENTS,),
                      outputs=(topics.NOTIFICATIONS, topics.DEAD_LETTER))

    def restore(self, ctx) -> None:
        pass

    def process(self, msgs, out: Outputs) -> int:
        for m in msgs:
            if m.value() == b"poison":
                raise ValueError("cannot echo poison")
            out.produce(topics.NOTIFICATIONS, m.key(), m.value(), m)
        return len(msgs)

    def rewind(self) -> None:
        pass

    def gauges(self):
        return {}

    def progress(self) -> str:
        return ""

    def stats(self):
        return {}


@pytest.fixture
def start(bootstrap, group_id):
    yield from started_services(lambda task, config: RunningService(
        Host(task, config) if task is not None else config))


def test_a_record_the_task_raises_on_is_dead_lettered_alone_and_the_others_go_through_once(bootstrap, group_id,
                                                                                             start):
    records = [(f"k{i}", b"poison" if i == 37 else f"v{i}".encode()) for i in range(100)]
    send(bootstrap, topics.EVENTS, records)
    svc = start(task=Echo(), config=HostConfig(bootstrap, group_id, batch_size=50))
    wait_processed(bootstrap, group_id, timeout=90)
    svc.stop()
    echoed = [m.value() for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    assert sorted(echoed) == sorted(v for _, v in records if v != b"poison")  # each once, read_committed
    (dl,) = dead_letters(bootstrap)
    assert dl.source_topic == topics.EVENTS and "processing failed: ValueError: cannot echo poison" in dl.reason
    assert svc.service.counters.replays >= 1


class RestoreFailsOnce(Echo):
    """Echo whose assignment step (a stateful task's restore) fails once for want of the cluster, mid-stream."""

    def __init__(self) -> None:
        super().__init__()
        self.echoed = self.failures = 0

    def assigned(self) -> None:
        if self.echoed >= 40 and not self.failures:
            self.failures += 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get committed offsets: Local: Timed out"))

    def process(self, msgs, out: Outputs) -> int:
        self.echoed += len(msgs)
        return super().process(msgs, out)


def test_a_batch_consumed_before_a_failed_steps_rewind_is_consumed_again_not_processed(bootstrap, group_id, start):
    """A step of the turn fails after its batch was consumed (the restore on assignment): the replay puts the inputs
    back at the committed offsets, so that batch comes again; processed and committed as well, its offsets would be
    committed past records a stateful task had skipped (the pattern service: no partition restored yet) and its
    outputs sent twice."""
    records = [(f"k{i}", f"v{i}".encode()) for i in range(200)]
    send(bootstrap, topics.EVENTS, records)
    task = RestoreFailsOnce()
    svc = start(task=task, config=HostConfig(bootstrap, group_id, batch_size=10))
    wait_processed(bootstrap, group_id, timeout=90)
    svc.stop()
    assert task.failures == 1 and svc.service.counters.replays == 1
    echoed = [m.value() for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    assert sorted(echoed) == sorted(v for _, v in records)  # each once, read_committed


def big_event(name: str, pad: int) -> bytes:
    return json.dumps({"name": name, "price": 1, "pad": "x" * pad}).encode()


def test_the_pattern_service_dead_letters_an_oversized_event_and_one_whose_notification_is_refused(
        bootstrap, group_id, start):
    send(bootstrap, topics.SUBSCRIPTIONS, [
        (b"1", json.dumps({"subscriber": "big", "pattern": 'seq a: name = "BIG" next b: name = "BIG" within 60s'})
         .encode()),
        (b"2", json.dumps({"subscriber": "small", "pattern": 'seq a: name = "S" next b: name = "S" within 60s'})
         .encode())])
    events = [big_event("HUGE", 20000),  # above max_record_bytes: never decoded
              big_event("BIG", 9000), big_event("BIG", 9000),  # a notification of both is above message.max.bytes
              big_event("S", 10), big_event("S", 10)]  # goes through after them
    producer, now = Producer({"bootstrap.servers": bootstrap}), int(time.time() * 1000) + 1000
    for i, v in enumerate(events):  # one partition, a second apart in event time
        producer.produce(topics.EVENTS, v, b"same-partition", timestamp=now + 1000 * i)
    assert producer.flush(30) == 0
    svc = start(task=None, config=PatternService(PatternServiceConfig(HostConfig(
        bootstrap, group_id, max_record_bytes=16384, client_config={"message.max.bytes": "17000"}))))
    wait_processed(bootstrap, group_id, timeout=90)
    svc.stop()
    reasons = sorted(d.reason for d in dead_letters(bootstrap) if d.source_topic == topics.EVENTS)
    assert len(reasons) == 2, reasons
    assert any("record too large" in r and "16384" in r for r in reasons)
    assert any("output refused" in r for r in reasons)
    notified = [json.loads(m.value()) for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    assert [n["subscriber"] for n in notified] == ["small"]


def test_the_table_service_dead_letters_an_oversized_row_and_goes_on(bootstrap, group_id, start):
    table = TableDeclaration.parse("stock:pubsub.tables.runtime-stock:symbol:risk=number")
    rows = [(b"A", json.dumps({"symbol": "A", "risk": 1}).encode()),
            (b"B", json.dumps({"symbol": "B", "risk": 2, "pad": "x" * 20000}).encode()),
            (b"C", json.dumps({"symbol": "C", "risk": 3}).encode())]
    svc = start(task=None, config=TableService(TableServiceConfig(HostConfig(bootstrap, group_id, max_record_bytes=16384),
                                                                  [table])))
    send(bootstrap, table.topic, rows)
    deadline = time.monotonic() + 60
    while svc.service.task.updates < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    svc.stop()
    (dl,) = [d for d in dead_letters(bootstrap) if d.source_topic == table.topic]
    assert "record too large" in dl.reason
    assert svc.service.stats()["task"]["rows"]["stock"] == 2


def test_an_event_the_pattern_engine_raises_on_is_dead_lettered_and_the_patterns_around_it_complete_once(
        bootstrap, group_id, start, monkeypatch):
    from fastpubsub.services.patterns.service import PatternsTask

    match = PatternsTask.match

    def faulty(self, p, part, decoded, ids, ts, values, settled, out):
        if any(b"POISON" in v for v in values):
            raise RuntimeError("engine fault")  # before the partition's state changes, as a bug at its entry would
        return match(self, p, part, decoded, ids, ts, values, settled, out)

    monkeypatch.setattr(PatternsTask, "match", faulty)
    send(bootstrap, topics.SUBSCRIPTIONS, [
        (b"1", json.dumps({"subscriber": "s", "pattern": 'seq a: name = "S" next b: name = "S" within 60s'}).encode())])
    producer, now = Producer({"bootstrap.servers": bootstrap}), int(time.time() * 1000) + 1000
    values = [json.dumps({"name": "POISON", "price": 1}).encode()] + [json.dumps({"name": "S", "price": 1}).encode()] * 2
    for i, v in enumerate(values):  # one partition, a second apart in event time
        producer.produce(topics.EVENTS, v, b"same-partition", timestamp=now + 1000 * i)
    assert producer.flush(30) == 0
    svc = start(task=None, config=PatternService(PatternServiceConfig(HostConfig(bootstrap, group_id))))
    wait_processed(bootstrap, group_id, timeout=90)
    svc.stop()
    (dl,) = [d for d in dead_letters(bootstrap) if d.source_topic == topics.EVENTS]
    assert "processing failed: RuntimeError: engine fault" in dl.reason and b"POISON" in dl.value
    notified = [json.loads(m.value()) for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    assert [n["subscriber"] for n in notified] == ["s"]  # once, read_committed, no de-duplication


def test_a_row_the_table_service_raises_on_is_dead_lettered_and_the_rows_around_it_count_once(
        bootstrap, group_id, start, monkeypatch):
    from fastpubsub.services.tables.service import TablesTask

    apply_row = TablesTask._apply_row

    def faulty(self, msg, *args):
        if b"POISON" in (msg.value() or b""):
            raise RuntimeError("aggregate fault")
        return apply_row(self, msg, *args)

    monkeypatch.setattr(TablesTask, "_apply_row", faulty)
    table = TableDeclaration.parse("stock:pubsub.tables.runtime-poison:symbol:risk=number")
    rows = [(b"A", json.dumps({"symbol": "A", "risk": 1}).encode()),
            (b"B", json.dumps({"symbol": "B", "risk": 2, "note": "POISON"}).encode()),
            (b"C", json.dumps({"symbol": "C", "risk": 3}).encode())]
    svc = start(task=None, config=TableService(TableServiceConfig(HostConfig(bootstrap, group_id), [table])))
    send(bootstrap, table.topic, rows)
    deadline = time.monotonic() + 60
    while svc.service.stats()["task"]["rows"]["stock"] < 2 and time.monotonic() < deadline:  # A and C: B is behind
        time.sleep(0.1)
    svc.stop()
    reasons = [d.reason for d in dead_letters(bootstrap) if d.source_topic == table.topic]
    assert len(reasons) == 1 and "processing failed: RuntimeError: aggregate fault" in reasons[0], reasons
    assert svc.service.stats()["task"]["rows"]["stock"] == 2
    changelog = read_all(bootstrap, svc.service.task.changelogs["stock"])  # read_committed, no de-duplication
    assert sorted(json.loads(m.key())[1] for m in changelog) == ["A", "C"]
