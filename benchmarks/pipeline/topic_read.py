"""How fast the subscriptions topic can be read from the embedded broker, by client and topic settings.

    python -m benchmarks.pipeline.topic_read                       # 1M W0 subscriptions, 2 repetitions
    python -m benchmarks.pipeline.topic_read --n 200000 --repeat 1

Writes N W0 subscriptions to pubsub.subscriptions (as `pubsub demo` does),
copies the same keys and values into topics written with other producer
settings (compression, record batch size, partitions), then times consumers
that only count records to the end of every partition (the broker's share of
a rebuild, ``benchmarks.pipeline.restart --read-only``).  Each line gives the records/s
and the CPU seconds the broker process and this process (the consumers'
librdkafka threads and Python) used meanwhile, so a read bound by the broker
shows as the broker's CPU close to the wall time.

Readers (on pubsub.subscriptions unless the name says another topic):

* ``one consumer``: the subscriptions reader's settings (64 MB read-ahead,
  ``fetch.max.bytes`` and ``max.partition.fetch.bytes`` 16 MB, fetching until
  the read-ahead is full);
* ``a consumer per partition``: the processor's rebuild readers (each with
  its share of the 64 MB read-ahead), all fetching at once;
* ``... librdkafka's 1 MB per partition and 100,000 queued``: its defaults of
  ``max.partition.fetch.bytes`` and ``queued.min.messages``;
* ``... large fetches``: ``fetch.max.bytes`` 64 MB;
* ``... fetch.min.bytes 1 MB``: the broker waits for 1 MB (up to ``fetch.wait.max.ms``);
* ``... 256 MB read-ahead``: ``queued.max.messages.kbytes`` 262,144 per consumer;
* ``... lz4`` / ``zstd``: the topic written with ``compression.type`` lz4 / zstd;
* ``... batches of 10,000``: written with ``batch.num.messages`` 10,000 and ``linger.ms`` 100 (the default
  producer closes a batch at 1 MB or 10,000 records, ``pubsub demo`` lingers 20 ms);
* ``... 8 partitions``: the same records on 8 partitions, 8 consumers.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from fastpubsub.cli.demo import Demo
from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.wire.topics import SUBSCRIPTIONS

from benchmarks.harness.cpu import cpu_seconds
from benchmarks.harness.records import produce_all, read_to_end
from benchmarks.harness.options import positive

PROCESSOR = {"queued.max.messages.kbytes": 65536, "fetch.max.bytes": 16 << 20, "fetch.wait.max.ms": 100,
             "max.partition.fetch.bytes": 16 << 20, "queued.min.messages": 10_000_000}  # runtime.inputs
PER_PARTITION = {**PROCESSOR, "queued.max.messages.kbytes": 65536 // 4}  # runtime.inputs: the read-ahead shared out
#: librdkafka's own per partition: fetches of 1 MB, and no more fetching once 100,000 records are queued
DEFAULT_DEPTH = {**PER_PARTITION, "max.partition.fetch.bytes": 1 << 20, "queued.min.messages": 100_000}
LARGE = {**PER_PARTITION, "fetch.max.bytes": 64 << 20}
MIN_BYTES = {**PER_PARTITION, "fetch.min.bytes": 1 << 20}
READ_AHEAD = {**PER_PARTITION, "queued.max.messages.kbytes": 262_144}

#: topic -> (partitions, producer settings) of the copies
COPIES = {
    "bench.subscriptions.lz4": (4, {"compression.type": "lz4", "linger.ms": 20}),
    "bench.subscriptions.zstd": (4, {"compression.type": "zstd", "linger.ms": 20}),
    "bench.subscriptions.batches": (4, {"batch.num.messages": 10_000, "batch.size": 16 << 20, "linger.ms": 100}),
    "bench.subscriptions.p8": (8, {"linger.ms": 20}),
}


def count(bootstrap: str, topic: str, partitions: list[int], settings: dict, name: str) -> int:
    """Records read by one consumer from the beginning to the end of ``partitions``."""
    consumer = ClientFactory(bootstrap).consumer(name, settings, **{"enable.auto.commit": False,
                                                                    "enable.partition.eof": True,
                                                                    "isolation.level": "read_committed"})
    n = read_to_end(consumer, topic, partitions)
    consumer.close()
    return n


def timed(bootstrap: str, topic: str, partitions: int, settings: dict, per_partition: bool,
          broker_pid: int) -> dict:
    began, broker_cpu, own_cpu = time.monotonic(), cpu_seconds(broker_pid), time.process_time()
    if per_partition:
        counts = [0] * partitions
        threads = [threading.Thread(target=lambda p=p: counts.__setitem__(
            p, count(bootstrap, topic, [p], settings, f"r{p}"))) for p in range(partitions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        n = sum(counts)
    else:
        n = count(bootstrap, topic, list(range(partitions)), settings, "r")
    return {"seconds": time.monotonic() - began, "records": n, "broker_cpu": cpu_seconds(broker_pid) - broker_cpu,
            "client_cpu": time.process_time() - own_cpu}


def copy_topic(bootstrap: str, records: list[tuple[bytes, bytes]], topic: str, partitions: int, settings: dict) -> float:
    """The same keys and values into ``topic``, written with ``settings``; seconds it took."""
    client = ClientFactory(bootstrap).admin()
    for future in client.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    producer = ClientFactory(bootstrap).producer({"queue.buffering.max.messages": 1_000_000,
                                                  "queue.buffering.max.kbytes": 1 << 20, **settings},
                                                 **{"enable.idempotence": True})
    began = time.monotonic()
    produce_all(producer, topic, records, timeout=120)
    return time.monotonic() - began


def read_all(bootstrap: str, partitions: int) -> list[tuple[bytes, bytes]]:
    consumer = ClientFactory(bootstrap).consumer("copy", PROCESSOR, **{"enable.auto.commit": False,
                                                                      "enable.partition.eof": True})
    out: list[tuple[bytes, bytes]] = []
    read_to_end(consumer, SUBSCRIPTIONS, range(partitions), lambda msg: out.append((msg.key(), msg.value())))
    consumer.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=positive, default=1_000_000, help="W0 subscriptions")
    ap.add_argument("--repeat", type=positive, default=2, help="reads of each kind")
    args = ap.parse_args()
    variants = [
        ("one consumer", SUBSCRIPTIONS, 4, PROCESSOR, False),
        ("a consumer per partition", SUBSCRIPTIONS, 4, PER_PARTITION, True),
        ("a consumer per partition, librdkafka's 1 MB per partition and 100,000 queued", SUBSCRIPTIONS, 4,
         DEFAULT_DEPTH, True),
        ("a consumer per partition, large fetches", SUBSCRIPTIONS, 4, LARGE, True),
        ("a consumer per partition, fetch.min.bytes 1 MB", SUBSCRIPTIONS, 4, MIN_BYTES, True),
        ("a consumer per partition, 256 MB read-ahead", SUBSCRIPTIONS, 4, READ_AHEAD, True),
        ("a consumer per partition, lz4", "bench.subscriptions.lz4", 4, PER_PARTITION, True),
        ("a consumer per partition, zstd", "bench.subscriptions.zstd", 4, PER_PARTITION, True),
        ("a consumer per partition, batches of 10,000", "bench.subscriptions.batches", 4, PER_PARTITION, True),
        ("a consumer per partition, 8 partitions", "bench.subscriptions.p8", 8, PER_PARTITION, True),
    ]
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        broker_pid = broker.pids()[0]
        admin.create_topics(bootstrap, partitions=4)
        total = Demo(args.n, 0)._load_subscriptions(bootstrap)
        records = read_all(bootstrap, 4)
        assert len(records) == total, (len(records), total)
        results: dict = {"records": total, "written": {}}
        for topic, (partitions, settings) in COPIES.items():
            try:
                took = copy_topic(bootstrap, records, topic, partitions, settings)
            except KafkaException as exc:
                print(f"{topic}: not written ({exc})", flush=True)
                continue
            results["written"][topic] = round(took, 2)
            print(f"{topic}: {len(records):,} records written in {took:.1f}s", flush=True)
        records = None
        for _ in range(args.repeat):
            for name, topic, partitions, settings, per_partition in variants:
                if topic != SUBSCRIPTIONS and topic not in results["written"]:
                    continue
                r = timed(bootstrap, topic, partitions, settings, per_partition, broker_pid)
                if r["records"] != total:
                    print(f"{name}: {r['records']:,} records, not {total:,}", flush=True)
                results.setdefault(name, []).append({k: round(v, 2) for k, v in r.items() if k != "records"})
                print(f"{name}: {r['records']:,} records in {r['seconds']:.2f}s ({r['records'] / r['seconds']:,.0f} "
                      f"records/s); CPU: broker {r['broker_cpu']:.2f}s, consumers {r['client_cpu']:.2f}s; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        print(json.dumps(results))


if __name__ == "__main__":
    main()
