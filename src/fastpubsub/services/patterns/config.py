"""The pattern service's settings (``pubsub patterns``): the host's (``runtime.host.HostConfig``) and its own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fastpubsub.kafka import Settings
from fastpubsub.kafka.schema_registry import RegistryConfig
from fastpubsub.runtime import DEFAULT_STALL_SECONDS, HostConfig
from fastpubsub.wire.topics import DEFAULT, TopicNames, pattern_repartition_changelog, pattern_repartition_topic

ATTRIBUTE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class PatternServiceConfig:
    bootstrap_servers: str
    group_id: str = "pubsub-patterns"  # the events consumer group: instances share the events partitions
    delivery: str = "auto"
    transactional_id: str | None = None  # default: a stable per-host slot of the group (runtime.instance)
    batch_size: int = 1000
    max_per_subscription: int = 10_000  # live instances of one subscription, per events partition
    max_state_bytes: int = 1 << 30  # instance store of one events partition (docs/patterns.md 1.3)
    output_format: str = "avro"  # of dead letters (notifications are JSON)
    session_timeout_ms: int = 6000
    progress_interval: float = 5.0
    client_config: dict[str, Any] = field(default_factory=dict)
    repartition_by: str | None = None  # re-key the events by this attribute first (docs/patterns.md 6.5)
    grace_ms: int = 1000  # how far behind the repartition partition's largest timestamp an event may still arrive
    max_record_bytes: int | None = None  # inputs larger are dead-lettered (default: the topics' max.message.bytes)
    stall_seconds: float = DEFAULT_STALL_SECONDS  # /healthz fails after this long without progress
    topics: TopicNames = DEFAULT  # the deployment's topic names (wire.topics)
    schema_registry: RegistryConfig | None = None  # --schema-registry: events in producers' registered schemas

    def __post_init__(self) -> None:
        self.client_config = Settings(self.client_config)  # its repr hides the secrets
        if len(self.topics.events) != 1 or self.topics.events_pattern is not None:
            # an engine's state is that of one events partition, kept in the changelog partition of its number
            raise ValueError("the pattern service reads one events topic: give one --events-topic and no "
                             "--events-pattern")
        if self.batch_size < 1 or self.max_per_subscription < 1 or self.max_state_bytes < 1:
            raise ValueError("batch size, instance cap and state bound must be positive")
        if self.repartition_by is not None and not ATTRIBUTE.fullmatch(self.repartition_by):
            raise ValueError(f"--repartition-by {self.repartition_by!r}: an attribute name (letters, digits and _, "
                             f"not starting with a digit) is expected")
        if self.grace_ms < 0:
            raise ValueError(f"--grace-ms {self.grace_ms}: the grace must not be negative")

    @property
    def events_topic(self) -> str:
        return self.topics.events[0]

    @property
    def input_topic(self) -> str:
        """The topic the engines read: the events, or the repartition topic."""
        if self.repartition_by is None:
            return self.events_topic
        return pattern_repartition_topic(self.group_id, self.repartition_by)

    @property
    def changelog_topic(self) -> str:
        if self.repartition_by is None:
            return self.topics.pattern_changelog
        return pattern_repartition_changelog(self.group_id, self.repartition_by)

    def host(self) -> HostConfig:
        return HostConfig(self.bootstrap_servers, self.group_id, self.client_config, self.delivery,
                          self.transactional_id, self.batch_size, self.session_timeout_ms, self.progress_interval,
                          self.output_format, stall_seconds=self.stall_seconds, commit_interval_ms=0,
                          max_record_bytes=self.max_record_bytes, topics=self.topics)  # a transaction per batch: --batch-size bounds it
