"""The second level of sort inside the runs, on and off in one process, on a workload whose runs are long.

At 100M W0 subscriptions an event reaches one (a0, a1) list of about
81,600 entries and finds about 30 runs of about 78 entries in it.  W0 with
``a1`` narrowed to ``--a1-values`` values (4 by default) has lists of that
size ten times sooner: at 10M, 140 lists of about 71,000 entries, runs of
about 68 entries, still about 1.7 matches per event (W0 at 100M: 1.9).

The matcher (``dynamic``, the cost model's own choice of second level) is
loaded once; "off" drops the second-level blocks (the kernel then tests
every entry of the runs found, which keep their order), "on" puts them
back, so both passes read the same arena.  Passes alternate, ``--repeat``
of each, best CPU time of each kept; both must find the same matches.

    python -m benchmarks.engine.level2 --n 10000000            # about 3 GB
    python -m benchmarks.engine.level2 --n 1000000 --a1-values 35   # W0 itself: the model builds no second level there
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from dataclasses import replace

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.engine.structures.sorted_runs import SUB_NONE
from fastpubsub.workloads.fabret import W0, generate_events, generate_subscriptions


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--a1-values", type=int, default=4, help="distinct values of a1 (W0: 35)")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    spec = replace(W0, name=f"W0-a1-{args.a1_values}", skew={1: (1, args.a1_values)})
    subs = generate_subscriptions(spec, args.n, seed=1)
    m = Matcher("dynamic")
    t = time.perf_counter()
    m.add_bulk(subs)
    load = time.perf_counter() - t
    del subs
    gc.collect()
    events = generate_events(spec, args.events, seed=2)
    m.match_encoded(events)  # (compiles; the maintenance settles)
    m.match_encoded(events)
    m.freeze_clustering()
    store = m.index.store
    s = m.stats()
    print(f"{spec.name} N={args.n:,}: load {load:.1f} s, tables {[t['fields'] for t in s['hash_tables']['schemas']]}, "
          f"largest cluster {s['largest_cluster']:,}, runs {s['runs']:,} over {s['sorted_entries']:,} sorted entries; "
          f"second level from runs of {s['level2_min']} entries (the cost model's), in {s['level2_clusters']:,} "
          f"clusters, {4 * s['level2_ints'] / 2**20:.1f} MB")
    on = store.c_sub.copy()
    off = np.where(on >= 0, SUB_NONE, on)
    best = {"on": float("inf"), "off": float("inf")}
    found = {}
    for _ in range(args.repeat):
        for name, state in (("off", off), ("on", on)):
            store.c_sub[:] = state
            t0 = time.process_time()
            res = m.match_encoded(events)
            best[name] = min(best[name], time.process_time() - t0)
            found.setdefault(name, (res.offsets.copy(), res.ids.copy()))
    store.c_sub[:] = on
    assert all(np.array_equal(a, b) for a, b in zip(found["on"], found["off"]))
    matches = len(found["on"][1]) / args.events
    print(" | ".join(f"second level {name}: {args.events / best[name]:,.0f} events/s encoded "
                     f"({best[name] / args.events * 1e6:.3f} CPU µs per event)" for name in ("off", "on"))
          + f" | on/off {best['off'] / best['on']:.2f}x | matches per event {matches:.2f} "
          f"| load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
