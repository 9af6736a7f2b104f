"""What each fastpubsub principal may do on a cluster with authorization, as Kafka ACLs, and granting them.

One :class:`Access` per service or command: the topics it reads and writes, the consumer groups and transactional
ids it uses (by prefix: a service's group ``G`` also names ``G.subscriptions-reader``, and its transactional ids are
``G-<hostname>-<slot>``), and the topics it may create (its own changelogs, when they are not created beforehand).
Nothing else: no super user, no wildcard.  ``DESCRIBE_CONFIGS`` on its topics lets a service read their record size
limits (``kafka.record_limits``).  The table of these is in docs/guide/security.md ("ACLs").
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   ResourcePatternType, ResourceType)

from fastpubsub.wire.topics import DEFAULT, TopicNames

from .clients import ClientFactory


@dataclass(frozen=True)
class Access:
    """What one principal may do (see the module's docstring)."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()  # prefixes of its consumer groups
    transactional_ids: tuple[str, ...] = ()  # prefixes of its transactional ids
    creates: tuple[str, ...] = ()
    describe_configs: bool = True  # a service reads its topics' record size limits; a command does not

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(resource type, pattern, name, operation) of every ACL, in a stable order."""
        out = [("TOPIC", "LITERAL", t, "READ") for t in self.reads]
        out += [("TOPIC", "LITERAL", t, "WRITE") for t in self.writes]
        out += [("TOPIC", "LITERAL", t, "DESCRIBE_CONFIGS") for t in dict.fromkeys(self.reads + self.writes)
                if self.describe_configs]
        out += [("TOPIC", "LITERAL", t, "CREATE") for t in self.creates]
        out += [("GROUP", "PREFIXED", g, "READ") for g in self.groups]
        out += [("TRANSACTIONAL_ID", "PREFIXED", t, "WRITE") for t in self.transactional_ids]
        return out

    def bindings(self, principal: str) -> list[AclBinding]:
        """The ACLs allowing ``principal`` (``User:name``) this access from any host."""
        return [AclBinding(ResourceType[kind], name, ResourcePatternType[pattern], principal, "*",
                           AclOperation[operation], AclPermissionType.ALLOW)
                for kind, pattern, name, operation in self.rows()]


def grant(clients: ClientFactory, principal: str, access: Access, timeout: float = 30.0) -> None:
    """Create the ACLs of ``access`` for ``principal`` (``clients`` must be allowed to: a super user)."""
    client = clients.admin()  # held until the answers: a client that is gone answers nothing
    futures = client.create_acls(access.bindings(principal), request_timeout=timeout)
    for future in futures.values():
        future.result(timeout)


def revoke(clients: ClientFactory, principal: str, access: Access, timeout: float = 30.0) -> None:
    """Delete the ACLs of ``access`` for ``principal`` (those it does not hold are no error): a running service
    that needs one of them is refused until it is granted again (docs/guide/security.md)."""
    client = clients.admin()
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in access.bindings(principal)]
    for future in client.delete_acls(filters, request_timeout=timeout).values():
        future.result(timeout)


def processor(group: str = "pubsub-processor", topics: TopicNames = DEFAULT) -> Access:
    """``pubsub run``: the subscriptions and events in, the statistics snapshots; notifications and dead letters
    out, in transactions.  ``group`` as the service joins it (after the prefix); topics matched by an events
    pattern need ACLs of their own (a PREFIXED binding, typically)."""
    return Access(reads=(topics.subscriptions, *topics.events, topics.statistics),
                  writes=(topics.notifications, topics.dead_letter),
                  groups=(group, topics.group("pubsub-statistics-feed")), transactional_ids=(f"{group}-",))


def patterns(group: str = "pubsub-patterns", changelog: str | None = None, topics: TopicNames = DEFAULT) -> Access:
    """``pubsub patterns`` (without ``--repartition-by``): its changelog is read back on restore."""
    changelog = changelog or topics.pattern_changelog
    return Access(reads=(topics.subscriptions, *topics.events, changelog),
                  writes=(topics.notifications, topics.dead_letter, changelog),
                  groups=(group,), transactional_ids=(f"{group}-",), creates=(changelog,))


def tables(tables: dict[str, str], group: str = "pubsub-tables", topics: TopicNames = DEFAULT) -> Access:
    """``pubsub tables`` over ``tables`` (name -> topic): the table topics and their changelogs, the schemas it
    announces, the reformulated subscriptions it writes."""
    logs = tuple(topics.changelog_topic(name) for name in tables)
    own = (topics.reformulated, topics.table_schemas, *logs)
    return Access(reads=(topics.subscriptions, *tables.values(), *logs),
                  writes=(topics.notifications, topics.dead_letter, *own), groups=(group,),
                  transactional_ids=(f"{group}-",), creates=own)


def client(topics: TopicNames = DEFAULT) -> Access:
    """``pubsub subscribe``/``unsubscribe``/``publish``/``tail``: subscriptions and events in, notifications and dead
    letters read (``tail``'s group is ``<prefix>pubsub-tail``, never committed), the declared tables checked."""
    return Access(reads=(topics.notifications, topics.dead_letter, topics.table_schemas),
                  writes=(topics.subscriptions, *topics.events), groups=(topics.group("pubsub-tail"),),
                  describe_configs=False)


def statistics(topics: TopicNames = DEFAULT) -> Access:
    """``pubsub stats``: the events read (by the driver and the Spark workers), the snapshots read and written
    (their topic created beforehand); its consumers are assigned, never committed, but librdkafka still looks up
    their groups' coordinator."""
    return Access(reads=(*topics.events, topics.statistics), writes=(topics.statistics,),
                  groups=("fastpubsub-spark-statistics", "fastpubsub-statistics-reader"), describe_configs=False)
