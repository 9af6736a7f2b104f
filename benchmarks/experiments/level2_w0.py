"""W0 at 30M and 100M in 5M chunks: the second level the cost model chose, with it and without it (one process).

    python -m benchmarks.experiments.level2_w0                       # 30M and 100M: about 8 GB at 100M
    python -m benchmarks.experiments.level2_w0 --n 2000000 --chunk 1000000 --events 2000   # a quick check

Each N is loaded into ``dynamic`` in chunks (``benchmarks.engine.scaling.chunk_makers``),
then 20,000 events pass with no change, the settle round that merges the load's
tails; the matcher's second-level blocks (``store.c_sub``) are then dropped and
put back in turn, best of 5 of each, and both must find the same matches.
``benchmarks.engine.level2`` asks the same on a narrowed W0 at a tenth of the size.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.workloads.fabret import W0, generate_events

from benchmarks.engine.scaling import chunk_makers
from benchmarks.harness.timing import warm_up

KEYS = ("level2_min", "level2_clusters", "level2_ints", "runs", "sorted_entries", "subscriptions", "memory_bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="30000000,100000000", help="comma-separated subscription counts")
    ap.add_argument("--chunk", type=int, default=5_000_000, help="subscriptions per add_bulk")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    events = generate_events(W0, n=args.events, seed=2)
    warm_up("dynamic", events)
    loaded = {}
    for n in (int(x) for x in args.n.split(",")):
        m = Matcher("dynamic")
        t = time.perf_counter()
        for make in chunk_makers(W0, n, args.chunk, seed=1):
            m.add_bulk(make())
        print(n, "load_s", round(time.perf_counter() - t, 1), flush=True)
        st = m.stats()
        print(" after the load", {k: st.get(k) for k in KEYS}, flush=True)
        m.match_encoded(events)  # the events with no change: the settle round merges the load's tails
        st = m.stats()
        print(f" after {args.events:,} events", {k: st.get(k) for k in KEYS}, flush=True)
        loaded[n] = m
    for n, m in loaded.items():
        store = m.index.store
        keep = store.c_sub
        res: dict[str, list[float]] = {"with": [], "without": []}
        ref = m.match_encoded(events)
        for _ in range(args.repeat):
            for name in ("with", "without"):
                store.c_sub = keep if name == "with" else np.zeros(0, dtype=keep.dtype)
                t = time.perf_counter()
                r = m.match_encoded(events)
                res[name].append(time.perf_counter() - t)
                assert np.array_equal(r.ids, ref.ids) and np.array_equal(r.offsets, ref.offsets)
        store.c_sub = keep
        print(n, {k: round(args.events / min(v)) for k, v in res.items()}, f"events/s best of {args.repeat}; load",
              os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
