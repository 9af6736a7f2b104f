"""A load as a user makes it: N W0 subscriptions in chunks through the columnar API, then matching.

    python -m benchmarks.engine.chunked_load --n 1000000,10000000 --chunk 2000000

Each N runs in a fresh process: the kernels compiled on a small load, then
``generate_subscriptions(spec, chunk, first_id=...)`` and ``Matcher.add_bulk``
chunk after chunk (only ``add_bulk`` timed), the batch dropped after each.
Reported: subscriptions loaded per second, resident bytes per subscription
(``VmRSS`` growth over the load as the process reads it, and after returning
the heap's free pages, ``benchmarks.engine.algorithms.rss_bytes``), the engine's own
count (``stats()["memory_bytes"]``), and events per second of
``match_encoded`` on 20,000 W0 events after the load (best of 3 batches).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time


def one(n: int, chunk: int, algorithm: str) -> dict:
    """In this process: load ``n`` W0 subscriptions in chunks of ``chunk``, then match 20,000 W0 events."""
    from fastpubsub.engine import Matcher
    from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions

    from benchmarks.harness.memory import rss_bytes, status_kb

    spec = PRESETS["W0"]
    Matcher(algorithm).add_bulk(generate_subscriptions(spec, 20_000, seed=3))  # compile outside the measure
    events = generate_events(spec, 20_000, seed=7)
    m = Matcher(algorithm)
    gc.collect()
    before, raw_before, seconds = rss_bytes(), status_kb("VmRSS") * 1024, 0.0
    for first in range(0, n, chunk):
        batch = generate_subscriptions(spec, min(chunk, n - first), seed=1 + first, first_id=first)
        t0 = time.perf_counter()
        m.add_bulk(batch)
        seconds += time.perf_counter() - t0
        del batch
    gc.collect()
    raw = status_kb("VmRSS") * 1024 - raw_before  # what a user reads, free heap pages included
    resident = rss_bytes() - before
    engine = m.stats()["memory_bytes"]
    m.match_encoded(events)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        m.match_encoded(events)
        best = min(best, time.perf_counter() - t0)
    return {"algorithm": algorithm, "n": n, "chunk": chunk, "load_subs_per_s": round(n / seconds),
            "vmrss_bytes_per_sub": round(raw / n, 1),
            "rss_trimmed_bytes_per_sub": round(resident / n, 1), "engine_bytes_per_sub": round(engine / n, 1),
            "events_per_s": round(len(events) / best), "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg())}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine.chunked_load", description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1000000,10000000")
    ap.add_argument("--chunk", type=int, default=2_000_000)
    ap.add_argument("--algorithm", default="dynamic")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # n: the child process
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.chunk, args.algorithm)), flush=True)
        return
    for n in [int(x) for x in args.n.split(",")]:
        out = subprocess.run([sys.executable, "-m", "benchmarks.engine.chunked_load", "--one", str(n), "--chunk", str(args.chunk),
                              "--algorithm", args.algorithm], capture_output=True, text=True, check=True).stdout
        print(out.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
