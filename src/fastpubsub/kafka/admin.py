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
    metadata = wait_for_topics(client, names, timeout)
    policies = cleanup_policies(client, timeout, names)
    return [
        TopicStatus(name, created[name], len(metadata.topics[name].partitions),
                    len(next(iter(metadata.topics[name].partitions.values())).replicas), policies.get(name))
        for name in names
    ]


def delete_topics(clients: ClientFactory | str, names: list[str] | tuple[str, ...], timeout: float = 30.0) -> None:
    """Delete the topics of ``names`` (those that do not exist are no error)."""
    if not names:
        return
    client = ClientFactory.of(clients).admin()
    for future in client.delete_topics(list(names), operation_timeout=timeout).values():
        try:
            future.result(timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise


def create_afresh(clients: ClientFactory | str, partitions: int = 4, names: tuple[str, ...] = ALL,
                  timeout: float = 30.0) -> list[TopicStatus]:
    """Create the topics of ``names``, new and empty, after :func:`delete_topics`.

    Deleting is asynchronous in Kafka: a topic is gone from the metadata before its logs are, and creating it again
    can meet ``TOPIC_ALREADY_EXISTS`` for a moment, so creation is retried until every topic stands new.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            statuses = create_topics(clients, partitions=partitions, names=names)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        if all(s.created for s in statuses):
            return statuses
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics not created afresh within {timeout:.0f}s: {statuses}")
        time.sleep(0.2)


def wait_for_topics(client: AdminClient, names: tuple[str, ...], timeout: float = 30.0):
    """The cluster's metadata once every topic of ``names`` has all its partitions led.

    A topic just created is in the controller's metadata before every broker serves it: asking at once can miss it,
    or find partitions without a leader yet, and a client that produces then waits or fails.
    """
    deadline = time.monotonic() + timeout
    while True:
        metadata = client.list_topics(timeout=max(1.0, deadline - time.monotonic()))
        missing = [n for n in names if n not in metadata.topics or metadata.topics[n].error is not None
                   or not metadata.topics[n].partitions
                   or any(p.leader < 0 for p in metadata.topics[n].partitions.values())]
        if not missing:
            return metadata
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {', '.join(missing)} not ready within {timeout:.0f}s")
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
