"""Avro (Confluent wire format) and JSON values: round trips and error reasons."""

import hashlib
import io
import json
import re
import struct

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.engine import AnyOf
from fastpubsub.wire import codecs
from fastpubsub.wire.codecs import framing
from fastpubsub.wire.codecs import DeadLetter, DecodeError, Subscription

SUB = Subscription("alice", [("movie", "=", "groundhog day"), ("price", "<=", 10), ("3d", "=", False), ("r", ">", 2.5)], None)
EVENT = {"movie": "groundhog day", "price": 8, "theater": "odeon", "3d": False, "rating": 4.5}


@pytest.mark.parametrize("fmt", codecs.FORMATS)
def test_round_trips(fmt):
    assert codecs.decode_subscription(codecs.encode_subscription(SUB, fmt)) == SUB
    timed = Subscription("bob", [("a", "!=", -3)], 1_900_000_000_000)
    assert codecs.decode_subscription(codecs.encode_subscription(timed, fmt)) == timed
    event = codecs.decode_event(codecs.encode_event(EVENT, fmt))
    assert event == EVENT and [type(v) for v in event.values()] == [type(v) for v in EVENT.values()]
    dl = DeadLetter("bad", "pubsub.events", 3, 17, None, b"\x00\xff")
    assert codecs.decode_dead_letter(codecs.encode_dead_letter(dl, fmt)) == dl


def test_the_json_of_the_readme_is_accepted():
    sub = codecs.decode_subscription(
        b'{"subscriber": "alice", "predicates": [["movie", "=", "groundhog day"], ["price", "<=", 10]], "valid_until": null}'
    )
    assert sub == Subscription("alice", [("movie", "=", "groundhog day"), ("price", "<=", 10)], None)
    assert codecs.decode_event(b'{"movie": "groundhog day", "price": 8, "theater": "odeon"}')["price"] == 8


def test_avro_values_use_the_confluent_wire_format_with_fixed_ids():
    for name, encoded in [
        ("subscription", codecs.encode_subscription(SUB)),
        ("event", codecs.encode_event(EVENT)),
        ("dead_letter", codecs.encode_dead_letter(DeadLetter("r", "t", 0, 0, b"k", b"v"))),
    ]:
        magic, schema_id = struct.unpack(">bI", encoded[:5])
        assert (magic, schema_id) == (0, codecs.SCHEMA_IDS[name])
        with open(codecs.SCHEMA_DIR / f"{name}.avsc") as f:  # readable by plain Avro tooling
            fastavro.schemaless_reader(io.BytesIO(encoded[5:]), fastavro.parse_schema(json.load(f)))


@pytest.mark.parametrize("fmt", codecs.FORMATS)
def test_notifications_carry_a_deterministic_id(fmt):
    value = codecs.encode_notification(42, "alice", "e17", codecs.encode_attributes(EVENT, fmt), fmt)
    n = codecs.decode_notification(value)
    assert n == {"notification_id": "e17/42", "subscription_id": 42, "subscriber": "alice", "event_id": "e17", "event": EVENT}
    if fmt == "avro":  # the pre-encoded event part makes a valid record of the full schema
        assert struct.unpack(">bI", value[:5]) == (0, codecs.SCHEMA_IDS["notification"])
        with open(codecs.SCHEMA_DIR / "notification.avsc") as f:
            assert fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(json.load(f))) == n
    else:
        assert json.loads(value) == n


def _notification_oracle(sid, subscriber, event_id, event, source, original):
    """The notification as fastavro writes the whole record (the encoder writes the event's part once per event)."""
    v2 = source is not None or original is not None
    datum = {"notification_id": f"{event_id}/{sid}", "subscription_id": sid, "subscriber": subscriber,
             "event_id": event_id, "event": event}
    if v2:
        datum["source"] = None if source is None else dict(zip(("topic", "partition", "offset"), source))
        datum["original"] = None if original is None else codecs.original_event(original)
    return _avro("notification_v2" if v2 else "notification", datum)


_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@given(sids=st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=4), subscriber=_names, event_id=_names,
       event=st.dictionaries(_names, st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False), _names,
                                               st.booleans()), max_size=4),
       source=st.none() | st.tuples(_names, st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)),
       original=st.none() | st.binary(max_size=12).filter(lambda b: b[:1] != b"\x00")
       | st.builds(lambda i, body: struct.pack(">bI", 0, i) + body, st.integers(0, 2**31 - 1), st.binary(max_size=8)))
@settings(max_examples=300, deadline=None)
def test_an_events_notifications_are_the_bytes_fastavro_writes_for_each_whole_record(sids, subscriber, event_id,
                                                                                   event, source, original):
    attributes = codecs.encode_attributes(event, "avro")
    encode = codecs.notification_encoder(event_id, attributes, "avro", source, original)
    for sid in sids:
        assert encode(sid, subscriber) == _notification_oracle(sid, subscriber, event_id, event, source, original)


def test_an_original_value_whose_schema_id_is_no_avro_int_is_refused_as_fastavro_refuses_it():
    original = struct.pack(">bI", 0, 2**31) + b"x"
    with pytest.raises(ValueError):
        _notification_oracle(1, "a", "e", {}, None, original)
    with pytest.raises(ValueError):
        codecs.encode_notification(1, "a", "e", codecs.encode_attributes({}, "avro"), "avro", None, original)


def test_integers_beyond_64_bits_are_sent_as_doubles_in_avro():
    assert codecs.decode_event(codecs.encode_event({"big": 2**70}, "avro")) == {"big": float(2**70)}


def _avro(name, datum, schema_id=None):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, codecs.SCHEMAS[name], datum)
    return struct.pack(">bI", 0, schema_id or codecs.SCHEMA_IDS[name]) + buf.getvalue()


GOOD_AVRO_EVENT = codecs.encode_event(EVENT, "avro")
BAD_OPERATOR_AVRO = _avro("subscription", {"subscriber": "a", "predicates": [{"attribute": "x", "operator": "~", "value": 1}],
                                           "valid_until": None})


@pytest.mark.parametrize(
    "decode, value, reason",
    [
        (codecs.decode_event, b"", "empty event value"),
        (codecs.decode_event, b"hello", "neither JSON"),
        (codecs.decode_event, b"\x00\x00\x00", "Avro value too short"),
        (codecs.decode_event, GOOD_AVRO_EVENT[:-3], "invalid Avro event"),
        (codecs.decode_event, GOOD_AVRO_EVENT + b"\x00", "1 trailing bytes"),
        (codecs.decode_event, codecs.encode_subscription(SUB, "avro"), "unexpected Avro schema id 1 for a event"),
        (codecs.decode_event, b"{not json", "invalid JSON"),
        (codecs.decode_event, b'{"a": 1, "a": 2}', "duplicate JSON key 'a'"),
        (codecs.decode_event, b'{"a": {"b": 1, "b": 2}}', "duplicate JSON key 'b'"),
        (codecs.decode_event, b'{"a": {"": 1}}', "non-empty strings"),
        (codecs.decode_event, b"{\"\": 1}", "non-empty strings"),
        (codecs.decode_event, b'{"a": "\xff"}', "not UTF-8"),
        (codecs.decode_subscription, b'{"predicates": [["a", "=", 1]]}', "missing the field 'subscriber'"),
        (codecs.decode_subscription, b'{"subscriber": "a"}', "missing the field 'predicates'"),
        (codecs.decode_subscription, b'{"subscriber": "a", "predicates": []}', "at least one predicate"),
        (codecs.decode_subscription, b'{"subscriber": "a", "predicates": [["a", "~", 1]]}', "unknown operator '~'"),
        (codecs.decode_subscription, BAD_OPERATOR_AVRO, "unknown operator '~'"),
        (codecs.decode_subscription, b'{"subscriber": "a", "predicates": [["a", "=", null]]}', "unsupported value type"),
        (codecs.decode_subscription, b'{"subscriber": "a", "predicates": [["a", "="]]}', "expected (attribute, operator, value)"),
        (codecs.decode_subscription, b'{"subscriber": "a", "predicates": [["a", "=", NaN]]}', "NaN"),
        (codecs.decode_subscription, b'{"subscriber": 7, "predicates": [["a", "=", 1]]}', "subscriber must be a non-empty string"),
        (codecs.decode_subscription, b'{"subscriber": "a", "predicates": [["a", "=", 1]], "valid_until": "soon"}', "valid_until"),
        (codecs.decode_subscription, b'{"subscriber": "a", "predicate": [["a", "=", 1]]}', "unknown subscription field(s): predicate"),
        (codecs.decode_subscription, b'{"subscriber": "a", "predicates": "a = 1"}', "list of (attribute, operator, value)"),
        (codecs.decode_subscription, b"[1]", "neither JSON"),
    ],
)
def test_bad_values_are_rejected_with_a_reason(decode, value, reason):
    with pytest.raises(DecodeError) as info:
        decode(value)
    assert reason in str(info.value)


# --- records that must fit a topic's limit ---------------------------------------------------------------------


from fastpubsub.kafka import ClientFactory  # noqa: E402
from fastpubsub.kafka.delivery import Delivery, RecordRefused  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(value=st.one_of(st.none(), st.binary(max_size=40_000)), key=st.one_of(st.none(), st.binary(max_size=3000)),
       fmt=st.sampled_from(codecs.FORMATS), max_bytes=st.integers(4096, 60_000), reason=st.text(max_size=3000))
def test_a_dead_letter_always_fits_and_keeps_a_prefix_its_size_and_its_hash(value, key, fmt, max_bytes, reason):
    dl = codecs.dead_letter(reason or "bad", "pubsub.events", 3, 17, key, value)
    out = codecs.encode_dead_letter(dl, fmt, max_bytes)
    assert len(out) <= max_bytes
    back = codecs.decode_dead_letter(out)
    assert back.original_size == len(key or b"") + len(value or b"")
    assert back.value_sha256 == (None if value is None else hashlib.sha256(value).hexdigest())
    assert (value or b"").startswith(back.value or b"") and (key or b"").startswith(back.key or b"")
    assert back.truncated == ((back.value or b"") != (value or b"") or (back.key or b"") != (key or b""))
    assert back.record_key == "pubsub.events:3:17"
    if len(codecs.encode_dead_letter(dl, fmt)) <= max_bytes:
        assert back == dl or back.reason != dl.reason  # whole, but for a very long reason cut short


def test_dead_letters_written_before_size_and_hash_fields_still_decode():
    old = framing._without("dead_letter", "original_size", "value_sha256", "truncated")
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, old, {"reason": "r", "source_topic": "t", "partition": 0, "offset": 1,
                                          "key": None, "value": b"v"})
    value = struct.pack(">bI", 0, codecs.SCHEMA_IDS["dead_letter"]) + buf.getvalue()
    assert codecs.decode_dead_letter(value) == codecs.DeadLetter("r", "t", 0, 1, None, b"v")


@pytest.mark.parametrize("fmt", codecs.FORMATS)
def test_a_notification_by_reference_names_the_event_record(fmt):
    value = codecs.encode_notification_reference(42, "alice", "e17", "pubsub.events", 2, 99, 5_000_000, fmt)
    assert codecs.decode_notification(value) == {
        "notification_id": "e17/42", "subscription_id": 42, "subscriber": "alice", "event_id": "e17",
        "event_ref": {"topic": "pubsub.events", "partition": 2, "offset": 99, "size": 5_000_000}}


def test_subscriber_names_are_bounded_because_they_key_every_notification():
    name = "e" * (codecs.MAX_SUBSCRIBER_BYTES + 1)
    with pytest.raises(codecs.DecodeError, match="subscriber name too long"):
        codecs.decode_subscription(json.dumps({"subscriber": name, "predicates": [["a", "=", 1]]}).encode())
    codecs.decode_subscription(json.dumps({"subscriber": name[1:], "predicates": [["a", "=", 1]]}).encode())


def test_a_record_the_producer_refuses_is_named_not_a_failed_batch():
    """librdkafka's own size check (no broker needed): the processor learns which record, and goes on."""
    delivery = Delivery(ClientFactory("127.0.0.1:1", {"message.max.bytes": 20_000}), "at-least-once")
    with pytest.raises(RecordRefused, match="too large"):
        delivery.produce("pubsub.notifications", b"k", b"x" * 30_000, ("pubsub.events", 0, 5))
    delivery.produce("pubsub.notifications", b"k", b"x" * 1_000)  # the next record is queued as usual
    delivery.producer.purge()


OPERATOR_SUBS = [
    Subscription("carol", [("color", "in", ["red", "blue"]), ("price", "between", [5, 10.5]), ("title", "prefix", "harry"),
                           ("promo", "exists", None), ("n", "not in", [True]), ("t", "contains", "é\U0001f600")]),
    Subscription("dave", AnyOf([[("a", "=", 1), ("b", "<", 2)], [("c", "in", [3, 4])]]), 1_900_000_000_000, 5),
    Subscription("erin", [("big", "not between", [-(2**62), 2**62]), ("s", "suffix", "x")]),
]


@pytest.mark.parametrize("fmt", codecs.FORMATS)
@pytest.mark.parametrize("sub", OPERATOR_SUBS)
def test_every_operator_and_or_round_trip(fmt, sub):
    value = codecs.encode_subscription(sub, fmt)
    assert codecs.decode_subscription(value) == sub
    if fmt == "avro":  # schema id 1 cannot hold them: the new schema's id
        assert struct.unpack(">bI", value[:5]) == (0, codecs.SCHEMA_IDS["subscription_v2"]) == (0, 7)


def test_plain_conjunctions_keep_schema_id_1_and_decode_under_both_ids():
    assert struct.unpack(">bI", codecs.encode_subscription(SUB)[:5]) == (0, 1)
    v2 = _avro("subscription_v2", {"subscriber": SUB.subscriber, "any": None, "valid_until": None, "valid_from": None,
                                   "predicates": [{"attribute": a, "operator": op, "value": v} for a, op, v in SUB.predicates]})
    assert codecs.decode_subscription(v2) == SUB


def test_the_json_forms_of_the_readme_are_accepted():
    sub = codecs.decode_subscription(b'{"subscriber": "alice", "any": [[["a", "=", 1], ["b", "<", 2]], '
                                     b'[["color", "in", ["red", "blue"]]]]}')
    assert sub.predicates == AnyOf([[("a", "=", 1), ("b", "<", 2)], [("color", "in", ["red", "blue"])]])
    sub = codecs.decode_subscription(b'{"subscriber": "bob", "predicates": [["price", "between", [5, 10]], '
                                     b'["title", "prefix", "harry"], ["promo", "exists", null]]}')
    assert sub.predicates == [("price", "between", [5, 10]), ("title", "prefix", "harry"), ("promo", "exists", None)]


V2_BAD = _avro("subscription_v2", {"subscriber": "a", "predicates": [{"attribute": "x", "operator": "in", "value": []}],
                                   "any": None, "valid_until": None, "valid_from": None})


@pytest.mark.parametrize(
    "value, reason",
    [
        (b'{"subscriber": "a", "predicates": [["a", "=", 1]], "any": [[["a", "=", 1]]]}', "exactly one of 'predicates'"),
        (b'{"subscriber": "a"}', "missing the field 'predicates' (or 'any', or 'rule')"),
        (b'{"subscriber": "a", "any": []}', "AnyOf needs at least one disjunct"),
        (b'{"subscriber": "a", "any": "a = 1"}', "'any' must be a list"),
        (b'{"subscriber": "a", "any": [[["a", "=", 1]], []]}', "disjunct 1: a subscription needs at least one predicate"),
        (b'{"subscriber": "a", "predicates": [["c", "in", [1, "x"]]]}', "predicate 0 ('c', 'in', ...): values of more than one kind"),
        (b'{"subscriber": "a", "predicates": [["c", "between", [9, 1]]]}', "lo 9 is above hi 1"),
        (b'{"subscriber": "a", "predicates": [["c", "prefix", ""]]}', "expected a non-empty string"),
        (b'{"subscriber": "a", "predicates": [["c", "in", [' + b"9" * 1200 + b"]]]}", "integer too large"),
        (V2_BAD, "the list of values is empty"),
    ],
)
def test_bad_operator_values_have_reasons(value, reason):
    with pytest.raises(DecodeError, match=re.escape(reason)):
        codecs.decode_subscription(value)


def test_nested_json_events_are_flattened_by_the_path_rule():
    value = (b'{"customer": {"address": {"country": "FR"}, "tags": ["vip", "new"]}, "items": [{"sku": "A", "qty": 2},'
             b' {"sku": "B"}], "note": null, "empty": [], "at": "10:30", "a.b": {"$c": 1}}')
    assert codecs.decode_event(value) == {
        "customer.address.country": "FR", "customer.tags": ["vip", "new"], "items.sku": ["A", "B"], "items.qty": 2,
        "at": "10:30", "a\\.b.\\$c": 1}
    assert codecs.decode_event(b'{"a": null, "b": []}') == {}

