"""The pattern service's settings (``pubsub patterns``): the host's (``runtime.HostConfig``) and its own."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from fastpubsub.kafka.schema_registry import RegistryConfig
from fastpubsub.runtime import HostConfig
from fastpubsub.wire.topics import pattern_repartition_changelog, pattern_repartition_topic

ATTRIBUTE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class PatternServiceConfig:
    """The pattern service's settings: the host's (``runtime.HostConfig``; its group shares the events partitions
    between instances) and its own."""

    host: HostConfig
    max_per_subscription: int = 10_000  # live instances of one subscription, per events partition
    max_state_bytes: int = 1 << 30  # instance store of one events partition (docs/patterns.md 1.3)
    repartition_by: str | None = None  # re-key the events by this attribute first (docs/patterns.md 6.5)
    grace_ms: int = 1000  # how far behind the repartition partition's largest timestamp an event may still arrive
    schema_registry: RegistryConfig | None = None  # --schema-registry: events in producers' registered schemas

    def __post_init__(self) -> None:
        if len(self.host.topics.events) != 1 or self.host.topics.events_pattern is not None:
            # an engine's state is that of one events partition, kept in the changelog partition of its number
            raise ValueError("the pattern service reads one events topic: give one --events-topic and no "
                             "--events-pattern")
        if self.max_per_subscription < 1 or self.max_state_bytes < 1:
            raise ValueError("instance cap and state bound must be positive")
        if self.repartition_by is not None and not ATTRIBUTE.fullmatch(self.repartition_by):
            raise ValueError(f"--repartition-by {self.repartition_by!r}: an attribute name (letters, digits and _, "
                             f"not starting with a digit) is expected")
        if self.grace_ms < 0:
            raise ValueError(f"--grace-ms {self.grace_ms}: the grace must not be negative")

    @property
    def events_topic(self) -> str:
        return self.host.topics.events[0]

    @property
    def input_topic(self) -> str:
        """The topic the engines read: the events, or the repartition topic."""
        if self.repartition_by is None:
            return self.events_topic
        return pattern_repartition_topic(self.host.group_id, self.repartition_by)

    @property
    def changelog_topic(self) -> str:
        if self.repartition_by is None:
            return self.host.topics.pattern_changelog
        return pattern_repartition_changelog(self.host.group_id, self.repartition_by)

    def host_config(self) -> HostConfig:
        """The host's settings as the host runs them: a transaction per batch (``batch_size`` bounds it)."""
        return replace(self.host, commit_interval_ms=0, commit_linger_ms=0)
