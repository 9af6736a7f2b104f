"""The event processor's settings (``pubsub run``): the host's (``runtime.host.HostConfig``) and the matcher's."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from fastpubsub.kafka import Settings
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.kafka.schema_registry import RegistryConfig
from fastpubsub.runtime import DEFAULT_STALL_SECONDS, HostConfig
from fastpubsub.wire.topics import DEFAULT, TopicNames

from .encode import NOTIFICATION_EVENT_FORMATS, NOTIFICATION_EVENT_MODES
from .shard import UNSHARDED, Shard


@dataclass
class ProcessorConfig:
    bootstrap_servers: str
    group_id: str = "pubsub-processor"
    output_format: str = "avro"
    delivery: str = "auto"
    batch_size: int = 1000  # most events per consumed batch (one match_encoded); fewer when fewer are there
    session_timeout_ms: int = 6000
    progress_interval: float = 5.0
    algorithm: str = "dynamic"
    runs: int | None = None  # static/dynamic: clusters of this many entries keep sorted runs (0: off; None: engine RUN_MIN)
    transactional_id: str | None = None  # default: a stable per-host slot (runtime.instance)
    client_config: dict[str, Any] = field(default_factory=dict)  # the -X settings of every Kafka client
    max_valid_events: int = 100_000  # the valid-event store's bounds (engine ValidEventStore)
    max_valid_event_bytes: int = 256 << 20
    snapshot_dir: str | None = None  # None: no snapshots, every start rebuilds from the topic
    snapshot_every: float = 300.0  # seconds between snapshots (when something changed)
    snapshot_changes: int = 100_000  # ... or after this many subscription changes, whichever comes first
    queue_bounds: QueueBounds = field(default_factory=QueueBounds)  # back-pressure (kafka.queues)
    stall_seconds: float = DEFAULT_STALL_SECONDS  # /healthz fails after this long without progress
    notification_event: str = "auto"  # full | reference | auto (services.events.encode.NOTIFICATION_EVENT_MODES)
    max_output_bytes: int | None = None  # None: each output topic's max.message.bytes as the broker reports it
    max_record_bytes: int | None = None  # None: the input topics' max.message.bytes (Kafka's default if unreported)
    shard: Shard = UNSHARDED  # or "I/K": hold only the subscriptions of shard I of K (services.events.shard)
    commit_interval_ms: int = 100  # a transaction (at-least-once: the outputs before an offset commit) is open this long at most
    commit_linger_ms: int = 0  # ... and, when the input is drained, at least this long (0: committed at once)
    start_from_groups: tuple[str, ...] = ()  # where a partition this group never committed starts (runtime.inputs)
    overlap_commits: bool = False  # commit on a thread while the next batch is consumed, decoded, matched, encoded
    latency_samples: int = 0  # sampled batches' latency by part kept for the final statistics (runtime.trace)
    topics: TopicNames = DEFAULT  # the deployment's topic names (wire.topics)
    notification_event_format: str = "decoded"  # or "original": the record's value as it was (encode.NOTIFICATION_EVENT_FORMATS)
    schema_registry: RegistryConfig | None = None  # --schema-registry: events in producers' registered schemas

    def __post_init__(self) -> None:
        self.client_config = Settings(self.client_config)  # its repr hides the secrets
        if isinstance(self.shard, str):
            self.shard = Shard.parse(self.shard)
        self.start_from_groups = tuple(self.start_from_groups)
        if "" in self.start_from_groups:
            raise ValueError("--start-from-group needs a consumer group name, got an empty one")
        if self.group in self.start_from_groups:
            raise ValueError(f"--start-from-group {self.group} is this instance's own consumer group; name the "
                             f"groups it takes over from (e.g. the unsharded --group-id, or the old shards' groups)")
        if self.notification_event not in NOTIFICATION_EVENT_MODES:
            raise ValueError(f"notification_event must be one of {', '.join(NOTIFICATION_EVENT_MODES)}, "
                             f"got {self.notification_event!r}")
        if self.notification_event_format not in NOTIFICATION_EVENT_FORMATS:
            raise ValueError(f"notification_event_format must be one of {', '.join(NOTIFICATION_EVENT_FORMATS)}, "
                             f"got {self.notification_event_format!r}")
        self.host()  # the host's own checks (batch size, commit interval, record limits)

    @property
    def group(self) -> str:
        """The consumer group this instance joins: ``group_id``, or ``<group_id>.shard-I-of-K`` for a shard."""
        return self.shard.group(self.group_id)

    def host(self) -> HostConfig:
        shared = {f.name: getattr(self, f.name) for f in fields(HostConfig) if hasattr(self, f.name)}
        return HostConfig(**{**shared, "group_id": self.group})
