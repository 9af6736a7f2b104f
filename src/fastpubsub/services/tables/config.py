"""The table service's settings (``pubsub tables``): the host's (``runtime.host.HostConfig``) and its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastpubsub.kafka import Settings
from fastpubsub.kafka.schema_registry import RegistryConfig
from fastpubsub.runtime import DEFAULT_STALL_SECONDS, HostConfig
from fastpubsub.wire.topics import DEFAULT, TopicNames

from .declarations import TableDeclaration

MODES = ("s-un", "s-cn")


@dataclass
class TableServiceConfig:
    bootstrap_servers: str
    tables: list[TableDeclaration]
    mode: str = "s-un"  # s-un: a notification per affected subscription; s-cn: the reformulated messages
    group_id: str = "pubsub-tables"  # committed offsets of the table topics and subscriptions
    delivery: str = "auto"
    transactional_id: str | None = None  # default: <group_id>-tables (a restarted instance fences the old one)
    batch_size: int = 1000
    output_format: str = "avro"  # of dead letters
    progress_interval: float = 5.0
    client_config: dict[str, Any] = field(default_factory=dict)
    max_record_bytes: int | None = None  # inputs larger are dead-lettered (default: the topics' max.message.bytes)
    stall_seconds: float = DEFAULT_STALL_SECONDS  # /healthz fails after this long without progress
    topics: TopicNames = DEFAULT  # the deployment's topic names (wire.topics)
    schema_registry: RegistryConfig | None = None  # --schema-registry: rows in producers' registered schemas

    def __post_init__(self) -> None:
        self.client_config = Settings(self.client_config)  # its repr hides the secrets
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.tables:
            raise ValueError("declare at least one table")
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ValueError(f"a table is declared twice: {names}")
        topics = [t.topic for t in self.tables]
        if len(set(topics)) != len(topics):
            raise ValueError(f"two tables share a topic: {topics}")

    def host(self) -> HostConfig:
        # the fixed transactional.id ends (aborts) what a previous instance left open, and fences it
        return HostConfig(self.bootstrap_servers, self.group_id, self.client_config, self.delivery,
                          self.transactional_id or f"{self.group_id}-tables", self.batch_size,
                          progress_interval=self.progress_interval, output_format=self.output_format,
                          stall_seconds=self.stall_seconds, commit_interval_ms=0,  # a transaction per batch:
                          max_record_bytes=self.max_record_bytes, topics=self.topics)  # --batch-size bounds it
