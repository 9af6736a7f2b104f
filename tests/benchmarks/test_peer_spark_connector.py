"""Spark's own Kafka connector as the statistics job's reader (benchmarks/peers/spark_connector.py) gives the
snapshot the job's Python data source gives: so benchmarks.pipeline.spark_readers compares the same work.

The connector is a Maven package of Spark's exact version; the test needs it
in the local Maven or Ivy cache (CI does not download it) and skips otherwise.
It runs the connector job in a process of its own (the connector's jars must
be on the classpath when the JVM starts; the session's Spark has none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyspark
import pytest
from confluent_kafka import Producer
from tests.stats_job.test_spark_statistics import _produce, _topic, known_events

from fastpubsub.stats_job.event_statistics import StatisticsOptions
from fastpubsub.kafka import ClientFactory
from benchmarks.peers.spark_connector import (CONNECTOR, ConnectorUnavailable, assign_options,
                                              connector_partial_counts, java_options)
from fastpubsub.stats_job.kafka_source import OffsetRange
from fastpubsub.stats_job.statistics_job import run_statistics_job
from fastpubsub.stats_job.window import WindowSpec
from fastpubsub.wire.codecs import encode_event


def test_the_security_settings_shared_by_librdkafka_and_the_java_client_are_translated():
    got = java_options({"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "ann",
                        "sasl.password": 'p"w', "ssl.ca.location": "/etc/ca.pem",
                        "ssl.endpoint.identification.algorithm": "none"})
    assert got == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.isolation.level": "read_committed",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="ann" password="p\\"w";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/ca.pem",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    assert java_options({"isolation.level": "read_uncommitted"}) == {"kafka.isolation.level": "read_uncommitted"}
    assert java_options({"ssl.certificate.pem": "C", "ssl.key.pem": "K", "ssl.key.password": "x"}) == {
        "kafka.isolation.level": "read_committed", "kafka.ssl.keystore.type": "PEM", "kafka.ssl.key.password": "x",
        "kafka.ssl.keystore.certificate.chain": "C", "kafka.ssl.keystore.key": "K"}


@pytest.mark.parametrize("settings, named", [
    ({"fetch.wait.max.ms": "10", "linger.ms": "5"}, "fetch.wait.max.ms, linger.ms"),
    ({"enable.ssl.certificate.verification": "false"}, "enable.ssl.certificate.verification"),
    ({"ssl.key.location": "/k.pem", "ssl.certificate.location": "/c.pem"}, "ssl.certificate.location, ssl.key.location"),
])
def test_settings_the_java_client_has_no_equivalent_of_are_refused_by_name(settings, named):
    with pytest.raises(ValueError, match=f"has no equivalent of the librdkafka setting\\(s\\) {named}:"):
        java_options(settings)


def test_a_sasl_password_without_a_mechanism_the_java_client_takes_it_with_is_refused():
    with pytest.raises(ValueError, match="only together and with sasl.mechanism"):
        java_options({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "a", "sasl.password": "b"})
    with pytest.raises(ValueError, match="only together"):
        java_options({"sasl.mechanism": "PLAIN", "sasl.username": "a"})


def test_the_connector_reads_the_resolved_ranges_end_exclusive_and_skips_empty_ones():
    assert assign_options("t", [OffsetRange(0, 5, 9), OffsetRange(1, 3, 3), OffsetRange(2, 0, 1)]) == {
        "assign": '{"t": [0, 2]}', "startingOffsets": '{"t": {"0": 5, "2": 0}}', "endingOffsets": '{"t": {"0": 9, "2": 1}}'}


@pytest.mark.spark
def test_a_session_without_the_connector_names_the_package_and_the_spark_version(spark):
    with pytest.raises(ConnectorUnavailable, match=f"{CONNECTOR}:{spark.version} \\(Spark {spark.version}\\)"):
        connector_partial_counts(spark, ClientFactory("127.0.0.1:9"), "t", [OffsetRange(0, 0, 10)], 50_000)


def connector_cached(version: str) -> bool:
    """Whether Spark can load the connector of ``version`` without downloading it (its jar in a local cache)."""
    artifact = CONNECTOR.split(":")[1]
    home = Path.home()
    return ((home / ".m2/repository/org/apache/spark" / artifact / version / f"{artifact}-{version}.jar").exists()
            or any((home / d / "jars" / f"org.apache.spark_{artifact}-{version}.jar").exists() for d in (".ivy2", ".ivy2.5.2")))


def _without_computed_at(path: Path) -> dict:
    record = json.loads(path.read_text())
    record["window"].pop("computed_at_ms")
    return record


@pytest.mark.spark
@pytest.mark.timeout(600)
@pytest.mark.skipif(not connector_cached(pyspark.__version__),
                    reason=f"{CONNECTOR}:{pyspark.__version__} (PySpark's version) is not in the local Maven or Ivy cache")
def test_the_connector_gives_the_snapshot_the_source_gives(broker, spark, tmp_path):
    """Bad records, a committed and an aborted transaction (read_committed: its events are not counted), two
    partitions cut into many splits; the same options: the same snapshot."""
    bs = broker.bootstrap_servers
    topic = _topic(bs, partitions=2)
    events = known_events(300, seed=9)
    values = [encode_event(e, "json" if i % 4 == 0 else "avro") for i, e in enumerate(events)]
    _produce(bs, topic, values[:150] + [b"garbage"], partition=0)
    producer = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for part, commit in ((values[150:200], True), ([encode_event({"aborted": 1})] * 20, False), (values[200:250], True)):
        producer.begin_transaction()
        for v in part:
            producer.produce(topic, value=v, partition=1)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    _produce(bs, topic, values[250:] + [b'{"a": [1]}'], partition=1)
    opts = StatisticsOptions(top_k=4, quantiles=5, min_support=0.05, joint_sets=3, joint_top_k=3)

    source = run_statistics_job(bs, topic, WindowSpec("earliest"), opts, tmp_path / "source.json", publish=False,
                                spark=spark, split_size=40)
    assert source.statistics.event_count == len(events) and source.statistics.bad_records == 2
    assert "aborted" not in source.statistics.attributes
    script = ("import sys\n"
              "from benchmarks.peers.spark_connector import connector_session, read_window\n"
              "from fastpubsub.stats_job.event_statistics import StatisticsOptions\n"
              "from fastpubsub.stats_job.statistics_job import run_statistics_job\n"
              "from fastpubsub.stats_job.window import WindowSpec\n"
              "bs, topic, out = sys.argv[1:]\n"
              "opts = StatisticsOptions(top_k=4, quantiles=5, min_support=0.05, joint_sets=3, joint_top_k=3)\n"
              "run_statistics_job(bs, topic, WindowSpec('earliest'), opts, out, publish=False,\n"
              "                   spark=connector_session('local[2]'), split_size=40, read_window=read_window)\n")
    command = [sys.executable, "-c", script, bs, topic, str(tmp_path / "connector.json")]
    root = str(Path(__file__).resolve().parents[2])
    run = subprocess.run(command, capture_output=True, text=True, timeout=540, cwd=root,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([root, *sys.path])})
    assert run.returncode == 0, run.stderr[-3000:]
    assert _without_computed_at(tmp_path / "connector.json") == _without_computed_at(tmp_path / "source.json")
