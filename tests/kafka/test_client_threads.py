"""Kafka clients end their threads when closed: what ``conftest.py`` checks after every module, and what a stopped
service's producer does even while the stopped service's objects stay (``runtime.gcwatch`` freezes them).

No broker: the clients point at a closed port on loopback, and start their threads all the same.
"""

from __future__ import annotations

import gc
import time

from tests.support.client_threads import client_threads, left_behind
from confluent_kafka import Consumer, Producer

from fastpubsub.kafka.clients import ClientFactory
from fastpubsub.kafka.delivery import Delivery
from fastpubsub.runtime.gcwatch import freeze_long_lived

NOWHERE = "127.0.0.1:1"


def test_confluent_and_kafka_python_clients_are_counted_until_closed():
    from kafka import KafkaConsumer, KafkaProducer

    before = client_threads()
    producer = Producer({"bootstrap.servers": NOWHERE, "log_level": 0})
    consumer = Consumer({"bootstrap.servers": NOWHERE, "group.id": "g", "log_level": 0})
    kp_consumer = KafkaConsumer(bootstrap_servers=NOWHERE, api_version=(2, 8))
    kp_producer = KafkaProducer(bootstrap_servers=NOWHERE, api_version=(2, 8))
    running = client_threads() - before
    assert running["rdk:main"] == 2 and sum(running.values()) >= 6, running
    assert any(name.startswith("kafka-python") for name in running), running
    consumer.close()
    producer.close()
    kp_consumer.close()
    kp_producer.close(timeout=5)
    assert not left_behind(before, bound=0), client_threads() - before


def test_a_client_held_only_by_a_cycle_is_not_left_behind():
    """The check collects garbage first: such a client is freed, not left open."""

    class Owner:
        def __init__(self) -> None:
            self.producer = Producer({"bootstrap.servers": NOWHERE, "log_level": 0, "error_cb": self.on_error})

        def on_error(self, err) -> None:
            pass

    before = client_threads()
    Owner()
    assert client_threads() - before  # running until the collector frees the cycle
    assert not left_behind(before, bound=0)


def test_closing_a_delivery_ends_its_producer_threads_even_while_the_delivery_stays():
    """A stopped service's objects stay in memory once frozen as long-lived (a cycle the collector then never
    frees): its producer must end its threads on close, not when it is freed."""
    before = client_threads()
    delivery = Delivery(ClientFactory(NOWHERE, {"log_level": "0", "message.timeout.ms": "2000"}), "at-least-once")
    delivery.produce("pubsub.notifications", b"k", b"undeliverable")  # queued: nothing answers at that port
    delivery.cycle = delivery  # what a service's objects do: refer to each other
    freeze_long_lived()
    try:
        started = time.monotonic()
        delivery.close()
        assert time.monotonic() - started < 10  # what could not be delivered does not hold the close
        del delivery
        left = left_behind(before, bound=0)
        assert not left, left
    finally:
        gc.unfreeze()
