"""/metrics, /healthz and /readyz: what a service published, exposed through prometheus_client and scraped over HTTP.

The exposition is read back the way a scraper reads it: ``prometheus_client.parser`` for the text format 0.0.4 and
the strict ``prometheus_client.openmetrics.parser`` when OpenMetrics is asked for.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest
from confluent_kafka import Producer
from click.testing import CliRunner
from hypothesis import given, strategies as st
from tests.support.kafka_helpers import send, wait_processed
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from fastpubsub.cli import main
from fastpubsub.runtime import HostConfig
from fastpubsub.kafka.broker import child_preexec, free_port
from fastpubsub.kafka import ClientFactory
from fastpubsub.runtime.metrics import BUCKETS, Histogram, Metrics, MetricsServer, consumer_lag
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def request(url: str, accept: str | None = None) -> tuple[int, str, str]:
    """(status, content type, body) of a GET."""
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def get(url: str) -> tuple[int, str]:
    status, _, body = request(url)
    return status, body


def families(text: str) -> dict[str, object]:
    """The text format 0.0.4 -> {family name: family}, as a scraper parses it."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    """The text format 0.0.4 -> {(sample name, labels): value}."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.fixture
def published() -> Metrics:
    """A host's metrics as its loop leaves them after some work."""
    m = Metrics()
    m.counters.events, m.counters.notifications, m.counters.batches, m.counters.commits = 120, 45, 3, 2
    m.dead_letters = Counter({(topics.EVENTS, "not_json_or_avro"): 2, (topics.SUBSCRIPTIONS, "predicates"): 1})
    m.publish(7, {"added": 8, "replaced": 1, "removed": 1, "expired": 0}, (3, 100_000, 4),
              delivery="transactional", group_id="g", algorithm="dynamic", shard="0/1")
    for seconds in (0.0004, 0.003, 0.003, 12.0):
        m.batch_seconds.observe(seconds)
    m.commit_seconds.observe(0.02)
    for seconds in (0.004, 0.03):
        m.event_commit_seconds.observe(seconds)
    for records in (1, 3, 1000):
        m.batch_records.observe(records)
    m.engine = {"clusters": 5, "algorithm": "dynamic", "hash_tables": {"multi_attribute": 2},
                "cluster_size_histogram": {"1": 4, "2-3": 1}, "memory_bytes": 300,
                "memory": {"clusters": 200, "predicates": 100}}
    m.ready.set()
    return m


@pytest.fixture
def serve():
    servers = []

    def start(metrics: Metrics) -> str:
        servers.append(MetricsServer(metrics, 0).start())
        return f"http://127.0.0.1:{servers[-1].port}"

    yield start
    for s in servers:
        s.stop()


def test_the_text_format_carries_the_published_numbers_with_their_types(published, serve):
    status, content_type, text = request(f"{serve(published)}/metrics")
    assert status == 200 and content_type == "text/plain; version=0.0.4; charset=utf-8"
    f = families(text)
    assert {name: f[name].type for name in ("pubsub_events", "pubsub_dead_letters", "pubsub_subscription_changes",
                                            "pubsub_producer_queue_full", "pubsub_batch_seconds", "pubsub_info",
                                            "pubsub_ready", "pubsub_subscriptions", "pubsub_engine_clusters")} == {
        "pubsub_events": "counter", "pubsub_dead_letters": "counter", "pubsub_subscription_changes": "counter",
        "pubsub_producer_queue_full": "counter", "pubsub_batch_seconds": "histogram", "pubsub_info": "gauge",
        "pubsub_ready": "gauge", "pubsub_subscriptions": "gauge", "pubsub_engine_clusters": "gauge"}
    assert all(s.name.endswith("_total") for fam in f.values() if fam.type == "counter" for s in fam.samples)
    assert not [s.name for fam in f.values() for s in fam.samples if s.name.endswith("_created")]
    m = parse(text)
    assert m["pubsub_events_total", frozenset()] == 120 and m["pubsub_notifications_total", frozenset()] == 45
    assert m["pubsub_dead_letters_total", frozenset({("topic", topics.EVENTS), ("reason", "not_json_or_avro")})] == 2
    assert m["pubsub_subscription_changes_total", frozenset({("change", "added")})] == 8
    assert m["pubsub_producer_queue_messages", frozenset()] == 3
    assert m["pubsub_producer_queue_full_total", frozenset()] == 4
    assert m["pubsub_info", frozenset({("algorithm", "dynamic"), ("delivery", "transactional"), ("group_id", "g"),
                                       ("shard", "0/1")})] == 1
    assert m["pubsub_ready", frozenset()] == 1 and m["pubsub_subscriptions", frozenset()] == 7
    assert m["pubsub_engine_hash_tables_multi_attribute", frozenset()] == 2
    assert m["pubsub_engine_clusters_by_size", frozenset({("size", "2-3")})] == 1
    assert m["pubsub_batch_seconds_bucket", frozenset({("le", "0.001")})] == 1
    assert f["pubsub_engine_structure_bytes"].type == "gauge"
    assert m["pubsub_engine_structure_bytes", frozenset({("structure", "clusters")})] == 200
    assert m["pubsub_engine_memory_bytes", frozenset()] == 300
    assert not [name for name, _ in m if name.startswith("pubsub_engine_memory_") and name != "pubsub_engine_memory_bytes"]
    assert m["pubsub_batch_seconds_bucket", frozenset({("le", "0.005")})] == 3
    assert m["pubsub_batch_seconds_bucket", frozenset({("le", "+Inf")})] == 4
    assert m["pubsub_batch_seconds_count", frozenset()] == 4
    assert m["pubsub_batch_seconds_sum", frozenset()] == pytest.approx(12.0064)


def test_the_wait_for_the_commit_and_the_batch_sizes_are_histograms_to_attribute_a_tail_to(published, serve):
    text = request(f"{serve(published)}/metrics")[2]
    f = families(text)
    assert f["pubsub_event_commit_seconds"].type == f["pubsub_batch_records"].type == "histogram"
    m = parse(text)
    assert m["pubsub_event_commit_seconds_bucket", frozenset({("le", "0.005")})] == 1
    assert m["pubsub_event_commit_seconds_bucket", frozenset({("le", "0.05")})] == 2
    assert m["pubsub_batch_records_bucket", frozenset({("le", "2.0")})] == 1
    assert m["pubsub_batch_records_bucket", frozenset({("le", "5.0")})] == 2
    assert m["pubsub_batch_records_bucket", frozenset({("le", "1000.0")})] == 3
    assert m["pubsub_batch_records_sum", frozenset()] == 1004


def test_openmetrics_when_the_scraper_asks_for_it(published, serve):
    status, content_type, text = request(f"{serve(published)}/metrics", accept=OPENMETRICS)
    assert status == 200 and content_type.startswith("application/openmetrics-text")
    f = {fam.name: fam for fam in openmetrics_families(text)}  # the strict parser: a malformed exposition raises
    assert f["pubsub"].type == "info" and f["pubsub_events"].type == "counter"
    assert f["pubsub_commit_seconds"].type == "histogram"
    assert [s.value for s in f["pubsub_events"].samples] == [120]


def test_health_and_readiness_follow_the_loop(serve):
    m = Metrics(stall_seconds=1.0)
    base = serve(m)
    assert request(f"{base}/readyz") == (503, "text/plain; charset=utf-8", "rebuilding subscriptions\n")
    assert request(f"{base}/healthz") == (200, "text/plain; charset=utf-8", "ok\n")
    assert parse(get(f"{base}/metrics")[1])["pubsub_ready", frozenset()] == 0
    m.ready.set()
    assert get(f"{base}/readyz") == (200, "ready\n")
    m.unreachable = True  # no broker answers: alive, waiting, not ready
    assert get(f"{base}/readyz") == (503, "the Kafka cluster is unreachable: waiting for it\n")
    assert get(f"{base}/healthz")[0] == 200 and parse(get(f"{base}/metrics")[1])["pubsub_ready", frozenset()] == 0
    m.unreachable = False
    assert get(f"{base}/readyz") == (200, "ready\n")
    m.last_beat -= 5
    m.registry_waiting(True)  # the Schema Registry does not answer: waiting on purpose, alive, not ready
    assert get(f"{base}/readyz") == (503, "the Schema Registry is unreachable: waiting for it\n")
    assert get(f"{base}/healthz")[0] == 200 and parse(get(f"{base}/metrics")[1])["pubsub_ready", frozenset()] == 0
    m.registry_waiting(False)
    assert get(f"{base}/readyz") == (200, "ready\n")
    m.recovering = True  # a failed step replayed: a new producer (which may wait for its coordinator), the inputs
    assert get(f"{base}/readyz")[0] == 503
    assert parse(get(f"{base}/metrics")[1])["pubsub_ready", frozenset()] == 0
    m.recovering = False
    assert get(f"{base}/readyz") == (200, "ready\n")
    m.committing_since = time.monotonic()  # a commit under way, not yet long
    assert get(f"{base}/readyz") == (200, "ready\n")
    m.committing_since -= 10  # the cluster went away in its middle: commit_transaction waits, nothing is polled
    assert get(f"{base}/readyz") == (503, "a commit has waited 10s for the Kafka cluster\n")
    assert parse(get(f"{base}/metrics")[1])["pubsub_ready", frozenset()] == 0
    m.committing_since = None
    assert get(f"{base}/readyz") == (200, "ready\n")
    m.last_beat -= 5  # the loop has not turned for five seconds
    status, body = get(f"{base}/healthz")
    assert status == 503 and body == "stalled: no progress for 5s\n"
    assert get(f"{base}/nothing")[0] == 404


def test_each_host_has_a_registry_of_its_own(serve):
    first, second = Metrics(), Metrics()
    first.counters.events, second.counters.events = 1, 2
    assert parse(get(f"{serve(first)}/metrics")[1])["pubsub_events_total", frozenset()] == 1
    assert parse(get(f"{serve(second)}/metrics")[1])["pubsub_events_total", frozenset()] == 2


@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), max_size=50))
def test_a_histogram_bucket_counts_the_observations_up_to_its_bound(values):
    h = Histogram()
    for v in values:
        h.observe(v)
    samples = {(s.name, s.labels.get("le")): s.value for s in h.family("x_seconds", "x").samples}
    for bound in BUCKETS:
        assert samples["x_seconds_bucket", repr(bound)] == sum(v <= bound for v in values)
    assert samples["x_seconds_bucket", "+Inf"] == samples["x_seconds_count", None] == len(values)
    assert samples["x_seconds_sum", None] == pytest.approx(sum(values))


def test_a_processor_exposes_its_metrics_before_its_loop_starts():
    from fastpubsub.services.events.processor import Processor, ProcessorConfig
    from prometheus_client.exposition import generate_latest

    metrics = parse(generate_latest(Processor(ProcessorConfig(HostConfig("127.0.0.1:1", "pubsub-processor"))).metrics.registry).decode())
    assert metrics["pubsub_ready", frozenset()] == 0 and metrics["pubsub_subscriptions", frozenset()] == 0


@pytest.mark.parametrize("command", [["run"], ["patterns"], ["tables", "--table", "stock:pubsub.tables.stock:symbol"]],
                         ids=["run", "patterns", "tables"])
def test_every_service_serves_metrics_on_the_port_given(command):
    """One set of options and one server for the three services: a port already taken is refused before the start."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, [*command, "-b", "127.0.0.1:1", "--metrics-port", str(port),
                                           "--stall-seconds", "30"])
    assert result.exit_code == 1 and f"cannot serve metrics on 127.0.0.1:{port}" in result.output


def closed_by_peer(conn: socket.socket) -> bool:
    """True once the server has closed ``conn`` (end of stream or reset), False while it still waits on it."""
    conn.settimeout(0.05)
    try:
        return conn.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def test_half_sent_requests_are_cut_after_the_deadline_and_never_hold_more_than_the_limit_of_threads():
    """100 connections that send half a request: at most ``limit`` are served (threads), the rest closed at once;
    after the deadline every one is closed, and a whole request is answered again."""
    server = MetricsServer(Metrics(), 0, seconds=1.0, limit=8).start()
    threads = threading.active_count()
    slow = []
    try:
        for _ in range(100):
            conn = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line: the headers never end
            slow.append(conn)
        time.sleep(0.3)
        assert threading.active_count() <= threads + 8
        time.sleep(1.5)
        assert all(closed_by_peer(conn) for conn in slow)
        assert threading.active_count() <= threads
        assert get(f"http://127.0.0.1:{server.port}/metrics")[0] == 200
    finally:
        for conn in slow:
            conn.close()
        server.stop()


def test_a_request_sent_a_byte_at_a_time_is_cut_at_the_deadline_however_often_it_sends():
    server = MetricsServer(Metrics(), 0, seconds=1.0).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as conn:
            started = time.monotonic()
            for byte in b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100:
                if closed_by_peer(conn):
                    break
                try:
                    conn.sendall(bytes([byte]))
                except ConnectionError:
                    break
                time.sleep(0.2)  # each read is answered well within the deadline
            assert time.monotonic() - started < 2.5
    finally:
        server.stop()


# --- through the broker ---------------------------------------------------------------------


@pytest.mark.broker
def test_counters_move_and_liveness_follows_the_loop(bootstrap, group_id, start_processor):
    send(bootstrap, topics.SUBSCRIPTIONS, [
        ("1", codecs.encode_subscription(Subscription("alice", [("price", "<", 10)]))),
        ("2", codecs.encode_subscription(Subscription("bob", [("price", ">=", 5)]))),
        ("3", b'{"subscriber": "eve", "predicates": [["price", "~", 1]]}'),  # bad: unknown operator
    ])
    p = start_processor()
    server = MetricsServer(p.processor.metrics, 0).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        status, text = get(f"{base}/metrics")
        before = parse(text)
        assert status == 200 and before["pubsub_events_total", frozenset()] == 0
        assert before["pubsub_subscriptions", frozenset()] == 2
        assert before["pubsub_dead_letters_total", frozenset({("topic", topics.SUBSCRIPTIONS), ("reason", "predicates")})] == 1
        assert get(f"{base}/healthz")[0] == 200 and get(f"{base}/readyz")[0] == 200

        send(bootstrap, topics.EVENTS, [(f"e{i}", codecs.encode_event({"price": i})) for i in range(20)]
             + [(b"e-bad", b"\x07garbage")])
        wait_processed(bootstrap, group_id)
        p.wait_for(lambda: parse(get(f"{base}/metrics")[1])["pubsub_batch_seconds_count", frozenset()] > 0,
                   what="a batch observed")
        after = parse(get(f"{base}/metrics")[1])
        assert after["pubsub_events_total", frozenset()] == 20
        assert after["pubsub_notifications_total", frozenset()] == 10 + 15  # price < 10, price >= 5
        assert after["pubsub_dead_letters_total", frozenset({("topic", topics.EVENTS), ("reason", "not_json_or_avro")})] == 1
        inf = after["pubsub_batch_seconds_bucket", frozenset({("le", "+Inf")})]
        assert inf == after["pubsub_batch_seconds_count", frozenset()] >= 1
        assert after["pubsub_consumer_lag", frozenset()] >= 0 and after["pubsub_producer_queue_bound", frozenset()] > 0
        assert after["pubsub_batch_records_sum", frozenset()] == 21  # every record taken, the bad one too
        assert after["pubsub_event_commit_seconds_count", frozenset()] >= 1  # each batch's wait for its commit
        assert after["pubsub_commit_seconds_count", frozenset()] >= 1
        assert after["pubsub_info", frozenset({("algorithm", "dynamic"), ("delivery", "transactional"),
                                                ("group_id", group_id), ("shard", "0/1")})] == 1
        assert after["pubsub_engine_clusters", frozenset()] >= 1  # the matcher's configuration
        assert "pubsub_engine_hash_tables_multi_attribute" in {name for name, _ in after}
        by_structure = {dict(labels)["structure"]: v for (name, labels), v in after.items()
                        if name == "pubsub_engine_structure_bytes"}
        assert {"predicates", "ids", "clusters", "access_keys"} <= set(by_structure)  # the engine's memory, by part
        assert sum(by_structure.values()) == after["pubsub_engine_memory_bytes", frozenset()] > 0

        p.processor.metrics.stall_seconds = 1.0  # liveness: a loop that stops turning is reported dead
        time.sleep(1.2)
        assert get(f"{base}/healthz")[0] == 200  # idle, but turning (it beats every 0.2 s)
        stats = p.stop()
        time.sleep(1.2)
        status, body = get(f"{base}/healthz")
        assert status == 503 and body.startswith("stalled")
        assert get(f"{base}/nothing")[0] == 404
    finally:
        server.stop()
    assert stats["events"] == 20


@pytest.mark.broker
def test_lag_is_read_from_the_positions_and_the_offsets_committed_without_asking_the_broker(bootstrap, group_id):
    """The records past what was committed (or, for a partition not committed since its assignment, past the
    position), against the high watermark the fetches brought back."""
    send(bootstrap, topics.EVENTS, [(f"e{i}", codecs.encode_event({"price": i})) for i in range(12)])
    consumer = ClientFactory(bootstrap).consumer(group_id, **{"auto.offset.reset": "earliest",
                                                              "enable.auto.commit": False})
    try:
        consumer.subscribe([topics.EVENTS])
        taken: list = []
        deadline = time.monotonic() + 30
        while len(taken) < 12 and time.monotonic() < deadline:
            taken += [m for m in consumer.consume(100, 0.5) if not m.error()]
        assert len(taken) == 12
        assert consumer_lag(consumer) == 0  # nothing committed: counted from the positions, all fetched
        last = {}
        for m in taken:
            last[m.topic(), m.partition()] = m.offset() + 1
        busiest = max(last, key=last.get)
        known = {**last, busiest: last[busiest] - 2}  # two records of one partition not committed yet
        assert consumer_lag(consumer, known) == 2
    finally:
        consumer.close()


class ServiceProcess:
    """``pubsub <command> --metrics-port PORT`` in a child process."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "fastpubsub", *args, "--progress-interval", "60",
                                      "--metrics-port", str(self.port)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=child_preexec)

    def scrape(self) -> dict[tuple[str, frozenset], float]:
        status, text = get(f"{self.base}/metrics")
        assert status == 200
        return parse(text)

    def wait_for(self, condition, what: str, timeout: float = 180.0) -> dict[tuple[str, frozenset], float]:
        """The first scrape that satisfies ``condition`` (the server answers from the start, before readiness)."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, self.proc.communicate()[1][-3000:]
            try:
                m = self.scrape()
                if condition(m):
                    return m
            except urllib.error.URLError:  # not listening yet
                pass
            assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
            time.sleep(0.2)

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def dead_lettered(m: dict[tuple[str, frozenset], float], topic: str) -> float:
    return sum(v for (name, labels), v in m.items() if name == "pubsub_dead_letters_total" and ("topic", topic) in labels)


@pytest.mark.broker
def test_the_pattern_and_table_services_serve_metrics(bootstrap, group_id):
    table_topic = "pubsub.tables.metrics-stock"
    send(bootstrap, topics.SUBSCRIPTIONS, [
        (b"1", json.dumps({"subscriber": "ann", "pattern": 'seq a: name = "X" next b: name = "X" within 60s'}).encode()),
        (b"2", json.dumps({"subscriber": "eve", "pattern": "seq a: price >"}).encode()),  # bad: dead-lettered
    ])
    patterns = ServiceProcess("patterns", "-b", bootstrap, "--group-id", f"{group_id}-patterns")
    tables = ServiceProcess("tables", "-b", bootstrap, "--group-id", f"{group_id}-tables",
                            "--table", f"stock:{table_topic}:symbol:risk=number")
    try:
        ready = lambda m: m.get(("pubsub_ready", frozenset())) == 1  # noqa: E731
        for service in (patterns, tables):
            service.wait_for(ready, "ready")
            assert get(f"{service.base}/readyz") == (200, "ready\n") and get(f"{service.base}/healthz")[0] == 200
        producer, now = Producer({"bootstrap.servers": bootstrap}), int(time.time() * 1000) + 1000
        for i in range(5):  # a second apart in event time: "next" needs a later event
            producer.produce(topics.EVENTS, json.dumps({"name": "X", "price": i}).encode(), b"k", timestamp=now + 1000 * i)
        assert producer.flush(30) == 0
        send(bootstrap, table_topic, [(b"A", json.dumps({"symbol": "A", "risk": 1}).encode()),
                                      (b"B", b"not a row")])  # bad: dead-lettered
        m = patterns.wait_for(lambda m: m["pubsub_events_total", frozenset()] == 5, "the events processed")
        assert m["pubsub_notifications_total", frozenset()] >= 1 and m["pubsub_subscriptions", frozenset()] == 1
        assert dead_lettered(m, topics.SUBSCRIPTIONS) == 1
        # the table service's inputs are its tables' topics and pubsub.subscriptions: two rows and two subscriptions
        m = tables.wait_for(lambda m: m["pubsub_events_total", frozenset()] == 4, "the rows processed")
        assert dead_lettered(m, table_topic) == 1
        assert ("pubsub_info", frozenset({("algorithm", ""), ("delivery", "transactional"),
                                          ("group_id", f"{group_id}-tables"), ("shard", "0/1"),
                                          ("mode", "s-un")})) in m
        assert patterns.stop()["task"]["events"] == 5 and tables.stop()["task"]["rows"] == {"stock": 1}
    finally:
        patterns.kill()
        tables.kill()


@pytest.mark.parametrize("reason, label", [
    ("table stock: invalid row: JSON value is not an object", "row"),
    ("table stock: row lacks its key attribute 'symbol'", "row"),
    ("output refused: Broker: Message size too large (2000 bytes to pubsub.notifications)", "too_large"),
    ("output refused by the broker: Broker: Topic authorization failed", "refused"),
    ("processing failed: RuntimeError: engine fault", "processing"),
    ("invalid predicates: unknown operator '~'", "predicates"),
    ("something nobody expected", "other"),
])
def test_each_dead_letter_reason_has_a_bounded_label(reason, label):
    from fastpubsub.kafka.deadletter import reason_class

    assert reason_class(reason) == label
