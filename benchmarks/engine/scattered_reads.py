"""The machine's floor for scattered reads: random int32 gathers from an array far larger than the caches.

    python -m benchmarks.engine.scattered_reads                    # 600 MB array, 2M reads, prefetch distances 0..64

A numba loop sums ``a[idx[i]]`` over random ``idx``, prefetching
``a[idx[i + D]]`` with the engine's own prefetch intrinsic.  The time per
read is what a cache miss costs when many are independent (the CPU
overlaps them), the lower bound for the run checks of
``engine.kernels.run_lookups.stage_runs`` (docs/benchmarks.md, "How does it scale with the number of subscriptions?").
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from fastpubsub.engine.kernels.scan import prefetch


@njit(cache=True)
def gather(a, idx, distance):
    total = 0
    n = idx.shape[0]
    for i in range(n):
        if distance > 0 and i + distance < n:
            prefetch(a, idx[i + distance])
        total += a[idx[i]]
    return total


def measure(mbytes: int, reads: int, distances: list[int], seed: int = 0) -> list[dict]:
    a = np.ones(mbytes * (1 << 20) // 4, dtype=np.int32)
    idx = np.random.default_rng(seed).integers(0, len(a), reads)
    rows = []
    for d in distances:
        gather(a, idx[:100], d)  # compile
        t = time.perf_counter()
        gather(a, idx, d)
        rows.append({"distance": d, "ns_per_read": round((time.perf_counter() - t) / reads * 1e9, 1)})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine.scattered_reads", description=__doc__.splitlines()[0])
    ap.add_argument("--mbytes", type=int, default=600, help="array size in MB")
    ap.add_argument("--reads", type=int, default=2_000_000)
    ap.add_argument("--distances", default="0,4,8,16,32,64", help="prefetch distances, in reads")
    args = ap.parse_args(argv)
    print("| prefetch distance | ns per read |")
    print("|---|---|")
    for r in measure(args.mbytes, args.reads, [int(x) for x in args.distances.split(",")]):
        print(f"| {r['distance']} | {r['ns_per_read']} |", flush=True)


if __name__ == "__main__":
    main()
