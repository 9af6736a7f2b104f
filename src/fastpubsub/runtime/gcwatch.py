"""The cyclic garbage collector's pauses, and keeping the subscriptions out of its full passes.

A full collection walks every container the interpreter tracks; with a
million subscriptions held (the subscriber of each id, the matcher's parts)
one is a pause of the whole loop that lands on whichever event batch is in
hand.  After the start (and after
each snapshot) the processor collects once and freezes what survived
(``gc.freeze``): long-lived state moves to the permanent generation, which
collections skip, and the batches' short-lived objects are collected as
before.  ``GcWatch`` measures the pauses by generation (``gc.callbacks``), so
the final statistics show what collections still cost.

What is frozen is never collected again: a stopped service's objects, which
refer to each other in cycles, stay in a process that goes on.  So whatever
holds a thread or a connection (a Kafka client) is closed explicitly when
the service stops, never left for the collector to free.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import Iterator


def freeze_long_lived() -> None:
    """Collect once, then move every surviving object out of the collector's passes."""
    gc.collect()
    gc.freeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection inside (as it was after).  A restore allocates millions of objects that
    reference counting frees (a rebuild's records, a chunk at a time) or that stay: the collector's full passes
    over them, one every few chunks, find nothing and hold the GIL while the rebuild's reading and loading threads
    wait.  The start collects once after it (:func:`freeze_long_lived`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class GcWatch:
    """Seconds and number of collections by generation while installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self.longest = 0.0
        self._began = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        took = time.perf_counter() - self._began
        generation = info.get("generation", 2)
        self.seconds[generation] += took
        self.count[generation] += 1
        self.longest = max(self.longest, took)

    def __enter__(self) -> "GcWatch":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def stats(self) -> dict:
        return {"collections": list(self.count), "seconds": [round(s, 3) for s in self.seconds],
                "longest_ms": round(self.longest * 1000, 1)}
