"""How fast the subscriptions topic can be read from the embedded broker, by client settings.

    python -m benchmarks.topic_read                       # 1M W0 subscriptions, 2 repetitions
    python -m benchmarks.topic_read --n 200000 --repeat 1

Writes N W0 subscriptions to pubsub.subscriptions (as `pubsub demo` does),
then times consumers that only count records to the end of every partition
(the broker's share of a rebuild, ``benchmarks.restart --read-only``), with:

* ``processor``: the processor's subscriptions reader settings (one consumer,
  64 MB read-ahead, ``fetch.max.bytes`` 16 MB, librdkafka's 1 MB per partition);
* ``large fetches``: the same with ``max.partition.fetch.bytes`` 16 MB and
  ``fetch.max.bytes`` 64 MB (fewer, larger fetch requests);
* ``a consumer per partition``: one consumer (and thread) per partition,
  with the large fetches, all reading at once.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from fastpubsub.cli.demo import Demo
from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.wire.topics import SUBSCRIPTIONS

PROCESSOR = {"queued.max.messages.kbytes": 65536, "fetch.max.bytes": 16 << 20, "fetch.wait.max.ms": 100}
LARGE = {**PROCESSOR, "max.partition.fetch.bytes": 16 << 20, "fetch.max.bytes": 64 << 20}


def count(bootstrap: str, partitions: list[int], settings: dict, name: str) -> int:
    """Records read by one consumer from the beginning to the end of ``partitions``."""
    consumer = ClientFactory(bootstrap).consumer(name, settings, **{"enable.auto.commit": False,
                                                                    "enable.partition.eof": True,
                                                                    "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(SUBSCRIPTIONS, p, OFFSET_BEGINNING) for p in partitions])
    todo, n = set(partitions), 0
    while todo:
        for msg in consumer.consume(10_000, 0.05):
            if msg.error() is None:
                n += 1
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                todo.discard(msg.partition())
    consumer.close()
    return n


def timed(bootstrap: str, partitions: int, settings: dict, per_partition: bool) -> tuple[float, int]:
    began = time.monotonic()
    if not per_partition:
        return _one(bootstrap, partitions, settings, began)
    counts = [0] * partitions
    threads = [threading.Thread(target=lambda p=p: counts.__setitem__(p, count(bootstrap, [p], settings, f"r{p}")))
               for p in range(partitions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - began, sum(counts)


def _one(bootstrap: str, partitions: int, settings: dict, began: float) -> tuple[float, int]:
    n = count(bootstrap, list(range(partitions)), settings, "r")
    return time.monotonic() - began, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="W0 subscriptions")
    ap.add_argument("--repeat", type=int, default=2, help="reads of each kind")
    args = ap.parse_args()
    if args.n <= 0 or args.repeat <= 0:
        ap.error("--n and --repeat must be positive")
    variants = [("processor", PROCESSOR, False), ("large fetches", LARGE, False),
                ("a consumer per partition", LARGE, True)]
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        admin.create_topics(bootstrap, partitions=4)
        total = Demo(args.n, 0)._load_subscriptions(bootstrap)
        results: dict = {"records": total}
        for _ in range(args.repeat):
            for name, settings, per_partition in variants:
                took, n = timed(bootstrap, 4, settings, per_partition)
                assert n == total, (n, total)
                results.setdefault(name, []).append(round(took, 2))
                print(f"{name}: {n:,} records in {took:.2f}s ({n / took:,.0f} records/s)", flush=True)
        print(json.dumps(results))


if __name__ == "__main__":
    main()
