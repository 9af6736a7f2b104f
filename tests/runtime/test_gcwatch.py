"""The collector's pauses are measured, and long-lived state is kept out of its full passes."""

from __future__ import annotations

import gc

import pytest

from fastpubsub.runtime.gcwatch import GcWatch, collector_paused, freeze_long_lived


def test_a_collection_is_counted_by_generation_while_watched_and_not_after():
    with GcWatch() as watch:
        gc.collect(0)
        gc.collect()
    assert watch.count[0] >= 1 and watch.count[2] >= 1
    assert watch.longest >= 0 and all(s >= 0 for s in watch.seconds)
    before = list(watch.count)
    gc.collect()
    assert watch.count == before  # removed from gc.callbacks on exit
    assert set(watch.stats()) == {"collections", "seconds", "longest_ms"}


def test_frozen_state_is_out_of_the_full_passes():
    held = [{"id": i} for i in range(10_000)]  # long-lived containers, as the subscriptions' state
    try:
        freeze_long_lived()
        assert gc.get_freeze_count() >= len(held)
        oldest = {id(o) for o in gc.get_objects(2)}  # what a full collection walks
        assert not any(id(h) in oldest for h in held)
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("enabled", [True, False])
def test_no_automatic_collection_runs_while_the_collector_is_paused_and_it_is_as_it_was_after(enabled):
    (gc.enable if enabled else gc.disable)()
    try:
        with collector_paused():
            assert not gc.isenabled()
            with GcWatch() as watch:
                cycles = [[] for _ in range(50_000)]
                for c in cycles:
                    c.append(c)  # containers enough to pass gen 0's threshold many times over
                del cycles
            assert watch.count == [0, 0, 0]
        assert gc.isenabled() == enabled
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("a failed restore")
        assert gc.isenabled() == enabled
    finally:
        gc.enable()
