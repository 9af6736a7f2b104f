"""An owned events partition of the pattern service, and its restore from the changelog on assignment.

Changelog partition p holds the state of input partition p: it is restored by the runtime
(``runtime.restore_changelog``: read to its end, the changes at or past p's committed offset dropped), then the
engine, the bound events' contents and the reorder buffer are rebuilt from what is kept.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from confluent_kafka import Consumer, TopicPartition

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.readers import committed_offsets
from fastpubsub.patterns.contents import BoundContents, split
from fastpubsub.patterns.engine import PatternEngine
from fastpubsub.patterns.reorder import ReorderBuffer
from fastpubsub.patterns.reorder import split as split_reorder
from fastpubsub.runtime import restore_changelog
from fastpubsub.state import KeyedStore

from .config import PatternServiceConfig

log = logging.getLogger("pubsub.patterns")


@dataclass
class Partition:
    """One owned events partition: its engine, the bound events' contents, the next offset to process."""

    engine: PatternEngine
    contents: BoundContents
    position: int
    event_time: int = 0
    reorder: ReorderBuffer | None = None  # a repartition partition's events, held until the watermark passes them


def restore_partitions(clients: ClientFactory, consumer: Consumer, partitions: list[int], input_topic: str,
                       changelog: str, config: PatternServiceConfig, new_engine: Callable[[], PatternEngine],
                       counts: Any) -> dict[int, Partition]:
    """Each partition's state from its changelog partition, from the committed offset on (``counts`` gets
    ``restored_instances`` and ``discarded_changes``)."""
    restored: dict[int, Partition] = {}
    found = {tp.partition: max(tp.offset, 0)
             for tp in committed_offsets(consumer, [TopicPartition(input_topic, p) for p in partitions])}
    logs = restore_changelog(clients, changelog, partitions, lambda p, _source: found[p],
                             group_id=f"{config.host.group_id}.restore")
    for p, committed in found.items():
        kept, discarded = logs[p].changes, logs[p].discarded
        counts.discarded_changes += discarded
        store = KeyedStore()
        store.apply(kept)
        store, reorder_state = split_reorder(store)
        engine_state, contents_state = split(store)
        part = Partition(new_engine(), BoundContents(), committed)
        if config.repartition_by is not None:
            part.reorder = ReorderBuffer(config.grace_ms)
            part.reorder.restore(reorder_state)
        counts.restored_instances += part.engine.restore(engine_state)
        part.contents.restore(contents_state)
        # contents of instances that were not restored (their subscription is gone or changed) are released
        part.contents.settle(part.engine.bound_event_ids(), committed - 1)
        restored[p] = part
        log.info("partition %d restored: %d instances, %d bound events, %d changelog records (%d discarded), "
                 "from offset %d", p, part.engine.live(), len(part.contents), len(kept) + discarded, discarded,
                 committed)
    return restored
