"""The reorder buffer of a repartition partition: within the grace, any arrival order releases the events sorted by
(timestamp, source partition, source offset); beyond it, events are reported late, never silently lost; repeats of
an aborted re-keying are recognised; the state survives a restore from its changes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.patterns.reorder import KEY_PREFIX, ReorderBuffer, event_id, event_name, split
from fastpubsub.state import KeyedStore


def sources(draw, n_parts: int, n: int) -> list[list[tuple[int, int, int]]]:
    """Per source partition, its events (ts, partition, offset) in offset order, timestamps increasing."""
    out = []
    for p in range(n_parts):
        ts, evs = 0, []
        for off in range(n):
            ts += draw(st.sampled_from([0, 1, 5, 20]))
            evs.append((ts, p, off))
        out.append(evs)
    return out


@st.composite
def interleavings(draw):
    """Source partitions interleaved in a random arrival order (as a re-keying reads them)."""
    parts = sources(draw, draw(st.integers(1, 3)), draw(st.integers(0, 25)))
    pos = [0] * len(parts)
    arrival = []
    while any(pos[p] < len(parts[p]) for p in range(len(parts))):
        p = draw(st.sampled_from([p for p in range(len(parts)) if pos[p] < len(parts[p])]))
        take = draw(st.integers(1, 6))
        arrival += parts[p][pos[p]: pos[p] + take]
        pos[p] += take
    return arrival


def disorder(arrival: list[tuple[int, int, int]]) -> int:
    """How far an event arrived behind the largest timestamp before it."""
    top, worst = None, 0
    for ts, _, _ in arrival:
        if top is not None:
            worst = max(worst, top - ts)
        top = ts if top is None else max(top, ts)
    return worst


def feed(buf: ReorderBuffer, arrival, cut: int | None = None) -> tuple[list, list]:
    released, late = [], []
    for k, (ts, p, off) in enumerate(arrival):
        verdict = buf.offer(ts, p, off, b"v%d" % off)
        if verdict == "late":
            late.append((ts, p, off))
        released += [(t, sp, so) for t, sp, so, _ in buf.release()]
    return released, late


@settings(max_examples=80, deadline=None)
@given(interleavings(), st.integers(0, 60))
def test_within_the_grace_the_release_order_is_the_event_time_order(arrival, grace):
    buf = ReorderBuffer(grace)
    released, late = feed(buf, arrival)
    if disorder(arrival) <= grace:
        assert late == []
        wm = buf.watermark()
        assert released == sorted(e for e in arrival if wm is not None and e[0] < wm)
    # whatever the disorder: every event is released once, held, or reported late; released in order
    held = len(buf)
    assert len(released) + len(late) + held == len(arrival)
    assert released == sorted(released) and len(set(released)) == len(released)
    assert all(t < buf.frontier for t, _, _ in late)


def test_a_late_event_is_reported_not_held():
    buf = ReorderBuffer(10)
    assert buf.offer(100, 0, 0, b"a") == "held"
    assert buf.offer(200, 1, 0, b"b") == "held"
    assert [e[:3] for e in buf.release()] == [(100, 0, 0)]  # the watermark is 190
    assert buf.offer(150, 0, 1, b"c") == "late"
    assert buf.offer(195, 0, 2, b"d") == "held"
    assert len(buf) == 2


def test_a_repeated_source_record_is_dropped():
    buf = ReorderBuffer(10)
    assert [buf.offer(5, 0, o, b"") for o in (0, 1, 2)] == ["held"] * 3
    assert buf.offer(5, 0, 1, b"") == "repeat"  # an aborted re-keying wrote it once already
    assert buf.offer(5, 1, 1, b"") == "held"  # another source partition: its own offsets


@settings(max_examples=40, deadline=None)
@given(interleavings(), st.integers(0, 30), st.data())
def test_restored_from_its_changes_it_continues_as_if_never_stopped(arrival, grace, data):
    cut = data.draw(st.integers(0, len(arrival)))
    whole = ReorderBuffer(grace)
    expected, _ = feed(whole, arrival)
    first = ReorderBuffer(grace)
    before, _ = feed(first, arrival[:cut])
    store = KeyedStore()
    store.apply(first.changes(tag=0), 1)
    rest, mine = split(store)
    assert not rest.data and all(k.startswith(KEY_PREFIX) for k in mine.data)
    second = ReorderBuffer(grace)
    second.restore(mine)
    after, _ = feed(second, arrival[cut:])
    assert before + after == expected
    assert len(second) == len(whole)


def test_event_ids_name_their_source_position():
    assert event_name(event_id(3, 12345)) == (3, 12345)
    assert event_id(0, 7) < event_id(1, 0)
