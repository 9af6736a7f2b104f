"""The maintenance's tail merging on and off, in one process: bulk load, churn, matching.

    python -m benchmarks.engine.tails --workload W0 --n 1000000 --repeat 5
    python -m benchmarks.engine.tails --workload W6 --n 200000 --ticks 4000

Two ``Matcher("dynamic")`` are loaded with the same subscriptions; in one the
maintenance rounds merge the hot lists' unsorted tails into their runs (the
engine's behaviour, docs/design/clustering.md "Runs"), in the other that step is
switched off.  ``--ticks`` then runs that many equilibrium ticks on both (50
oldest subscriptions deleted, 50 new inserted, 200 events matched).  Both
match the same event batches in turn, alternating the order, ``--repeat``
passes; a batch's time is its best pass, the figure the median batch.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions


def tails(m: Matcher) -> int:
    """Entries waiting in the unsorted tails of clusters with runs."""
    st = m.index.store
    top = st.ids.high
    runs = (st.c_k[:top] >= 1) & (st.c_len[:top] >= max(st.run_min, 1))
    return int(np.sum(st.c_len[:top][runs] - st.c_sorted[:top][runs]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="W0", choices=sorted(PRESETS))
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--ticks", type=int, default=0, help="equilibrium ticks after the load (50 changes each)")
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    spec = PRESETS[args.workload]
    load0 = os.getloadavg()[0]
    warm = Matcher("dynamic")  # numba compilation is in no figure
    warm.add_bulk(generate_subscriptions(spec, 5000, seed=[1, 0]))
    warm.index.sort_tails(warm.index.live_keys())
    warm.match_encoded(generate_events(spec, 200, seed=[1, 1]))
    subs = generate_subscriptions(spec, args.n, seed=[0, 0])
    matchers, loads = {}, {}
    for name in ("merged", "left"):
        m = Matcher("dynamic")
        if name == "left":
            m.index.store.sort_tails = lambda keys: 0  # the step off, for this matcher only
        t0 = time.perf_counter()
        m.add_bulk(subs)
        loads[name] = time.perf_counter() - t0
        matchers[name] = m
    churn = {name: 0.0 for name in matchers}
    for t in range(args.ticks):
        old = np.arange(t * 50, (t + 1) * 50, dtype=np.int64)
        new = generate_subscriptions(spec, 50, seed=[0, 1, t], first_id=args.n + t * 50)
        events = generate_events(spec, 200, seed=[0, 2, t])
        for name, m in (matchers.items() if t % 2 == 0 else reversed(matchers.items())):
            t0 = time.perf_counter()
            m.remove_bulk(old)
            m.add_bulk(new)
            m.match_encoded(events)
            churn[name] += time.perf_counter() - t0
    batches = [generate_events(spec, args.events, seed=[0, 3, i]) for i in range(args.batches)]
    best = {name: np.full(args.batches, np.inf) for name in matchers}
    names = list(matchers)
    for name in names:
        matchers[name].match_encoded(batches[0])
    for rep in range(args.repeat):
        for i, b in enumerate(batches):
            for name in (names if (rep + i) % 2 == 0 else names[::-1]):
                t0 = time.perf_counter()
                matchers[name].match_encoded(b)
                best[name][i] = min(best[name][i], time.perf_counter() - t0)
    print(f"{args.workload}, n = {args.n:,}, {args.ticks:,} ticks; best of {args.repeat} passes over "
          f"{args.batches} batches of {args.events} events")
    print("| tails | load s | ticks s | maintenance s | entries in tails | tables | events/s |")
    print("|---|---|---|---|---|---|---|")
    for name, m in matchers.items():
        mnt = m.maintenance
        print(f"| {name} | {loads[name]:.1f} | {churn[name]:.1f} | {mnt.seconds:.1f} | {tails(m):,} | "
              f"{len(m.index.schemas)} | {args.events / float(np.median(best[name])):,.0f} |")
    print(f"# load average {load0:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
