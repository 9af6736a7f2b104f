"""Creating the topics idempotently, and checking that they exist (names and configurations: ``wire.topics``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from fastpubsub.wire.topics import ALL, FIXED_PARTITIONS, REQUIRED, config_of

from .clients import ClientFactory


@dataclass(frozen=True)
class TopicStatus:
    name: str
    created: bool  # False: it already existed
    partitions: int
    replicas: int
    cleanup_policy: str | None  # as reported by the broker; None if it cannot say


def create_topics(clients: ClientFactory | str, partitions: int = 4, replication_factor: int = -1, timeout: float = 30.0,
                  names: tuple[str, ...] = ALL) -> list[TopicStatus]:
    """Create the topics that do not exist yet; report every topic as the broker sees it.

    ``replication_factor`` -1 leaves it to the cluster's ``default.replication.factor`` (and ``min.insync.replicas``),
    which is what an operator sets once for the whole cluster.
    """
    client = ClientFactory.of(clients).admin()
    new = [NewTopic(name, FIXED_PARTITIONS.get(name, partitions), replication_factor, config=config_of(name)) for name in names]
    created = {}
    for name, future in client.create_topics(new, operation_timeout=timeout, request_timeout=timeout).items():
        try:
            future.result(timeout)
            created[name] = True
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            created[name] = False
    metadata = _listing(client, names, timeout)
    policies = cleanup_policies(client, timeout, names)
    return [
        TopicStatus(name, created[name], len(metadata.topics[name].partitions),
                    len(next(iter(metadata.topics[name].partitions.values())).replicas), policies.get(name))
        for name in names
    ]


def _listing(client: AdminClient, names: tuple[str, ...], timeout: float):
    """The cluster's metadata once it lists every one of ``names`` with its partitions.

    A topic just created is not at once in every broker's metadata (Apache Kafka in KRaft mode propagates it
    from the controller): listed right after the creation, it was missing, and a service that had just created
    its changelog stopped on a ``KeyError``.
    """
    deadline = time.monotonic() + timeout
    while True:
        metadata = client.list_topics(timeout=timeout)
        missing = [n for n in names if n not in metadata.topics or metadata.topics[n].error is not None
                   or not metadata.topics[n].partitions]
        if not missing or time.monotonic() > deadline:
            if missing:
                raise RuntimeError(f"topics {missing} created but not listed by the broker within {timeout:.0f}s")
            return metadata
        time.sleep(0.05)


def cleanup_policies(client: AdminClient, timeout: float = 10.0, names: tuple[str, ...] = ALL) -> dict[str, str]:
    """``cleanup.policy`` of each topic, for brokers that answer DescribeConfigs."""
    out = {}
    futures = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name) for name in names])
    for resource, future in futures.items():
        try:
            entry = future.result(timeout).get("cleanup.policy")
        except KafkaException:
            continue
        if entry is not None:
            out[resource.name] = entry.value
    return out


def require(clients: ClientFactory | str, names: tuple[str, ...] = REQUIRED, timeout: float = 10.0) -> dict[str, int]:
    """Partitions of each topic; a clear error if one is missing.

    Lists all topics rather than asking for these: asking for a topic by name
    auto-creates it on brokers that allow that (``auto.create.topics.enable``),
    without the configuration of ``wire.topics``.
    """
    clients = ClientFactory.of(clients)
    metadata = clients.admin().list_topics(timeout=timeout)
    out = {}
    for name in names:
        t = metadata.topics.get(name)
        if t is None or t.error is not None:
            raise RuntimeError(f"topic {name} does not exist on {clients.bootstrap_servers}; run `pubsub topics` first")
        out[name] = len(t.partitions)
    return out


def partitions_of(clients: ClientFactory | str, topic: str, timeout: float = 10.0) -> int:
    return require(clients, (topic,), timeout)[topic]
