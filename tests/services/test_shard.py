"""Sharding by subscription id: a fixed hash, one owner per id, and shards whose union is the unsharded state."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.random_workload import random_events, random_subscriptions

from fastpubsub.engine.validity.event_store import ValidEventStore
from fastpubsub.services.events import snapshot
from fastpubsub.services.events.shard import Shard, shard_of
from fastpubsub.services.events.subscriptions import SubscriptionState, parse_subscription_id
from fastpubsub.wire import codecs
from fastpubsub.wire.codecs import Subscription

ids = st.integers(-(2**63), 2**63 - 1)


def crc32_reference(data: bytes) -> int:
    """CRC-32 (ISO-HDLC, reflected polynomial 0xEDB88320), bit by bit: what any language's crc32 computes."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_the_hash_is_pinned():
    """The owner of an id must never change between processes or versions: these values are part of the format."""
    pinned = {0: (1, 2, 1), 1: (1, 2, 7), 42: (0, 2, 8), -7: (1, 2, 15), 2**63 - 1: (0, 1, 14), -(2**63): (1, 1, 11)}
    assert {sid: tuple(shard_of(sid, k) for k in (2, 3, 16)) for sid in pinned} == pinned


@given(ids, st.integers(1, 64))
def test_the_hash_is_crc32_of_the_decimal_id(sid, count):
    assert shard_of(sid, count) == crc32_reference(str(sid).encode("utf-8")) % count


@given(ids, st.integers(1, 64))
def test_every_id_has_exactly_one_shard(sid, count):
    assert [Shard(i, count).owns(sid) for i in range(count)].count(True) == 1


@pytest.mark.parametrize("key", [b"42", b"042", b"+42", b"0042"])
def test_spellings_of_one_id_go_to_one_shard(key):
    assert shard_of(parse_subscription_id(key), 5) == shard_of(42, 5)


def test_ids_spread_evenly():
    counts = [0] * 4
    for sid in range(100_000):
        counts[shard_of(sid, 4)] += 1
    assert counts == [24_999, 25_001, 24_999, 25_001]  # as docs/processor.md says


@pytest.mark.parametrize("text, message", [
    ("3/2", "shard index must be below the shard count: 3/2"),
    ("2/2", "shard index must be below the shard count"),
    ("-1/2", "shard index must be 0 or more"),
    ("0/0", "shard count must be between 1 and 4096"),
    ("0/5000", "shard count must be between 1 and 4096"),
    ("1", "shard must be I/K"), ("a/b", "shard must be I/K"), ("", "shard must be I/K"), ("1/2/3", "shard must be I/K"),
])
def test_bad_shards_are_refused_with_a_reason(text, message):
    with pytest.raises(ValueError, match=message):
        Shard.parse(text)


def test_shard_names():
    assert Shard.parse(" 1 / 3 ") == Shard(1, 3) and str(Shard(1, 3)) == "1/3"
    assert Shard(1, 3).group("pubsub-processor") == "pubsub-processor.shard-1-of-3"
    assert Shard(0, 1).group("pubsub-processor") == "pubsub-processor" and not Shard(0, 1).sharded


def encoded(sid: int, s: Subscription) -> tuple[bytes, bytes]:
    return str(sid).encode(), codecs.encode_subscription(s, "avro" if sid % 2 else "json")


def a_history(seed: int) -> list[tuple[bytes | None, bytes | None]]:
    """Adds, replacements (same id, other predicates), removals, bad values and bad keys, interleaved."""
    rng = random.Random(seed)
    subs = random_subscriptions(400, seed=seed)
    others = random_subscriptions(400, seed=seed + 1)
    records = [encoded(sid, s) for sid, s in subs]
    for sid, s in rng.sample(others, 150):
        records.append(encoded(sid, s))  # a replacement: same id, so same shard
    for sid, _ in rng.sample(subs, 100):
        records.append((str(sid).encode(), None))
    records += [(b"17", b"{not json"), (b"abc", records[0][1]), (None, records[0][1])]
    return records


@pytest.mark.parametrize("count", [2, 3])
def test_the_shards_together_hold_what_one_unsharded_state_holds(count):
    history = a_history(3)
    whole = SubscriptionState()
    whole_errors = whole.apply_many(history)
    shards = [SubscriptionState(shard=Shard(i, count)) for i in range(count)]
    errors = [s.apply_many(history) for s in shards]
    assert sum(len(s) for s in shards) == len(whole) and len(whole) > 0
    assert all(len(s) < len(whole) for s in shards)
    merged = {}
    for s in shards:
        assert all(Shard(shards.index(s), count).owns(sid) for sid in s.subscribers)
        merged.update(s.subscribers)
    assert merged == whole.subscribers
    # each bad record is reported by exactly one shard: the id's owner, or shard 0 for a key that is no id
    assert sorted(i for e in errors for i, _ in e) == sorted(i for i, _ in whole_errors)
    assert [i for i, _ in errors[0] if history[i][0] in (b"abc", None)] == [len(history) - 2, len(history) - 1]
    for event in random_events(300, seed=4):
        together = sorted(sid for s in shards for sid in s.matcher.match(event).tolist())
        assert together == sorted(whole.matcher.match(event).tolist())


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.booleans(), st.integers(0, 5)), max_size=60), st.integers(2, 4))
def test_any_sequence_of_changes_splits_exactly(changes, count):
    """Adds, replaces and deletes of random ids: the shards' matches are the unsharded matches, partitioned."""
    records = [(str(sid).encode(), None if delete else codecs.encode_subscription(Subscription(f"s{sid}", [("a", "=", v)])))
               for sid, delete, v in changes]
    whole = SubscriptionState()
    whole.apply_many(records)
    shards = [SubscriptionState(shard=Shard(i, count)) for i in range(count)]
    for s in shards:
        s.apply_many(records)
    for v in range(6):
        parts = [s.matcher.match({"a": v}).tolist() for s in shards]
        assert sorted(x for p in parts for x in p) == sorted(whole.matcher.match({"a": v}).tolist())


def test_a_snapshot_is_loaded_only_by_its_own_shard(tmp_path):
    state = SubscriptionState(shard=Shard(0, 2))
    state.apply_many(a_history(5))
    meta = snapshot.write(tmp_path, state, ValidEventStore(), {0: 3}, 4, Shard(0, 2))
    assert snapshot.path_of(tmp_path, Shard(0, 2)).name == "processor.shard-0-of-2.snapshot"
    assert not snapshot.path_of(tmp_path).exists()  # shards and an unsharded processor may share a directory
    assert meta["shard"] == [0, 2]
    loaded = snapshot.read(tmp_path, 4, "dynamic", ValidEventStore(), shard=Shard(0, 2)).state
    assert loaded.subscribers == state.subscribers and loaded.shard == Shard(0, 2)
    with pytest.raises(snapshot.SnapshotError, match="no snapshot"):
        snapshot.read(tmp_path, 4, "dynamic", ValidEventStore(), shard=Shard(1, 2))
    # renamed over another shard's (or another count's, or the unsharded) file, it is still refused
    for other in (Shard(1, 2), Shard(0, 3), Shard(0, 1)):
        snapshot.path_of(tmp_path, Shard(0, 2)).rename(snapshot.path_of(tmp_path, other))
        with pytest.raises(snapshot.SnapshotError, match=f"is of shard 0/2, this processor is shard {other}"):
            snapshot.read(tmp_path, 4, "dynamic", ValidEventStore(), shard=other)
        snapshot.path_of(tmp_path, other).rename(snapshot.path_of(tmp_path, Shard(0, 2)))


def test_an_unsharded_snapshot_is_not_loaded_by_a_shard(tmp_path):
    state = SubscriptionState()
    state.apply_many(a_history(6))
    snapshot.write(tmp_path, state, ValidEventStore(), {}, 4)
    snapshot.path_of(tmp_path).rename(snapshot.path_of(tmp_path, Shard(1, 2)))
    with pytest.raises(snapshot.SnapshotError, match="is of shard 0/1, this processor is shard 1/2"):
        snapshot.read(tmp_path, 4, "dynamic", ValidEventStore(), shard=Shard(1, 2))
