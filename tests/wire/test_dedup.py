"""De-duplication by notification_id in bounded memory (fastpubsub.wire.dedup)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastpubsub.wire.dedup import Deduplicator, deduplicate


def first_occurrences(ids):
    seen, out = set(), []
    for i in ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


@given(st.lists(st.sampled_from([f"e{e}/{s}" for e in range(8) for s in range(4)]), max_size=200))
def test_with_room_for_every_id_exactly_the_first_occurrences_remain(ids):
    notes = [{"notification_id": i, "n": k} for k, i in enumerate(ids)]
    kept = deduplicate(notes, capacity=1000)
    assert [n["notification_id"] for n in kept] == first_occurrences(ids)
    assert [n["n"] for n in kept] == sorted(n["n"] for n in kept)  # order kept


@given(st.lists(st.integers(0, 30).map(str), max_size=300), st.integers(1, 12))
def test_a_small_capacity_never_drops_an_id_it_has_not_seen(ids, capacity):
    d, before = Deduplicator(capacity), set()
    for i in ids:
        if d.seen(i):
            assert i in before  # only ever drops a real repeat
        before.add(i)
        assert len(d) <= capacity
    assert d.passed + d.dropped == len(ids) and d.passed >= len(before)


def test_duplicates_within_the_window_are_dropped_beyond_it_they_pass():
    d = Deduplicator(capacity=3)
    assert [d.seen(i) for i in ["a", "b", "a", "c", "d"]] == [False, False, True, False, False]
    # "a" was refreshed by its repeat, so "b" is the oldest and was forgotten when "d" came
    assert [d.seen(i) for i in ["a", "b"]] == [True, False]
    assert (d.passed, d.dropped, len(d)) == (5, 2, 3)


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        Deduplicator(0)
