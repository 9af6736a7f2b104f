"""An owned events partition of the pattern service, and its restore from the changelog on assignment.

As a Kafka Streams task restores its state stores from their changelogs before it processes a record: the
changes are read to the end, those tagged at or past the committed offset are discarded (they belong to a
transaction that did not commit), and the engine, the bound events' contents and the reorder buffer are rebuilt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.readers import committed_offsets, read_to_end
from fastpubsub.patterns.contents import BoundContents, split
from fastpubsub.patterns.engine import PatternEngine
from fastpubsub.patterns.reorder import ReorderBuffer
from fastpubsub.patterns.reorder import split as split_reorder
from fastpubsub.state import KeyedStore, from_records

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
    found = committed_offsets(consumer, [TopicPartition(input_topic, p) for p in partitions])
    logged: dict[int, list[Message]] = {p: [] for p in partitions}
    for m in read_to_end(clients, [TopicPartition(changelog, p, OFFSET_BEGINNING)
                             for p in partitions], group_id=f"{config.group_id}.restore"):
        logged[m.partition()].append(m)
    for tp in found:
        p, committed = tp.partition, max(tp.offset, 0)
        changes = from_records((m.key(), m.value(), m.headers()) for m in logged[p])
        store = KeyedStore()
        counts.discarded_changes += store.apply(changes, committed)
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
                 "from offset %d", p, part.engine.live(), len(part.contents), len(changes),
                 sum(1 for _, _, _, o in changes.sources() if o >= committed), committed)
    return restored
