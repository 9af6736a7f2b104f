"""The processor survives its broker going away and coming back, without manual action.

The embedded broker keeps everything in memory, so a restarted one is empty:
the test re-creates the topics and re-sends the subscriptions (what a durable
broker would still hold) and checks that the same processor process matches
the events sent after the restart, exactly as the oracle says.
"""

from __future__ import annotations

import time

import pytest
from kafka_helpers import notifications, wait_processed
from random_workload import by_event, expected_matches, random_events, random_subscriptions, send_events, send_subscriptions
from test_scale_out import ProcessorProcess

from fastpubsub.kafka import admin
from fastpubsub.kafka.broker import EmbeddedBroker, free_port

pytestmark = pytest.mark.broker


@pytest.mark.parametrize("delivery", ["auto", "at-least-once"])
def test_processor_resumes_after_the_broker_restarts(tmp_path, group_id, delivery):
    port = free_port()
    subs = random_subscriptions(100, seed=31)
    before, after = random_events(200, seed=32), random_events(300, seed=33)
    broker = EmbeddedBroker(port, log=tmp_path / "broker.log").start()
    proc = None
    try:
        b = broker.bootstrap_servers
        admin.create_topics(b, partitions=4)
        send_subscriptions(b, subs)
        # records the restarted broker never takes fail after 5 s (default 30 s), so the batch is replayed sooner
        proc = ProcessorProcess(b, group_id, "--delivery", delivery, "-X", "message.timeout.ms=5000")
        send_events(b, before)
        wait_processed(b, group_id, timeout=60)

        broker.stop()  # the broker goes away (and, in memory, forgets everything)
        time.sleep(3)
        assert proc.proc.poll() is None, "".join(proc.log[-20:])
        broker = EmbeddedBroker(port, log=tmp_path / "broker.log").start()
        admin.create_topics(b, partitions=4)
        send_subscriptions(b, subs)
        send_events(b, after)
        try:
            wait_processed(b, group_id, timeout=60)
        finally:
            (tmp_path / "processor.log").write_text("".join(proc.log))
        assert proc.proc.poll() is None, "".join(proc.log[-20:])
        notes = notifications(b)
        stats = proc.stop()
    finally:
        if proc is not None:
            proc.kill()
        broker.stop()
    assert by_event(notes) == {n: s for n, s in expected_matches(subs, after).items() if s}
    assert stats["events"] >= len(before) + len(after)
