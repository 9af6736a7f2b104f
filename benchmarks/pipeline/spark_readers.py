"""The statistics job's reader, its Python data source, against Spark's Kafka connector (benchmarks/peers/spark_connector.py).

Starts the embedded broker, produces ``--events`` W0 events (Avro) to
pubsub.events as ``benchmarks.pipeline.spark_statistics`` does, then runs the whole job
over the whole topic (``--from earliest``) with each reader in turn on one
SparkSession that has the connector loaded, ``--rounds`` times, alternating
which goes first.  A small window is run first with each reader, not measured
(the Python workers load the numba kernels, the JVM warms up).  Each run
reports records/s of the job call and its first pass / statistics split;
every snapshot must equal the first (``computed_at`` aside), else the
benchmark fails.  The figures and the snapshots' agreement go to ``--out``
as JSON.

    python -m benchmarks.pipeline.spark_readers --events 1000000 --rounds 3

The connector is ``spark-sql-kafka-0-10`` of the running PySpark's version
(fetched when the session starts) unless ``--connector-jars`` gives it.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import time
from datetime import datetime, timezone

from benchmarks.harness import report
from benchmarks.pipeline.spark_statistics import produce_w0
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.stats_job.event_statistics import StatisticsOptions
from fastpubsub.stats_job.statistics_job import run_statistics_job
from fastpubsub.stats_job.window import WindowSpec

from benchmarks.peers.spark_connector import connector_session, read_window, session_config

#: The job's own reader (its Python data source) and Spark's Kafka connector (``read_window``).
READERS = {"source": None, "connector": read_window}


def _snapshot(result) -> dict:
    record = result.statistics.to_record()
    record["window"].pop("computed_at_ms")
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=4, help="partitions of pubsub.events")
    p.add_argument("--rounds", type=int, default=3, help="runs of each reader, alternating which goes first")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--split-size", type=int, default=50_000)
    p.add_argument("--warmup", type=int, default=50_000, help="offsets per partition of the unmeasured first runs")
    p.add_argument("--connector-jars", type=lambda t: [j for j in t.split(",") if j], metavar="JAR,...")
    p.add_argument("--out", default="benchmarks/results/spark_readers.json")
    p.add_argument("--label", default="", help="recorded with the figures (e.g. 'smoke: loaded machine')")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    import pyspark

    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    print(f"machine: {machine}; PySpark {pyspark.__version__}; master {args.master}")
    options = StatisticsOptions()
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        t = time.perf_counter()
        produce_w0(bs, args.events, args.partitions)
        print(f"produced {args.events} W0 events in {time.perf_counter() - t:.1f}s (not part of the measurement)")
        spark = connector_session(args.master, args.connector_jars)
        spark.sparkContext.setLogLevel("WARN")

        def job(reader: str, window: WindowSpec):
            return run_statistics_job(bs, window=window, options=options, output=None, publish=False, spark=spark,
                                      split_size=args.split_size, read_window=READERS[reader])

        warm = WindowSpec("earliest", end_offsets={q: min(args.warmup, args.events // args.partitions)
                                                   for q in range(args.partitions)})
        for reader in READERS:
            job(reader, warm)
        runs, reference = [], None
        for round_ in range(args.rounds):
            for reader in READERS if round_ % 2 == 0 else reversed(READERS):
                t = time.perf_counter()
                r = job(reader, WindowSpec("earliest"))
                seconds = round(time.perf_counter() - t, 2)
                snapshot = _snapshot(r)
                reference = reference or snapshot
                if snapshot != reference:
                    raise AssertionError(f"round {round_ + 1}: the {reader} reader's snapshot differs from the first")
                runs.append({"round": round_ + 1, "reader": reader, "records": r.records, "seconds": seconds,
                             "first_pass_seconds": round(r.first_pass_seconds, 2),
                             "statistics_seconds": round(r.statistics_seconds, 2),
                             "records_per_s": round(r.records / seconds)})
                print(f"round {round_ + 1} {reader:9s}: {r.records} records in {seconds:.1f}s "
                      f"({r.records / seconds:,.0f} records/s), first pass {r.first_pass_seconds:.1f}s, "
                      f"statistics {r.statistics_seconds:.1f}s")
    summary = {}
    for reader in READERS:
        mine = [x for x in runs if x["reader"] == reader]
        best = min(mine, key=lambda x: x["seconds"])
        summary[reader] = {"best_seconds": best["seconds"], "best_records_per_s": best["records_per_s"],
                           "median_seconds": statistics.median(x["seconds"] for x in mine)}
        print(f"{reader:9s}: best {best['seconds']:.1f}s = {best['records_per_s']:,} records/s, "
              f"median {summary[reader]['median_seconds']:.1f}s")
    print("snapshots: all equal (computed_at aside)")
    result = {
        "benchmark": "python -m benchmarks.pipeline.spark_readers", "label": args.label,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine,
        "load_average": os.getloadavg(), "pyspark": pyspark.__version__,
        "connector": args.connector_jars or session_config()["spark.jars.packages"],
        "events": args.events, "partitions": args.partitions, "split_size": args.split_size, "master": args.master,
        "snapshots_equal": True, "runs": runs, "summary": summary,
    }
    report.write_json(result, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
