"""Reading partitions to their end: how stateful services restore their state from changelogs and inputs."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from .clients import ClientFactory


def read_to_end(clients: ClientFactory, start: list[TopicPartition], timeout: float = 60.0,
                stop_at: dict[tuple[str, int], int] | None = None, group_id: str = "pubsub-restore") -> list[Message]:
    """Every record from ``start`` to the end of each partition (or to ``stop_at`` offsets, exclusive).

    End-of-partition events, not watermarks: a read_committed reader ends at the last stable offset,
    which the high watermark can be past while a transaction is open; records of aborted transactions
    are not read.
    """
    if not start:
        return []
    stop_at = stop_at or {}
    todo = {(tp.topic, tp.partition) for tp in start if stop_at.get((tp.topic, tp.partition), 1) > 0}
    if not todo:
        return []
    c = clients.consumer(group_id, {"auto.offset.reset": "earliest"},
                         **{"enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": "read_committed"})
    out: list[Message] = []
    try:
        c.assign([tp for tp in start if (tp.topic, tp.partition) in todo])
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not read {sorted(todo)} to their end within {timeout:.0f}s")
            for msg in c.consume(10_000, 0.2):
                tp = (msg.topic(), msg.partition())
                if tp not in todo:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(tp)
                    continue
                end = stop_at.get(tp)
                if end is not None and msg.offset() >= end:
                    todo.discard(tp)
                    continue
                out.append(msg)
                if end is not None and msg.offset() + 1 >= end:
                    todo.discard(tp)
        return out
    finally:
        c.close()


#: The group coordinator is loading, not there yet, or moved: asking again finds it.
COORDINATOR_MOVING = frozenset({KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT})


def committed_offsets(consumer: Consumer, partitions: list[TopicPartition], timeout: float = 30.0
                      ) -> list[TopicPartition]:
    """``consumer.committed``, asked again while the group coordinator is still loading or moving (a group just
    created, a broker just restarted): those errors are retriable, the answer comes within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.committed(partitions, timeout=max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            err = exc.args[0]
            if not (isinstance(err, KafkaError) and (err.retriable() or err.code() in COORDINATOR_MOVING)) \
                    or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
