"""The event processor's settings (``pubsub run``): the host's (``runtime.host.HostConfig``) and the matcher's."""

from __future__ import annotations

from dataclasses import dataclass, replace

from fastpubsub.kafka.schema_registry import RegistryConfig
from fastpubsub.runtime import HostConfig

from .encode import NOTIFICATION_EVENT_FORMATS, NOTIFICATION_EVENT_MODES
from .shard import UNSHARDED, Shard


@dataclass
class ProcessorConfig:
    """The event processor's settings: the host's (the connection, the group, delivery, batching, commits, limits:
    ``runtime.HostConfig``) and the matcher's own."""

    host: HostConfig
    algorithm: str = "dynamic"
    runs: int | None = None  # static/dynamic: clusters of this many entries keep sorted runs (0: off; None: engine RUN_MIN)
    max_valid_events: int = 100_000  # the valid-event store's bounds (engine ValidEventStore)
    max_valid_event_bytes: int = 256 << 20
    snapshot_dir: str | None = None  # None: no snapshots, every start rebuilds from the topic
    snapshot_every: float = 300.0  # seconds between snapshots (when something changed)
    snapshot_changes: int = 100_000  # ... or after this many subscription changes, whichever comes first
    notification_event: str = "auto"  # full | reference | auto (services.events.encode.NOTIFICATION_EVENT_MODES)
    shard: Shard = UNSHARDED  # or "I/K": hold only the subscriptions of shard I of K (services.events.shard)
    notification_event_format: str = "decoded"  # or "original": the record's value as it was (encode.NOTIFICATION_EVENT_FORMATS)
    schema_registry: RegistryConfig | None = None  # --schema-registry: events in producers' registered schemas

    def __post_init__(self) -> None:
        if isinstance(self.shard, str):
            self.shard = Shard.parse(self.shard)
        starts = self.host.start_from_groups
        if "" in starts:
            raise ValueError("--start-from-group needs a consumer group name, got an empty one")
        if self.group in starts:
            raise ValueError(f"--start-from-group {self.group} is this instance's own consumer group; name the "
                             f"groups it takes over from (e.g. the unsharded --group-id, or the old shards' groups)")
        if self.notification_event not in NOTIFICATION_EVENT_MODES:
            raise ValueError(f"notification_event must be one of {', '.join(NOTIFICATION_EVENT_MODES)}, "
                             f"got {self.notification_event!r}")
        if self.notification_event_format not in NOTIFICATION_EVENT_FORMATS:
            raise ValueError(f"notification_event_format must be one of {', '.join(NOTIFICATION_EVENT_FORMATS)}, "
                             f"got {self.notification_event_format!r}")

    @property
    def group(self) -> str:
        """The consumer group this instance joins: ``group_id``, or ``<group_id>.shard-I-of-K`` for a shard."""
        return self.shard.group(self.host.group_id)

    def host_config(self) -> HostConfig:
        """The host's settings as the host runs them: a shard joins its own group."""
        return replace(self.host, group_id=self.group)
