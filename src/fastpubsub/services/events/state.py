"""What the processor holds between batches: subscriptions, valid events, the subscription offsets applied.

This is exactly what a snapshot (``processor.snapshot``) saves, so the
decision when to snapshot lives here too: after ``snapshot_every`` seconds or
``snapshot_changes`` subscription changes, whichever comes first, and only if
something changed.  The stages hold this object, never its parts, because a
snapshot load or a stale snapshot replaces the parts.
"""

from __future__ import annotations

import logging
import time
from confluent_kafka import Message

from fastpubsub.engine import ValidEventStore
from fastpubsub.wire.subscription_decoder import DecodedSubscriptions

from . import snapshot
from fastpubsub.runtime import event_time, human
from .shard import UNSHARDED, Shard
from .subscriptions import Applied, SubscriptionState

log = logging.getLogger("pubsub")


def _next_offsets(msgs: list[Message]) -> dict[int, int]:
    """Partition -> the offset after its last record in ``msgs``.  A partition's records come in order, so a
    walk from the end stops once it has met every partition (no Python step per record: a rebuild reads millions)."""
    partitions = set(map(Message.partition, msgs))
    out: dict[int, int] = {}
    for msg in reversed(msgs):
        p = msg.partition()
        if p not in out:
            out[p] = msg.offset() + 1
            if len(out) == len(partitions):
                break
    return out


class ProcessorState:
    def __init__(self, algorithm: str = "dynamic", runs: int | None = None, max_valid_events: int = 100_000,
                 max_valid_event_bytes: int = 256 << 20, snapshot_dir: str | None = None,
                 snapshot_every: float = 300.0, snapshot_changes: int = 100_000, shard: Shard = UNSHARDED) -> None:
        self.algorithm, self.runs, self.shard = algorithm, runs, shard
        self._bounds = (max_valid_events, max_valid_event_bytes)
        self.snapshot_dir, self.snapshot_every, self.snapshot_changes = snapshot_dir, snapshot_every, snapshot_changes
        self.subscriptions = SubscriptionState(algorithm, runs, shard)
        self.events = self._new_store()
        self.offsets: dict[int, int] = {}  # partition of the subscriptions topic -> next offset to apply
        self.snapshots = 0
        self.unsnapshotted = 0  # subscription records applied since the last snapshot
        self._store_mark = self._store_state()
        self._last_snapshot = time.monotonic()
        self._prefetch: snapshot.Prefetch | None = None

    def prefetch_snapshot(self) -> None:
        """Start reading the snapshot file (if any) on a thread; :meth:`load_snapshot` takes what it read."""
        if self.snapshot_dir and snapshot.path_of(self.snapshot_dir, self.shard).exists():
            self._prefetch = snapshot.Prefetch(self.snapshot_dir, self.shard)

    def start_offsets(self) -> dict[int, int]:
        """Where the start will read the subscriptions topic from: the offsets the snapshot file says (not yet
        checked: its header alone is read), else nowhere yet (the beginning)."""
        if self._prefetch is None:
            return {}
        return snapshot.offsets_of(self.snapshot_dir, self.shard)

    def _new_store(self) -> ValidEventStore:
        return ValidEventStore(*self._bounds)

    def reset(self) -> None:
        """Empty subscriptions and events, from the beginning of the topic (a snapshot that does not apply)."""
        self.subscriptions = SubscriptionState(self.algorithm, self.runs, self.shard)
        self.events = self._new_store()
        self.offsets = {}
        self._store_mark = self._store_state()

    def apply(self, records: list[Message], passed: list[Message] = ()) -> Applied:
        """Apply subscription records in one bulk step (their offsets move on, bad ones included).

        ``passed``: records not applied at all (dead-lettered before decoding); their offsets move on too.
        """
        return self.apply_columns(records, [msg.key() for msg in records], [msg.value() for msg in records], passed)

    def apply_columns(self, records: list[Message], keys: list[bytes | None], values: list[bytes | None],
                      passed: list[Message] = (), decoded: DecodedSubscriptions | None = None) -> Applied:
        """:meth:`apply` with each record's key and value already taken out (a rebuild's one pass over them), and
        perhaps decoded (``decoded``: ``decode_subscriptions(keys, values)``)."""
        for msgs in (records, passed):  # a partition's offset only moves on (its passed records may come first)
            for p, offset in _next_offsets(msgs).items():
                if offset > self.offsets.get(p, -1):
                    self.offsets[p] = offset
        applied = self.subscriptions.apply_columns(keys, values, lambda rows: [event_time(records[i]) for i in rows],
                                                   decoded)
        self.unsnapshotted += len(records) + len(passed)
        return applied

    # --- snapshots ----------------------------------------------------------------

    def load_snapshot(self, partitions: int) -> None:
        """Start from the snapshot if there is a usable one (else log why not and keep the empty state)."""
        if not self.snapshot_dir:
            return
        started = time.monotonic()
        if not snapshot.path_of(self.snapshot_dir, self.shard).exists():
            log.info("no snapshot in %s yet: rebuilding from the subscriptions topic", self.snapshot_dir)
            return
        try:
            prefetched, self._prefetch = self._prefetch, None
            snap = snapshot.read(self.snapshot_dir, partitions, self.algorithm, self._new_store(), self.runs,
                                 self.shard, prefetched)
        except snapshot.SnapshotError as exc:
            log.warning("ignoring the snapshot, rebuilding from the subscriptions topic: %s", exc)
            return
        self.subscriptions, self.events, self.offsets = snap.state, snap.store, snap.offsets
        self._store_mark = self._store_state()
        log.info("snapshot loaded in %.1fs: %d subscriptions, %d valid events, offsets %s",
                 time.monotonic() - started, len(self.subscriptions), len(self.events), snap.offsets)

    def _store_state(self) -> tuple:
        s = self.events.stats()
        return s["added"], s["expired"], s["evicted"]

    def snapshot_due(self, force: bool = False) -> bool:
        if not self.snapshot_dir:
            return False
        changed = self.unsnapshotted > 0 or self._store_mark != self._store_state()
        return changed and (force or self.unsnapshotted >= self.snapshot_changes
                            or time.monotonic() - self._last_snapshot >= self.snapshot_every)

    def write_snapshot(self, partitions: int) -> None:
        """Write the snapshot; the caller commits the outputs first (a snapshot must not be ahead of them)."""
        meta = snapshot.write(self.snapshot_dir, self.subscriptions, self.events, self.offsets, partitions, self.shard)
        self.snapshots += 1
        self.unsnapshotted = 0
        self._store_mark = self._store_state()
        self._last_snapshot = time.monotonic()
        log.info("snapshot written in %.1fs: %d subscriptions, %d valid events, %s bytes",
                 meta["seconds"], meta["subscriptions"], meta["events"], human(meta["bytes"]))
