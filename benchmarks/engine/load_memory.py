"""Peak memory of one bulk load per subscription, per algorithm: the factors of ``engine.memory_budget.LOAD_BYTES``.

    python -m benchmarks.engine.load_memory --n 1000000,3000000
    python -m benchmarks.engine.load_memory --n 1000000 --algorithms dynamic,counting

Each (algorithm, N) runs in a fresh process: N W0 subscriptions generated
(the batch a caller would hold), the kernels compiled on a small load, then
the peak resident set reset (``/proc/self/clear_refs``) and one ``add_bulk``
of the N into an empty matcher.  Reported per subscription: the resident
growth the matcher keeps (steady), the peak growth during the load
(``VmHWM``) and the transient (their difference).  The refusal estimate
uses the peak (the load's own estimate is switched off here).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ALGORITHMS = ("counting", "propagation", "propagation-wp", "static", "dynamic", "opindex", "bitmaps", "amkh")


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    raise RuntimeError(f"no {key}")


def one(algorithm: str, n: int) -> dict:
    """In this process: peak and steady resident growth of one ``add_bulk`` of ``n`` W0 subscriptions."""
    import fastpubsub.engine.memory_budget as budget
    from fastpubsub.engine import Matcher
    from fastpubsub.workloads.fabret import PRESETS, generate_subscriptions

    budget.check_load = lambda *a: None  # (measuring what the estimate is made of)
    import fastpubsub.engine.matcher as matcher
    matcher.check_load = budget.check_load
    Matcher(algorithm).add_bulk(generate_subscriptions(PRESETS["W0"], 20_000, seed=3))  # compile outside the measure
    batch = generate_subscriptions(PRESETS["W0"], n, seed=1)
    m = Matcher(algorithm)
    from benchmarks.harness.memory import rss_bytes
    before = rss_bytes()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident set
    m.add_bulk(batch)
    peak = _status_kb("VmHWM:") * 1024 - before
    steady = rss_bytes() - before
    return {"algorithm": algorithm, "n": n, "steady_bytes_per_sub": round(steady / n, 1),
            "peak_bytes_per_sub": round(peak / n, 1), "transient_bytes_per_sub": round((peak - steady) / n, 1),
            "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg())}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine.load_memory", description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1000000,3000000")
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # (algorithm, n): the child process
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]))), flush=True)
        return
    rows = []
    for n in [int(x) for x in args.n.split(",")]:
        for a in args.algorithms.split(","):
            out = subprocess.run([sys.executable, "-m", "benchmarks.engine.load_memory", "--one", a, str(n)],
                                 capture_output=True, text=True, check=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            print(row, flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
