"""Subscription changes taken as columns: the rebuild's path and the record-by-record one agree."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message

from fastpubsub.processor.app import _plain_columns


def record(i: int, key: bytes | None = b"1", value: bytes | None = b"v", error: KafkaError | None = None) -> Message:
    return Message(topic="pubsub.subscriptions", partition=0, offset=i, key=key, value=value, error=error)


def test_plain_records_give_their_keys_and_values_in_order():
    msgs = [record(0, b"7", b"abc"), record(1, b"8", None), record(2, b"9", b"")]  # a tombstone, an empty value
    assert _plain_columns(msgs, 1000) == ([b"7", b"8", b"9"], [b"abc", None, b""])


def test_an_error_or_a_record_over_the_limit_goes_record_by_record():
    eof = record(3, None, None, KafkaError(KafkaError._PARTITION_EOF))
    assert _plain_columns([record(0), eof], 1000) is None
    assert _plain_columns([record(0, b"12", b"x" * 98)], 100) == ([b"12"], [b"x" * 98])  # exactly the limit
    assert _plain_columns([record(0, b"12", b"x" * 99)], 100) is None


def test_the_largest_key_and_the_largest_value_together_decide_conservatively():
    """Two records each within the limit, but the largest key plus the largest value is not: the record-by-record
    path decides (it takes both)."""
    msgs = [record(0, b"k" * 60, b"v"), record(1, b"1", b"v" * 60)]
    assert _plain_columns(msgs, 100) is None


def test_nothing_is_plain_columns_of_nothing():
    assert _plain_columns([], 100) == ([], [])
