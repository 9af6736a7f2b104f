"""Spark's own Kafka connector (``spark-sql-kafka-0-10``) as a reader of the statistics job, beside its Python data source.

The job reads its window with its data source (``fastpubsub.stats_job.kafka_source``); this is the reader a Spark
user would reach for instead, kept here so that ``benchmarks.pipeline.spark_readers`` can run the whole job with either and
compare them (docs/benchmarks.md, "Against the alternatives": the data source is as fast or faster, so it is the
job's only reader).  :func:`connector_partial_counts` is what ``run_statistics_job(read_window=...)`` takes.

The connector is a Maven package of the same version as Spark
(:func:`connector_package`), fetched by Spark at session start
(``spark.jars.packages``, :func:`session_config`) or given as jars.  It reads
the same resolved offset ranges (``assign``, ``startingOffsets``,
``endingOffsets``) with Kafka's Java client, ``read_committed`` as librdkafka
reads by default; ``mapInArrow`` then hands each Arrow batch of values and
timestamps to :func:`fastpubsub.stats_job.partial_counts.batch_counts`, the
decoding and counting the Python data source does, so both readers yield the
same partial counts.

The ``-X`` settings are librdkafka's; the ones the Java client understands too
(security protocol, SASL, TLS certificates) are translated
(:func:`java_options`), and any other is refused, naming it: silently dropping
a setting could connect a job without the security its user asked for.
"""

from __future__ import annotations

import json
from math import ceil
from typing import Callable, Iterator, Mapping

from fastpubsub.kafka import ClientFactory

from fastpubsub.stats_job.kafka_source import OffsetRange

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"

#: librdkafka settings the Java client knows under the same name and meaning.
SAME_NAME = ("security.protocol", "sasl.mechanism", "sasl.kerberos.service.name", "client.id", "isolation.level",
             "ssl.key.password", "ssl.keystore.location", "ssl.keystore.password")
#: Java login modules of the SASL mechanisms whose user name and password librdkafka takes as settings.
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class ConnectorUnavailable(RuntimeError):
    """Spark's Kafka connector is not on the session's classpath (or not of its Spark version)."""


def connector_package(spark_version: str | None = None) -> str:
    """The Maven coordinate of the connector of ``spark_version`` (default: the running PySpark's)."""
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    return f"{CONNECTOR}:{spark_version}"


def session_config(connector_jars: list[str] | None = None) -> dict[str, str]:
    """What a SparkSession needs, set before its JVM starts, to load the connector: the jars if given, else the
    package (Spark resolves it and its dependencies from the local Maven/Ivy caches or Maven Central)."""
    if connector_jars:
        return {"spark.jars": ",".join(connector_jars)}
    # SLF4J is on Spark's classpath already; Ivy would fetch the connector's version of it (from the network
    # even when everything else is in the local Maven cache)
    return {"spark.jars.packages": connector_package(), "spark.jars.excludes": "org.slf4j:slf4j-api"}


def unavailable(spark_version: str, reason: str) -> ConnectorUnavailable:
    return ConnectorUnavailable(
        f"Spark's Kafka connector is not loaded ({reason}): it needs "
        f"{connector_package(spark_version)} (Spark {spark_version}) on the session's classpath; it is fetched "
        f"when the session starts, unless --connector-jars gives its jars and their dependencies")


def _jaas_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def java_options(settings: Mapping[str, object]) -> dict[str, str]:
    """The connector's ``kafka.``-prefixed options for librdkafka ``settings`` (the ``-X`` ones).

    ValueError names every setting that has no Java equivalent.
    """
    s = {k: str(v) for k, v in settings.items()}
    if "sasl.mechanisms" in s:  # librdkafka's alias
        s.setdefault("sasl.mechanism", s.pop("sasl.mechanisms"))
    out = {k: s.pop(k) for k in SAME_NAME if k in s}
    out.setdefault("isolation.level", "read_committed")  # librdkafka's default, so the source's too
    if "ssl.keystore.location" in out:
        out["ssl.keystore.type"] = "PKCS12"  # librdkafka's keystores are PKCS#12
    if "sasl.username" in s or "sasl.password" in s:
        mechanism = out.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in LOGIN_MODULES or "sasl.username" not in s or "sasl.password" not in s:
            raise ValueError(f"sasl.username and sasl.password map to the Java client only together and with "
                             f"sasl.mechanism {', '.join(LOGIN_MODULES)} (got {mechanism})")
        out["sasl.jaas.config"] = (f'{LOGIN_MODULES[mechanism]} required username="{_jaas_value(s.pop("sasl.username"))}" '
                                   f'password="{_jaas_value(s.pop("sasl.password"))}";')
    if "ssl.ca.location" in s:  # a PEM file of CA certificates
        out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": s.pop("ssl.ca.location")})
    elif "ssl.ca.pem" in s:
        out.update({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": s.pop("ssl.ca.pem")})
    if "ssl.certificate.pem" in s and "ssl.key.pem" in s:
        out.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": s.pop("ssl.certificate.pem"),
                    "ssl.keystore.key": s.pop("ssl.key.pem")})
    if "ssl.endpoint.identification.algorithm" in s:
        algorithm = s.pop("ssl.endpoint.identification.algorithm").lower()
        out["ssl.endpoint.identification.algorithm"] = "" if algorithm == "none" else algorithm
    if s:
        raise ValueError(f"Spark's Kafka connector (Kafka's Java client) has no equivalent of the librdkafka "
                         f"setting(s) {', '.join(sorted(s))}: leave them out")
    return {"kafka." + k: v for k, v in out.items()}


def assign_options(topic: str, ranges: list[OffsetRange]) -> dict[str, str]:
    """``assign``, ``startingOffsets`` and ``endingOffsets`` of the non-empty ``ranges`` (end exclusive, as Spark)."""
    ranges = [r for r in ranges if r.end > r.start]
    return {
        "assign": json.dumps({topic: [r.partition for r in ranges]}),
        "startingOffsets": json.dumps({topic: {str(r.partition): r.start for r in ranges}}),
        "endingOffsets": json.dumps({topic: {str(r.partition): r.end for r in ranges}}),
    }


def _counter(mode: str, joint_sets: list[list[str]] | None, joint_auto: tuple[int, float] | None) -> Callable:
    """The ``mapInArrow`` function: Arrow batches of (value, timestamp, timestampType) -> partial counts."""

    def count(batches: Iterator) -> Iterator:
        import numpy as np
        import pyarrow as pa

        from fastpubsub.stats_job.partial_counts import batch_counts

        for batch in batches:
            if not batch.num_rows:
                continue
            stamped = np.asarray(batch.column("timestampType").fill_null(-1)) >= 0  # -1: none (librdkafka's 0)
            micros = np.asarray(batch.column("timestamp").cast(pa.int64()).fill_null(0))
            yield from batch_counts(batch.column("value").to_pylist(), micros[stamped] // 1000,
                                    mode, joint_sets, joint_auto)

    return count


def connector_partial_counts(spark, clients: ClientFactory, topic: str, ranges: list[OffsetRange], split_size: int,
                             mode: str = "first", joint_sets: list[list[str]] | None = None,
                             joint_auto: tuple[int, float] | None = None):
    """The DataFrame of partial counts (:data:`~fastpubsub.stats_job.partial_counts.SCHEMA`) of ``ranges``,
    read by the connector in about ``split_size`` offsets per Spark partition."""
    from fastpubsub.stats_job.partial_counts import SCHEMA

    options = {"kafka.bootstrap.servers": clients.bootstrap_servers, **java_options(clients.settings),
               **assign_options(topic, ranges),
               "minPartitions": str(max(1, sum(ceil((r.end - r.start) / split_size) for r in ranges)))}
    reader = spark.read.format("kafka")
    for k, v in options.items():
        reader = reader.option(k, v)
    try:
        frame = reader.load()
    except Exception as exc:
        if "kafka" in str(exc) and ("Failed to find data source" in str(exc) or "DATA_SOURCE_NOT_FOUND" in str(exc)):
            raise unavailable(spark.version, "no data source 'kafka' in this session") from None
        raise
    return frame.select("value", "timestamp", "timestampType").mapInArrow(_counter(mode, joint_sets, joint_auto), SCHEMA)


def read_window(spark, clients: ClientFactory, topic: str, ranges: list[OffsetRange], split_size: int,
                options: Mapping[str, str]):
    """``run_statistics_job``'s ``read_window``: the data source's options (``pass``, ``joint.sets``,
    ``joint.auto``) read by the connector."""
    return connector_partial_counts(
        spark, clients, topic, ranges, split_size, options.get("pass", "first"),
        json.loads(options["joint.sets"]) if "joint.sets" in options else None,
        tuple(json.loads(options["joint.auto"])) if "joint.auto" in options else None)


def connector_session(master: str | None = None, connector_jars: list[str] | None = None):
    """The job's SparkSession with the connector loaded (:func:`session_config`); ConnectorUnavailable when the
    session cannot start with it."""
    from fastpubsub.stats_job.statistics_job import spark_session

    try:
        return spark_session(master, config=session_config(connector_jars))
    except Exception as exc:  # Ivy's resolution failed, or a jar is missing: the JVM did not start
        import pyspark

        raise unavailable(pyspark.__version__, f"the session did not start: {exc}") from exc
