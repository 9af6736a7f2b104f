"""What every service shares, the host's settings: the connection, the group, delivery, batching, commits, limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastpubsub.kafka import Settings
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.kafka.record_limits import MIN_RECORD_LIMIT
from fastpubsub.wire.topics import DEFAULT, TopicNames

from .checkpoint import MAX_COMMIT_INTERVAL_MS
from .metrics import DEFAULT_STALL_SECONDS


@dataclass
class HostConfig:
    """What every service shares: the connection, the group, delivery, batching, commits, limits, health."""

    bootstrap_servers: str
    group_id: str  # the consumer group of the task's inputs (and the default transactional.id's prefix)
    client_config: dict[str, Any] = field(default_factory=dict)  # the -X settings of every Kafka client
    delivery: str = "auto"
    transactional_id: str | None = None  # default: a stable per-host slot of the group (runtime.instance)
    batch_size: int = 1000  # most records per batch; fewer when fewer are there
    session_timeout_ms: int = 6000
    progress_interval: float = 5.0
    output_format: str = "avro"  # of dead letters
    queue_bounds: QueueBounds = field(default_factory=QueueBounds)  # back-pressure (kafka.queues)
    stall_seconds: float = DEFAULT_STALL_SECONDS  # /healthz fails after this long without progress
    commit_interval_ms: int = 100  # a transaction is open this long at most
    commit_linger_ms: int = 0  # ... and, when the input is drained, at least this long
    overlap_commits: bool = False  # commit on a thread while the next batch is processed
    latency_samples: int = 0  # the last this many sampled batches, their latency by part, in the statistics
    max_output_bytes: int | None = None  # None: each output topic's max.message.bytes as the broker reports it
    max_record_bytes: int | None = None  # None: the input topics' max.message.bytes
    start_from_groups: tuple[str, ...] = ()  # where a partition the group never committed starts (runtime.inputs)
    topics: TopicNames = DEFAULT  # the deployment's topic names (wire.topics)

    def __post_init__(self) -> None:
        self.client_config = Settings(self.client_config)  # its repr hides the secrets
        self.start_from_groups = tuple(self.start_from_groups)
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a whole number of records, at least 1, got {self.batch_size!r}")
        if not isinstance(self.commit_interval_ms, int) or not 0 <= self.commit_interval_ms <= MAX_COMMIT_INTERVAL_MS:
            raise ValueError(f"commit_interval_ms must be a whole number of milliseconds from 0 (commit every batch) "
                             f"to {MAX_COMMIT_INTERVAL_MS} (half the producer's transaction timeout), "
                             f"got {self.commit_interval_ms!r}")
        if not isinstance(self.latency_samples, int) or self.latency_samples < 0:
            raise ValueError(f"latency_samples must be a whole number, at least 0, got {self.latency_samples!r}")
        if not isinstance(self.commit_linger_ms, int) or not 0 <= self.commit_linger_ms <= self.commit_interval_ms:
            raise ValueError(f"commit_linger_ms must be a whole number of milliseconds from 0 to the commit interval "
                             f"({self.commit_interval_ms}), got {self.commit_linger_ms!r}")
        for name in ("max_output_bytes", "max_record_bytes"):
            value = getattr(self, name)
            if value is not None and value < MIN_RECORD_LIMIT:
                raise ValueError(f"{name} must be at least {MIN_RECORD_LIMIT} bytes, got {value}")
