"""Two or more source trees of fastpubsub side by side on the pattern workload, batch by batch in turn.

    python -m benchmarks.pattern_sides /path/to/tree-a /path/to/tree-b --subs 100000 --events 50000 --warmup 10000

On a shared machine two runs one after the other see different loads; here every tree runs in its own
process (``PYTHONPATH`` = the tree's ``src`` and the tree itself, so its own ``benchmarks.patterns`` builds the
workload), all build the same engine and warm up, then they process each timed batch in turn, so that every
batch of every tree meets the same load.  Prints per tree the wall and CPU seconds over the timed batches and the
results (witnesses, live instances), which must agree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

WORKER = r"""
import gc, json, sys, time
from benchmarks.patterns import Ticks, subscriptions, build
from fastpubsub.patterns.engine import PatternEngine
from fastpubsub.patterns.oracle import Limits
subs, events, warmup, batch = (int(x) for x in sys.argv[1:5])
ticks = Ticks(warmup + events, 2000, 0)
probe = PatternEngine()
engine, _ = build("dynamic", subscriptions(subs, ticks, 1), Limits(100, max(1, (2 << 30) // probe.instance_bytes())))
engine.process(*ticks.batch(0, 1000))
for a in range(1000, warmup, batch):
    engine.process(*ticks.batch(a, min(a + batch, warmup)))
print("ready", flush=True)
witnesses = 0
for line in sys.stdin:
    a = int(line)
    t, c = time.perf_counter(), time.process_time()
    witnesses += len(engine.process(*ticks.batch(a, min(a + batch, warmup + events))))
    print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c, "witnesses": witnesses,
                      "live": engine.live()}), flush=True)
"""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trees", nargs="+", help="source trees (each with src/fastpubsub and benchmarks/)")
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--warmup", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=10_000)
    args = ap.parse_args(argv)
    procs = []
    for tree in args.trees:
        env = {**os.environ, "PYTHONPATH": f"{tree}/src{os.pathsep}{tree}"}
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, str(args.subs), str(args.events),
                                       str(args.warmup), str(args.batch)], cwd=tree, env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE))
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    totals = [{"wall": 0.0, "cpu": 0.0} for _ in procs]
    last = [None] * len(procs)
    for k, a in enumerate(range(args.warmup, args.warmup + args.events, args.batch)):
        order = procs if k % 2 == 0 else procs[::-1]  # alternate who goes first
        for p in order:
            i = procs.index(p)
            p.stdin.write(f"{a}\n")
            p.stdin.flush()
            row = json.loads(p.stdout.readline())
            totals[i]["wall"] += row["wall"]
            totals[i]["cpu"] += row["cpu"]
            last[i] = row
    for p in procs:
        p.stdin.close()
        p.wait()
    for tree, tot, row in zip(args.trees, totals, last):
        print(json.dumps({"tree": tree, "events": args.events, "wall_s": round(tot["wall"], 3),
                          "cpu_s": round(tot["cpu"], 3), "events_per_s": round(args.events / tot["wall"]),
                          "events_per_cpu_s": round(args.events / tot["cpu"]), "witnesses": row["witnesses"],
                          "live": row["live"], "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
