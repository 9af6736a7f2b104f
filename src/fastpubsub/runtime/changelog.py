"""Restore from a changelog, as a Kafka Streams task restores its stores before it processes a record: the
changelog read to its end, and the changes at or past the committed offset of their source dropped.

A change carries its source position (``state.changelog`` headers) and is written in the transaction that commits
its source's offset.  At least once, a crash between the outputs and the offset commit leaves changes whose source
offset is at or past the committed one; exactly once, an aborted transaction's changes are not read at all.  Either
way the replay from the committed offset writes them again, so a restore keeps only the changes before it.  The
pattern service (one changelog partition per input partition) and the table service (one changelog per table, its
changes tagged with their input partition) both restore through :func:`restore_changelog`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.readers import read_to_end
from fastpubsub.state import StateChanges, from_records


@dataclass
class Restored:
    """A changelog partition's changes to apply (before the committed offsets, in log order) and how many were
    dropped (at or past them)."""

    changes: StateChanges
    discarded: int


def restore_changelog(clients: ClientFactory, changelog: str, partitions: Sequence[int],
                      committed: Callable[[int, int], int], group_id: str = "pubsub-restore") -> dict[int, Restored]:
    """Each of ``partitions`` of ``changelog`` read to its end (end-of-partition events, read_committed);
    ``committed(changelog partition, source partition)`` is the committed offset a change's source offset is held
    against (0 where nothing was committed)."""
    logged: dict[int, list] = {p: [] for p in partitions}
    for m in read_to_end(clients, [TopicPartition(changelog, p, OFFSET_BEGINNING) for p in partitions],
                         group_id=group_id):
        logged[m.partition()].append(m)
    restored = {}
    for p, msgs in logged.items():
        changes = from_records((m.key(), m.value(), m.headers()) for m in msgs)
        limits = np.zeros(len(changes), np.int64)
        for source in np.unique(changes.partitions).tolist():
            limits[changes.partitions == source] = committed(p, source)
        before = changes.offsets < limits
        if not before.all():
            kept = np.flatnonzero(before).tolist()
            changes = StateChanges([changes.keys[i] for i in kept], [changes.values[i] for i in kept],
                                   changes.offsets[kept], changes.partitions[kept])
        restored[p] = Restored(changes, int((~before).sum()))
    return restored
