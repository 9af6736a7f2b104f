"""The latency trace: a sample of batches followed from their first record's timestamp to their commit.

A tail latency is a sum of waits (in the broker and the consumer, for the
CPU, for the commit), and the percentiles at a reader do not say which one
grew.  The loop follows at most one batch every :data:`SAMPLE_EVERY`
seconds: when its first record was stamped, when the batch left the
consumer, how long it spent decoding and matching, when its outputs were
handed to the producer and when the transaction that holds them was
committed.  A benchmark adds when a read_committed reader saw the first
notification (``benchmarks.pipeline.e2e``) and so splits each sampled event's
latency into its parts.  Sampling keeps the cost to a few calls a batch
chosen; the last ``--latency-samples`` are kept, in the host's statistics (none unless asked).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

SAMPLE_EVERY = 0.05  # seconds between two sampled batches, at least
KEPT = 4000  # samples a benchmark keeps (the most recent); a service keeps --latency-samples (default none)


@dataclass
class BatchSample:
    """One sampled batch; times are seconds since the epoch (the record timestamps' clock)."""

    key: str  # its first record's key, as text: a benchmark finds that event's notification by it
    stamp: float  # that record's timestamp
    consumed: float  # the batch came out of the consumer
    decode: float = 0.0  # seconds decoding it
    match: float = 0.0  # seconds matching it
    produced: float = 0.0  # its outputs were handed to the producer (into the open transaction)
    committed: float = 0.0  # the transaction holding it was committed

    def parts(self) -> dict[str, Any]:
        """Its latency split: ms waiting before the consumer handed it over, decoding, matching, until produced,
        until committed."""
        return {"key": self.key, "stamp": round(self.stamp, 4),
                "consumer_ms": round((self.consumed - self.stamp) * 1e3, 2),
                "decode_ms": round(self.decode * 1e3, 3), "match_ms": round(self.match * 1e3, 3),
                "produce_ms": round(max(self.produced - self.consumed - self.decode - self.match, 0.0) * 1e3, 3),
                "commit_ms": round((self.committed - self.produced) * 1e3, 2),
                "committed": round(self.committed, 4)}


class LatencyTrace:
    """Chooses the batches to follow and keeps the committed ones."""

    def __init__(self, every: float = SAMPLE_EVERY, kept: int = KEPT) -> None:
        self.every, self.kept = every, kept
        self._next = 0.0
        self.done: deque[BatchSample] = deque(maxlen=kept)

    def start(self, key: bytes | str | None, stamp_ms: int, consumed: float) -> BatchSample | None:
        """A sample of this batch if one is due and its first record has a timestamp; else None."""
        if not self.kept or consumed < self._next or stamp_ms <= 0:
            return None
        self._next = consumed + self.every
        text = key.decode(errors="replace") if isinstance(key, bytes) else (key or "")
        return BatchSample(text, stamp_ms / 1000, consumed)

    def committed(self, samples: list[BatchSample], at: float | None = None) -> None:
        at = time.time() if at is None else at
        for s in samples:
            s.committed = at
        self.done.extend(samples)

    def stats(self) -> list[dict[str, Any]]:
        return [s.parts() for s in self.done]
