"""Aggregates with row filters, in process: table updates per second of ``AggregateService.apply``.

    python -m benchmarks.stateful.filtered_aggregates                         # 2,000 aggregates, 50 sectors
    python -m benchmarks.stateful.filtered_aggregates --against /tmp/old      # side by side with another checkout

The table service's soak workload (``benchmarks.pipeline.soak --service tables``) without the broker: a
1,000-row stock table, ``--subscriptions`` aggregates cycling ``min(per)``, ``sum(per)``, ``count(*)`` and
``distinct(sector)`` over a ``risk`` range of 10, each filtered to one of ``--sectors`` sectors, so the
subscriptions fall into 4 x sectors groups and a row update can change only the groups of its old and new
sector.  The timed updates follow untimed ones that fill the table; each run of ``--run`` rows is matched
against the row filters at once (``filters_passed``, where the code has it) and applied in order, as the table
service does with a poll's rows.

``--against CHECKOUT`` runs the same measurement on that checkout's ``src`` in a child process, the two taking
turns for ``--rounds`` rounds (median of each reported with every round), so both share the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.report import load_average, load_numbers


def measure(subscriptions: int, sectors: int, updates: int, run: int, seed: int = 1) -> dict[str, Any]:
    """Updates/s and notifications per update of one service built afresh (imports the code on ``sys.path``)."""
    from fastpubsub.aggregates.service import AggregateService, TableSchema
    from fastpubsub.aggregates.text import parse_subscription

    rng = random.Random(seed)
    svc = AggregateService([TableSchema("stock", "symbol", {"symbol": "string", "risk": "number", "per": "number",
                                                            "sector": "string"})])
    fns = ("min(per)", "sum(per)", "count(*)", "distinct(sector)")
    for sid in range(subscriptions):
        low = rng.randrange(90)
        svc.subscribe(sid, parse_subscription(f'{fns[sid % 4]} over stock where risk between {low} and {low + 10} '
                                              f'and sector = "s{rng.randrange(sectors)}"'))

    def row() -> tuple[str, dict[str, Any]]:
        symbol = f"S{rng.randrange(1000):04d}"
        return symbol, {"symbol": symbol, "risk": float(rng.randrange(100)), "per": float(rng.randrange(50)),
                        "sector": f"s{rng.randrange(sectors)}"}

    batched = hasattr(svc, "filters_passed")
    for i in range(5000):  # the table filled and every group warm
        svc.apply("stock", *row(), f"w{i}")
    timed = [row() for _ in range(updates)]
    notified = 0
    start = time.perf_counter()
    for j in range(0, updates, run):
        chunk = timed[j:j + run]
        if batched:
            passing = svc.filters_passed("stock", [r for _, r in chunk])
            for i, ((key, r), p) in enumerate(zip(chunk, passing)):
                notified += len(svc.apply("stock", key, r, f"u{j + i}", passing=p).notifications)
        else:
            for i, (key, r) in enumerate(chunk):
                notified += len(svc.apply("stock", key, r, f"u{j + i}").notifications)
    seconds = time.perf_counter() - start
    return {"updates_per_s": round(updates / seconds), "notifications_per_update": round(notified / updates, 2),
            "groups": svc.stats()["groups"], "batched": batched}


def _child(checkout: str | None, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(checkout) / "src"), str(Path(__file__).parents[2])])
    out = subprocess.run([sys.executable, "-m", "benchmarks.stateful.filtered_aggregates", "--one",
                          "--subscriptions", str(args.subscriptions), "--sectors", str(args.sectors),
                          "--updates", str(args.updates), "--run", str(args.run)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subscriptions", type=int, default=2000)
    ap.add_argument("--sectors", type=int, default=50)
    ap.add_argument("--updates", type=int, default=5000)
    ap.add_argument("--run", type=int, default=100, help="rows matched against the filters at once")
    ap.add_argument("--against", help="another checkout, measured in turn with this one")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="write the rounds and medians as JSON")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one measurement, as JSON (the child)
    args = ap.parse_args(argv)
    if min(args.subscriptions, args.sectors, args.updates, args.run, args.rounds) <= 0:
        ap.error("counts must be positive")
    if args.one:
        print(json.dumps(measure(args.subscriptions, args.sectors, args.updates, args.run)))
        return
    sides = {"this": None, **({"against": args.against} if args.against else {})}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    print(f"load before: {load_average()}", flush=True)
    for k in range(args.rounds):
        for name, checkout in sides.items():
            r = _child(checkout, args)
            rounds[name].append({**r, "load": load_numbers()})
            print(f"round {k + 1} {name:8s} {r['updates_per_s']:>7,} updates/s  "
                  f"{r['notifications_per_update']} notifications/update  groups {r['groups']}"
                  f"{'' if r['batched'] else '  (one row a call)'}", flush=True)
    medians = {name: statistics.median(r["updates_per_s"] for r in rs) for name, rs in rounds.items()}
    print("medians: " + ", ".join(f"{name} {m:,.0f} updates/s" for name, m in medians.items()))
    if args.against:
        print(f"this / against: {medians['this'] / medians['against']:.2f}")
    if args.out:
        args.out.write_text(json.dumps({"config": vars(args) | {"out": str(args.out)}, "rounds": rounds,
                                        "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
