"""The collector's pauses are measured, and long-lived state is kept out of its full passes."""

from __future__ import annotations

import gc

from fastpubsub.runtime.gcwatch import GcWatch, freeze_long_lived


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
