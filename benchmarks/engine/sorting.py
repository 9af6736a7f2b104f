"""The per-event sort of matched ids: ``engine.kernels.sorting.sort_slice`` against numba's quicksort, by slice length.

    python -m benchmarks.engine.sorting
    python -m benchmarks.engine.sorting --lengths 33,48,72,140,1000 --spans 6000000,1099511627776 --events 20000

Each row sorts ``--events`` slices of ``n`` random ids in ``[-span/3, span)``
(the order an event's matches arrive in: scattered clusters) and reports
CPU nanoseconds per slice and per id, best of ``--repeat``.  Both kernels
are checked to give ``np.sort``'s result.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from fastpubsub.engine.kernels.sorting import sort_slice


@njit
def _quicksort_all(a, offsets):
    for e in range(offsets.shape[0] - 1):
        a[offsets[e]:offsets[e + 1]].sort()


@njit
def _sort_slice_all(a, offsets):
    for e in range(offsets.shape[0] - 1):
        sort_slice(a, offsets[e], offsets[e + 1])


def _best(kernel, base, offsets, repeat):
    a = base.copy()
    kernel(a, offsets)  # compile
    best = float("inf")
    for _ in range(repeat):
        a = base.copy()
        t0 = time.process_time()
        kernel(a, offsets)
        best = min(best, time.process_time() - t0)
    return best, a


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="8,33,48,72,140,1000")
    ap.add_argument("--spans", default="6000000,1099511627776")
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print("| ids per slice | span | quicksort ns / slice (per id) | sort_slice ns / slice (per id) | speed-up |")
    print("|---|---|---|---|---|")
    for n in map(int, args.lengths.split(",")):
        for span in map(int, args.spans.split(",")):
            events = max(1, args.events * 72 // max(n, 72))
            offsets = np.arange(events + 1, dtype=np.int64) * n
            base = rng.integers(-span // 3, span, size=events * n).astype(np.int64)
            want = np.sort(base.reshape(events, n), axis=1).ravel()
            t_q, a_q = _best(_quicksort_all, base, offsets, args.repeat)
            t_s, a_s = _best(_sort_slice_all, base, offsets, args.repeat)
            if not (np.array_equal(a_q, want) and np.array_equal(a_s, want)):
                raise SystemExit(f"wrong order at n={n}, span={span}")
            q, s = t_q / events * 1e9, t_s / events * 1e9
            print(f"| {n} | {span:,} | {q:,.0f} ({q / n:.1f}) | {s:,.0f} ({s / n:.1f}) | {q / s:.2f}x |")


if __name__ == "__main__":
    main()
