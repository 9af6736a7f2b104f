"""The processor survives its broker going away and coming back, without manual action.

Apache Kafka keeps its data directory: the restarted node on the same port still holds the topics, the
subscriptions, the group's offsets and the transactions.  The same processor process goes on, and every event sent
before and after the outage is matched exactly as the oracle says (transactional: each notification once).
"""

from __future__ import annotations

import collections
import time

import pytest
from tests.support.kafka_helpers import notifications, wait_processed
from tests.support.random_workload import by_event, expected_matches, random_events, random_subscriptions, send_events, send_subscriptions
from tests.pipeline.test_scale_out import ProcessorProcess

from fastpubsub.kafka import admin
from fastpubsub.kafka.broker import EmbeddedBroker, free_port


@pytest.mark.parametrize("delivery", ["auto", pytest.param("at-least-once", marks=pytest.mark.long)])
def test_processor_resumes_after_the_broker_restarts(tmp_path, group_id, delivery):
    port = free_port()
    subs = random_subscriptions(100, seed=31)
    before = random_events(200, seed=32)
    after = [{**e, "n": e["n"] + len(before)} for e in random_events(300, seed=33)]
    data = tmp_path / "kafka"
    broker = EmbeddedBroker(port, data_dir=data).start()
    proc = None
    try:
        b = broker.bootstrap_servers
        admin.create_topics(b, partitions=4)
        send_subscriptions(b, subs)
        # records the restarted broker never takes fail after 5 s (default 30 s), so the batch is replayed sooner
        proc = ProcessorProcess(b, group_id, "--delivery", delivery, "-X", "message.timeout.ms=5000")
        send_events(b, before)
        wait_processed(b, group_id, timeout=60)

        broker.stop()  # the broker goes away; its data directory stays
        time.sleep(3)
        assert proc.proc.poll() is None, "".join(proc.log[-20:])
        broker = EmbeddedBroker(port, data_dir=data).start()
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
    expected = {n: s for n, s in expected_matches(subs, before + after).items() if s}
    assert by_event(notes) == expected
    if delivery == "auto":  # transactions: exactly once, read_committed, no de-duplication
        counts = collections.Counter((n["event"]["n"], n["subscription_id"]) for n in notes)
        assert max(counts.values()) == 1, [k for k, c in counts.items() if c > 1][:5]
    assert stats["events"] >= len(before) + len(after)
