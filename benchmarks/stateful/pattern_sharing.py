"""What state merging could save on the stock-tick workload: instances per event with and without sharing.

    python -m benchmarks.stateful.pattern_sharing --subs 100000 --events 50000 --warmup 10000

Counts, over the events of ``benchmarks.stateful.patterns``, the instances that start
per event (every subscription whose start predicate holds; the per-subscription
cap is ignored, so this is an upper bound) and the instances that would start
if subscriptions started by the same event shared one instance whenever their
steps bind the same events: equal correlations, operators and aggregates.
What may differ between the sharers is what the engine could check per
subscription when an instance moves on (post-selections ``where``/``while``,
``until``, ``within``): one shared instance per (start event, step structure),
fanning out to its subscriptions at witness time (Cayuga's merging of
identical automaton prefixes).  No engine runs here: it sizes the idea.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import numpy as np

from fastpubsub.patterns import parse
from fastpubsub.patterns.language import to_json

from benchmarks.stateful.patterns import Ticks, subscriptions

_CMP = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
TEMPLATES = ("S1", "S2", "S3", "S4", "S5")  # benchmarks.stateful.patterns draws template sid % 5


def step_structure(pattern) -> str:
    """What decides which events an instance binds: per step the operator, correlation and aggregates."""
    steps = to_json(pattern)["steps"]
    return json.dumps([(s["op"], s["correlate"], s.get("aggregates")) for s in steps], sort_keys=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--warmup", type=int, default=10_000)
    ap.add_argument("--symbols", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    ticks = Ticks(args.warmup + args.events, args.symbols, args.seed)
    cols = {"price": ticks.price, "volume": ticks.volume}
    by_symbol: dict[str, list] = defaultdict(list)  # the start's name equality -> (template, other predicates, key)
    for sid, text in subscriptions(args.subs, ticks, args.seed + 1):
        p = parse(text)
        if not p.steps:
            continue  # completes at its start: no instance
        name = next(c for a, op, c in p.start if a == "name" and op == "=")
        rest = [(a, op, c) for a, op, c in p.start if a != "name"]
        by_symbol[name].append((sid % 5, rest, step_structure(p)))
    starts, shared = np.zeros(5), np.zeros(5)
    names = ticks.symbols[ticks.sym]
    for i in range(args.warmup, args.warmup + args.events):
        keys = set()
        for t, rest, key in by_symbol.get(names[i], ()):
            if all(_CMP[op](cols[a][i], c) for a, op, c in rest):
                starts[t] += 1
                keys.add((t, key))
        for t, _ in keys:
            shared[t] += 1
    n = args.events
    for t in range(1, 5):
        print(json.dumps({"template": TEMPLATES[t], "starts_per_event": round(starts[t] / n, 2),
                          "shared_per_event": round(shared[t] / n, 2)}))
    print(json.dumps({"template": "all", "starts_per_event": round(starts.sum() / n, 2),
                      "shared_per_event": round(shared.sum() / n, 2)}))


if __name__ == "__main__":
    main()
