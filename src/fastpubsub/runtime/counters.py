"""Counters the pipeline's stages publish, and the metrics (``processor.metrics``) read.

A plain record with no behaviour and no imports: the stages increment it, the
``/metrics`` thread reads it, and neither needs the other's module.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: Stages whose busy time is kept (a batch is consume + decode + match + produce; a commit covers one or more
#: batches).  consume: taking the batch from librdkafka's queue, waits for a first event included.
STAGES = ("consume", "decode", "match", "produce", "commit")


@dataclass
class PipelineCounters:
    events: int = 0  # events decoded and matched
    notifications: int = 0  # notifications produced, live and for stored valid events
    stored_notifications: int = 0  # of which: new subscriptions x stored valid events
    batches: int = 0  # event batches committed
    commits: int = 0  # transactions committed (at-least-once: offset commits after a flush), each of one or more batches
    by_reference: int = 0  # notifications that refer to their event's record instead of embedding it
    not_kept: int = 0  # stored valid events whose notification did not fit (docs/guide/reliability.md, "Oversized records")
    replays: int = 0  # batches that failed delivery and were consumed again
    overlapped: int = 0  # event batches consumed while the previous commit was still in flight (--overlap-commits)
    busy_seconds: float = 0.0  # time spent on event batches and their commits
    #: busy time by stage, to say what bounds the throughput (docs/benchmarks.md)
    stage_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    #: event batches by size, in powers of two ("1", "2-3", "4-7", ...): what the adaptive batching chose
    batch_sizes: dict[str, int] = field(default_factory=dict)

    def sized(self, n: int) -> None:
        low = 1 << (max(n, 1).bit_length() - 1)
        name = str(low) if low == 1 else f"{low}-{2 * low - 1}"
        self.batch_sizes[name] = self.batch_sizes.get(name, 0) + 1

    def stats(self) -> dict:
        """The counts of the final statistics (``Host.stats``)."""
        return {"events": self.events, "notifications": self.notifications, "batches": self.batches,
                "commits": self.commits, "busy_seconds": round(self.busy_seconds, 3),
                "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
                "batch_sizes": dict(self.batch_sizes), "replays": self.replays, "overlapped_batches": self.overlapped}

    def lap(self, stage: str, since: float) -> float:
        """Add the time since ``since`` (``time.perf_counter``) to ``stage``; return now."""
        now = time.perf_counter()
        self.stage_seconds[stage] += now - since
        return now
