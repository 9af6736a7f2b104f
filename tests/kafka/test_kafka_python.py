"""Clients nobody here wrote: kafka-python (pure Python, its own protocol code) produces and consumes end to end.

Subscriptions and events are written by a kafka-python producer, as JSON
built with ``json.dumps`` and as Avro in the Confluent wire format; the
notifications are read by a kafka-python ``read_committed`` consumer in a
consumer group.  The result must be the oracle's, each notification once.
"""

from __future__ import annotations

import json
import time
import uuid
import warnings

import pytest
from tests.support.random_workload import expected_matches, random_events, random_subscriptions

from fastpubsub.wire import codecs, topics

with warnings.catch_warnings():  # kafka-python 3.0 reads its protocol schemas with a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer

pytestmark = pytest.mark.broker


def subscription_json(sub: codecs.Subscription) -> bytes:
    """What a client writes from the README's description alone."""
    return json.dumps({"subscriber": sub.subscriber, "predicates": [list(p) for p in sub.predicates]}).encode()


def read_notifications(bootstrap: str, expected: int, fmt: str, timeout: float = 90.0) -> list[dict]:
    consumer = KafkaConsumer(
        topics.NOTIFICATIONS, bootstrap_servers=bootstrap, group_id=f"kafka-python-{uuid.uuid4().hex[:8]}",
        isolation_level="read_committed", auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=6000, heartbeat_interval_ms=1000)
    out: list[dict] = []
    try:
        deadline = time.monotonic() + timeout
        quiet_until = None
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    note = json.loads(r.value) if fmt == "json" else codecs.decode_notification(r.value)
                    assert r.key.decode() == note["subscriber"]
                    out.append(note)
            if len(out) >= expected:  # then a little longer: anything more would be a duplicate or a stray
                quiet_until = quiet_until or time.monotonic() + 2
                if time.monotonic() >= quiet_until:
                    break
        consumer.commit()
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("output_format", ["json", "avro"])
def test_kafka_python_producers_and_consumer_end_to_end(bootstrap, start_processor, output_format):
    subs = random_subscriptions(300, seed=71)
    events = random_events(400, seed=72)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for sid, s in subs:  # half JSON written by hand, half Avro (Confluent wire format)
        value = subscription_json(s) if sid % 2 == 0 else codecs.encode_subscription(s, "avro")
        producer.send(topics.SUBSCRIPTIONS, key=str(sid).encode(), value=value)
    producer.flush(30)
    p = start_processor(output_format=output_format)
    p.wait_for(lambda: len(p.state) == len(subs), what="every subscription")
    for e in events:
        value = json.dumps(e).encode() if e["n"] % 2 == 0 else codecs.encode_event(e, "avro")
        producer.send(topics.EVENTS, key=f"k{e['n']}".encode(), value=value, partition=e["n"] % 4)
    producer.flush(30)
    producer.close()

    expected = sorted(f"k{n}/{sid}" for n, sids in expected_matches(subs, events).items() for sid in sids)
    notes = read_notifications(bootstrap, len(expected), output_format)
    stats = p.stop()
    assert stats["events"] == len(events) and stats["dead_letters"] == {}
    assert sorted(n["notification_id"] for n in notes) == expected  # each once: read_committed, transactional output
    assert all(n["event"]["n"] == int(n["event_id"][1:]) for n in notes)
