"""Events in producers' registered schemas, decoded with the schema under their id (unit lane: confluent-kafka's
in-process ``mock://`` registry; the broker lane runs the same against the real one, tests/kafka/test_registry.py).

The records are written by confluent-kafka's own serializers (Avro, JSON Schema, Protobuf), as users' producers
write them; fastpubsub reads them with its own readers, and the attributes are checked against what the producer
sent, flattened by path.
"""

from __future__ import annotations

import datetime
import decimal
import json
import struct
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.kafka.schema_registry import (EVENT_SUBJECT, RegistryConfig, SchemaSource, event_decoders,
                                            output_subjects, register_outputs)
from fastpubsub.services.events.encode import notification_attributes
from fastpubsub.wire import codecs
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.paths import flatten
from fastpubsub.wire.registered import (RegisteredDecoders, RegisteredSchema, RegistryUnavailable, comparable,
                                       indexed_attributes)

TOPIC = "orders"
CONTEXT = SerializationContext(TOPIC, MessageField.VALUE)

ADDRESS = {"type": "record", "name": "Address", "namespace": "shop",
           "fields": [{"name": "country", "type": "string"}, {"name": "zip", "type": ["null", "string"],
                                                                 "default": None}]}
ORDER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"},
            {"name": "address", "type": "shop.Address"}]}},
        {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "labels", "type": {"type": "map", "values": "string"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "discount", "type": ["null", "double", "string"], "default": None},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 2}},
        {"name": "payload", "type": "bytes"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "paid", "type": "boolean"},
    ],
}
UTC = datetime.timezone.utc
AN_ORDER = {
    "id": 7, "customer": {"name": "Ann", "address": {"country": "FR", "zip": None}},
    "items": [{"sku": "a1", "qty": 2}, {"sku": "b2", "qty": 1}], "tags": ["gift", "rush"],
    "labels": {"channel": "web"}, "status": "PAID", "discount": 0.5, "digest": b"\x01\x02", "payload": b"\xff",
    "day": datetime.date(2024, 2, 29), "at_ms": datetime.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=UTC),
    "at_us": datetime.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=UTC), "amount": decimal.Decimal("12.34"),
    "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"), "paid": True,
}
AN_ORDER_PAIRS = [
    ("id", 7), ("customer.name", "Ann"), ("customer.address.country", "FR"),
    ("items.sku", "a1"), ("items.qty", 2), ("items.sku", "b2"), ("items.qty", 1),
    ("tags", "gift"), ("tags", "rush"), ("labels.channel", "web"), ("status", "PAID"), ("discount", 0.5),
    ("day", "2024-02-29"), ("at_ms", 1709208000123), ("at_us", 1709208000123.456), ("amount", 12.34),
    ("ref", "12345678-1234-5678-1234-567812345678"), ("paid", True),
]


@pytest.fixture
def registry(request):
    """A fresh in-process registry (its name is the test's)."""
    return RegistryConfig.configure(f"mock://{request.node.name}").client()


def avro_serializer(client, schema, **conf):
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(client, schema, conf={"auto.register.schemas": True, **conf})


def with_references(client) -> Schema:
    """The order schema as Java's serializers register it: its nested named record a schema of its own."""
    client.register_schema("shop.Address", Schema(json.dumps(ADDRESS), "AVRO"))
    return Schema(json.dumps(ORDER), "AVRO", [SchemaReference("shop.Address", "shop.Address", 1)])


def decoders(client) -> RegisteredDecoders:
    return RegisteredDecoders(SchemaSource(client, "mock"), native_event_id=-1)


def test_nested_avro_with_references_gives_every_leaf_by_path(registry):
    schema = with_references(registry)
    value = avro_serializer(registry, schema)(AN_ORDER, CONTEXT)
    decoded = decode_events([value], decoders(registry))
    assert decoded.errors == {}
    batch = decoded.event_batch()
    assert [batch.attribute_names[a] for a in batch.attributes] == [name for name, _ in AN_ORDER_PAIRS]
    assert [v for _, v in AN_ORDER_PAIRS if isinstance(v, str)] == list(batch.strings)
    assert decoders(registry).pairs(value) == AN_ORDER_PAIRS


def test_logical_types_become_comparable_scalars():
    assert comparable(datetime.date(1970, 1, 2)) == "1970-01-02"
    assert comparable(datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) == 1000
    assert comparable(datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)) == -1
    assert comparable(datetime.time(0, 1, 0, 500)) == 60000.5
    assert comparable(decimal.Decimal("-1.5")) == -1.5
    assert comparable(b"\x00") is None
    assert comparable({"a": [b"x", 1]}) == {"a": [None, 1]}


def test_dates_compare_in_time_order_as_text():
    days = [datetime.date(1, 1, 1), datetime.date(999, 12, 31), datetime.date(1970, 1, 1), datetime.date(9999, 1, 1)]
    assert sorted(days) == sorted(days, key=comparable)


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.text(max_size=5)),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text("abc", min_size=1, max_size=2), inner,
                                                            max_size=3)),
                    max_leaves=12))
def test_a_json_schema_event_is_its_leaves_by_path(value):
    """Whatever the nesting, the attributes are the leaves, each under the keys leading to it; arrays repeat."""
    def naive(v, path):
        if isinstance(v, dict):
            return [p for k, x in v.items() for p in naive(x, f"{path}.{k}" if path else k)]
        if isinstance(v, list):
            return [p for x in v for p in naive(x, path)]
        return [] if v is None else [(path, v)]

    event = {"root": value}
    assert flatten(event) == naive(event, "")


def test_json_schema_records_decode_by_path(registry):
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    schema = {"type": "object", "properties": {
        "id": {"type": "integer"}, "customer": {"type": "object", "properties": {
            "address": {"type": "object", "properties": {"country": {"type": "string"}}}}},
        "tags": {"type": "array", "items": {"type": "string"}}}}
    value = JSONSerializer(json.dumps(schema), registry)({"id": 1, "customer": {"address": {"country": "DE"}},
                                                          "tags": ["x", "y"]}, CONTEXT)
    assert decoders(registry).pairs(value) == [("id", 1), ("customer.address.country", "DE"), ("tags", "x"),
                                               ("tags", "y")]


PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  message Customer { string name = 1; Address address = 2; repeated string tags = 3; }
  Customer customer = 2;
  repeated Item items = 3;
  oneof pay { string card = 4; string iban = 5; }
  Status status = 6;
  map<string, int64> counts = 7;
  google.protobuf.Timestamp at = 8;
  bytes blob = 9;
  optional int32 rank = 10;
}
message Address { string country = 1; }
message Item { string sku = 1; double price = 2; }
enum Status { NEW = 0; PAID = 1; }
"""
PROTO_PAIRS = [("id", 2**40), ("customer.name", "ann"), ("customer.address.country", "FR"), ("customer.tags", "a"),
               ("customer.tags", "b"), ("items.sku", "x"), ("items.price", 2.5), ("card", "visa"),
               ("status", "PAID"), ("counts.k", 3), ("at", 1700000000250)]


def proto_classes():
    """Message classes compiled from PROTO, in a pool of their own (what a producer's generated code is)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    from fastpubsub.wire import protobuf

    files: dict = {}
    protobuf._file_protos(RegisteredSchema("PROTOBUF", PROTO), "shop/order.proto", files)
    pool = descriptor_pool.DescriptorPool()
    wk = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(wk)
    pool.Add(wk)
    pool.Add(files["shop/order.proto"])
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop.{name}"))
            for name in ("Order", "Item", "Order.Customer")}


def an_order(Order):
    m = Order(id=2**40, card="visa", status=1)
    m.customer.name = "ann"
    m.customer.address.country = "FR"
    m.customer.tags.extend(["a", "b"])
    m.items.add(sku="x", price=2.5)
    m.counts["k"] = 3
    m.at.seconds, m.at.nanos = 1700000000, 250_000_000
    m.blob = b"zz"
    return m


def test_protobuf_as_pythons_serializer_registers_it(registry):
    """confluent-kafka's serializer registers a base64 descriptor and writes message indexes."""
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    classes = proto_classes()
    ser = ProtobufSerializer(classes["Order"], registry, {"use.deprecated.format": False})
    assert decoders(registry).pairs(ser(an_order(classes["Order"]), CONTEXT)) == PROTO_PAIRS
    item = ProtobufSerializer(classes["Item"], registry, {"use.deprecated.format": False})(
        classes["Item"](sku="q"), SerializationContext("items", MessageField.VALUE))
    assert decoders(registry).pairs(item) == [("sku", "q"), ("price", 0.0)]  # proto3 defaults are values


def test_protobuf_as_java_registers_it_proto_text_and_nested_message_indexes(registry):
    sid = registry.register_schema("orders-value", Schema(PROTO, "PROTOBUF"))
    classes = proto_classes()
    frame = struct.pack(">bI", 0, sid)
    dec = decoders(registry)
    assert dec.pairs(frame + b"\x00" + an_order(classes["Order"]).SerializeToString()) == PROTO_PAIRS
    assert dec.pairs(frame + b"\x02\x04" + classes["Item"](sku="q", price=1).SerializeToString()) == \
        [("sku", "q"), ("price", 1.0)]  # indexes [2]: the third message
    assert dec.pairs(frame + b"\x04\x00\x00" + classes["Order.Customer"](name="z").SerializeToString()) == \
        [("name", "z")]  # indexes [0, 0]: Order's first nested message
    bad = decode_events([frame + b"\x02\x0e" + b""], dec)
    assert "message indexes [7] name no message" in bad.errors[0]


def test_a_new_version_mid_stream_is_read_without_a_restart(registry):
    ser1 = avro_serializer(registry, json.dumps({"type": "record", "name": "E", "fields": [
        {"name": "a", "type": "long"}]}))
    dec = decoders(registry)
    first = ser1({"a": 1}, CONTEXT)
    assert decode_events([first], dec).errors == {}
    ser2 = avro_serializer(registry, json.dumps({"type": "record", "name": "E", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": ""}]}))
    second = ser2({"a": 2, "b": "new"}, CONTEXT)
    assert first[1:5] != second[1:5]  # a new id
    assert [dec.pairs(v) for v in (first, second)] == [[("a", 1)], [("a", 2), ("b", "new")]]


def test_an_unknown_id_and_an_undecodable_record_are_bad_records_with_their_reason(registry):
    ser = avro_serializer(registry, json.dumps(ORDER).replace('"shop.Address"', json.dumps(ADDRESS)))
    good = ser(AN_ORDER, CONTEXT)
    values = [struct.pack(">bI", 0, 4242) + b"\x02", good[:-3], good, b'{"plain": 1}']
    decoded = decode_events(values, decoders(registry))
    assert decoded.errors[0] == "schema id 4242 is not in the Schema Registry at mock"
    assert decoded.errors[1].startswith(f"record of schema id {struct.unpack('>I', good[1:5])[0]} does not decode")
    assert decoded.rows.tolist() == [2, 3]  # the pipeline moves on


def test_a_subscribed_bytes_or_fixed_field_is_named_in_a_warning_once_per_schema(registry, caplog):
    """Subscriptions are accepted before any schema is known, so one on a bytes field cannot be refused; the first
    batch of a schema in which a subscribed path is bytes or fixed says so, naming the schema id and the field."""
    schema = with_references(registry)
    value = avro_serializer(registry, schema)(AN_ORDER, CONTEXT)
    sid = struct.unpack(">I", value[1:5])[0]
    dec = decoders(registry)
    with caplog.at_level("WARNING", logger="fastpubsub.wire.registered"):
        decode_events([value], dec, frozenset({"status", "customer.name"}))  # nothing uncomparable named
        assert dec.uncomparable == [] and not caplog.records
        for _ in range(2):
            decoded = decode_events([value, value], dec, frozenset({"status", "payload", "digest"}))
    assert decoded.errors == {} and decoded.event_batch().attribute_names == ("status",)  # the events still match
    assert sorted(dec.uncomparable) == [(sid, "digest"), (sid, "payload")]
    told = sorted(r.getMessage() for r in caplog.records)
    assert told == [f"schema id {sid}: field 'digest' is fixed, which no predicate can compare: subscriptions that "
                    f"name it never match events of this schema",
                    f"schema id {sid}: field 'payload' is bytes, which no predicate can compare: subscriptions that "
                    f"name it never match events of this schema"]


def test_a_subscribed_protobuf_bytes_field_is_named_in_a_warning_once(registry, caplog):
    """The same clear error for a Protobuf schema (read record by record): ``blob`` is ``bytes``."""
    sid = registry.register_schema("orders-value", Schema(PROTO, "PROTOBUF"))
    value = struct.pack(">bI", 0, sid) + b"\x00" + an_order(proto_classes()["Order"]).SerializeToString()
    dec = decoders(registry)
    with caplog.at_level("WARNING", logger="fastpubsub.wire.registered"):
        decode_events([value], dec, frozenset({"status", "customer.name"}))
        assert dec.uncomparable == [] and not caplog.records
        for _ in range(2):
            decoded = decode_events([value, value], dec, frozenset({"status", "blob"}))
    assert decoded.errors == {} and decoded.event_batch().attribute_names == ("status",)
    assert dec.uncomparable == [(sid, "blob")]
    assert [r.getMessage() for r in caplog.records] == [
        f"schema id {sid}: field 'blob' is bytes, which no predicate can compare: subscriptions that name it never "
        f"match events of this schema"]


def test_a_union_of_bytes_and_string_is_not_called_uncomparable(registry):
    ser = avro_serializer(registry, json.dumps({"type": "record", "name": "U", "fields": [
        {"name": "v", "type": ["null", "bytes", "string"]}]}))
    dec = decoders(registry)
    decode_events([ser({"v": "x"}, CONTEXT)], dec, frozenset({"v"}))
    assert dec.uncomparable == []


def test_an_unknown_id_is_asked_about_once_per_interval_and_read_once_registered(registry):
    asked: list[int] = []
    source = SchemaSource(registry, "mock")
    dec = RegisteredDecoders(lambda sid: asked.append(sid) or source(sid), native_event_id=-1, unknown_seconds=3600)
    value = avro_serializer(registry, json.dumps({"type": "record", "name": "L", "fields": [
        {"name": "a", "type": "long"}]}))({"a": 3}, CONTEXT)
    late = struct.pack(">bI", 0, struct.unpack(">I", value[1:5])[0] + 1) + value[5:]  # the next id: not yet there
    assert len(decode_events([late] * 3, dec).errors) == 3 and len(asked) == 1
    avro_serializer(registry, json.dumps({"type": "record", "name": "L2", "fields": [
        {"name": "b", "type": "long"}]}))({"b": 3}, SerializationContext("other", MessageField.VALUE))
    dec.unknown_seconds = 0
    assert dec.pairs(late) == [("b", 3)]


def test_fastpubsubs_own_event_schema_is_read_under_the_id_the_registry_gave_it(registry):
    """With a registry, ids are the registry's: a producer's schema may hold id 2, fastpubsub's event another."""
    user = avro_serializer(registry, json.dumps({"type": "record", "name": "U", "fields": [
        {"name": "x", "type": "long"}]}))({"x": 5}, CONTEXT)
    assert struct.unpack(">I", user[1:5])[0] in (1, 2)
    dec = event_decoders(RegistryConfig("mock://"), client=registry)
    native = dec.native_event_id
    assert native == registry.register_schema(EVENT_SUBJECT, Schema((codecs.SCHEMA_DIR / "event.avsc").read_text(),
                                                                   "AVRO"))  # found, not registered twice
    ours = struct.pack(">bI", 0, native) + codecs.encode_event({"n": 1.5})[5:]
    decoded = decode_events([user, ours], dec)
    assert decoded.errors == {}
    batch = decoded.event_batch()
    assert [batch.attribute_names[a] for a in batch.attributes] == ["x", "n"]


def test_a_registry_that_does_not_answer_is_waited_for_never_taken_for_a_verdict():
    """Nothing listens on the port: the source retries, saying so, until the service stops; then it raises
    RegistryUnavailable, neither an event nor a dead letter."""
    attempts: list[bool] = []
    client = RegistryConfig.configure("http://127.0.0.1:9", ["timeout=1", "max.retries=0"]).client()
    source = SchemaSource(client, "http://127.0.0.1:9", waiting=attempts.append,
                          stopped=lambda: len(attempts) >= 3, first_pause=0.01)
    with pytest.raises(RegistryUnavailable, match="does not answer"):
        decode_events([struct.pack(">bI", 0, 77) + b"\x02"], RegisteredDecoders(source, 2))
    assert attempts[:3] == [True, True, True] and attempts[-1] is False


def test_a_notification_carries_a_registered_event_as_a_flat_map_losing_no_element(registry):
    ser = avro_serializer(registry, json.dumps(ORDER).replace('"shop.Address"', json.dumps(ADDRESS)))
    value = ser(AN_ORDER, CONTEXT)
    attrs = json.loads(notification_attributes(value, "json", decoders(registry)))
    assert attrs["customer.address.country"] == "FR"
    assert [attrs["items.sku[0]"], attrs["items.sku[1]"], attrs["tags[0]"], attrs["tags[1]"]] == \
        ["a1", "b2", "gift", "rush"]
    assert indexed_attributes([("a", 1), ("b", 2), ("a", 3)]) == {"a[0]": 1, "b": 2, "a[1]": 3}
    avro = notification_attributes(value, "avro", decoders(registry))
    note = codecs.decode_notification(codecs.encode_notification(1, "s", "e", avro, "avro"))
    assert note["event"] == attrs


def test_registry_settings_are_given_the_way_kafkas_are(tmp_path):
    conf = tmp_path / "registry.properties"
    conf.write_text("# the registry's\nbasic.auth.user.info=me:secret\ntimeout=3\n")
    got = RegistryConfig.configure("https://r.example:8081/", ["timeout=5"], str(conf))
    assert got.url == "https://r.example:8081" and got.settings == {"basic.auth.user.info": "me:secret",
                                                                     "timeout": "5"}
    assert "secret" not in repr(got)
    assert RegistryConfig.configure(None) is None
    with pytest.raises(ValueError, match="give its --schema-registry URL"):
        RegistryConfig.configure(None, ["timeout=5"])
    with pytest.raises(ValueError, match="an http://"):
        RegistryConfig.configure("r.example:8081")
    with pytest.raises(ValueError, match="-R timeout: a number"):
        RegistryConfig.configure("http://r", ["timeout=soon"]).client()


def test_with_a_registry_fastpubsubs_outputs_carry_the_ids_it_registered(registry):
    """Notifications (full, naming their source, and by reference) and dead letters are framed with the registry's
    ids, under the notifications and dead-letter topics' subjects, so that any registry client reads them."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    ids = register_outputs(RegistryConfig("mock://"), output_subjects("n", "d"), client=registry)
    assert set(ids) == {codecs.SCHEMA_IDS[k] for k in ("notification", "notification_v2", "notification_reference",
                                                           "dead_letter")}
    assert ids[codecs.SCHEMA_IDS["notification"]] == registry.get_latest_version("n-value").schema_id
    read = AvroDeserializer(registry)
    note = codecs.reframed(codecs.encode_notification(5, "ann", "e1", codecs.encode_attributes({"a": 1}, "avro"),
                                                      "avro"), ids)
    assert read(note, SerializationContext("n", MessageField.VALUE))["event"] == {"a": 1}
    sourced = codecs.reframed(codecs.encode_notification(5, "ann", "e1", codecs.encode_attributes({"a": 1}, "avro"),
                                                         "avro", ("t", 0, 9)), ids)
    assert read(sourced, SerializationContext("n", MessageField.VALUE))["source"] == {"topic": "t", "partition": 0,
                                                                                      "offset": 9}
    ref = codecs.reframed(codecs.encode_notification_reference(5, "ann", "e1", "t", 0, 9, 100, "avro"), ids)
    assert read(ref, SerializationContext("n", MessageField.VALUE))["subscription_id"] == 5
    dl = codecs.reframed(codecs.encode_dead_letter(codecs.dead_letter("bad", "t", 0, 1, b"k", b"v")), ids)
    assert read(dl, SerializationContext("d", MessageField.VALUE))["reason"] == "bad"
    assert codecs.reframed(b'{"json": 1}', ids) == b'{"json": 1}' and codecs.reframed(note, None) == note
