"""A slow or small output never makes the processor buffer without limit, drop or fail (kafka.queues)."""

from __future__ import annotations

import json

import pytest
from tests.support.kafka_helpers import notifications, send, wait_processed

from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription
from fastpubsub.kafka.queues import QueueBounds

pytestmark = pytest.mark.broker

BOUND = 50


def test_a_tiny_producer_queue_slows_the_loop_and_delivers_everything(bootstrap, group_id, start_processor):
    subs = [(sid, Subscription(f"user{sid}", [("n", ">=", 0)])) for sid in range(10)]  # every event matches all 10
    send(bootstrap, topics.SUBSCRIPTIONS, [(str(sid), codecs.encode_subscription(s)) for sid, s in subs])
    queued: list[int] = []  # librdkafka's own count of records in the producer's queue, sampled every 20 ms

    def on_stats(text: str) -> None:
        stats = json.loads(text)
        if stats["type"] == "producer":
            queued.append(stats["msg_cnt"])
            assert stats["msg_max"] == BOUND

    p = start_processor(queue_bounds=QueueBounds(producer_messages=BOUND),
                        client_config={"statistics.interval.ms": 20, "stats_cb": on_stats})
    events = [{"n": i} for i in range(300)]
    send(bootstrap, topics.EVENTS, [(f"e{e['n']}", codecs.encode_event(e)) for e in events])  # one burst
    wait_processed(bootstrap, group_id, timeout=120)
    stats = p.stop()

    waits = p.processor.delivery.queue_full_waits
    assert stats["notifications"] == len(events) * len(subs) and waits > 0  # the bound was hit, and waited on
    assert queued and max(queued) <= BOUND
    notes = notifications(bootstrap)
    assert sorted(n["notification_id"] for n in notes) == sorted(f"e{e['n']}/{sid}" for e in events for sid, _ in subs)
    print(f"\nback-pressure: {len(notes)} notifications through a queue of {BOUND}: {waits} waits, "
          f"peak {max(queued)} queued ({len(queued)} samples)")
