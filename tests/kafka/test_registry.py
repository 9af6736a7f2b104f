"""Producers' registered topics through the real Schema Registry (Apicurio, ``pubsub registry``) on Apache Kafka.

confluent-kafka's own Avro, JSON Schema and Protobuf serializers write nested records, registering their schemas
as they do against any registry; the processor, given ``--schema-registry``, decodes them with the schema under
their id and matches subscriptions on nested fields.  Records it cannot read are dead-lettered with their reason
and the rest flows.  The registry's own start, storage and command line are tested here too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryError, topic_record_subject_name_strategy
from confluent_kafka.serialization import MessageField, SerializationContext
from tests.support.kafka_helpers import RunningService, read_all, send, service_config, wait_committed, wait_processed
from tests.wire.test_registered import AN_ORDER, PROTO, PROTO_PAIRS, an_order, proto_classes, with_references

from click.testing import CliRunner

from fastpubsub.cli import main
from fastpubsub.kafka.distribution import cache_root
from fastpubsub.kafka.registry_server import CCOMPAT, EmbeddedRegistry
from fastpubsub.kafka.schema_registry import EVENT_SUBJECT, RegistryConfig
from fastpubsub.wire import codecs, topics

pytestmark = pytest.mark.broker
CONTEXT = SerializationContext(topics.EVENTS, MessageField.VALUE)
JAVA_PRODUCER = Path(__file__).resolve().parents[1] / "support" / "java" / "apicurio-producer"


@pytest.fixture(scope="session")
def java_producer_libs() -> Path:
    """The Java producer's runtime jars (Apicurio's Avro serde, kafka-clients), copied by Maven once into the cache."""
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("Maven and Java 17 are needed for the Java producer")
    libs = cache_root() / "apicurio-producer-libs"
    if not (libs / "complete").is_file():
        done = subprocess.run(["mvn", "-B", "-q", "-f", str(JAVA_PRODUCER / "pom.xml"), "dependency:copy-dependencies",
                               "-DincludeScope=runtime", f"-DoutputDirectory={libs}"], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        (libs / "complete").write_text("")
    return libs


def java_produce(libs: Path, bootstrap: str, registry_url: str, topic: str, n: int) -> None:
    """Java 17 runs the producer's one source file as it is: no build."""
    base = registry_url.removesuffix(CCOMPAT)
    done = subprocess.run(["java", "-cp", f"{libs}/*", str(JAVA_PRODUCER / "NestedAvroProducer.java"), bootstrap, base,
                           topic, str(n)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and f"sent {n}" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]


def subscribe(bootstrap: str, subs: dict[int, list]) -> None:
    send(bootstrap, topics.SUBSCRIPTIONS, [(str(sid), json.dumps({"subscriber": f"s{sid}", "predicates": preds}).encode())
                                          for sid, preds in subs.items()])


def test_the_embedded_registry_serves_the_confluent_api_on_loopback(schema_registry):
    assert schema_registry.url.startswith("http://127.0.0.1:") and schema_registry.url.endswith(CCOMPAT)
    assert schema_registry.request("GET", "/config") == {"compatibilityLevel": "BACKWARD"}  # Confluent's default
    client = RegistryConfig(schema_registry.url).client()
    v1 = {"type": "record", "name": "C", "fields": [{"name": "a", "type": "long"}]}
    sid = client.register_schema("compat-value", Schema(json.dumps(v1), "AVRO"))
    assert json.loads(client.get_schema(sid).schema_str) == v1
    breaking = {"type": "record", "name": "C", "fields": [{"name": "b", "type": "long"}]}  # no default: not BACKWARD
    with pytest.raises(SchemaRegistryError):
        client.register_schema("compat-value", Schema(json.dumps(breaking), "AVRO"))


def test_registered_avro_json_and_protobuf_events_match_on_nested_fields(bootstrap, group_id, start_processor,
                                                                         schema_registry, java_producer_libs):
    """Python's serializers (Avro with a reference, JSON Schema, Protobuf) and a Java producer with Apicurio's serde
    (every nested record a schema of its own, referred to by name) write to the events topic."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    client = RegistryConfig(schema_registry.url).client()
    # several record types on one topic: each under its own subject (TopicRecordNameStrategy), the Java one under
    # the topic's (Apicurio's default); one element per array here, repeated ones are the engine's tests' concern
    own = {"subject.name.strategy": topic_record_subject_name_strategy}
    avro = AvroSerializer(client, with_references(client), conf={"auto.register.schemas": True, **own})
    order = {**AN_ORDER, "items": AN_ORDER["items"][:1], "tags": ["rush"]}
    json_schema = {"title": "shop.JsonOrder", "type": "object", "properties": {"customer": {"type": "object", "properties": {
        "address": {"type": "object", "properties": {"country": {"type": "string"}}}}},
        "tags": {"type": "array", "items": {"type": "string"}}}}
    jsons = JSONSerializer(json.dumps(json_schema), client, None, own)
    classes = proto_classes()
    # Apicurio 3.0.9 parses every Protobuf schema as .proto text: it refuses the base64 descriptor Python's serializer
    # registers, and answers that serializer's lookups with text it cannot read.  So the record is framed here as a
    # Java client frames it (the id of the .proto text, message indexes, the message); the unit lane reads the
    # Python serializer's own form.
    proto_id = client.register_schema(f"{topics.EVENTS}-protobuf-shop.Order", Schema(PROTO, "PROTOBUF"))
    proto_order = an_order(classes["Order"])
    del proto_order.customer.tags[:1]  # "b" alone
    subscribe(bootstrap, {
        1: [["customer.address.country", "=", "FR"]],
        2: [["tags", "=", "rush"], ["status", "=", "PAID"]],
        3: [["customer.address.country", "=", "DE"]],
        4: [["at", ">=", 1700000000000], ["customer.tags", "=", "b"]],
        5: [["items.sku", "=", "s2"], ["labels.channel", "=", "java"]],
    })
    java_produce(java_producer_libs, bootstrap, schema_registry.url, topics.EVENTS, 4)
    p = start_processor(schema_registry=RegistryConfig(schema_registry.url))
    frame_of_unknown = struct.pack(">bI", 0, 987654321) + b"\x02"
    send(bootstrap, topics.EVENTS, [
        ("avro", avro(order, CONTEXT)),
        ("json", jsons({"customer": {"address": {"country": "DE"}}, "tags": ["x"]}, CONTEXT)),
        ("proto", struct.pack(">bI", 0, proto_id) + b"\x00" + proto_order.SerializeToString()),
        ("unknown", frame_of_unknown),
        # fastpubsub's own Avro event, under the id the registry gave its schema when the processor started
        ("native", codecs.reframed(codecs.encode_event({"tags": "rush", "status": "PAID"}, "avro"),
                                   {codecs.SCHEMA_IDS["event"]: client.get_latest_version(EVENT_SUBJECT).schema_id})),
    ])
    wait_processed(bootstrap, group_id)
    p.stop()
    # read back as any registry client reads them: fastpubsub registered its output schemas, no fixed ids
    read = AvroDeserializer(client)
    notes = [read(m.value(), SerializationContext(topics.NOTIFICATIONS, MessageField.VALUE))
             for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    assert {(n["event_id"], n["subscription_id"]) for n in notes} == \
        {("avro", 1), ("avro", 2), ("json", 3), ("proto", 1), ("proto", 4), ("native", 2),
         ("java-0", 1), ("java-1", 3), ("java-2", 1), ("java-2", 5), ("java-3", 3)}
    by = {(n["event_id"], n["subscription_id"]): n["event"] for n in notes}
    assert by["avro", 1]["customer.address.country"] == "FR" and by["avro", 1]["items.sku"] == "a1"
    assert by["proto", 4]["at"] == dict(PROTO_PAIRS)["at"]
    (dl,) = [read(m.value(), SerializationContext(topics.DEAD_LETTER, MessageField.VALUE))
             for m in read_all(bootstrap, topics.DEAD_LETTER)]
    assert dl["key"] == b"unknown" and "schema id 987654321 is not in the Schema Registry" in dl["reason"]
    # a notification of an event read from a record names its source: the record subject of that schema
    assert client.get_latest_version(f"{topics.NOTIFICATIONS}-fastpubsub.NotificationV2").schema_id == \
        struct.unpack(">I", read_all(bootstrap, topics.NOTIFICATIONS)[0].value()[1:5])[0]
    assert all(n["source"]["topic"] == topics.EVENTS for n in notes)
    # and as fastpubsub's own reader reads them, given the registry
    tailed = CliRunner().invoke(main, ["tail", "-b", bootstrap, "--schema-registry", schema_registry.url,
                                       "--from-beginning", "--max", str(len(notes)), "--timeout", "20"],
                                catch_exceptions=False)
    assert tailed.exit_code == 0, tailed.output
    assert {(n["event_id"], n["subscription_id"]) for n in map(json.loads, tailed.stdout.splitlines())} == \
        {(n["event_id"], n["subscription_id"]) for n in notes}


SHOP_ORDER = {"type": "record", "name": "ShopOrder", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
    {"name": "customer", "type": {"type": "record", "name": "Buyer", "fields": [
        {"name": "address", "type": {"type": "record", "name": "Where", "fields": [
            {"name": "country", "type": "string"}]}}]}}]}


def test_aggregates_over_a_registered_avro_table_take_nested_paths(bootstrap, group_id, schema_registry):
    """`pubsub tables --schema-registry`: a user-named table topic of a producer's nested Avro rows; an aggregate
    subscription ranges and filters on their nested fields by path."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    from fastpubsub.services.tables.service import TableDeclaration, TableService, TableServiceConfig

    topic = f"shop.orders.{group_id}"
    client = RegistryConfig(schema_registry.url).client()
    avro = AvroSerializer(client, json.dumps(SHOP_ORDER), conf={"auto.register.schemas": True})
    rows = [{"id": i, "amount": float(i * 10), "customer": {"address": {"country": "FR" if i % 3 else "DE"}}}
            for i in range(1, 13)]
    table = f"orders:{topic}:id:amount=number,customer.address.country=string"
    service = RunningService(TableService(service_config(
        TableServiceConfig, bootstrap, [TableDeclaration.parse(table)], group_id=group_id, batch_size=50,
        progress_interval=60, schema_registry=RegistryConfig(schema_registry.url))))
    try:
        send(bootstrap, topic, [(str(r["id"]), avro(r, SerializationContext(topic, MessageField.VALUE))) for r in rows])
        wait_committed(bootstrap, group_id, topic)
        send(bootstrap, topics.SUBSCRIPTIONS, [("1", json.dumps({"subscriber": "a", "aggregate":
            'sum(amount) over orders where amount between 20 and 100 and customer.address.country = "FR"'}).encode())])
        wait_committed(bootstrap, group_id, topics.SUBSCRIPTIONS)
    finally:
        service.stop()
    (note,) = [json.loads(m.value()) for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    want = sum(r["amount"] for r in rows if 20 <= r["amount"] <= 100 and r["customer"]["address"]["country"] == "FR")
    assert note["value"] == want and read_all(bootstrap, topics.DEAD_LETTER) == []


def test_patterns_over_registered_avro_events_take_nested_paths_and_record_metadata(bootstrap, group_id,
                                                                                     schema_registry):
    """`pubsub patterns --schema-registry`: steps test nested fields by path and the record's `$key` and `$topic`,
    and correlate on them."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    from fastpubsub.services.patterns.service import PatternService, PatternServiceConfig

    client = RegistryConfig(schema_registry.url).client()
    avro = AvroSerializer(client, json.dumps(SHOP_ORDER), conf={  # a record type of its own on the events topic
        "auto.register.schemas": True, "subject.name.strategy": topic_record_subject_name_strategy})
    pattern = ('seq a: a.customer.address.country = "FR" and a.$key = "k1" next b: b.$topic = "' + topics.EVENTS
               + '" and b.customer.address.country = a.customer.address.country and b.amount > a.amount within 1h')
    send(bootstrap, topics.SUBSCRIPTIONS, [("1", json.dumps({"subscriber": "p", "pattern": pattern}).encode())])
    service = RunningService(PatternService(service_config(
        PatternServiceConfig, bootstrap, group_id=group_id, batch_size=50, progress_interval=60,
        schema_registry=RegistryConfig(schema_registry.url))))
    try:
        orders = [("k0", 1, 5.0, "FR"), ("k1", 2, 10.0, "FR"), ("k2", 3, 20.0, "DE"), ("k3", 4, 5.0, "FR"),
                  ("k4", 5, 30.0, "FR")]
        p = Producer({"bootstrap.servers": bootstrap})
        now = int(time.time() * 1000)
        for key, i, amount, country in orders:  # one partition, a millisecond apart: a sequence is in event time
            p.produce(topics.EVENTS, avro({"id": i, "amount": amount, "customer": {"address": {"country": country}}},
                                          CONTEXT), key, partition=0, timestamp=now + i)
        assert p.flush(30) == 0
        wait_processed(bootstrap, group_id)
    finally:
        stats = service.stop()
    notes = [json.loads(m.value()) for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    assert [[e["event"]["id"] for e in n["events"]] for n in notes] == [[2, 5]], json.dumps(stats)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _until(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_registry_down_for_30_s_is_waited_for_not_ready_and_nothing_is_lost(bootstrap, group_id, start_processor):
    """A schema version first met while the registry is down: the processor waits for it (/readyz 503, no dead
    letter), reads it once the registry is back (its ids on Kafka, `--storage kafkasql`), and every event is matched
    exactly once."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    from fastpubsub.runtime.metrics import MetricsServer

    registry = EmbeddedRegistry(storage="kafkasql", bootstrap_servers=bootstrap).start()
    server = None
    try:
        config = RegistryConfig(registry.url)
        client = config.client()
        v1 = AvroSerializer(client, json.dumps(SHOP_ORDER), conf={"auto.register.schemas": True})
        v2_schema = {**SHOP_ORDER, "fields": [*SHOP_ORDER["fields"], {"name": "note", "type": "string", "default": ""}]}
        v2 = AvroSerializer(client, json.dumps(v2_schema), conf={"auto.register.schemas": True})

        def order(i: int, **more) -> dict:
            return {"id": i, "amount": 1.0, "customer": {"address": {"country": "FR" if i % 2 else "DE"}}, **more}

        later = [(f"b{i}", v2(order(i, note="x"), CONTEXT)) for i in range(6)]  # v2 registered now, read later
        subscribe(bootstrap, {1: [["customer.address.country", "=", "FR"]]})
        p = start_processor(schema_registry=config)
        server = MetricsServer(p.processor.metrics, 0).start()
        ready = f"http://127.0.0.1:{server.port}/readyz"
        send(bootstrap, topics.EVENTS, [(f"a{i}", v1(order(i), CONTEXT)) for i in range(6)])
        wait_processed(bootstrap, group_id)
        assert _status(ready) == 200
        registry.stop()
        down = time.monotonic()
        send(bootstrap, topics.EVENTS, later)
        _until(lambda: _status(ready) == 503, "/readyz says ready while the registry is down")
        assert read_all(bootstrap, topics.DEAD_LETTER) == []
        time.sleep(max(0.0, down + 20 - time.monotonic()))  # with the registry's restart, about 30 s down
        registry.start()
        wait_processed(bootstrap, group_id, timeout=90)
        _until(lambda: _status(ready) == 200, "not ready again once the registry answers")
        read = AvroDeserializer(client)
        notes = [read(m.value(), SerializationContext(topics.NOTIFICATIONS, MessageField.VALUE))
                 for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    finally:
        if server is not None:
            server.stop()
        registry.stop()
    assert sorted(n["event_id"] for n in notes) == ["a1", "a3", "a5", "b1", "b3", "b5"]  # each once
    assert read_all(bootstrap, topics.DEAD_LETTER) == []


@pytest.mark.slow  # two starts of the registry on Kafka
def test_pubsub_registry_on_kafka_keeps_its_ids_across_a_restart(broker):
    """``--storage kafkasql``: the journal is on the project's Kafka, so an id read before a restart still names
    the same schema after it (a record written before must stay readable)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    schema = json.dumps({"type": "record", "name": "K", "fields": [{"name": "k", "type": "string"}]})

    def start() -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen([sys.executable, "-m", "fastpubsub", "registry", "--port", "0", "--storage", "kafkasql",
                                 "-b", broker.bootstrap_servers], stdout=subprocess.PIPE, text=True, env=env)
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        return proc, url

    def call(url: str, method: str, path: str, body: object | None = None) -> object:
        req = urllib.request.Request(url + path, None if body is None else json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as answer:
            return json.loads(answer.read())

    proc, url = start()
    try:
        sid = call(url, "POST", "/subjects/keep-value/versions", {"schema": schema})["id"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    proc, url = start()
    try:
        assert json.loads(call(url, "GET", f"/schemas/ids/{sid}")["schema"]) == json.loads(schema)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
