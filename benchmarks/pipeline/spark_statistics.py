"""Benchmark of the Spark statistics job: events/s end to end, read vs compute.

Starts the embedded broker, produces ``--events`` W0 events (Avro) to
pubsub.events, then runs the job ``--repeat`` times over the whole topic
(``--from earliest``) on one SparkSession and reports every run and the best.
"first pass" is window resolution + Kafka + decoding + partial counts in the
executors; "statistics" is one Spark job merging the counts and the driver
deriving the statistics (and a second pass over the window if some joint set
was not counted in the first; not on W0);
"total" is the job call.  Then reading alone
(the same splits, Kafka + decoding, only records counted) is timed.
Producing the events is not measured.

    python -m benchmarks.pipeline.spark_statistics --events 1000000

``--counting`` times instead, in this process and without Kafka or Spark, what
an executor does per batch of ``--batch`` W0 events (best of ``--repeat``):
decoding, value counts, schema counts, choosing the joint sets, joint counts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import time

from confluent_kafka.admin import NewTopic

from fastpubsub.workloads.fabret import PRESETS, generate_events
from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.wire.codecs import encode_event
from fastpubsub.stats_job.event_statistics import StatisticsOptions, summarize
from fastpubsub.stats_job.kafka_source import KafkaEventsDataSource
from fastpubsub.stats_job.statistics_job import run_statistics_job, spark_session
from fastpubsub.wire.topics import EVENTS
from fastpubsub.stats_job.window import WindowSpec


def produce_w0(bootstrap_servers: str, n: int, partitions: int, chunk: int = 100_000) -> None:
    clients = ClientFactory(bootstrap_servers)
    admin = clients.admin()
    admin.create_topics([NewTopic(EVENTS, partitions, 1)])[EVENTS].result()
    producer = clients.producer({"linger.ms": 20, "batch.num.messages": 10_000,
                                 "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
    failed = []
    done = 0
    for seed, start in enumerate(range(0, n, chunk)):
        for i, event in enumerate(generate_events(PRESETS["W0"], min(chunk, n - start), seed=seed).to_dicts()):
            producer.produce(EVENTS, value=encode_event(event), partition=(start + i) % partitions,
                             on_delivery=lambda err, msg: err and failed.append(err))
            producer.poll(0)
        done += min(chunk, n - start)
        logging.info("produced %d/%d events", done, n)
    producer.flush(120)
    if failed:
        raise RuntimeError(f"{len(failed)} events were not delivered: {failed[0]}")


def time_counting(n: int, repeat: int) -> None:
    from fastpubsub.wire.event_decoder import decode_events
    from fastpubsub.stats_job import partial_counts as pc

    values = [encode_event(e) for e in generate_events(PRESETS["W0"], n, seed=3).to_dicts()]
    opts = StatisticsOptions()
    best: dict[str, float] = {}

    def timed(name, f):
        t = time.perf_counter()
        out = f()
        best[name] = min(best.get(name, float("inf")), time.perf_counter() - t)
        return out

    for _ in range(repeat + 1):  # the first round compiles or loads the numba kernels
        decoded = timed("decode", lambda: decode_events(values))
        timed("value counts", lambda: pc.value_counts(decoded))
        schemas, counts = timed("schema counts", lambda: pc.schemas_of(decoded))
        sets = timed("joint sets", lambda: pc.local_joint_sets(schemas, counts, opts.min_support, opts.joint_sets))
        timed("joint counts", lambda: pc.joint_counts(decoded, sets))
    print(f"one batch of {n:,} W0 events, best of {repeat}: "
          + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in best.items()) + f" ({len(sets)} joint sets)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=4, help="partitions of pubsub.events")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--split-size", type=int, default=50_000)
    p.add_argument("--joint-sets", type=int, default=StatisticsOptions().joint_sets)
    p.add_argument("--counting", action="store_true", help="time the executors' counting per batch, in process")
    p.add_argument("--batch", type=int, default=50_000, help="events per batch with --counting")
    args = p.parse_args()
    if args.counting:
        time_counting(args.batch, args.repeat)
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; master {args.master}")
    with EmbeddedBroker() as broker:
        t = time.perf_counter()
        produce_w0(broker.bootstrap_servers, args.events, args.partitions)
        print(f"produced {args.events} W0 events in {time.perf_counter() - t:.1f}s (not part of the measurement)")
        spark = spark_session(args.master)
        spark.sparkContext.setLogLevel("WARN")
        runs = []
        for i in range(args.repeat):
            t = time.perf_counter()
            r = run_statistics_job(broker.bootstrap_servers, window=WindowSpec("earliest"),
                                   options=StatisticsOptions(joint_sets=args.joint_sets), output=None, publish=False,
                                   spark=spark, split_size=args.split_size)
            total = time.perf_counter() - t
            runs.append((total, r.first_pass_seconds, r.statistics_seconds))
            print(f"run {i + 1}: {r.records} records, total {total:.1f}s ({r.records / total:,.0f} events/s), "
                  f"first pass {r.first_pass_seconds:.1f}s, statistics {r.statistics_seconds:.1f}s")
        best = min(runs)
        print(f"best of {len(runs)}: total {best[0]:.1f}s = {args.events / best[0]:,.0f} events/s; "
              f"first pass {best[1]:.1f}s, statistics {best[2]:.1f}s")
        # reading alone: the same splits, Kafka + decoding, only records counted
        ranges = json.dumps([[o.partition, o.start, o.end] for o in r.statistics.window.offsets])
        reads = []
        for i in range(args.repeat):
            t = time.perf_counter()
            df = (spark.read.format(KafkaEventsDataSource.name()).option("bootstrap.servers", broker.bootstrap_servers)
                  .option("topic", EVENTS).option("ranges", ranges).option("split.size", str(args.split_size))
                  .option("pass", "count").load())
            n = summarize(df).records
            reads.append(time.perf_counter() - t)
            print(f"read only {i + 1}: {n} records in {reads[-1]:.1f}s ({n / reads[-1]:,.0f} events/s)")
        print(f"best read only: {min(reads):.1f}s, against the job's best first pass {best[1]:.1f}s and total "
              f"{best[0]:.1f}s (a second pass for joint values, when needed, is logged by the job)")


if __name__ == "__main__":
    main()
