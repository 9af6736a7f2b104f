"""Fixtures for tests through Apache Kafka with real confluent-kafka clients, and the test lanes.

One Apache Kafka node (KRaft, a temporary data directory) per test session on free ports serves every test that only
needs a broker; every test that uses ``bootstrap`` gets the five topics deleted and created afresh, and its own
consumer group id.  Tests that restart or kill brokers start their own ``EmbeddedBroker``.

Lanes (``make test-fast`` runs the first alone):
  unit    no marker: no broker, no Spark;
  broker  every test that uses the ``broker`` fixture (marked here) or starts a broker of its own;
  spark   tests that run a Spark job;
  slow    long-running tests (installing the wheel, crash loops).

The folders mirror the package (tests/engine, tests/wire, ...), plus tests/faults, tests/pipeline (the services end
to end through Kafka), tests/project (docs, packaging, command line) and tests/benchmarks; tests/support holds the
shared helpers (oracles, naive kernels, Kafka helpers).  A folder whose tests all cost the same names its lane in its
own conftest.py (``tests.support.lanes``: faults and pipeline are broker, stats_job is spark); in the other folders
a file or a test carries its marker.  The fixtures here (the session broker, the registry, Spark) reach every folder.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Iterator

import pytest
from tests.support.client_threads import LEFT_BEHIND_BOUND, client_threads, clients, left_behind
from tests.support.kafka_helpers import RunningProcessor, alter_topic_config, service_config

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.wire import topics
from fastpubsub.services.events.processor import ProcessorConfig
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.kafka.registry_server import EmbeddedRegistry

#: The JVMs of the tests' brokers (the session's, the clusters', and those the demo and the packaging test start)
#: compile with C1 only: they live a minute or two, so C2's compile threads cost more CPU than they save, and
#: the two cores are shared by every worker.  Kafka's own scripts read JVM options from KAFKA_OPTS too.
os.environ.setdefault("KAFKA_OPTS", "-XX:TieredStopAtLevel=1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long-faults", action="store_true", default=False,
                     help="tests/faults/test_cluster_faults.py: several seeds, longer loads, a one-minute outage "
                          "(make test-faults)")


#: Files whose tests take minutes through the broker, slowest first: run first, so that the two workers of ``make
#: test`` (``--dist loadfile`` hands out whole files in collection order) end together instead of one waiting on
#: the other's last long file.
LONGEST_FIRST = ("test_cluster_faults.py", "test_exactly_once.py", "test_crash.py", "test_demo.py",
                 "test_spark_standalone.py", "test_commit_interval.py", "test_packaging.py", "test_registry.py",
                 "test_security.py", "test_tables.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that needs the session broker is in the ``broker`` lane, whether or not its file says so; a case
    marked ``long`` runs only in the long version of the fault tests (``make test-faults``); the longest files
    first."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
    long = config.getoption("--long-faults")
    for item in items:
        if "broker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)
        if not long and item.get_closest_marker("long") is not None:
            item.add_marker(pytest.mark.skip(reason="the long version: make test-faults (--long-faults)"))


_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Seconds per test file, setup and teardown included (under xdist the controller sees every worker's)."""
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The longest files: what LONGEST_FIRST should list, so that no worker ends alone with a long one."""
    if len(_FILE_SECONDS) < 2:
        return
    longest = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:12]
    terminalreporter.write_sep("=", f"longest files ({sum(_FILE_SECONDS.values()):.0f} s in all)")
    for path, seconds in longest:
        terminalreporter.write_line(f"{seconds:8.1f}s {path}")


@pytest.fixture(scope="module", autouse=True)
def no_client_left_open(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module whose tests leave Kafka clients running (their threads) fails at its end, naming the threads: close
    every client a test makes, stop every service it starts (``client_threads``)."""
    before = client_threads()
    yield
    left = left_behind(before)
    if clients(left) > LEFT_BEHIND_BOUND:
        pytest.fail(f"{request.module.__name__} left {clients(left)} Kafka clients running (at most "
                    f"{LEFT_BEHIND_BOUND}), threads {dict(left)}; close the clients its tests make", pytrace=False)


@pytest.fixture(scope="session")
def long_faults(request: pytest.FixtureRequest) -> bool:
    """True in the long version of the fault tests (``make test-faults``): more kills per run."""
    return bool(request.config.getoption("--long-faults"))


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[EmbeddedRegistry]:
    """One real Schema Registry (Apicurio, in memory) for every registry test of the session."""
    with EmbeddedRegistry() as r:
        yield r


@pytest.fixture(scope="session")
def spark():
    """One local Spark for every test of the spark lane (a JVM's start is most of a small job's time)."""
    pytest.importorskip("pyspark")
    from fastpubsub.stats_job.statistics_job import spark_session

    session = spark_session("local[2]", driver_memory="2g")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def bootstrap(broker: EmbeddedBroker) -> Iterator[str]:
    """Bootstrap servers of the session broker with the four topics empty and new."""
    fresh_topics(broker.bootstrap_servers)
    yield broker.bootstrap_servers


def fresh_topics(bootstrap_servers: str, partitions: int = 4) -> None:
    """Delete every topic but Kafka's own, then create the five topics empty."""
    topics_now = ClientFactory(bootstrap_servers).admin().list_topics(timeout=10).topics
    admin.delete_topics(bootstrap_servers, [t for t in topics_now if not t.startswith("__")])
    admin.create_afresh(bootstrap_servers, partitions=partitions)
    keep_old_events(bootstrap_servers)


def keep_old_events(bootstrap_servers: str, topic: str = topics.EVENTS) -> None:
    """Tests replay events stamped in a fixed past (patterns, windows): no time-based retention deletes them
    while a test runs, as Kafka's seven days would within seconds."""
    alter_topic_config(bootstrap_servers, topic, {"retention.ms": "-1"})


@pytest.fixture
def group_id() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def start_processor(bootstrap: str, group_id: str):
    running: list[RunningProcessor] = []

    def start(**overrides: Any) -> RunningProcessor:
        config = service_config(ProcessorConfig, bootstrap, **{"group_id": group_id, "progress_interval": 60, **overrides})
        p = RunningProcessor(config)
        running.append(p)
        return p

    yield start
    for p in running:
        if p._thread.is_alive():
            p.processor.stop()
            p._thread.join(60)
