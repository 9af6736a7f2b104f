"""Timing on a shared machine: compile first, then the best of several passes, the contenders taken in turn.

The development machine is shared, so the least disturbed pass (the minimum)
is the figure; matchers compared with each other are timed round by round, one
pass of each in turn, so that a slow spell hits them all rather than one.
numba compiles a kernel on its first call: :func:`warm_up` makes those calls
before anything is timed.
"""

from __future__ import annotations

import time

from fastpubsub.engine import Matcher
from fastpubsub.workloads.fabret import W0, WorkloadSpec, generate_subscriptions


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def warm_up(algorithm: str, events, spec: WorkloadSpec = W0, **scan_options) -> None:
    """Compile (or load from numba's cache) every kernel the measured run will use: two chunks of 100,000, so
    that the maintenance rounds (every ``refresh_changes``), a load into a filled matcher and the arena's
    compaction (past 2**20 ints) run too, not only during the timed load."""
    m = Matcher(algorithm, **scan_options)
    for k in range(2):
        m.add_bulk(generate_subscriptions(spec, n=100_000, seed=99 + k, first_id=100_000 * k))
    m.match_encoded(events)
    m.match_batch(events.to_dicts()[:10])


def best_passes(ms: list[Matcher], events, dicts, repeat: int) -> list[tuple[float, float | None, int]]:
    """Per matcher: its best ``match_encoded`` seconds, best ``match_batch`` seconds (None without ``dicts``) and
    matches, over ``repeat`` rounds that each time one pass of every matcher in turn, so that a slow spell of the
    shared machine hits them all rather than one.  Dicts and encoded events must give the same matches."""
    best = [[float("inf"), None, 0] for _ in ms]
    for _ in range(repeat):
        for b, m in zip(best, ms):
            t = time.perf_counter()
            res = m.match_encoded(events)
            b[0] = min(b[0], time.perf_counter() - t)
            b[2] = len(res.ids)
            if dicts is not None:
                t = time.perf_counter()
                lists = m.match_batch(dicts)
                t_dict = time.perf_counter() - t
                b[1] = t_dict if b[1] is None else min(b[1], t_dict)
                assert [x.tolist() for x in lists] == [x.tolist() for x in res.split()]
    return [tuple(b) for b in best]
