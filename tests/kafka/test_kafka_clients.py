"""Every Kafka client comes from one factory, and the -X settings reach the admin, producer and consumer clients alike."""

from __future__ import annotations

import ipaddress
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner
from tests.support.client_threads import client_threads, left_behind
from tests.support.kafka_helpers import read_all, send, wait_processed

from fastpubsub.cli import main
from fastpubsub.runtime import HostConfig
from fastpubsub.kafka import ClientFactory, parse_settings
from fastpubsub.kafka.clients import read_properties
from fastpubsub.kafka.broker import child_preexec, free_port
from fastpubsub.services.events.processor import Processor, ProcessorConfig
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

SETTINGS = {"client.id": "layout-check", "socket.timeout.ms": "45000"}


def test_settings_sit_between_role_defaults_and_role_requirements():
    clients = ClientFactory("broker:9092", {**SETTINGS, "linger.ms": "20", "acks": "1"})
    producer = clients.producer_config({"linger.ms": 5}, acks="all")
    assert producer["bootstrap.servers"] == "broker:9092"
    assert producer["linger.ms"] == "20"  # a user may tune a default
    assert producer["acks"] == "all"  # but not switch off what the role needs
    for config in (clients.admin_config(), producer, clients.consumer_config("g", {"auto.offset.reset": "earliest"})):
        assert {k: config[k] for k in SETTINGS} == SETTINGS


def test_bootstrap_servers_are_not_a_setting_and_bad_items_are_named():
    with pytest.raises(ValueError, match="bootstrap.servers"):
        ClientFactory("a:1", {"bootstrap.servers": "b:2"})
    with pytest.raises(ValueError, match="'security.protocol'"):
        parse_settings(["client.id=x", "security.protocol"])
    assert parse_settings(["sasl.password=a=b"]) == {"sasl.password": "a=b"}


SECRETS = {"sasl.password": "pw-7f3a", "ssl.key.password": "kp-19c2", "sasl.oauthbearer.client.secret": "cs-5e8d"}


def test_secrets_never_show_in_a_factory_a_service_configuration_or_an_error():
    from fastpubsub.services.patterns.config import PatternServiceConfig
    from fastpubsub.services.tables.config import TableServiceConfig
    from fastpubsub.services.tables.declarations import TableDeclaration

    settings = parse_settings([f"{k}={v}" for k, v in SECRETS.items()] + ["client.id=shown"])
    clients = ClientFactory("b:1", settings)
    assert clients.producer_config()["sasl.password"] == "pw-7f3a"  # the clients get them
    shown = [repr(settings), repr(clients), str(clients), repr(HostConfig("b:1", "g", client_config=dict(settings))),
             repr(PatternServiceConfig(HostConfig("b:1", "g", client_config=dict(settings)))),
             repr(TableServiceConfig(HostConfig("b:1", "g", client_config=dict(settings)),
                                     [TableDeclaration.parse("t:pubsub.tables.t:k")]))]
    for text in shown:
        assert "client.id': 'shown'" in text and "'sasl.password': '***'" in text, text
        assert not [v for v in SECRETS.values() if v in text], text
    with pytest.raises(ValueError) as refused:
        parse_settings(["sasl.password:pw-7f3a"])
    assert "pw-7f3a" not in str(refused.value)


CLIENT_PROPERTIES = """\
# a Kafka client properties file
bootstrap.servers=kafka-1:9093
security.protocol = SASL_SSL
! also a comment
sasl.mechanism: SCRAM-SHA-512
sasl.username=svc
sasl.password=pw=with=equals
ssl.ca.location=/etc/kafka/\\
  ca.pem
client.id=from-file

"""


def test_a_client_properties_file_reads_as_kafka_users_write_it(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(CLIENT_PROPERTIES)
    assert read_properties(path) == {
        "bootstrap.servers": "kafka-1:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc", "sasl.password": "pw=with=equals", "ssl.ca.location": "/etc/kafka/ca.pem",
        "client.id": "from-file"}
    path.write_text("client.id=a\nsasl.password pw-7f3a\n")
    with pytest.raises(ValueError) as refused:
        read_properties(path)
    assert f"{path}:2: expected key=value" in str(refused.value) and "pw-7f3a" not in str(refused.value)


def test_the_command_line_wins_over_the_file_and_the_file_over_the_default(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(CLIENT_PROPERTIES)
    clients = ClientFactory.configure(None, ["client.id=from-x", "linger.ms=5"], path, "127.0.0.1:9092")
    assert clients.bootstrap_servers == "kafka-1:9093"
    assert clients.settings["client.id"] == "from-x" and clients.settings["linger.ms"] == "5"
    assert clients.settings["sasl.password"] == "pw=with=equals" and "bootstrap.servers" not in clients.settings
    assert ClientFactory.configure("b:1", (), path).bootstrap_servers == "b:1"
    assert ClientFactory.configure(None, ["client.id=x"], None, "d:1") == ClientFactory("d:1", {"client.id": "x"})
    with pytest.raises(ValueError, match="no bootstrap servers"):
        ClientFactory.configure(None, ())


def test_every_kafka_subcommand_takes_a_client_config_file(tmp_path):
    import click

    from fastpubsub.cli.common import connection_options

    path = tmp_path / "client.properties"
    path.write_text(CLIENT_PROPERTIES)
    built = []
    command = click.command()(connection_options(lambda clients: built.append(clients)))
    assert CliRunner().invoke(command, ["--client-config", str(path), "-X", "client.id=x"]).exit_code == 0
    assert built == [ClientFactory.configure(None, ["client.id=x"], path)]
    path.write_text("security.protocol\n")
    for args in (["topics"], ["subscribe", "a = 1", "--subscriber", "s"], ["unsubscribe", "--id", "1"],
                 ["publish", "{}"], ["tail"], ["run"], ["patterns"], ["tables", "--table", "t:pubsub.tables.t:k"]):
        result = CliRunner().invoke(main, [*args, "--client-config", str(path)])
        assert result.exit_code == 2 and f"{path}:1: expected key=value" in result.output, (args, result.output)


def test_the_settings_travel_as_data_source_options():
    clients = ClientFactory("b:1", SETTINGS)
    options = clients.to_options()
    assert options == {"bootstrap.servers": "b:1", "kafka.client.id": "layout-check", "kafka.socket.timeout.ms": "45000"}
    assert ClientFactory.from_options(options) == clients
    with pytest.raises(ValueError, match="stats_cb"):
        ClientFactory("b:1", {"stats_cb": print}).to_options()


def test_the_spark_data_source_rebuilds_the_factory_from_its_options():
    """What a Spark worker gets: the reader of the data source, built from the options alone."""
    pytest.importorskip("pyspark")
    from fastpubsub.stats_job.kafka_source import KafkaEventsDataSource

    clients = ClientFactory("b:1", SETTINGS)
    source = KafkaEventsDataSource({**clients.to_options(), "topic": "pubsub.events", "ranges": "[[0, 0, 10]]"})
    assert source.reader(None).clients == clients


def _recorder() -> tuple[dict[str, str], object]:
    """librdkafka's statistics callback, recording each client handle's name -> the client.id it was built with."""
    names: dict[str, str] = {}

    def on_stats(text: str) -> None:
        stats = json.loads(text)
        names[stats["name"]] = stats["client_id"]

    return names, on_stats


@pytest.mark.broker
def test_real_admin_producer_and_consumer_report_the_same_client_id(broker):
    names, on_stats = _recorder()
    clients = ClientFactory(broker.bootstrap_servers, {**SETTINGS, "statistics.interval.ms": "100", "stats_cb": on_stats})
    admin, producer, consumer = clients.admin(), clients.producer(), clients.consumer("layout-check")
    try:
        admin.list_topics(timeout=10)
        deadline = time.monotonic() + 20
        while len(names) < 3:
            assert time.monotonic() < deadline, f"statistics seen from {names}"
            for client in (admin, producer, consumer):
                client.poll(0.05)
    finally:
        consumer.close()
    assert set(names.values()) == {"layout-check"}
    assert sorted(name.split("#")[1].split("-")[0] for name in names) == ["consumer", "producer", "producer"]  # admin: a producer handle


@pytest.mark.broker
def test_a_running_processor_gives_the_settings_to_every_client(bootstrap, start_processor):
    """Its producer and its three consumers (subscriptions, events, statistics feed) carry the -X client.id."""
    names, on_stats = _recorder()
    p = start_processor(client_config={**SETTINGS, "statistics.interval.ms": 100, "stats_cb": on_stats})
    send(bootstrap, topics.SUBSCRIPTIONS, [("1", codecs.encode_subscription(Subscription("alice", [("n", ">=", 0)])))])
    deadline = time.monotonic() + 60
    while sum("#consumer-" in n for n in names) < 3 or not any("#producer-" in n for n in names):
        assert time.monotonic() < deadline, f"statistics seen from {names}"
        send(bootstrap, topics.EVENTS, [(b"e", codecs.encode_event({"n": 1}))])  # a batch: the producer flushes
        time.sleep(0.5)
    p.stop()
    assert set(names.values()) == {"layout-check"}


def test_a_stopped_processor_leaves_no_client_running(bootstrap, start_processor):
    """A service stopped in a process that goes on (an application that embeds it, the test suite) ends its clients'
    threads, though its objects stay in memory, frozen as long-lived (runtime.gcwatch)."""
    before = client_threads()
    p = start_processor()
    assert client_threads() - before  # its producer and consumers run
    p.stop()
    left = left_behind(before, bound=0)
    assert not left, left


def test_the_cli_parses_x_for_every_kafka_subcommand():
    for command in (["topics"], ["subscribe", "a = 1", "--subscriber", "s"], ["unsubscribe", "--id", "1"],
                    ["publish", "{}"], ["tail"], ["run"]):
        result = CliRunner().invoke(main, [*command, "-b", "127.0.0.1:1", "-X", "client.id"])
        assert result.exit_code == 2 and "KEY=VALUE" in result.output, (command, result.output)


def test_the_processor_builds_its_factory_from_its_config():
    """The config's settings, and the host's error callback, which hears when no broker answers (runtime.host)."""
    clients = Processor(ProcessorConfig(HostConfig("127.0.0.1:1", "g", client_config=dict(SETTINGS)))).clients
    settings = dict(clients.settings)
    assert callable(settings.pop("error_cb"))
    assert ClientFactory(clients.bootstrap_servers, settings) == ClientFactory("127.0.0.1:1", SETTINGS)


def test_no_module_but_the_factory_builds_a_client():
    """An AST walk over the package and the benchmarks: Consumer(...), Producer(...), AdminClient(...) only in kafka/clients.py."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    builders = {"Consumer", "Producer", "AdminClient", "SerializingProducer", "DeserializingConsumer"}
    found = []
    for path in [*(root / "src" / "fastpubsub").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in builders:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found and all(f.startswith("src/fastpubsub/kafka/clients.py:") for f in found), found


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a socket listening on ``port`` (``/proc/net/tcp``, ``/proc/net/tcp6``)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    raw = bytes.fromhex(address)
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # host-order words
                    found.add(str(ipaddress.ip_address(words)))
    return found


@pytest.mark.broker
def test_a_service_given_secrets_never_emits_them(bootstrap, group_id, tmp_path):
    """``pubsub run -X sasl.password=...``: neither its log, its output, /metrics, /healthz, /readyz nor
    its dead letters carry a secret; /metrics listens on 127.0.0.1 only."""
    send(bootstrap, topics.SUBSCRIPTIONS, [
        ("1", codecs.encode_subscription(Subscription("alice", [("n", ">=", 0)]))),
        ("2", b'{"subscriber": "eve", "predicates": [["n", "~", 1]]}'),  # dead-lettered
    ])
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastpubsub", "run", "-b", bootstrap, "--group-id", group_id, "--log-level", "info",
         "--progress-interval", "1", "--metrics-port", str(port), *[a for k, v in SECRETS.items() for a in ("-X", f"{k}={v}")]],
        stdout=(tmp_path / "out").open("w"), stderr=(tmp_path / "err").open("w"), preexec_fn=child_preexec)
    try:
        base, shown = f"http://127.0.0.1:{port}", []
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "err").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{base}/readyz", timeout=5) as answer:
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        assert listening_addresses(port) == {"127.0.0.1"}
        send(bootstrap, topics.EVENTS, [(b"e", codecs.encode_event({"n": 1})), (b"bad", b"\x07garbage")])
        wait_processed(bootstrap, group_id)
        for path in ("/metrics", "/healthz", "/readyz"):
            with urllib.request.urlopen(base + path, timeout=5) as answer:
                shown.append(answer.read().decode())
        assert "pubsub_events_total 1.0" in shown[0]
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    letters = [r.value() for r in read_all(bootstrap, topics.DEAD_LETTER)]
    assert proc.returncode == 0 and "dead letter" in err and len(letters) >= 2
    emitted = "\n".join([out, err, *shown, *(repr(letter) for letter in letters)])
    assert not [v for v in SECRETS.values() if v in emitted]
