"""The table service's settings (``pubsub tables``): the host's (``runtime.HostConfig``) and its own."""

from __future__ import annotations

from dataclasses import dataclass, replace

from fastpubsub.kafka.schema_registry import RegistryConfig
from fastpubsub.runtime import HostConfig

from .declarations import TableDeclaration

MODES = ("s-un", "s-cn")


@dataclass
class TableServiceConfig:
    """The table service's settings: the host's (``runtime.HostConfig``; its group holds the committed offsets of
    the table topics and the subscriptions) and its own."""

    host: HostConfig
    tables: list[TableDeclaration]
    mode: str = "s-un"  # s-un: a notification per affected subscription; s-cn: the reformulated messages
    schema_registry: RegistryConfig | None = None  # --schema-registry: rows in producers' registered schemas

    def __post_init__(self) -> None:
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

    def host_config(self) -> HostConfig:
        """The host's settings as the host runs them: a transaction per batch (``batch_size`` bounds it), and a
        fixed transactional.id (default ``<group_id>-tables``) that ends (aborts) what a previous instance left
        open, and fences it."""
        return replace(self.host, transactional_id=self.host.transactional_id or f"{self.host.group_id}-tables",
                       commit_interval_ms=0, commit_linger_ms=0)
