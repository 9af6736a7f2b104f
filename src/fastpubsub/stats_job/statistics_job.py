"""The event statistics batch job: window -> Spark -> snapshot on pubsub.statistics and in a file.

Entry points: :func:`run_statistics_job` (what ``pubsub stats`` calls),
``python -m fastpubsub.stats_job`` and ``spark-submit src/fastpubsub/stats_job/statistics_job.py``
(both :func:`main`).  One run: resolve the window (default: everything since
the last snapshot of this topic), read it through the Python data source
(:mod:`fastpubsub.stats_job.kafka_source`) into partial counts per decoded batch ("first pass": Kafka, decoding, counting in
the executors), merge them in one Spark job and derive the statistics on the
driver (groups too big for it in Spark), with a second pass over the window
only for joint sets the batches did not all guess ("statistics"), then
publish the snapshot and write it as JSON.  Nothing new in the window: nothing is published.  A failed run publishes
nothing either, so the next run covers its window again.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from fastpubsub.engine import EventStatistics, PartitionOffsets, SourceWindow
from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.schema_registry import RegistryConfig
from fastpubsub.kafka.statistics_topic import ensure_statistics_topic, latest_snapshot, publish_snapshot
from fastpubsub.wire.topics import EVENTS, STATISTICS, TopicNames
from fastpubsub.runtime import write_atomically
from fastpubsub.wire.printable import log_to_stderr

from .event_statistics import StatisticsOptions, compute_statistics, summarize
from .kafka_source import DEFAULT_BATCH_SIZE, DEFAULT_SPLIT_SIZE, KafkaEventsDataSource
from .window import FROM_CHOICES, WindowSpec, parse_offsets, parse_time, resolve_window

log = logging.getLogger("fastpubsub.stats_job.statistics")

DEFAULT_OUTPUT = "out/statistics.json"


@dataclass
class JobResult:
    statistics: EventStatistics | None  # None: nothing new in the window
    records: int
    first_pass_seconds: float  # window resolution + Kafka + decoding + partial counts in the executors
    statistics_seconds: float  # merging (Spark) and deriving (driver), and the joint pass if one is needed
    published: tuple[int, int] | None  # (partition, offset) on the statistics topic
    output: Path | None


def spark_session(master: str | None = None, driver_memory: str = "4g", config: Mapping[str, str] | None = None):
    """A SparkSession with the data source registered (reuses a running one); ``config``: more settings for a
    session this call starts (e.g. jars to load, which must be known before its JVM starts)."""
    from pyspark.sql import SparkSession

    # Python workers must run this interpreter (it has pyarrow, confluent-kafka, ...);
    # on a cluster set PYSPARK_PYTHON to the executors' interpreter instead.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("fastpubsub-event-statistics")
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):  # one machine: the driver, its block manager and web UI on loopback
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    builder = (
        builder.config("spark.driver.memory", driver_memory)  # only effective when Python starts the JVM
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.showConsoleProgress", "false")
        # batches for mapInArrow: as many records as the data source decodes at once
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(DEFAULT_BATCH_SIZE))
    )
    for k, v in (config or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.dataSource.register(KafkaEventsDataSource)
    return spark


def run_statistics_job(
    bootstrap_servers: str,
    topic: str = EVENTS,
    window: WindowSpec | None = None,
    options: StatisticsOptions | None = None,
    output: str | Path | None = DEFAULT_OUTPUT,
    publish: bool = True,
    statistics_topic: str = STATISTICS,
    spark=None,
    master: str | None = None,
    split_size: int = DEFAULT_SPLIT_SIZE,
    kafka_config: dict[str, str] | None = None,
    read_window: Callable | None = None,
    schema_registry: RegistryConfig | None = None,
) -> JobResult:
    """Compute one snapshot of ``topic``'s window; publish it and write it to ``output`` (None: no file).

    ``kafka_config``: the ``-X`` settings, for every client of the job: here and, through the data
    source's options, in the Spark workers.
    ``read_window``: another reader of the window, ``(spark, clients, topic, ranges, split_size, options)`` ->
    a DataFrame of the partial counts the data source yields for the same ``options`` (``pass``, ``joint.sets``,
    ``joint.auto``); benchmarks.pipeline.spark_readers runs the job with Spark's own Kafka connector this way.
    ``schema_registry``: records in producers' registered schemas are read with it (in the workers), their fields
    counted by attribute path.
    """
    clients = ClientFactory(bootstrap_servers, kafka_config or {})
    window = window or WindowSpec()
    options = options or StatisticsOptions()
    spark = spark or spark_session(master)
    spark.dataSource.register(KafkaEventsDataSource)
    t0 = time.perf_counter()
    if publish:
        ensure_statistics_topic(clients, statistics_topic)
    last = latest_snapshot(clients, topic, statistics_topic) if window.start_from == "last-run" else None
    consumer = clients.consumer("fastpubsub-spark-statistics", {"fetch.wait.max.ms": 10},
                                **{"enable.partition.eof": True, "enable.auto.commit": False})
    try:
        ranges = resolve_window(consumer, topic, window, last)
    finally:
        consumer.close()
    total = sum(r.end - r.start for r in ranges)
    log.info("window of %s: %s (%d offsets)%s", topic, ", ".join(f"[{r.partition}] {r.start}..{r.end}" for r in ranges),
             total, " since the last run" if last is not None and window.start_from == "last-run" else "")
    computed_at = int(time.time() * 1000)
    if total == 0:
        log.info("nothing new in the window: no snapshot")
        return JobResult(None, 0, time.perf_counter() - t0, 0.0, None, None)
    def read(**options: str):
        if read_window is not None:
            return read_window(spark, clients, topic, ranges, split_size, options)
        source = spark.read.format(KafkaEventsDataSource.name())
        registry = {} if schema_registry is None else schema_registry.to_options()
        for k, v in {**clients.to_options(), **registry, **options}.items():  # the settings travel to the workers
            source = source.option(k, v)
        return (source.option("topic", topic)
                .option("ranges", json.dumps([[r.partition, r.start, r.end] for r in ranges]))
                .option("split.size", str(split_size))
                .load())

    first = {"joint.sets": json.dumps([sorted(s) for s in options.joint_attributes])} if options.joint_attributes else \
        {"joint.auto": json.dumps([options.joint_sets if options.joint_top_k else 0, options.min_support])}
    partials = read(**first).cache()  # small: counts, not events
    try:
        summary = summarize(partials)  # the first action: the first pass over the window
        t1 = time.perf_counter()
        log.info("first pass: %d records in %.1fs: %d events, %d bad", summary.records, t1 - t0, summary.events, summary.bad)
        for reason, count in summary.bad_reasons:
            log.warning("%d bad record(s): %s", count, reason)
        if summary.events == 0:
            log.warning("no decodable event in the window: no snapshot")
            return JobResult(None, summary.records, t1 - t0, 0.0, None, None)
        stats = compute_statistics(partials, options, summary,
                                   lambda sets: read(**{"pass": "joint", "joint.sets": json.dumps([list(s) for s in sets])}))
    finally:
        partials.unpersist()
    t2 = time.perf_counter()
    stats.window = SourceWindow(
        topic=topic,
        offsets=[PartitionOffsets(r.partition, r.start, r.end) for r in ranges],
        computed_at_ms=computed_at,
        first_timestamp_ms=summary.first_timestamp_ms,
        last_timestamp_ms=summary.last_timestamp_ms,
    )
    log.info("computed statistics of %d events in %.1fs (%d attributes, %d attribute sets, %d with joint values)",
             stats.event_count, t2 - t1, len(stats.attributes), len(stats.schemas), len(stats.joint))
    path = None
    if output is not None:
        path = Path(output)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, [(json.dumps(stats.to_record(), indent=1) + "\n").encode()], mode=0o644)
        log.info("wrote %s", path)
    published = None
    if publish:
        published = publish_snapshot(clients, stats, statistics_topic)
        log.info("published the snapshot to %s[%d]@%d", statistics_topic, *published)
    return JobResult(stats, summary.records, t1 - t0, t2 - t1, published, path)


# --- command line ----------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """``90s``, ``10m``, ``1h``, ``1d`` or plain seconds -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"a duration looks like 90s, 10m, 1h or 1d, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _joint_sets(text: str) -> list[tuple[str, ...]]:
    return [tuple(a.strip() for a in s.split(",")) for s in text.split(";") if s.strip()]


def build_parser(prog: str = "python -m fastpubsub.stats_job", default_bootstrap: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", "-b", default=os.environ.get("PUBSUB_BOOTSTRAP_SERVERS"),
                   help="Kafka bootstrap servers (%senv PUBSUB_BOOTSTRAP_SERVERS, else bootstrap.servers of "
                        "--client-config)" % (f"default {default_bootstrap} unless given by " if default_bootstrap else ""))
    p.add_argument("--topic-prefix", default=os.environ.get("PUBSUB_TOPIC_PREFIX", ""), metavar="PREFIX",
                   help="the deployment's prefix (env PUBSUB_TOPIC_PREFIX): the default topics are PREFIX%s and "
                        "PREFIX%s" % (EVENTS, STATISTICS))
    p.add_argument("--events-topic", "--topic", dest="topic", default=os.environ.get("PUBSUB_EVENTS_TOPIC"),
                   metavar="TOPIC", help="the events topic, one (env PUBSUB_EVENTS_TOPIC; default <prefix>%s)" % EVENTS)
    p.add_argument("--statistics-topic", default=os.environ.get("PUBSUB_STATISTICS_TOPIC"),
                   help="snapshot topic (env PUBSUB_STATISTICS_TOPIC; default <prefix>%s)" % STATISTICS)
    w = p.add_argument_group("window (default: everything since the last run)")
    w.add_argument("--from", dest="start_from", choices=FROM_CHOICES, default="last-run",
                   help="where partitions without an explicit start begin (default %(default)s)")
    w.add_argument("--start-offsets", help="PARTITION:OFFSET,... (inclusive)")
    w.add_argument("--end-offsets", help="PARTITION:OFFSET,... (exclusive; default: the end of the log)")
    w.add_argument("--start-time", help="ISO-8601 or ms since the epoch: the first record at or after it")
    w.add_argument("--end-time", help="ISO-8601 or ms since the epoch: records before it")
    s = p.add_argument_group("statistics")
    d = StatisticsOptions()
    s.add_argument("--top-k", type=int, default=d.top_k, help="most frequent values per attribute (default %(default)s)")
    s.add_argument("--quantiles", type=int, default=d.quantiles, help="numeric histogram points, min..max (default %(default)s)")
    s.add_argument("--min-support", type=float, default=d.min_support, help="minimal P(set) of reported pairs/triples (default %(default)s)")
    s.add_argument("--max-sets", type=int, default=d.max_sets, help="reported pairs and triples at most (default %(default)s)")
    s.add_argument("--joint-sets", type=int, default=d.joint_sets, help="most frequent sets given joint value frequencies (default %(default)s)")
    s.add_argument("--joint-top-k", type=int, default=d.joint_top_k, help="value combinations per joint set (default %(default)s)")
    s.add_argument("--joint", type=_joint_sets, default=[], metavar="A,B[;C,D,E]", help="explicit joint sets instead of the most frequent")
    s.add_argument("--driver-rows", type=int, default=d.driver_rows,
                   help="merged rows per attribute / schema table / joint set derived on the driver; "
                        "bigger ones stay in Spark (default %(default)s)")
    o = p.add_argument_group("run")
    o.add_argument("--output", default=DEFAULT_OUTPUT, help="JSON file of the snapshot (default %(default)s; '' for none)")
    o.add_argument("--no-publish", action="store_true", help="do not publish to the statistics topic")
    o.add_argument("--every", type=parse_duration, help="loop: run again every DURATION (10m, 1h, ...)")
    o.add_argument("--master", help="Spark master when started with python (spark-submit sets its own): local[2], or "
                                    "spark://HOST:PORT for a standalone cluster (default local[*])")
    o.add_argument("--split-size", type=int, default=DEFAULT_SPLIT_SIZE, help="offsets per Spark partition (default %(default)s)")
    r = p.add_argument_group("schema registry (records in producers' registered Avro, JSON Schema, Protobuf)")
    r.add_argument("--schema-registry", default=os.environ.get("PUBSUB_SCHEMA_REGISTRY"), metavar="URL",
                   help="a Confluent-compatible Schema Registry (env PUBSUB_SCHEMA_REGISTRY): records framed with its "
                        "schema ids are decoded and their fields counted by path")
    r.add_argument("-R", dest="registry_config", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the registry client (basic.auth.user.info, ssl.ca.location, ...); repeatable")
    r.add_argument("--schema-registry-config", metavar="FILE", help="registry client settings, one KEY=VALUE a line")
    o.add_argument("-X", dest="kafka_config", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting for every Kafka client of the job (security...); repeatable")
    o.add_argument("--client-config", metavar="FILE", help="librdkafka settings for every Kafka client of the job, one "
                   "key=value a line (a Kafka client properties file: # comments); -X wins over it")
    return p


def main(argv: list[str] | None = None, prog: str = "python -m fastpubsub.stats_job", default_bootstrap: str | None = None) -> int:
    """The command line (``python -m fastpubsub.stats_job``, ``pubsub stats``: the same options)."""
    log_to_stderr(logging.INFO, "%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    parser = build_parser(prog, default_bootstrap)
    args = parser.parse_args(argv)
    try:
        window = WindowSpec(args.start_from, parse_offsets(args.start_offsets), parse_offsets(args.end_offsets),
                            parse_time(args.start_time), parse_time(args.end_time))
        options = StatisticsOptions(args.top_k, args.quantiles, args.min_support, args.max_sets, args.joint_sets,
                                    args.joint_top_k, args.joint, args.driver_rows)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        topics = TopicNames.build(args.topic_prefix, [args.topic] if args.topic else [],
                                  statistics=args.statistics_topic)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        clients = ClientFactory.configure(args.bootstrap_servers, args.kafka_config, args.client_config,
                                          default_bootstrap)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    try:
        registry = RegistryConfig.configure(args.schema_registry, args.registry_config, args.schema_registry_config)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    if args.every is not None and (window.start_from != "last-run" or window.start_offsets or window.end_offsets
                                   or window.start_time_ms is not None or window.end_time_ms is not None):
        parser.error("--every reads what is new since the last run each time; it takes no window options")
    spark = spark_session(args.master)
    spark.sparkContext.setLogLevel("WARN")
    while True:
        started = time.monotonic()
        try:
            run_statistics_job(clients.bootstrap_servers, topics.events[0], window, options, args.output or None,
                               not args.no_publish, topics.statistics, spark, split_size=args.split_size,
                               kafka_config=clients.settings, schema_registry=registry)
        except Exception:
            if args.every is None:
                raise
            log.exception("this run failed; its window is read again by the next run")
        if args.every is None:
            return 0
        pause = max(0.0, args.every - (time.monotonic() - started))
        log.info("next run in %.0fs", pause)
        time.sleep(pause)
