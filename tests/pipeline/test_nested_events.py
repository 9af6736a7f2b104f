"""Nested JSON events through the processor on Apache Kafka: matched on a path and on an array element."""

from __future__ import annotations

import json

from tests.support.kafka_helpers import notifications, send, wait_processed

from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription


def test_a_nested_json_event_is_matched_on_a_path_and_on_an_array_element(bootstrap, group_id, start_processor):
    subs = {1: Subscription("alice", [("customer.address.country", "=", "FR")]),
            2: Subscription("bob", [("items.sku", "=", "B"), ("tags", "=", "gift")]),
            3: Subscription("carol", [("items.sku", "=", "Z")])}
    send(bootstrap, topics.SUBSCRIPTIONS, [(str(sid), codecs.encode_subscription(s, "json")) for sid, s in subs.items()])
    start_processor(output_format="json")
    event = {"n": 1, "customer": {"address": {"country": "FR"}}, "tags": ["new", "gift"],
             "items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}], "note": None}
    send(bootstrap, topics.EVENTS, [("k1", json.dumps(event).encode()),
                                    ("k2", json.dumps({"n": 2, "items": [{"sku": "A"}]}).encode())])
    wait_processed(bootstrap, group_id)
    got = sorted((n["subscription_id"], n["event"]["n"]) for n in notifications(bootstrap))
    assert got == [(1, 1), (2, 1)]
    assert all(n["event"] == event for n in notifications(bootstrap))  # the event as it arrived, nesting and all
