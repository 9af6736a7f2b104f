"""How fast one consumer drains a backlog from the embedded broker, by ``fetch.queue.backoff.ms``.

librdkafka stops fetching for a partition once its pre-fetch queue is over
``queued.max.messages.kbytes`` and waits ``fetch.queue.backoff.ms`` (default
1000) before the next fetch; a loop that empties the queue faster than that
then waits for events while the backlog sits in the broker.  The processor's
events consumer sets 10 ms (``runtime.inputs.GROUP_FETCH``).  This drains
a backlog of 150-byte records with the processor's queue bounds and the loop's
way of taking batches (what is there, else wait for one), once per setting::

    .venv/bin/python -m benchmarks.pipeline.fetch_backoff --records 200000 --backoff 1000,10,1000,10
"""

from __future__ import annotations

import argparse
import time

from confluent_kafka import TopicPartition

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.wire import topics

from benchmarks.harness.records import produce_all


def drain(bootstrap: str, records: int, backoff_ms: int) -> tuple[float, int]:
    """(records/s from the first record to the last, times the loop found the queue empty)."""
    consumer = ClientFactory(bootstrap).consumer(
        f"drain-{backoff_ms}-{time.monotonic_ns()}",
        {"auto.offset.reset": "earliest", **QueueBounds().consumer(), "fetch.wait.max.ms": 10,
         "fetch.queue.backoff.ms": backoff_ms},
        **{"enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        n = admin.partitions_of(bootstrap, topics.EVENTS)
        consumer.assign([TopicPartition(topics.EVENTS, p, 0) for p in range(n)])
        got, empty, first = 0, 0, None
        while got < records:
            msgs = consumer.consume(1000, 0)
            if not msgs:
                empty += 1
                msgs = consumer.consume(1, 0.2)
            if msgs and first is None:
                first = time.perf_counter()
            got += len(msgs)
        return records / (time.perf_counter() - first), empty
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--backoff", default="1000,10,1000,10", help="fetch.queue.backoff.ms values, in order")
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        admin.create_topics(bootstrap)
        producer = ClientFactory(bootstrap).producer({"linger.ms": 5}, **{"enable.idempotence": True})
        value = b"x" * 150
        produce_all(producer, topics.EVENTS, ((f"e{i}".encode(), value) for i in range(args.records)), timeout=60,
                    wait=0.01)
        for backoff in (int(v) for v in args.backoff.split(",")):
            rate, empty = drain(bootstrap, args.records, backoff)
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            print(f"fetch.queue.backoff.ms={backoff}: {rate:,.0f} records/s, queue found empty {empty} times "
                  f"(load average {load})", flush=True)


if __name__ == "__main__":
    main()
