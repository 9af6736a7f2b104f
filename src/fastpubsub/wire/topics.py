"""The five topics: their names and configurations (what ``pubsub topics`` creates, ``kafka.admin``)."""

from __future__ import annotations

SUBSCRIPTIONS = "pubsub.subscriptions"
EVENTS = "pubsub.events"
NOTIFICATIONS = "pubsub.notifications"
DEAD_LETTER = "pubsub.dead-letter"
STATISTICS = "pubsub.statistics"
ALL = (SUBSCRIPTIONS, EVENTS, NOTIFICATIONS, DEAD_LETTER, STATISTICS)
REQUIRED = (SUBSCRIPTIONS, EVENTS, NOTIFICATIONS, DEAD_LETTER)  # the processor cannot run without these

# Subscriptions are state (latest value per id), dead letters are keyed by
# their source position so replays collapse, statistics snapshots are keyed by
# their source topic (the latest per topic is what counts): all compacted.
CONFIGS: dict[str, dict[str, str]] = {
    SUBSCRIPTIONS: {"cleanup.policy": "compact"},
    EVENTS: {"cleanup.policy": "delete"},
    NOTIFICATIONS: {"cleanup.policy": "delete"},
    DEAD_LETTER: {"cleanup.policy": "compact"},
    STATISTICS: {"cleanup.policy": "compact"},
}
# Partitions fixed by design, whatever `--partitions` says: one for the
# statistics, so that the latest snapshot is simply the last record.
FIXED_PARTITIONS: dict[str, int] = {STATISTICS: 1}
