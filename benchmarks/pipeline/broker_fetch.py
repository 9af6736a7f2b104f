"""The embedded broker's CPU for a fetch that returns records, against the batches the partition holds.

    python -m benchmarks.pipeline.broker_fetch                      # 0 .. 40,000 stored batches, single-record and 10,000-record
    python -m benchmarks.pipeline.broker_fetch --levels 0 20000 --seconds 8

Each level fills partition 0 of a fresh topic with that many records, either
one record per batch (``batch.num.messages=1``) or 10,000 per batch, then
offers a trickle of ``--rate`` single-record batches per second for
``--seconds`` while a consumer with ``fetch.wait.max.ms`` = 10 follows it (as
the processor's events consumer and the benchmark's timing consumer do).  The
broker's CPU over the trickle, divided by the fetches that returned records,
is the cost of one such fetch; its growth over the first level's, divided
by the growth of the batches the partition holds (the fill's and the
trickle's own, one per record), the cost per batch held.  A producer alone and a consumer waiting at the end of the
partition are measured too: neither costs the broker anything at any level.

Why it matters: every latency figure through the embedded broker depends on
how many batches its partitions hold by then (docs/benchmarks.md, "End to end on
Apache Kafka").
"""

from __future__ import annotations

import argparse
import threading
import time

from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka.admin import NewTopic

from fastpubsub.kafka import ClientFactory

from fastpubsub.kafka.broker import EmbeddedBroker

from benchmarks.harness.cpu import cpu_seconds
from benchmarks.harness.records import produce_all

TOPIC = "fetch-cost"


def _fill(bootstrap: str, records: int, per_batch: int) -> None:
    producer = ClientFactory(bootstrap).producer(**{"linger.ms": 0 if per_batch == 1 else 50,
                                                    "batch.num.messages": per_batch,
                                                    "queue.buffering.max.messages": 1_000_000})
    produce_all(producer, TOPIC, ((b"k", b"v" * 200) for _ in range(records)), wait=0.01, partition=0)


class _Follower(threading.Thread):
    """A consumer at the end of partition 0 with a 10 ms fetch wait; counts the polls that returned records."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.consumer = ClientFactory(bootstrap).consumer("fetch-cost", **{"enable.auto.commit": False,
                                                                           "fetch.wait.max.ms": 10})
        self.consumer.assign([TopicPartition(TOPIC, 0, OFFSET_END)])
        self.records = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.records += len(self.consumer.consume(1000, 0.05))
        self.consumer.close()


def measure(bootstrap: str, broker_pid: int, produce: bool, follow: bool, rate: float, seconds: float) -> dict:
    """Broker CPU (cores) over a trickle of ``rate`` single-record batches/s, with and without a follower."""
    producer = ClientFactory(bootstrap).producer(**{"linger.ms": 0})
    follower = _Follower(bootstrap) if follow else None
    if follower:
        follower.start()
    time.sleep(1.5)  # the follower has joined the end of the partition
    before, start, sent = cpu_seconds(broker_pid), time.monotonic(), 0
    while (now := time.monotonic()) - start < seconds:
        if produce and sent < (now - start) * rate:
            producer.produce(TOPIC, b"v" * 200, b"k", partition=0)
            producer.poll(0)
            sent += 1
        time.sleep(0.002)
    elapsed = time.monotonic() - start
    cores = (cpu_seconds(broker_pid) - before) / elapsed
    if follower:
        follower.stopping.set()
        follower.join(10)
    producer.flush(10)
    return {"cores": cores, "received": follower.records if follower else 0, "sent": sent}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[0, 5_000, 10_000, 20_000, 40_000])
    parser.add_argument("--rate", type=float, default=30.0, help="records/s of the trickle")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--per-batch", type=int, nargs="+", default=[10_000, 1],
                        help="records per batch of the fill, one broker each")
    args = parser.parse_args(argv)
    print("| records filled | records per batch | batches held | broker cores: trickle alone "
          "| consumer at the end alone | trickle + consumer | records the consumer received / sent "
          "| broker µs per fetch with records | its growth per batch held, µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for per_batch in args.per_batch:
        with EmbeddedBroker() as broker:
            client = ClientFactory(broker.bootstrap_servers).admin()
            client.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
            stored, trickled, base = 0, 0, None
            for level in args.levels:
                _fill(broker.bootstrap_servers, level - stored, per_batch)
                stored = level
                pid = broker.pids()[0]
                alone = measure(broker.bootstrap_servers, pid, True, False, args.rate, args.seconds)
                idle = measure(broker.bootstrap_servers, pid, False, True, args.rate, args.seconds)
                trickled += alone["sent"]
                both = measure(broker.bootstrap_servers, pid, True, True, args.rate, args.seconds)
                # the batches the partition held during the last measurement (the trickle's own: one per record)
                batches = -(-level // per_batch) + trickled + both["sent"] / 2
                trickled += both["sent"]
                per_fetch = both["cores"] * args.seconds / max(both["received"], 1) * 1e6
                starved = both["received"] < both["sent"] / 2  # the broker saturated: its fetches no longer keep up
                if base is None:
                    base = (per_fetch, batches)  # the first level: the fetch's own cost
                    slope = "–"
                else:
                    slope = "– (saturated)" if starved else f"{(per_fetch - base[0]) / (batches - base[1]):.2f}"
                print(f"| {level:,} | {per_batch:,} | {batches:,.0f} | {alone['cores']:.2f} | {idle['cores']:.2f} "
                      f"| {both['cores']:.2f} | {both['received']:,} / {both['sent']:,} | {per_fetch:,.0f} | {slope} |",
                      flush=True)


if __name__ == "__main__":
    main()
