"""Nothing is lost when a processor is killed mid-stream: a restarted one picks up from the committed offsets."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Producer
from kafka_helpers import committed_events, notifications, wait_processed
from random_workload import by_event, expected_matches, random_events, random_subscriptions, send_subscriptions
from test_scale_out import ProcessorProcess

from processor import codecs, topics

pytestmark = pytest.mark.broker


@pytest.mark.parametrize("delivery", ["auto", "at-least-once"])
def test_kill_and_restart_loses_nothing(bootstrap, group_id, delivery):
    subs = random_subscriptions(200, seed=8)
    events = random_events(2000, seed=9)
    send_subscriptions(bootstrap, subs)
    producer = Producer({"bootstrap.servers": bootstrap})
    for e in events:
        producer.produce(topics.EVENTS, codecs.encode_event(e), f"k{e['n']}", partition=e["n"] % 4)
    assert producer.flush(30) == 0

    first = second = None
    try:
        first = ProcessorProcess(bootstrap, group_id, "--delivery", delivery, "--batch-size", "10")
        deadline = time.monotonic() + 60
        while committed_events(bootstrap, group_id) < 100:  # kill it without warning once it has done some work
            assert time.monotonic() < deadline and first.proc.poll() is None, first.log[-5:]
            time.sleep(0.02)
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)

        second = ProcessorProcess(bootstrap, group_id, "--delivery", delivery)
        wait_processed(bootstrap, group_id, timeout=120)
        stats = second.stop()
        assert 0 < stats["events"] < len(events)  # the first one did part of the work
    finally:
        for p in (first, second):
            if p is not None:
                p.kill()

    notes = notifications(bootstrap)
    expected = {n: s for n, s in expected_matches(subs, events).items() if s}
    assert by_event(notes) == expected  # every notification is there (duplicates allowed)
