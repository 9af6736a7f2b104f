"""Batches that notify nothing still move the committed offsets, in every delivery mode.

A shard (or any processor) whose subscriptions match none of a batch's
events has no output to put in the batch's transaction; ``Delivery.commit``
commits those offsets through the consumer, without a transaction, and the
processor's lag must still fall to zero.
"""

from __future__ import annotations

import pytest
from tests.support.kafka_helpers import committed_events, notifications, wait_processed
from tests.support.random_workload import send_subscriptions
from tests.faults.test_crash import send_events

from fastpubsub.wire.codecs import Subscription


@pytest.mark.parametrize("delivery", ["auto", "at-least-once"])
def test_batches_without_notifications_commit_their_offsets(bootstrap, group_id, start_processor, delivery):
    send_subscriptions(bootstrap, [(1, Subscription("alice", [("hit", "=", 1)]))])
    p = start_processor(batch_size=10, delivery=delivery)
    events = [{"n": n, "hit": 1 if n % 50 == 0 else 0} for n in range(400)]  # most batches notify nothing
    send_events(bootstrap, events)
    wait_processed(bootstrap, group_id, timeout=60)
    stats = p.stop()
    assert stats["delivery"] == ("transactional" if delivery == "auto" else "at-least-once")
    assert committed_events(bootstrap, group_id) == len(events) == stats["events"]
    assert sorted(n["notification_id"] for n in notifications(bootstrap)) == sorted(f"k{n}/1" for n in range(0, 400, 50))
