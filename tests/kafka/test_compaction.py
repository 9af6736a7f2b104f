"""Compacted topics are really compacted on Apache Kafka, and a processor rebuilds exactly from what Kafka keeps.

``pubsub.subscriptions`` is compacted (``wire.topics``): Kafka's log cleaner keeps the latest value of each key and,
after ``delete.retention.ms``, drops tombstones too.  A processor that starts after the cleaning reads neither the
replaced values nor the removed ids, and must still hold exactly the subscriptions that stand, and match as the
oracle says.  The test makes the cleaner work at once (segments of 100 ms, any dirty ratio, tombstones kept 100 ms),
which is what a week of a production topic does slowly.
"""

from __future__ import annotations

import time

import pytest
from tests.support.kafka_helpers import alter_topic_config, notifications, read_all, send, wait_processed
from tests.support.random_workload import by_event, expected_matches, random_events, random_subscriptions, send_events, send_subscriptions

from fastpubsub.kafka import ClientFactory
from fastpubsub.wire import topics

pytestmark = pytest.mark.broker

CLEAN_AT_ONCE = {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100",
                 "min.compaction.lag.ms": "0"}


def test_a_rebuild_from_a_compacted_subscriptions_topic_holds_exactly_what_stands(bootstrap, start_processor):
    alter_topic_config(bootstrap, topics.SUBSCRIPTIONS, CLEAN_AT_ONCE)
    subs = random_subscriptions(300, seed=41)
    replaced = random_subscriptions(300, seed=42)[:100]  # ids 0..99 get other predicates
    removed = list(range(100, 180))
    send_subscriptions(bootstrap, subs)
    send_subscriptions(bootstrap, replaced)
    send(bootstrap, topics.SUBSCRIPTIONS, [(str(sid), None) for sid in removed])
    written = len(subs) + len(replaced) + len(removed)
    standing = dict(subs) | dict(replaced)
    for sid in removed:
        del standing[sid]

    roller = ClientFactory(bootstrap).producer()
    deadline = time.monotonic() + 120
    while True:  # a later write rolls the segment; the cleaner then keeps the latest record of each key
        for partition in range(4):  # a segment rolls only when its own partition is written to
            roller.produce(topics.SUBSCRIPTIONS, None, "999999", partition=partition)
        assert roller.flush(30) == 0
        kept = read_all(bootstrap, topics.SUBSCRIPTIONS, quiet=0.2)
        values = [m.key() for m in kept if m.value() is not None]
        if len(values) <= len(standing):
            break
        assert time.monotonic() < deadline, f"not compacted: {len(kept)} of {written} records kept"
        time.sleep(1)
    # one value per standing id, none of the replaced or removed ones; tombstones go in a later pass of the cleaner
    assert len(values) == len(set(values)) == len(standing) and set(values) == {str(s).encode() for s in standing}
    assert len(kept) < written

    p = start_processor()
    p.wait_for(lambda: len(p.state) == len(standing), what="the standing subscriptions")
    events = random_events(300, seed=43)
    send_events(bootstrap, events)
    wait_processed(bootstrap, p.processor.config.group_id)
    p.stop()
    assert by_event(notifications(bootstrap)) == {n: s for n, s in expected_matches(sorted(standing.items()),
                                                                                      events).items() if s}
