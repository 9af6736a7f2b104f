"""fastpubsub on Kafka: every client from one factory, delivery, dead letters, bounded queues, topics, the broker.

* ``clients``: :class:`~fastpubsub.kafka.clients.ClientFactory`, the only place a confluent-kafka
  client is built, so the ``-X`` connection settings reach admin, producer and consumer alike;
* ``delivery``: outputs and input offsets committed together (transactions, or at-least-once);
* ``deadletter``: bad input to ``pubsub.dead-letter`` with its reason and position;
* ``queues``: the bounds of every in-memory queue (back-pressure);
* ``admin``: creating and checking the topics of ``wire.topics``;
* ``statistics_topic``: reading and writing snapshots on ``pubsub.statistics``;
* ``distribution``: the Apache Kafka jars (Maven Central through ``pom.xml``, or ``--kafka-home``);
* ``broker``: Apache Kafka on loopback (KRaft, one node or three), what the demo and the tests start.
"""

from .clients import ClientFactory, Settings, parse_settings

__all__ = ["ClientFactory", "Settings", "parse_settings"]
