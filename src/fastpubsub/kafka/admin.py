"""Creating the topics idempotently, and checking that they exist (names and configurations: ``wire.topics``)."""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Iterable

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from fastpubsub.wire.topics import ALL, DEFAULT, REQUIRED, TopicNames

from .clients import ClientFactory


@dataclass(frozen=True)
class TopicStatus:
    name: str
    created: bool  # False: it already existed
    partitions: int
    replicas: int
    cleanup_policy: str | None  # as reported by the broker; None if it cannot say


def create_topics(clients: ClientFactory | str, partitions: int = 4, replication_factor: int = -1, timeout: float = 30.0,
                  names: tuple[str, ...] | None = None, topics: TopicNames = DEFAULT) -> list[TopicStatus]:
    """Create the topics that do not exist yet; report every topic as the broker sees it.

    ``names`` default to ``topics.all``; each is configured by its role in ``topics`` (``TopicNames.config_of``).

    ``replication_factor`` -1 leaves it to the cluster's ``default.replication.factor`` (and ``min.insync.replicas``),
    which is what an operator sets once for the whole cluster.
    """
    names = topics.all if names is None else names
    client = ClientFactory.of(clients).admin()
    new = [NewTopic(name, topics.fixed_partitions(name, partitions), replication_factor, config=topics.config_of(name))
           for name in names]
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
                  timeout: float = 30.0, topics: TopicNames = DEFAULT) -> list[TopicStatus]:
    """Create the topics of ``names``, new and empty, after :func:`delete_topics`.

    Deleting is asynchronous in Kafka: a topic is gone from the metadata before its logs are, and creating it again
    can meet ``TOPIC_ALREADY_EXISTS`` for a moment, so creation is retried until every topic stands new.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            statuses = create_topics(clients, partitions=partitions, names=names, topics=topics)
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


class ConnectionFailed(RuntimeError):
    """No answer from the cluster, and why: authentication refused, TLS failed, a plaintext client at a TLS port."""


#: librdkafka errors that no retry mends: the client's settings are wrong.
_REFUSED = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL)


def _listing(clients: ClientFactory, timeout: float) -> Any:
    """Every topic's metadata as this principal may see it; :class:`ConnectionFailed` saying why not, at once when
    the broker refused the client's credentials or its TLS."""
    seen: list[KafkaError] = []
    client = clients.admin(error_cb=seen.append)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.list_topics(timeout=max(0.5, min(1.0, deadline - time.monotonic())))
        except KafkaException as exc:
            client.poll(0)  # serves error_cb
            refused = [e for e in seen if e.code() in _REFUSED]
            tls = _protocol(clients).endswith("PLAINTEXT") and _speaks_tls(clients.bootstrap_servers)
            if refused or tls or time.monotonic() >= deadline:
                raise ConnectionFailed(_why(clients, exc.args[0], refused, tls)) from None


def _protocol(clients: ClientFactory) -> str:
    return str(clients.settings.get("security.protocol", "plaintext")).upper()


def _speaks_tls(bootstrap_servers: str, timeout: float = 2.0) -> bool:
    """Whether the first bootstrap server completes a TLS handshake (certificate unchecked: only the protocol is
    asked about), which a client without TLS could not talk to."""
    host, _, port = bootstrap_servers.split(",")[0].strip().rpartition(":")
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as raw, \
                context.wrap_socket(raw, server_hostname=host.strip("[]") or None):
            return True
    except (OSError, ValueError):
        return False


def _why(clients: ClientFactory, error: KafkaError, refused: list[KafkaError], tls: bool) -> str:
    settings, protocol = clients.settings, _protocol(clients)
    where = f"cannot connect to {clients.bootstrap_servers} ({protocol}"
    where += f", {settings.get('sasl.mechanism', 'GSSAPI')} as {settings.get('sasl.username', '?')})" \
        if protocol.startswith("SASL") else ")"
    for e in refused:
        if e.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            return f"{where}: authentication failed: {e.str()}"
        if e.code() == KafkaError._SSL:
            return f"{where}: TLS failed: {e.str()}"
    if tls:
        return (f"{where}: the broker speaks TLS there; set security.protocol=SSL or SASL_SSL (and ssl.ca.location "
                f"to its CA)")
    return f"{where}: {error.str()}"


def require(clients: ClientFactory | str, names: tuple[str, ...] = REQUIRED, timeout: float = 10.0) -> dict[str, int]:
    """Partitions of each topic; a clear error if one is missing, not authorized, or the cluster cannot be reached
    (:class:`ConnectionFailed`).

    Lists all topics rather than asking for these: asking for a topic by name
    auto-creates it on brokers that allow that (``auto.create.topics.enable``),
    without the configuration of ``wire.topics``.  A topic the principal may not
    describe is left out of that list, so a missing one is asked about alone, in a
    request that never creates it (``describe_topics``).
    """
    clients = ClientFactory.of(clients)
    metadata = _listing(clients, timeout)
    # a topic created a moment ago (by this process's start, through another node) reaches every node's metadata
    # in its own time: a missing one is looked for again, for NEW_TOPIC_GRACE seconds, before it is called missing
    deadline = time.monotonic() + NEW_TOPIC_GRACE
    while not all(_present(metadata, name) for name in names) and time.monotonic() < deadline:
        time.sleep(0.1)
        metadata = _listing(clients, timeout)
    out = {}
    for name in names:
        if not _present(metadata, name):
            raise RuntimeError(_missing(clients, name, timeout))
        out[name] = len(metadata.topics[name].partitions)
    return out


NEW_TOPIC_GRACE = 3.0

#: Errors that say "not now" (a node down, a leader or controller moving) rather than "no": asked again.
TRANSIENT = (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER,
             KafkaError.LEADER_NOT_AVAILABLE, KafkaError.BROKER_NOT_AVAILABLE, KafkaError._ALL_BROKERS_DOWN)


def transient(error: KafkaError) -> bool:
    """Whether an admin question that failed with ``error`` is worth asking again."""
    return error.retriable() or error.code() in TRANSIENT


def _present(metadata, name: str) -> bool:
    t = metadata.topics.get(name)
    return t is not None and t.error is None


def _missing(clients: ClientFactory, name: str, timeout: float) -> str:
    user = clients.settings.get("sasl.username")
    client = clients.admin()  # held until the answer: a client that is gone answers nothing
    try:
        client.describe_topics(TopicCollection([name]), request_timeout=timeout)[name].result()
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            return (f"not authorized to describe topic {name} on {clients.bootstrap_servers}"
                    f"{f' as User:{user}' if user else ''}: grant it READ or WRITE on the topic (see the ACLs in "
                    f"docs/guide/security.md)")
    return f"topic {name} does not exist on {clients.bootstrap_servers}; run `pubsub topics` first"


def check_access(clients: ClientFactory | str, reads: Iterable[str], writes: Iterable[str],
                 timeout: float = 10.0) -> None:
    """A clear error naming each topic and operation this principal lacks: READ on ``reads``, WRITE on ``writes``
    (or :class:`ConnectionFailed` saying why the cluster does not answer).

    Asked of the cluster once at start (the operations it reports the caller is authorized for), rather than learnt
    from the first refused produce, which a transactional producer only reports as an aborted transaction.  A
    cluster that reports no operations is not checked here."""
    clients = ClientFactory.of(clients)
    reads, writes = tuple(reads), tuple(writes)
    _listing(clients, timeout)  # the cluster answers, or an error that says why not
    client = clients.admin()  # held until the answers
    futures = client.describe_topics(TopicCollection(list(dict.fromkeys(reads + writes))), request_timeout=timeout,
                                     include_authorized_operations=True)
    lacking = []
    for name, future in futures.items():
        try:
            allowed = {op.name for op in future.result().authorized_operations or ()}
            if not allowed or "ALL" in allowed:
                continue
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
                continue  # a missing topic is the start's own check to report
            allowed = set()  # not even DESCRIBE
        lacking += [f"{op} topic {name}" for op, topics in (("READ", reads), ("WRITE", writes))
                    if name in topics and op not in allowed]
    if lacking:
        user = clients.settings.get("sasl.username")
        raise RuntimeError(f"{f'User:{user}' if user else 'this client'} is not authorized to "
                           f"{', '.join(lacking)} on {clients.bootstrap_servers}: grant it (an ACL, e.g. "
                           f"kafka-acls --add --allow-principal User:{user or '...'} --operation "
                           f"{lacking[0].split()[0]} --topic {lacking[0].split()[-1]})")


def partitions_of(clients: ClientFactory | str, topic: str, timeout: float = 10.0) -> int:
    return require(clients, (topic,), timeout)[topic]
