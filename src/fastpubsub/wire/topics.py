"""The five topics: their names and configurations (what ``pubsub topics`` creates, ``kafka.admin``).

The pattern service (``pubsub patterns``, docs/patterns.md) adds ``pubsub.changelog.patterns``, with the
events topic's partition count; with ``--repartition-by ATTR`` it adds ``<group-id>-<ATTR>-repartition`` (the
events re-keyed by the attribute) and ``<group-id>-<ATTR>-repartition-changelog`` instead (both with the events
topic's partition count, see :func:`pattern_repartition_topic`).  The table service (``pubsub tables``, docs/aggregates.md) adds its own: the public S-CN topic
``pubsub.reformulated``, ``pubsub.table-schemas`` (the declared tables, read by ``pubsub subscribe``)
and one compacted changelog per table, all created by the service when missing.  Table topics
(``pubsub.tables.<name>`` by convention) belong to the publishers of the rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

SUBSCRIPTIONS = "pubsub.subscriptions"
EVENTS = "pubsub.events"
NOTIFICATIONS = "pubsub.notifications"
DEAD_LETTER = "pubsub.dead-letter"
STATISTICS = "pubsub.statistics"
ALL = (SUBSCRIPTIONS, EVENTS, NOTIFICATIONS, DEAD_LETTER, STATISTICS)
REQUIRED = (SUBSCRIPTIONS, EVENTS, NOTIFICATIONS, DEAD_LETTER)  # the processor cannot run without these

REFORMULATED = "pubsub.reformulated"
TABLE_SCHEMAS = "pubsub.table-schemas"
TABLE_PREFIX = "pubsub.tables."
CHANGELOG_PREFIX = "pubsub.changelog.tables."
TABLE_SERVICE = (REFORMULATED, TABLE_SCHEMAS)  # created by the table service
#: The pattern service's state (``pubsub patterns``, docs/patterns.md): one partition per events partition, compacted.
PATTERN_CHANGELOG = "pubsub.changelog.patterns"


#: ``pubsub patterns --repartition-by ATTR`` (docs/patterns.md 6.5): the events re-keyed by an attribute, and the
#: state of the engines that read them; named from the application id (the consumer group), as Kafka Streams names
#: its internal topics, with the events topic's partition count.
REPARTITION_SUFFIX = "-repartition"
REPARTITION_CHANGELOG_SUFFIX = "-repartition-changelog"


def pattern_repartition_topic(application_id: str, attribute: str) -> str:
    """``<group>-<attribute>-repartition``: the events keyed (and placed) by ``attribute``."""
    return f"{application_id}-{attribute}{REPARTITION_SUFFIX}"


def pattern_repartition_changelog(application_id: str, attribute: str) -> str:
    """``<group>-<attribute>-repartition-changelog``: the pattern state of each repartition partition (compacted)."""
    return f"{application_id}-{attribute}{REPARTITION_CHANGELOG_SUFFIX}"


def table_topic(table: str) -> str:
    """The conventional topic of a table's rows."""
    return TABLE_PREFIX + table


def changelog_topic(table: str) -> str:
    """A table's changelog: the latest row per key, written in the transaction of the outputs (compacted)."""
    return CHANGELOG_PREFIX + table


# Subscriptions are state (latest value per id), dead letters are keyed by
# their source position so replays collapse, statistics snapshots are keyed by
# their source topic (the latest per topic is what counts): all compacted.
CONFIGS: dict[str, dict[str, str]] = {
    SUBSCRIPTIONS: {"cleanup.policy": "compact"},
    EVENTS: {"cleanup.policy": "delete"},
    NOTIFICATIONS: {"cleanup.policy": "delete"},
    DEAD_LETTER: {"cleanup.policy": "compact"},
    STATISTICS: {"cleanup.policy": "compact"},
    REFORMULATED: {"cleanup.policy": "delete"},
    TABLE_SCHEMAS: {"cleanup.policy": "compact"},
    PATTERN_CHANGELOG: {"cleanup.policy": "compact"},
}


def config_of(name: str) -> dict[str, str]:
    """The configuration of any fastpubsub topic (changelogs are compacted)."""
    if name.startswith(CHANGELOG_PREFIX) or name.endswith(REPARTITION_CHANGELOG_SUFFIX):
        return {"cleanup.policy": "compact"}
    if name.endswith(REPARTITION_SUFFIX):
        return {"cleanup.policy": "delete"}
    return CONFIGS[name]
# Partitions fixed by design, whatever `--partitions` says: one for the
# statistics, so that the latest snapshot is simply the last record.
# One for the table schemas and every changelog too: a table has one owner (docs/aggregates.md).
FIXED_PARTITIONS: dict[str, int] = {STATISTICS: 1, TABLE_SCHEMAS: 1}


#: What Kafka accepts as a topic name (``org.apache.kafka.common.internals.Topic``).
LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_name(name: str, what: str) -> str:
    """``name`` if Kafka would accept it as a topic name; else a ValueError naming the option."""
    if not LEGAL_NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"{what}: {name!r} is not a Kafka topic name (1 to 249 of a-z A-Z 0-9 . _ -)")
    return name


@dataclass(frozen=True)
class TopicNames:
    """The topics of one deployment: today's names by default, each one replaceable, all under one prefix.

    The prefix goes in front of every name fastpubsub chooses (its own topics and consumer groups), never in front of
    a name the user gives (``--events-topic orders`` is read as it is), so that two deployments with different
    prefixes share a cluster without touching each other's topics, groups or transactional ids.  Events come from
    ``events`` (one or more topics), from the topics matching ``events_pattern`` (a regular expression, matched in
    full; a topic created later is picked up by the consumer's metadata refresh), or from both.
    """

    prefix: str = ""
    events: tuple[str, ...] = (EVENTS,)
    events_pattern: str | None = None
    subscriptions: str = SUBSCRIPTIONS
    notifications: str = NOTIFICATIONS
    dead_letter: str = DEAD_LETTER
    statistics: str = STATISTICS
    #: the names given explicitly (kept so that ``replace`` keeps them and help can tell the defaults)
    given: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def build(cls, prefix: str = "", events: Iterable[str] = (), events_pattern: str | None = None,
              subscriptions: str | None = None, notifications: str | None = None, dead_letter: str | None = None,
              statistics: str | None = None) -> "TopicNames":
        """The names from the options: each given name as it is, the others ``prefix`` + today's name.

        Without ``events`` and ``events_pattern`` the events topic is ``prefix`` + ``pubsub.events``.  Raises
        ValueError for a name Kafka refuses, a pattern that does not compile, or one topic given two roles.
        """
        prefix = prefix or ""
        if prefix:
            check_name(prefix, "--topic-prefix")
        events = tuple(dict.fromkeys(check_name(e, "--events-topic") for e in events))
        if events_pattern is not None:
            events_pattern = events_pattern[1:] if events_pattern.startswith("^") else events_pattern
            if not events_pattern:
                raise ValueError("--events-pattern: an empty regular expression")
            try:
                re.compile(events_pattern)
            except re.error as exc:
                raise ValueError(f"--events-pattern: {events_pattern!r} is not a regular expression: {exc}") from None
        given = {k for k, v in (("events", events or events_pattern), ("subscriptions", subscriptions),
                                ("notifications", notifications), ("dead_letter", dead_letter),
                                ("statistics", statistics)) if v}
        names = {
            "subscriptions": subscriptions or prefix + SUBSCRIPTIONS,
            "notifications": notifications or prefix + NOTIFICATIONS,
            "dead_letter": dead_letter or prefix + DEAD_LETTER,
            "statistics": statistics or prefix + STATISTICS,
        }
        for role, name in names.items():
            check_name(name, f"--{role.replace('_', '-')}-topic")
        if not events and events_pattern is None:
            events = (prefix + EVENTS,)
        out = cls(prefix, events, events_pattern, given=frozenset(given), **names)
        out._check_roles()
        return out

    def _check_roles(self) -> None:
        """One topic, one role: an output that is also an input would feed the service its own records."""
        roles: dict[str, str] = {}
        for role, name in (*(("events", e) for e in self.events), ("subscriptions", self.subscriptions),
                           ("notifications", self.notifications), ("dead-letter", self.dead_letter),
                           ("statistics", self.statistics)):
            if name in roles:
                raise ValueError(f"topic {name} is both the {roles[name]} topic and the {role} topic")
            roles[name] = role
        if self.events_pattern is not None:
            pattern = re.compile(self.events_pattern)
            clash = [n for n in (self.subscriptions, self.notifications, self.dead_letter, self.statistics)
                     if pattern.fullmatch(n)]
            if clash:
                raise ValueError(f"--events-pattern {self.events_pattern!r} matches {', '.join(clash)}, which is "
                                 f"not an events topic: narrow the pattern")

    # --- what the clients are given -----------------------------------------------------------------------

    @property
    def event_subscription(self) -> list[str]:
        """What the events consumer subscribes to: the topics, and the pattern as librdkafka takes one (``^``),
        anchored at both ends so that it matches whole names, as :meth:`is_event_topic` does."""
        return [*self.events, *((f"^({self.events_pattern})$",) if self.events_pattern is not None else ())]

    def is_event_topic(self, topic: str) -> bool:
        """Whether records of ``topic`` are events of this deployment."""
        return topic in self.events or (self.events_pattern is not None
                                        and re.fullmatch(self.events_pattern, topic) is not None)

    @property
    def events_label(self) -> str:
        """The events input in one word, for logs and as the statistics' source key: ``a,b`` or ``a,^regex``."""
        return ",".join(self.event_subscription)

    def options(self) -> list[str]:
        """The command line options that name these topics (for a ``pubsub`` command started by another)."""
        out = ["--topic-prefix", self.prefix] if self.prefix else []
        for e in self.events:
            out += ["--events-topic", e]
        if self.events_pattern is not None:
            out += ["--events-pattern", self.events_pattern]
        return out + ["--subscriptions-topic", self.subscriptions, "--notifications-topic", self.notifications,
                      "--dead-letter-topic", self.dead_letter, "--statistics-topic", self.statistics]

    def group(self, name: str) -> str:
        """A consumer group (and transactional id) name of this deployment: ``prefix`` + ``name``."""
        return self.prefix + name

    # --- fastpubsub's own topics ---------------------------------------------------------------------------

    @property
    def reformulated(self) -> str:
        return self.prefix + REFORMULATED

    @property
    def table_schemas(self) -> str:
        return self.prefix + TABLE_SCHEMAS

    @property
    def pattern_changelog(self) -> str:
        return self.prefix + PATTERN_CHANGELOG

    def table_topic(self, table: str) -> str:
        """The conventional topic of a table's rows, under the prefix."""
        return self.prefix + table_topic(table)

    def changelog_topic(self, table: str) -> str:
        """A table's changelog, under the prefix."""
        return self.prefix + changelog_topic(table)

    @property
    def all(self) -> tuple[str, ...]:
        """What ``pubsub topics`` creates: the subscriptions, the named events topics (a pattern's are the
        users'), notifications, dead letters and statistics."""
        return (self.subscriptions, *self.events, self.notifications, self.dead_letter, self.statistics)

    @property
    def required(self) -> tuple[str, ...]:
        """What the processor cannot run without (a pattern may match no topic yet: it waits for one)."""
        return (self.subscriptions, *self.events, self.notifications, self.dead_letter)

    def config_of(self, name: str) -> dict[str, str]:
        """The configuration of one of this deployment's topics, by its role."""
        by_role = {self.subscriptions: SUBSCRIPTIONS, self.notifications: NOTIFICATIONS,
                   self.dead_letter: DEAD_LETTER, self.statistics: STATISTICS, self.reformulated: REFORMULATED,
                   self.table_schemas: TABLE_SCHEMAS, self.pattern_changelog: PATTERN_CHANGELOG,
                   **{e: EVENTS for e in self.events}}
        if name in by_role:
            return CONFIGS[by_role[name]]
        if self.is_event_topic(name):  # one the pattern matches
            return CONFIGS[EVENTS]
        if name.startswith(self.prefix + CHANGELOG_PREFIX):
            return {"cleanup.policy": "compact"}
        return config_of(name)

    def fixed_partitions(self, name: str, default: int) -> int:
        """The statistics topic and the table schemas have one partition, whatever ``--partitions`` says."""
        return 1 if name in (self.statistics, self.table_schemas) else default


#: The names of a deployment without options: today's constants.
DEFAULT = TopicNames()
