"""Records onto a topic and off it again, as the benchmarks' loads and readers need them.

A producer's local queue fills long before the broker falls behind, so a load
waits on ``BufferError`` (serving delivery reports) rather than dropping the
record; a reader that must see a topic to its end asks for partition EOF
events (``enable.partition.eof``) and stops when every partition has sent one.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition


def produce(producer, topic: str, value: bytes, key: bytes | None = None, wait: float = 0.01, **kw) -> None:
    """One record; while the local queue is full, serve delivery reports for ``wait`` seconds and try again."""
    while True:
        try:
            producer.produce(topic, value, key, **kw)
            return
        except BufferError:
            producer.poll(wait)


def produce_all(producer, topic: str, records: Iterable[tuple[bytes | None, bytes]], timeout: float = 300.0,
                wait: float = 0.05, **kw) -> None:
    """Every (key, value) of ``records``, then a flush; raises if the broker has not acknowledged them all in
    ``timeout`` seconds."""
    for key, value in records:
        produce(producer, topic, value, key, wait, **kw)
    if producer.flush(timeout):
        raise RuntimeError(f"the broker did not acknowledge the records of {topic}")


def read_to_end(consumer, topic: str, partitions: Iterable[int], on_record: Callable | None = None,
                poll_s: float = 0.05) -> int:
    """Records read from the beginning to the end of ``partitions`` (the consumer must have
    ``enable.partition.eof``); each goes to ``on_record`` if given.  The consumer stays open."""
    partitions = list(partitions)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    todo, n = set(partitions), 0
    while todo:
        for msg in consumer.consume(10_000, poll_s):
            if msg.error() is None:
                n += 1
                if on_record is not None:
                    on_record(msg)
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                todo.discard(msg.partition())
    return n


#: A group's coordinator not ready yet (a fresh broker's ``__consumer_offsets`` still loading, or moving): asked again.
COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                      KafkaError.COORDINATOR_NOT_AVAILABLE)


def committed(consumer, topic: str, partitions: int, timeout: float = 30.0) -> int:
    """Records of the topic's first ``partitions`` partitions that the consumer's group has committed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)
            return sum(max(tp.offset, 0) for tp in offsets)
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_MOVING or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_committed(consumer, topic: str, partitions: int, target: int, proc, timeout: float,
                   what: str, every: float = 0.2) -> list[tuple[float, int]]:
    """``(monotonic time, committed)`` every ``every`` seconds until the group has committed ``target`` records of
    the topic (a rate is taken from these samples); raises if the process ``proc`` that commits them exits first or
    ``timeout`` seconds pass (``what`` names the records in the message)."""
    samples = []
    deadline = time.monotonic() + timeout
    while True:
        done = committed(consumer, topic, partitions)
        samples.append((time.monotonic(), done))
        if done >= target:
            return samples
        if proc.poll() is not None:
            raise RuntimeError(f"the process exited ({proc.returncode}) before {what} was processed")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: {done:,} of {target:,} processed within {timeout:.0f}s")
        time.sleep(every)
