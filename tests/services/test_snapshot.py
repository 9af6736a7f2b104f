"""Snapshots: what is loaded matches what was written; anything doubtful is ignored (full rebuild)."""

from __future__ import annotations

import hashlib
import json
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.kafka_helpers import send
from tests.support.random_workload import random_events, random_subscriptions

from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.validity.event_store import ValidEventStore
from fastpubsub.services.events import snapshot
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription
from fastpubsub.services.events.subscriptions import SubscriptionState


def records(subs):
    return [(str(sid).encode(), codecs.encode_subscription(s, "avro" if sid % 2 else "json")) for sid, s in subs]


def a_state():
    subs = random_subscriptions(300, seed=51)
    subs = [(sid, Subscription(s.subscriber, s.predicates, valid_until=10_000 + sid if sid % 3 == 0 else None,
                               valid_from=sid if sid % 5 == 0 else None)) for sid, s in subs]
    state = SubscriptionState("dynamic")
    state.apply_many(records(subs))
    state.apply_many([(b"7", None), (b"8", codecs.encode_subscription(Subscription("zed", [("price", ">", 3)])))])
    state.expire(10_000 + 30)  # drops 0, 3, ..., 27 (and 30 when the time reaches it)
    return state


def a_store():
    store = ValidEventStore()
    events = random_events(50, seed=52)
    store.add(EventBatch.from_dicts(events), [f"k{e['n']}" for e in events], np.array([100 + e["n"] for e in events]),
              now=np.arange(50), payloads=[codecs.encode_event(e) for e in events])
    return store


def test_round_trip_keeps_subscriptions_validity_and_valid_events(tmp_path):
    state, store = a_state(), a_store()
    meta = snapshot.write(tmp_path, state, store, {0: 17, 3: 5}, partitions=4)
    assert meta["subscriptions"] == len(state) and meta["events"] == 50
    snap = snapshot.read(tmp_path, 4, "propagation", ValidEventStore())
    loaded = snap.state
    assert snap.offsets == {0: 17, 3: 5}
    assert loaded.subscribers == state.subscribers and loaded.stats() == state.stats()
    assert sorted(loaded.live_batch().to_lists()) == sorted(state.live_batch().to_lists())
    events = random_events(200, seed=53)
    assert [r.tolist() for r in loaded.matcher.match_batch(events)] == [r.tolist() for r in state.matcher.match_batch(events)]
    for sid in state.subscribers:
        for t in (0, 9, 10_020, 10_500):
            assert loaded.valid_at(sid, t) == state.valid_at(sid, t)
    assert loaded.expire(20_000) == state.expire(20_000) > 0
    new = records([(900, Subscription("x", [("price", ">=", 0)]))])
    want = store.match_bulk(SubscriptionState().apply_records(new).added)
    got = snap.store.match_bulk(loaded.apply_records(new).added)
    assert got.event_ids == want.event_ids and got.payloads == want.payloads and np.array_equal(got.times, want.times)


@pytest.mark.parametrize("damage, reason", [
    (lambda b: b[:-10], "truncated"),
    (lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], "checksum"),
    (lambda b: b"NOTASNAPSHOT" + b[12:], "not a snapshot"),
    (lambda b: b[:10] + (99).to_bytes(4, "big") + b[14:], "format version 99"),
    (lambda b: b"", "not a snapshot"),
])
def test_a_damaged_snapshot_is_refused_with_a_reason(tmp_path, damage, reason):
    snapshot.write(tmp_path, a_state(), a_store(), {0: 1}, partitions=4)
    path = snapshot.path_of(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(snapshot.SnapshotError, match=reason):
        snapshot.read(tmp_path, 4, "dynamic", ValidEventStore())


@pytest.mark.parametrize("array, reason", [
    (["subscriptions.ids", "<i8", [10**9], 0], "does not lie within the body"),  # more bytes than there are
    (["subscriptions.ids", "|O", [1], 0], "holds Python objects"),  # never read, whatever the bytes
])
def test_a_body_whose_header_places_an_array_outside_it_or_holds_objects_is_refused(tmp_path, array, reason):
    header = json.dumps({"meta": {"partitions": 4}, "arrays": [array]}).encode()
    body = struct.pack("<Q", len(header)) + header + bytes(64)
    snapshot.path_of(tmp_path).write_bytes(snapshot.MAGIC + snapshot._HEAD.pack(snapshot.VERSION, len(body),
                                                                                 hashlib.sha256(body).digest()) + body)
    with pytest.raises(snapshot.SnapshotError, match=reason):
        snapshot.read(tmp_path, 4, "dynamic", ValidEventStore())


def test_the_offsets_are_read_from_the_header_alone_so_that_the_readers_can_start_there_early(tmp_path):
    assert snapshot.offsets_of(tmp_path) == {}  # no snapshot: the readers start from the beginning
    snapshot.write(tmp_path, a_state(), a_store(), {0: 17, 3: 5}, partitions=4)
    path = snapshot.path_of(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-100])  # the body is not read: a damaged one is refused later, by read()
    assert snapshot.offsets_of(tmp_path) == {0: 17, 3: 5}
    path.write_bytes(data[:20])
    assert snapshot.offsets_of(tmp_path) == {}


def test_a_snapshot_for_another_partition_count_or_missing_is_refused(tmp_path):
    with pytest.raises(snapshot.SnapshotError, match="no snapshot"):
        snapshot.read(tmp_path, 4, "dynamic", ValidEventStore())
    snapshot.write(tmp_path, a_state(), a_store(), {0: 1}, partitions=4)
    with pytest.raises(snapshot.SnapshotError, match="4 partitions"):
        snapshot.read(tmp_path, 8, "dynamic", ValidEventStore())
    assert [p.name for p in tmp_path.iterdir()] == [snapshot.FILE_NAME]  # no temporary file left behind


@pytest.mark.broker
def test_restart_from_snapshot_replays_only_later_changes(bootstrap, group_id, start_processor, tmp_path, caplog):
    subs = random_subscriptions(400, seed=54)
    send(bootstrap, topics.SUBSCRIPTIONS, records(subs))
    first = start_processor(snapshot_dir=str(tmp_path))
    assert first.stop()["task"]["snapshots"] >= 1  # after the rebuild (and on stop if anything changed)
    later = [(str(sid).encode(), None) for sid in range(0, 400, 7)] + records(random_subscriptions(30, seed=55))
    send(bootstrap, topics.SUBSCRIPTIONS, later)  # removals, replacements of ids 0..29

    caplog.set_level("INFO", logger="pubsub")
    second = start_processor(snapshot_dir=str(tmp_path))
    assert any("snapshot loaded" in r.getMessage() for r in caplog.records)
    from_snapshot = second.state
    assert second.processor.task.rebuild_records == len(later)  # not the 400 before them
    second.stop()

    rebuilt = start_processor()  # no snapshot: from the topic alone
    assert rebuilt.state.subscribers == from_snapshot.subscribers
    assert sorted(rebuilt.state.live_batch().to_lists()) == sorted(from_snapshot.live_batch().to_lists())
    rebuilt.stop()

    snapshot.path_of(tmp_path).write_bytes(b"PUBSUBSNAP garbage")
    caplog.clear()
    third = start_processor(snapshot_dir=str(tmp_path))
    assert any("ignoring the snapshot" in r.getMessage() and "not a snapshot" in r.getMessage() for r in caplog.records)
    assert third.state.subscribers == from_snapshot.subscribers
    third.stop()
    snapshot.read(tmp_path, 4, "dynamic", ValidEventStore())  # the fallback wrote a good one again


# --- the built index in the snapshot (engine.structure) ------------------------------------------------------------


def matches(matcher, events):
    return [r.tolist() for r in matcher.match_batch(events)]


def test_a_restart_loads_the_built_index_and_it_keeps_matching_and_changing_like_a_bulk_load(tmp_path, caplog):
    state = a_state()
    snapshot.write(tmp_path, state, a_store(), {0: 1}, partitions=4)
    caplog.set_level("INFO", logger="pubsub")
    loaded = snapshot.read(tmp_path, 4, "dynamic", ValidEventStore()).state
    assert loaded.index_loaded and not caplog.records  # no bulk load, nothing to explain
    assert loaded.matcher.stats() == state.matcher.stats()  # the same clustering, not a re-clustering
    bulk = snapshot.read(tmp_path, 4, "static", ValidEventStore()).state  # another algorithm: bulk-loaded
    assert not bulk.index_loaded
    events = random_events(300, seed=56)
    assert matches(loaded.matcher, events) == matches(state.matcher, events) == matches(bulk.matcher, events)
    later = [(b"1", None), (b"2", None)] + records(random_subscriptions(360, seed=57)[300:])
    for s in (loaded, state, bulk):
        s.apply_many(later)
    assert matches(loaded.matcher, events) == matches(state.matcher, events) == matches(bulk.matcher, events)


@pytest.mark.parametrize("algorithm", ["counting", "propagation", "propagation-wp", "static", "dynamic"])
def test_every_algorithm_s_index_is_written_and_read_back(algorithm):
    from fastpubsub import engine
    from fastpubsub.engine import Matcher, structure

    matcher = Matcher(algorithm)
    for sid, s in random_subscriptions(200, seed=58):
        matcher.add(sid, s.predicates)
    copy = structure.load(structure.dump(matcher))
    events = random_events(200, seed=59)
    assert matches(copy, events) == matches(matcher, events)
    copy.remove(5), matcher.remove(5)
    assert matches(copy, events) == matches(matcher, events)


def test_an_index_of_another_engine_version_is_not_used(tmp_path, caplog, monkeypatch):
    from fastpubsub import engine
    from fastpubsub.engine import structure

    state = a_state()
    snapshot.write(tmp_path, state, a_store(), {0: 1}, partitions=4)
    monkeypatch.setattr(engine, "index_fingerprint", lambda: "0123456789abcdef")  # as if the engine had changed since
    caplog.set_level("INFO", logger="pubsub")
    loaded = snapshot.read(tmp_path, 4, "dynamic", ValidEventStore()).state
    assert not loaded.index_loaded
    assert any("another engine version" in r.getMessage() and "bulk-loading" in r.getMessage() for r in caplog.records)
    events = random_events(100, seed=60)
    assert matches(loaded.matcher, events) == matches(state.matcher, events)


@pytest.mark.parametrize("index, reason", [
    (lambda: __import__("pickle").dumps(__import__("os").getcwd), "does not name posix.getcwd"),
    (lambda: b"\x80\x05garbage", "not a matcher structure"),
    (lambda: __import__("pickle").dumps([1, 2]), "a list"),
])
def test_a_foreign_index_is_refused_and_the_columns_are_bulk_loaded(tmp_path, caplog, monkeypatch, index, reason):
    from fastpubsub import engine
    from fastpubsub.engine import structure

    with pytest.raises(structure.StructureError, match=reason):
        structure.load(index())  # nothing it names outside the engine and numpy's arrays is even looked up
    state = a_state()
    monkeypatch.setattr(engine, "dump_index", lambda matcher: index())
    snapshot.write(tmp_path, state, a_store(), {0: 1}, partitions=4)
    caplog.set_level("INFO", logger="pubsub")
    loaded = snapshot.read(tmp_path, 4, "dynamic", ValidEventStore()).state
    assert not loaded.index_loaded and any(reason in r.getMessage() for r in caplog.records)
    assert matches(loaded.matcher, random_events(100, seed=61)) == matches(state.matcher, random_events(100, seed=61))


def test_an_index_that_does_not_hold_the_snapshot_s_subscriptions_is_not_used(tmp_path, monkeypatch):
    from fastpubsub import engine
    from fastpubsub.engine import Matcher, structure

    other = Matcher("dynamic")
    other.add(1, [("price", "=", 1)])
    monkeypatch.setattr(engine, "dump_index", lambda matcher, dump=structure.dump: dump(other))
    state = a_state()
    snapshot.write(tmp_path, state, a_store(), {0: 1}, partitions=4)
    loaded = snapshot.read(tmp_path, 4, "dynamic", ValidEventStore()).state
    assert not loaded.index_loaded and len(loaded) == len(state)


def test_a_snapshot_read_ahead_on_a_thread_loads_and_is_checked_the_same(tmp_path):
    state = a_state()
    snapshot.write(tmp_path, state, a_store(), {0: 1}, partitions=4)
    loaded = snapshot.read(tmp_path, 4, "dynamic", ValidEventStore(), prefetched=snapshot.Prefetch(tmp_path)).state
    assert loaded.index_loaded and loaded.subscribers == state.subscribers
    path = snapshot.path_of(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:40] + bytes([data[40] ^ 1]) + data[41:])
    with pytest.raises(snapshot.SnapshotError, match="checksum"):
        snapshot.read(tmp_path, 4, "dynamic", ValidEventStore(), prefetched=snapshot.Prefetch(tmp_path))
    path.unlink()
    with pytest.raises(snapshot.SnapshotError, match="no snapshot"):
        snapshot.read(tmp_path, 4, "dynamic", ValidEventStore(), prefetched=snapshot.Prefetch(tmp_path))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=30), st.data())
def test_the_offsets_a_snapshot_records_only_move_on(records_and_passed, data):
    """Records and dead-lettered ("passed") records of one call may interleave in a partition: the snapshot's next
    offset per partition is one past the latest of either, never an earlier one."""
    from confluent_kafka import Message

    from fastpubsub.services.events.state import ProcessorState

    state = ProcessorState("dynamic")
    last: dict[int, int] = {}
    next_offset = {0: 0, 1: 0, 2: 0}
    for chunk in range(3):
        applied, passed = [], []
        for p, is_passed in data.draw(st.permutations(records_and_passed)):
            msg = Message(topic=topics.SUBSCRIPTIONS, partition=p, offset=next_offset[p], key=b"42", value=None)
            next_offset[p] += 1
            (passed if is_passed else applied).append(msg)
            last[p] = next_offset[p]
        state.apply_columns(applied, [m.key() for m in applied], [m.value() for m in applied], passed)
        assert state.offsets == last


def test_links_planted_in_the_snapshot_directory_are_neither_followed_nor_overwritten(tmp_path):
    """A writable ``--snapshot-dir`` shared with others: links at every name a predictable temporary file could
    have, and at the snapshot's own name, leave their targets as they were; the snapshot is written and loads."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"not yours")
    directory = tmp_path / "snapshots"
    directory.mkdir()
    target = snapshot.path_of(directory)
    for pid in range(os.getpid() - 64, os.getpid() + 64):  # a name from the writer's pid is predictable
        (directory / f".{target.name}.tmp-{pid}").symlink_to(victim)
    target.symlink_to(victim)
    state = a_state()
    snapshot.write(directory, state, a_store(), {0: 3}, partitions=4)
    assert victim.read_bytes() == b"not yours"
    assert not target.is_symlink()
    assert len(snapshot.read(directory, 4, "dynamic", ValidEventStore()).state) == len(state)
    assert not [p for p in directory.iterdir() if not p.is_symlink() and p != target]  # no temporary file left
