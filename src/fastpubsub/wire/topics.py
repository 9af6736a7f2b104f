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
