"""The pipelined rebuild: chunks read and decoded on a thread, applied in order on the processor's.

``processor.handoff.Handoff`` must hand every chunk over once and in order,
raise the reader's failure in its place, and stop the reader when closed; and a
rebuild through the broker in many small chunks (replacements, removals and
re-additions of one id falling in different chunks) must end in the state a
record-by-record application gives, with the same counters.
"""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.kafka_helpers import dead_letters, send

from fastpubsub.runtime import inputs
from fastpubsub.services.events import processor as app
from fastpubsub.runtime.handoff import Handoff
from fastpubsub.services.events.subscriptions import SubscriptionState
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription


def _chunks(sizes: list[int], fail_at: int | None = None, log: list | None = None):
    def make(stopped):
        n = 0
        try:
            for i, size in enumerate(sizes):
                if i == fail_at:
                    raise RuntimeError(f"reader failed at chunk {i}")
                yield list(range(n, n + size))
                n += size
        finally:
            if log is not None:
                log.append("closed")
    return make


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(0, 20), max_size=30), depth=st.integers(1, 3), slow=st.booleans())
def test_every_chunk_is_handed_over_once_in_order(sizes, depth, slow):
    got = []
    with Handoff(_chunks(sizes), depth=depth) as ahead:
        for chunk in ahead:
            if slow:
                time.sleep(0.001)  # the consumer slower than the reader: the queue fills, nothing is dropped
            got.append(chunk)
    assert got == [list(range(sum(sizes[:i]), sum(sizes[:i + 1]))) for i in range(len(sizes))]


@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=10), data=st.data())
def test_a_failure_of_the_reader_is_raised_after_the_chunks_before_it(sizes, data):
    fail_at = data.draw(st.integers(0, len(sizes) - 1))
    log: list = []
    got = []
    with pytest.raises(RuntimeError, match=f"at chunk {fail_at}"):
        with Handoff(_chunks(sizes, fail_at, log)) as ahead:
            for chunk in ahead:
                got.append(chunk)
    assert len(got) == fail_at
    assert log == ["closed"]


def test_closing_stops_the_reader_and_runs_its_cleanup():
    log: list = []
    made = []

    def make(stopped):
        try:
            i = 0
            while not stopped():
                made.append(i)
                yield i
                i += 1
        finally:
            log.append("closed")

    ahead = Handoff(make, depth=2)
    first = next(iter(ahead))
    ahead.close()
    assert first == 0 and log == ["closed"]
    assert len(made) <= 4  # it stopped a few chunks ahead at most, not at the end of an endless source
    assert not any(t.name == "handoff" and t.is_alive() for t in threading.enumerate())


def test_a_reader_stuck_in_a_call_does_not_hang_close(caplog):
    release = threading.Event()

    def make(stopped):
        yield 0
        release.wait(10)  # a blocking call that never looks at stopped()
        yield 1

    ahead = Handoff(make, depth=1, name="stuck-reader")
    assert next(iter(ahead)) == 0
    t0 = time.monotonic()
    ahead.close(timeout=0.3)
    assert time.monotonic() - t0 < 5
    assert "left behind" in caplog.text
    release.set()


def test_the_consumer_is_kept_alive_while_it_waits():
    beats = []

    def make(stopped):
        time.sleep(0.3)
        yield "late"

    with Handoff(make, idle=lambda: beats.append(1), beat=0.05) as ahead:
        assert list(ahead) == ["late"]
    assert beats  # the heartbeat ran while nothing had come


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="depth must be at least 1"):
        Handoff(_chunks([1]), depth=0)


@pytest.mark.broker
def test_a_rebuild_in_many_chunks_equals_applying_record_by_record(bootstrap, group_id, start_processor, monkeypatch):
    """Ids are added, replaced, removed and re-added across chunk boundaries; a chunk lost, repeated or applied
    out of order would leave other subscriptions, subscribers or counters."""
    rng = random.Random(7)
    records: list[tuple[str, bytes | None]] = []
    for step in range(400):
        sid = rng.randrange(60)
        what = rng.random()
        if what < 0.15:
            records.append((str(sid), None))  # remove
        elif what < 0.2:
            records.append((str(sid), b'{"subscriber": "x", "predicates": [["a", "~", 1]]}'))  # invalid: removes
        else:
            sub = Subscription(f"user{step}", [("a", "<=", rng.randrange(10)), ("b", "=", rng.choice(["p", "q"]))])
            records.append((str(sid), codecs.encode_subscription(sub, rng.choice(["avro", "json"]))))
    send(bootstrap, topics.SUBSCRIPTIONS, records)

    expected = SubscriptionState()
    for key, value in records:  # one by one: the meaning of the topic
        try:
            expected.apply(key.encode(), value)
        except codecs.DecodeError:
            pass
    chunks = []

    class Counted(Handoff):
        def __iter__(self):
            for changes in super().__iter__():
                chunks.append([(m.partition(), m.offset()) for m in changes.records])
                yield changes

    monkeypatch.setattr(app, "REBUILD_CHUNK", 17)
    monkeypatch.setattr(inputs, "CHANGES_PER_POLL", 5)
    monkeypatch.setattr(app, "Handoff", Counted)
    p = start_processor()
    assert len(chunks) > 10
    handed = [r for chunk in chunks for r in chunk]
    for partition in range(4):  # each partition's records handed over once each, in their order, none missing
        offsets = [o for q, o in handed if q == partition]
        assert offsets == list(range(len(offsets)))
    assert len(handed) == len(records)
    state = p.state
    assert state.subscribers == expected.subscribers
    assert state.stats()["subscriptions"] == len(expected.subscribers)
    assert p.processor.task.rebuild_records == len(records)
    held = np.array(sorted(expected.subscribers), np.int64)
    assert all(sid in state.matcher for sid in held.tolist())
    assert not any(sid in state.matcher for sid in range(60) if sid not in expected.subscribers)
    assert sorted(state.live_batch().to_lists()) == sorted(expected.live_batch().to_lists())  # partitions interleave
    p.stop()
    invalid = sum(1 for _, v in records if v and v.startswith(b'{"subscriber": "x"'))
    assert len(dead_letters(bootstrap)) == invalid
