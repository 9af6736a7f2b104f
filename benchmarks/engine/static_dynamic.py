"""Static against dynamic on W0 at one N, side by side: both loaded, then their passes alternate.

    python -m benchmarks.engine.static_dynamic --n 6000000 --events 20000 --repeat 5
    python -m benchmarks.engine.static_dynamic --n 10000000 --algorithms dynamic --dicts   # one matcher, match_batch too

On a shared machine a figure taken minutes after another says little about
their ratio; here every round times one pass of each matcher in turn
(``benchmarks.engine.algorithms.best_passes``), in wall-clock and in CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from fastpubsub.engine import Matcher
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=6_000_000)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runs", type=int, default=None, help="clusters' run threshold (default: the engine's)")
    ap.add_argument("--algorithms", default="static,dynamic")
    ap.add_argument("--dicts", action="store_true", help="also time match_batch on the events as dicts")
    args = ap.parse_args(argv)
    spec = PRESETS["W0"]
    subs = generate_subscriptions(spec, n=args.n, seed=1)
    events = generate_events(spec, n=args.events, seed=2)
    layout = {} if args.runs is None else {"runs": args.runs}
    ms = {}
    algorithms = [a for a in args.algorithms.split(",") if a]
    dicts = events.to_dicts() if args.dicts else None
    for algorithm in algorithms:
        t0 = time.perf_counter()
        m = Matcher(algorithm, **layout)
        m.add_bulk(subs)
        m.match_encoded(events)  # dispatch warm-up
        ms[algorithm] = m
        print(json.dumps({"algorithm": algorithm, "load_s": round(time.perf_counter() - t0, 1),
                          "tables": [t["fields"] for t in m.stats()["hash_tables"]["schemas"]]}), flush=True)
    best = {a: [float("inf")] * 4 for a in ms}
    for _ in range(args.repeat):
        for a, m in ms.items():
            w, c = time.perf_counter(), time.process_time()
            m.match_encoded(events)
            best[a][0] = min(best[a][0], time.perf_counter() - w)
            best[a][1] = min(best[a][1], time.process_time() - c)
            if dicts is not None:
                w, c = time.perf_counter(), time.process_time()
                m.match_batch(dicts)
                best[a][2] = min(best[a][2], time.perf_counter() - w)
                best[a][3] = min(best[a][3], time.process_time() - c)
    out = {a: {"n": args.n, "events_per_s": round(args.events / b[0]), "events_per_cpu_s": round(args.events / b[1]),
               **({"dict_events_per_s": round(args.events / b[2]), "dict_events_per_cpu_s": round(args.events / b[3])}
                  if dicts is not None else {})}
           for a, b in best.items()}
    if "static" in best and "dynamic" in best:
        out["static_over_dynamic"] = round(best["dynamic"][0] / best["static"][0], 3)
        out["static_over_dynamic_cpu"] = round(best["dynamic"][1] / best["static"][1], 3)
    out["load_average"] = os.getloadavg()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
