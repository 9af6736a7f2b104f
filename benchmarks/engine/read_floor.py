"""What reading the runs an event finds costs on this machine, with nothing else done: the floor under matching at 100M.

At 100M W0 subscriptions an event finds about 30 runs of about 78 entries,
scattered over an arena of about 2.6 GiB (docs/benchmarks.md, "How does it
scale").  This times only the reads: per event, ``--runs`` runs at random
places in an int32 arena of ``--arena-gib``, each read whole (``--entries``
consecutive int32: one column of the run), with the run ``--ahead`` places on
prefetched as the matching kernels do, and no test, no bit vector, no result.
Whatever the matcher does on top costs more, so the events/s here bound what
any kernel reading that much per run can reach.

    python -m benchmarks.engine.read_floor                      # 2.6 GiB, 30 runs of 78, 32, 16, 4 entries
    python -m benchmarks.engine.read_floor --entries 78 --ahead 0,2,4,8
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from numba import njit

from fastpubsub.engine.kernels.prefetch import prefetch


@njit(cache=True)
def _read_runs(arena, starts, entries, ahead):
    """Sum of ``entries`` int32 from each start (so that nothing is optimised away), run ``i + ahead`` prefetched."""
    acc = 0
    n = starts.shape[0]
    for i in range(n):
        if ahead > 0 and i + ahead < n:
            s = starts[i + ahead]
            for b in range(0, entries, 16):  # one prefetch per 64-byte line
                prefetch(arena, s + b)
        s = starts[i]
        for j in range(entries):
            acc += arena[s + j]
    return acc


def floor(arena: np.ndarray, events: int, runs: int, entries: int, ahead: int, repeat: int, seed: int = 1) -> dict:
    starts = np.random.default_rng(seed).integers(0, len(arena) - entries, size=events * runs).astype(np.int64)
    _read_runs(arena, starts[:runs], entries, ahead)  # compiled outside the timing
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        total = _read_runs(arena, starts, entries, ahead)
        best = min(best, time.perf_counter() - t)
    assert total == len(starts) * entries  # the arena holds ones: every entry was read
    return {"arena_gib": round(arena.nbytes / 2**30, 2), "runs_per_event": runs, "entries_per_run": entries,
            "ahead": ahead, "events": events, "events_per_s": round(events / best), "ns_per_run": round(best / len(starts) * 1e9, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine.read_floor", description=__doc__.splitlines()[0])
    ap.add_argument("--arena-gib", type=float, default=2.6, help="size of the int32 arena (100M W0: about 2.6)")
    ap.add_argument("--runs", type=int, default=30, help="runs an event finds (100M W0: about 30)")
    ap.add_argument("--entries", default="78,32,16,4", help="entries read per run, comma-separated")
    ap.add_argument("--ahead", default="0,4", help="runs prefetched ahead, comma-separated (0: none)")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    arena = np.ones(int(args.arena_gib * 2**30) // 4, dtype=np.int32)
    rows = []
    print(f"load average {os.getloadavg()[0]:.2f}")
    for entries in (int(x) for x in args.entries.split(",")):
        for ahead in (int(x) for x in args.ahead.split(",")):
            row = floor(arena, args.events, args.runs, entries, ahead, args.repeat)
            rows.append(row)
            print(f"{row['runs_per_event']} runs of {entries:3d} entries, {ahead} ahead: "
                  f"{row['events_per_s']:>11,} events/s ({row['ns_per_run']} ns a run)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_average": os.getloadavg()[0], "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
