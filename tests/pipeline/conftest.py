"""The three services end to end through Apache Kafka (subscriptions and events in, notifications out), on the
session broker or brokers of their own: the broker lane."""

from tests.support.lanes import lane

pytest_itemcollected = lane("broker")
