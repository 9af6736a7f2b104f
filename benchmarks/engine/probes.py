"""What one more multi-attribute table costs per event, measured on the clustered matcher itself.

    python -m benchmarks.engine.probes --n 1000000 --c-h 5          # many tables: the greedy thinks probes are cheap
    python -m benchmarks.engine.probes --n 6000000 --c-h 20 --steps 0,1,2,4,8,all

Loads W0 into a ``static`` matcher whose cost model has the given ``C_h``
(a small one makes the greedy configure many (a0, a1, x) tables), then
times the batch kernel over the same events with only the first ``k``
configured schemas visible to it.  The step from ``k`` to ``k + 1`` schemas
is what a probe costs in practice -- the table lookup, the visit of the list
it finds and the scan of a small cluster -- which is what the cost model's
``C_h`` must stand for (docs/design/clustering.md).  Per row: events/s and µs per
event; the kernel's compilation is excluded, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.engine.costmodel.model import calibrated_model
from fastpubsub.engine.frontend.encoding import encode_batch
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions


def measure(n: int, c_h: float, steps: list[int], n_events: int = 2000, repeat: int = 5, seed: int = 1) -> list[dict]:
    model = dataclasses.replace(calibrated_model(), C_h=c_h)
    m = Matcher("static", model=model)
    m.add_bulk(generate_subscriptions(PRESETS["W0"], n=n, seed=seed))
    events = generate_events(PRESETS["W0"], n_events, seed=seed + 1)
    m.match_encoded(events)  # compile / load the kernel
    ev = encode_batch(events, m.attributes, m.strings).arrays()
    ix = m.index
    all_schemas = ix.sch_fields  # the fields of every configured schema, one row each
    rows = []
    for k in steps:
        k = len(all_schemas) if k < 0 else k
        if k > len(all_schemas):
            break
        ix.sch_fields = np.ascontiguousarray(all_schemas[:k])  # the events probe the first k tables only
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            off, ids = ix.match_encoded(ev, events, m.handle_id)
            best = min(best, time.perf_counter() - t)
        ix.sch_fields = all_schemas
        rows.append({"n": n, "C_h": c_h, "schemas": k, "events_per_s": round(n_events / best),
                     "us_per_event": round(best / n_events * 1e6, 3), "matches": int(len(ids))})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine.probes", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="W0 subscriptions")
    ap.add_argument("--c-h", type=float, default=5.0, help="C_h (ns) given to the static greedy")
    ap.add_argument("--steps", default="0,1,2,4,8,15", help="numbers of schemas to time; 'all': every configured one")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    steps = [-1 if x == "all" else int(x) for x in args.steps.split(",")]
    print("| N | schemas | events/s | µs/event |")
    print("|---|---|---|---|")
    for r in measure(args.n, args.c_h, steps, repeat=args.repeat):
        print(f"| {r['n']:,} | {r['schemas']} | {r['events_per_s']:,} | {r['us_per_event']} |", flush=True)


if __name__ == "__main__":
    main()
