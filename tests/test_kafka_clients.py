"""Every Kafka client comes from one factory, and the -X settings reach the admin, producer and consumer clients alike."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from kafka_helpers import send

from fastpubsub.cli import main
from fastpubsub.kafka import ClientFactory, parse_settings
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


def test_the_cli_parses_x_for_every_kafka_subcommand():
    for command in (["topics"], ["subscribe", "a = 1", "--subscriber", "s"], ["unsubscribe", "--id", "1"],
                    ["publish", "{}"], ["tail"], ["run"]):
        result = CliRunner().invoke(main, [*command, "-b", "127.0.0.1:1", "-X", "client.id"])
        assert result.exit_code == 2 and "KEY=VALUE" in result.output, (command, result.output)


def test_the_processor_builds_its_factory_from_its_config():
    """The config's settings, and the host's error callback, which hears when no broker answers (runtime.host)."""
    clients = Processor(ProcessorConfig("127.0.0.1:1", client_config=dict(SETTINGS))).clients
    settings = dict(clients.settings)
    assert callable(settings.pop("error_cb"))
    assert ClientFactory(clients.bootstrap_servers, settings) == ClientFactory("127.0.0.1:1", SETTINGS)


def test_no_module_but_the_factory_builds_a_client():
    """An AST walk over the package and the benchmarks: Consumer(...), Producer(...), AdminClient(...) only in kafka/clients.py."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    builders = {"Consumer", "Producer", "AdminClient", "SerializingProducer", "DeserializingConsumer"}
    found = []
    for path in [*(root / "src" / "fastpubsub").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in builders:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found and all(f.startswith("src/fastpubsub/kafka/clients.py:") for f in found), found
