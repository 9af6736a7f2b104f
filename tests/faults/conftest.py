"""Faults: brokers killed, restarted or partitioned, processors killed mid-stream, poison and oversized input, exactly
once across them.  Every test starts Apache Kafka (the session's or its own): the broker lane."""

from tests.support.lanes import lane

pytest_itemcollected = lane("broker")
