"""Matching time per event under churn: the equilibrium's tick without the experiment around it.

Loads N subscriptions of a workload into ``Matcher("dynamic")``, then per
tick removes the 50 oldest, adds 50 new and matches 200 events; prints the
median tick's matching time per event (all ticks, the first and the last
100).  Quicker than ``benchmarks.figures.equilibrium`` for comparing two versions of the
kernels on the same churned state::

    python -m benchmarks.engine.churn --workload W3 --n 1000000 --ticks 600 [--runs 64]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions


def churn(workload: str, n: int, ticks: int, runs: int = 0, per_tick: int = 50, events: int = 200) -> dict:
    spec = PRESETS[workload]
    m = Matcher("dynamic", runs=runs)
    m.add_bulk(generate_subscriptions(spec, n, seed=1))
    batches = [generate_events(spec, events, seed=100 + i) for i in range(50)]
    m.match_encoded(batches[0])
    per_event = []
    for t in range(ticks):
        m.remove_bulk(np.arange(t * per_tick, (t + 1) * per_tick, dtype=np.int64))
        m.add_bulk(generate_subscriptions(spec, per_tick, seed=10_000 + t, first_id=n + t * per_tick))
        start = time.perf_counter()
        m.match_encoded(batches[t % len(batches)])
        per_event.append((time.perf_counter() - start) / events * 1e6)
    return {"workload": workload, "n": n, "ticks": ticks, "runs": runs,
            "median_us_per_event": round(float(np.median(per_event)), 2),
            "first_100": round(float(np.median(per_event[:100])), 2),
            "last_100": round(float(np.median(per_event[-100:])), 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="W3", choices=sorted(PRESETS))
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--ticks", type=int, default=600)
    ap.add_argument("--runs", type=int, default=0, help="sorted-run threshold (0: plain clusters, the default)")
    args = ap.parse_args(argv)
    if args.n < 50 * args.ticks:
        ap.error("--n must hold at least 50 subscriptions per tick")
    print(churn(args.workload, args.n, args.ticks, args.runs))


if __name__ == "__main__":
    main()
