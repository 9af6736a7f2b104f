"""Oversized records: no single record stops the pipeline or the service.

Through Apache Kafka, a second client produces good records around each
bad one.  The input topics take records of up to 64 MB (``max.message.bytes``,
as a user whose publishers write large records sets it), the processor is told
``--max-record-bytes`` of Kafka's default 1,048,588, and every record it writes
must fit its output topic's limit (Kafka's default, below which the producer's
``message.max.bytes`` of 1,000,000 bytes is the output limit): dead letters
of large records carry a prefix, their size and SHA-256; notifications of
events too large to embed refer to the event's record instead; input records
above ``--max-record-bytes`` are dead-lettered before decoding.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter

import pytest
from confluent_kafka import Producer
from tests.support.kafka_helpers import dead_letters, notifications, read_all, wait_processed

from fastpubsub.kafka.record_limits import KAFKA_DEFAULT_BYTES, PRODUCER_DEFAULT_BYTES, RECORD_OVERHEAD
from fastpubsub.runtime import HostConfig
from fastpubsub.wire import codecs, topics

MB = 1_000_000
OWNER = "alice"


@pytest.fixture(autouse=True)
def large_input_topics(request):
    """The events and subscriptions topics of the test take records of up to 64 MB."""
    if "bootstrap" in request.fixturenames:
        from tests.support.kafka_helpers import alter_topic_config

        for topic in (topics.EVENTS, topics.SUBSCRIPTIONS):
            alter_topic_config(request.getfixturevalue("bootstrap"), topic, {"max.message.bytes": str(64 * MB)})


@pytest.fixture
def start_processor(start_processor):
    """Processors of these tests refuse inputs over Kafka's default record size, whatever the topics allow."""

    def start(**overrides):
        overrides.setdefault("max_record_bytes", KAFKA_DEFAULT_BYTES)
        return start_processor(**overrides)

    return start


def big_producer(bootstrap: str) -> Producer:
    """A producer that can write records of up to 50 MB (the input topics take them)."""
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.max.bytes": 50 * MB,
                     "batch.size": 50 * MB})


def subscribe_all(producer: Producer) -> None:
    """One subscription that every event with an ``n`` satisfies."""
    producer.produce(topics.SUBSCRIPTIONS, codecs.encode_subscription(codecs.Subscription(OWNER, [("n", ">=", 0)])), "1")


class Stream:
    """Good events from one producer around bad records from another, with what each should become."""

    def __init__(self, bootstrap: str) -> None:
        self.good = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.bad = big_producer(bootstrap)
        self.n = 0
        self.plain: set[str] = set()  # event ids expected as full notifications
        self.referenced: dict[str, tuple[int, int]] = {}  # event id -> (partition, offset) of its record
        self.dead: dict[str, tuple[bytes, bytes]] = {}  # dead-letter record key -> the original (key, value)
        self._pending: list = []

    def good_event(self) -> None:
        self.n += 1
        eid = f"g{self.n}"
        self.good.produce(topics.EVENTS, codecs.encode_event({"n": self.n}), eid)
        self.good.flush(30)
        self.plain.add(eid)

    def _send(self, producer: Producer, topic: str, key: str, value: bytes, outcome: str) -> None:
        def done(err, msg):
            assert err is None, err
            if outcome == "dead":
                self.dead[f"{msg.topic()}:{msg.partition()}:{msg.offset()}"] = (key.encode(), value)
            elif outcome == "reference":
                self.referenced[key] = (msg.partition(), msg.offset())
            else:
                self.plain.add(key)

        producer.produce(topic, value, key, on_delivery=done)
        assert producer.flush(60) == 0

    def around(self, value: bytes, outcome: str, topic: str = topics.EVENTS, key: str | None = None) -> None:
        """good, the record, good: ``outcome`` is dead, reference or plain."""
        self.good_event()
        self.n += 1
        self._send(self.bad, topic, key or f"x{self.n}", value, outcome)
        self.good_event()


def event_of_size(size: int, fmt: str = "avro") -> bytes:
    """A valid event (it matches the subscription) whose encoding is exactly ``size`` bytes."""
    base = codecs.encode_event({"n": 7, "s": ""}, fmt)
    for pad in range(size - len(base) - 8, size - len(base) + 1):
        value = codecs.encode_event({"n": 7, "s": "x" * pad}, fmt)
        if len(value) == size:
            return value
    raise AssertionError(f"no event of exactly {size} bytes")


def check(bootstrap: str, stream: Stream, fmt: str) -> list[dict]:
    """Good events notified once each, large ones by reference to their record, bad ones dead-lettered once."""
    letters = {dl.record_key: dl for dl in dead_letters(bootstrap)}
    assert set(letters) == set(stream.dead)
    for key, dl in letters.items():
        original_key, original = stream.dead[key]
        assert dl.reason and dl.key == original_key
        assert dl.original_size == len(original_key) + len(original)
        assert dl.value_sha256 == hashlib.sha256(original).hexdigest()
        assert original.startswith(dl.value)
        assert dl.truncated == (len(dl.value) < len(original))
    raw = read_all(bootstrap, topics.NOTIFICATIONS)
    assert all(len(m.value()) + len(m.key()) + RECORD_OVERHEAD <= PRODUCER_DEFAULT_BYTES for m in raw)
    found = [codecs.decode_notification(m.value()) for m in raw]
    by_id = Counter(n["notification_id"] for n in found)
    full = {n["event_id"] for n in found if "event" in n}
    refs = {n["event_id"]: (n["event_ref"]["partition"], n["event_ref"]["offset"]) for n in found if "event_ref" in n}
    assert full == stream.plain
    assert refs == stream.referenced
    assert set(by_id) == {f"{e}/1" for e in stream.plain | set(stream.referenced)}
    if fmt == "json":
        assert all(m.value()[:1] == b"{" for m in raw)
    return found


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_oversized_events_neither_stall_nor_lose_anything(bootstrap, group_id, start_processor, fmt):
    setup = big_producer(bootstrap)
    subscribe_all(setup)
    assert setup.flush(30) == 0
    p = start_processor(output_format=fmt)
    s = Stream(bootstrap)
    s.around(b"\x00\x00\x00\x00\x02" + os.urandom(MB + 100), "dead")  # bad Avro: its dead letter would not fit
    s.around(b'{"n": 1, "s": "' + b"x" * 760_000, "dead")  # bad JSON: base64 in a JSON dead letter would not fit
    s.around(os.urandom(10 * MB), "dead")  # above --max-record-bytes: dead before decoding
    s.around(b'{"n": 1, "s": "\\ud800' + b"y" * (10 * MB) + b'"}', "dead")
    s.around(codecs.encode_event({"n": 1, "s": "z" * (10 * MB)}), "dead")  # valid, but above --max-record-bytes
    s.around(codecs.encode_event({"n": 1, "s": "z" * MB}, fmt), "reference")  # fits the input, not a notification
    many = {"n": 1, **{f"f{i}": i for i in range(100_000)}}  # 100,000 attributes: over 1 MB, dead before decoding
    s.around(codecs.encode_event(many, fmt), "dead")
    # tens of thousands of attributes, just over 1 MB: decoded and matched, but too large to embed
    many = {"n": 1, **{f"{i}": 0 for i in range(127_000 if fmt == "avro" else 85_000)}}
    s.around(codecs.encode_event(many, fmt), "reference")
    s.around(codecs.encode_event({"n": 1, "s": "z" * 500_000}, fmt), "plain")  # large, but fits embedded
    limit = KAFKA_DEFAULT_BYTES
    s.around(event_of_size(limit - len(b"edge0"), fmt), "reference", key="edge0")  # key + value exactly at the limit
    s.around(event_of_size(limit - len(b"edge1") + 1, fmt), "dead", key="edge1")  # one byte over
    wait_processed(bootstrap, group_id, timeout=120)
    p.wait_for(lambda: p.processor.dead_letters.total == len(s.dead), timeout=60, what="every dead letter")
    stats = p.stop()
    check(bootstrap, s, fmt)
    assert stats["replays"] == 0 and stats["limits"]["max_record_bytes"] == limit
    assert stats["task"]["notifications_by_reference"] == len(s.referenced)


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_notifications_exactly_at_the_output_limit_embed_and_one_byte_over_refer(bootstrap, group_id, start_processor,
                                                                                fmt):
    setup = big_producer(bootstrap)
    subscribe_all(setup)
    assert setup.flush(30) == 0
    out_limit = 100_000
    p = start_processor(output_format=fmt, max_output_bytes=out_limit, max_record_bytes=300_000)
    budget = out_limit - len(OWNER) - RECORD_OVERHEAD
    s = Stream(bootstrap)
    for over, outcome in ((0, "plain"), (1, "reference")):
        key = f"at{over}"
        # every notification names its event's record: a partition and an offset below 10 encode in as many bytes
        # as (0, 0), in Avro and in JSON alike, and this stream writes fewer than 10 records to a partition
        source = (topics.EVENTS, 0, 0)
        head = len(codecs.encode_notification(1, OWNER, key, b"", fmt, source))
        # the notification embeds the event's bytes: a JSON value as it is, an Avro value without its 5-byte header
        value = event_of_size(budget + over - head + (5 if fmt == "avro" else 0), fmt)
        embedded = value[5:] if fmt == "avro" else value
        assert len(codecs.encode_notification(1, OWNER, key, embedded, fmt, source)) == budget + over
        s.around(value, outcome, key=key)
    s.around(os.urandom(300_001), "dead")  # input one byte over --max-record-bytes (with its key)
    wait_processed(bootstrap, group_id, timeout=120)
    p.wait_for(lambda: p.processor.dead_letters.total == len(s.dead), timeout=60, what="every dead letter")
    p.stop()
    letters = dead_letters(bootstrap)
    assert all(dl.truncated for dl in letters)  # a 300 KB record does not fit a 100 KB dead letter
    check(bootstrap, s, fmt)


def test_full_mode_dead_letters_an_event_whose_notification_does_not_fit(bootstrap, group_id, start_processor):
    setup = big_producer(bootstrap)
    subscribe_all(setup)
    assert setup.flush(30) == 0
    p = start_processor(notification_event="full")
    s = Stream(bootstrap)
    s.around(codecs.encode_event({"n": 1, "s": "z" * MB}), "dead")
    wait_processed(bootstrap, group_id, timeout=120)
    p.wait_for(lambda: p.processor.dead_letters.total == 1, timeout=60, what="the dead letter")
    p.stop()
    check(bootstrap, s, "avro")
    assert "notification too large" in dead_letters(bootstrap)[0].reason


def test_reference_mode_never_embeds(bootstrap, group_id, start_processor):
    setup = big_producer(bootstrap)
    subscribe_all(setup)
    assert setup.flush(30) == 0
    p = start_processor(notification_event="reference", output_format="json")
    s = Stream(bootstrap)
    s.around(codecs.encode_event({"n": 1}), "reference", key="small")
    wait_processed(bootstrap, group_id, timeout=120)
    p.stop()
    found = notifications(bootstrap)
    assert found and all("event" not in n and n["event_ref"]["topic"] == topics.EVENTS for n in found)


def test_oversized_subscriptions_are_dead_lettered_and_the_service_survives_restarts(bootstrap, group_id,
                                                                                    start_processor):
    producer = big_producer(bootstrap)
    subscribe_all(producer)
    bad = {
        "unknown fields, 600 KB": json.dumps({"subscriber": "eve", "predicates": [["n", "=", 1]],
                                              "junk": "j" * 600_000}).encode(),
        "duplicate key, 1 MB": b'{"subscriber": "eve", "subscriber": "' + b"e" * MB + b'", "predicates": []}',
        "100,000 predicates, the last unknown": json.dumps({"subscriber": "eve", "predicates": [
            [f"a{i}", "=", i] for i in range(99_999)] + [["z", "~", 1]]}).encode(),
        "10 MB": b'{"subscriber": "' + b"e" * (10 * MB) + b'", "predicates": [["n", "=", 1]]}',
        "a subscriber name of 900 KB, the key of every notification": json.dumps(
            {"subscriber": "e" * 900_000, "predicates": [["n", ">=", 0]]}).encode(),
    }
    s = Stream(bootstrap)
    for i, value in enumerate(bad.values()):  # before the start: read by the rebuild
        s._send(producer, topics.SUBSCRIPTIONS, str(100 + i), value, "dead")
    assert producer.flush(30) == 0
    p = start_processor()
    for i, value in enumerate(bad.values()):  # while running: the live path
        s.around(value, "dead", topic=topics.SUBSCRIPTIONS, key=str(200 + i))
    wait_processed(bootstrap, group_id, timeout=120)
    p.wait_for(lambda: p.processor.dead_letters.total == 2 * len(bad), timeout=60, what="every dead letter")
    p.stop()
    again = start_processor()  # a restart reads every bad record again
    s.good_event()
    wait_processed(bootstrap, group_id, timeout=120)
    again.wait_for(lambda: again.processor.dead_letters.total == 2 * len(bad), timeout=60, what="the rebuild")
    again.stop()
    check(bootstrap, s, "avro")
    assert len(s.dead) == 2 * len(bad)


def test_healthz_reports_a_loop_that_delivers_nothing_and_recovers_with_it(tmp_path):
    """A loop stuck on one batch (here: a broker that stops answering mid-stream) is not healthy; progress heals it.

    /healthz serves ``Metrics.alive``; before, every turn of the loop counted as
    progress, so a processor replaying one batch forever looked alive.
    """
    import signal

    from tests.support.kafka_helpers import RunningProcessor
    from tests.support.random_workload import random_events, send_events

    from fastpubsub.kafka import admin
    from fastpubsub.kafka.broker import EmbeddedBroker, free_port
    from fastpubsub.services.events.processor import ProcessorConfig

    broker = EmbeddedBroker(free_port()).start()
    try:
        b = broker.bootstrap_servers
        admin.create_topics(b, partitions=2)
        setup = big_producer(b)
        subscribe_all(setup)
        assert setup.flush(30) == 0
        p = RunningProcessor(ProcessorConfig(HostConfig(b, "health", progress_interval=60, batch_size=200,
                                                        stall_seconds=3.0)))
        send_events(b, random_events(30_000, seed=5))
        p.wait_for(lambda: p.processor.events >= 1_000, timeout=60, what="some batches")
        broker.kill_node(0, signal.SIGSTOP)  # the broker stops answering; the loop has batches fetched ahead
        try:
            deadline = time.monotonic() + 20
            while p.processor.metrics.alive():
                assert time.monotonic() < deadline, "still healthy 20 s after the broker stopped answering"
                time.sleep(0.2)
        finally:
            broker.kill_node(0, signal.SIGCONT)
        p.wait_for(lambda: p.processor.events >= 30_000, timeout=120, what="every event after the broker is back")
        assert p.processor.metrics.alive()
        p.stop()
    finally:
        broker.stop()


def test_lag_counts_what_is_fetched_but_not_committed(bootstrap, group_id):
    """A batch consumed and then replayed is still lag: the metric counts from the offsets the instance committed
    (``Checkpoint.known``, given to it), not from the positions it fetched to."""
    from confluent_kafka import Consumer
    from tests.support.kafka_helpers import send

    from fastpubsub.runtime.metrics import consumer_lag

    send(bootstrap, topics.EVENTS, [(f"k{i}", codecs.encode_event({"n": i})) for i in range(100)])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        c.subscribe([topics.EVENTS])
        got = 0
        deadline = time.monotonic() + 30
        while got < 100 and time.monotonic() < deadline:
            got += len([m for m in c.consume(100, timeout=0.5) if m.error() is None])
        assert got == 100
        nothing = {(tp.topic, tp.partition): 0 for tp in c.assignment()}
        assert consumer_lag(c, nothing) == 100  # fetched, none committed
        c.commit(asynchronous=False)
        done = {(tp.topic, tp.partition): tp.offset for tp in c.position(c.assignment())}
        assert consumer_lag(c, done) == 0
    finally:
        c.close()


def test_a_refusal_shared_by_several_records_is_split_until_one_record_is_at_fault():
    """One record's refusal is dead-lettered on the replay; a refusal of several narrows the batches to one record."""
    from fastpubsub.kafka.delivery import DeliveryError
    from fastpubsub.kafka.queues import QueueBounds
    from fastpubsub.services.events.processor import Processor, ProcessorConfig
    from fastpubsub.runtime.sink import Sink

    p = Processor(ProcessorConfig(HostConfig("127.0.0.1:1", "pubsub-processor", delivery="at-least-once")))
    p.sink = Sink(p.clients, "at-least-once", "split-test", QueueBounds(), "avro")  # no broker needed yet

    def refused(sources):
        def step():
            raise DeliveryError("records refused", dict.fromkeys(sources, "output refused by the broker: too large"))
        return step

    assert not p._guarded(None, refused([("e", 0, 5), ("e", 0, 6), ("e", 1, 2)]))
    cp = p.checkpoint
    assert cp.suspects == {("e", 0): 6, ("e", 1): 2} and not cp.refused  # nobody dead-lettered on a guess
    assert not p._guarded(None, refused([("e", 0, 6)]))  # a batch of one record: that one is at fault
    assert cp.refused == {("e", 0, 6): "output refused by the broker: too large"}
    assert p._guarded(None, lambda: None) and cp.refused  # a step that succeeds is not yet a commit past it
    cp.committed({("e", 0): 6})  # the committed offset is the refused record's: it comes again
    assert cp.refused and cp.suspects == {("e", 0): 6, ("e", 1): 2}
    cp.committed({("e", 0): 7, ("e", 1): 3})  # committed past them: forgotten
    assert not cp.refused and not cp.suspects
    assert p.counters.replays == 2
    p.sink.close()
