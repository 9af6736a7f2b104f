"""The decode stage: its few-C-calls path for plain batches gives what the record-by-record path gives."""

from __future__ import annotations

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.runtime.checkpoint import Checkpoint, next_offsets
from fastpubsub.runtime.counters import PipelineCounters
from fastpubsub.services.events.decode import Decode
from fastpubsub.wire.codecs import encode_event

GOOD = [encode_event({"price": i, "movie": "rex"}, "avro") for i in range(5)] + [encode_event({"a": 1}, "json")]
#: records the plain path must leave to the record-by-record one (or decode the same way)
ODD = {
    "no key": dict(key=None),
    "key not UTF-8": dict(key=b"\xff\xfe"),
    "valid_until header": dict(headers=[("valid_until", b"99")]),
    "bad valid_until": dict(headers=[("valid_until", b"soon")]),
    "no value": dict(value=None),
    "bad value": dict(value=b"\x00\x00\x00\x00\x02\x99"),
    "no timestamp": dict(timestamp=(TIMESTAMP_NOT_AVAILABLE, 0)),
    "too large": dict(value=encode_event({"s": "x" * 3000}, "avro")),
}


def message(i: int, odd: str | None, value: int) -> Message:
    fields = dict(topic="pubsub.events", partition=i % 3, offset=100 + i, key=f"e{i}".encode(), value=GOOD[value],
                  headers=None, timestamp=(TIMESTAMP_CREATE_TIME, 1_000 + i))
    fields.update(ODD.get(odd, {}))
    return Message(**fields)


def summary(batch):
    times = [t if t < 1_000_000 else "now" for t in batch.times]  # a record without a timestamp: the clock's time
    return ([m.offset() for m in batch.records], batch.ids, batch.valid_until, batch.decoded.rows.tolist(), times,
            [(m.offset(), reason) for m, reason in batch.rejects])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None] * 8 + sorted(ODD)), st.integers(0, len(GOOD) - 1)), min_size=1,
                max_size=30), st.booleans())
def test_a_batch_decodes_the_same_whichever_path_takes_it(records, reports):
    """The host screens out records too large (``runtime.checkpoint``); the rest decode alike on both paths."""
    decode = Decode(PipelineCounters(), reports_bad_input=reports)
    msgs = [message(i, odd, v) for i, (odd, v) in enumerate(records)]
    kept, rejects = Checkpoint(100).screen(msgs, 2048, report_oversized=reports)
    large = [m.offset() for (odd, _), m in zip(records, msgs) if odd == "too large"]
    assert [m.offset() for m, _ in rejects] == (large if reports else [])
    assert [m.offset() for m in kept] == [m.offset() for (odd, _), m in zip(records, msgs) if odd != "too large"]
    if kept:
        assert summary(decode(kept)) == summary(decode._each(kept))
    if all(odd is None for odd, _ in records):
        assert decode._plain(msgs) is not None and not rejects  # the common batch takes the short path


def test_a_refused_record_is_screened_out_with_its_reason():
    cp = Checkpoint(100)
    msgs = [message(i, None, 0) for i in range(4)]
    assert cp.screen(msgs, 2048) == (msgs, [])
    cp.refused[("pubsub.events", 1, 101)] = "output refused by the broker: too large"
    kept, rejects = cp.screen(msgs, 2048)
    assert [m.offset() for m in kept] == [100, 102, 103]
    assert [(m.offset(), reason) for m, reason in rejects] == [(101, "output refused by the broker: too large")]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=200))
def test_a_batch_moves_each_partition_past_its_last_record(partitions):
    """Every record read, good or bad, moves its partition's next offset (the host commits these)."""
    msgs = [Message(topic="pubsub.events", partition=p, offset=100 + i, key=b"k", value=b"v")
            for i, p in enumerate(partitions)]
    expected = {}
    for m in msgs:
        expected[(m.topic(), m.partition())] = m.offset() + 1
    assert next_offsets(msgs) == expected


def test_events_are_decoded_for_the_referenced_attributes_only_unless_kept_for_later():
    """JSON and native Avro alike: the matcher gets the pairs of the names subscriptions reference; an event
    carrying ``valid_until`` (stored for subscriptions yet to come) keeps all of them."""
    values = [encode_event({"price": 3, "movie": "rex", "extra": "x"}, "avro"), b'{"price": 4, "c": {"d": 1, "e": "y"}}']
    decode = Decode(PipelineCounters(), referenced=lambda: frozenset({"price", "c.d"}))
    plain = [Message(topic="pubsub.events", partition=0, offset=i, key=b"e%d" % i, value=v, headers=None,
                     timestamp=(TIMESTAMP_CREATE_TIME, 1_000)) for i, v in enumerate(values)]
    assert decode(plain).decoded.event_batch().to_dicts() == [{"price": 3}, {"price": 4, "c.d": 1}]
    kept = [Message(**{**dict(topic="pubsub.events", partition=0, offset=9, key=b"e9", value=values[1],
                              timestamp=(TIMESTAMP_CREATE_TIME, 1_000)), "headers": [("valid_until", b"5000")]})]
    assert decode(kept).decoded.event_batch().to_dicts() == [{"price": 4, "c.d": 1, "c.e": "y"}]
