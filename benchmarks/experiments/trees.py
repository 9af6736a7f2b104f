"""One workload's matching in two or more source trees, in alternating processes with fresh numba caches.

    git worktree add --detach /tmp/before <commit>
    python -m benchmarks.experiments.trees --tree before=/tmp/before --tree now=. --workloads W1,W2 --n 6000000 --rounds 2
    python -m benchmarks.experiments.trees --tree before=/tmp/before --tree now=. --workloads W0 --algorithm propagation
    python -m benchmarks.experiments.trees --tree before=/tmp/before --tree now=. --workloads wuyu --algorithm amkh \
        --options '{"general": ["g0"], "bucketing": "range", "buckets": 4}'

A workload is a preset of workloads/fabret.py or ``intervals`` (the interval
workload), ``wuyu`` (Wu & Yu's, x = 55), ``sparse`` (OpIndex's synthetic
data).

Each tree is imported in a process of its own (``PYTHONPATH``: the tree's
``src``, or the tree itself for the layout before ``src/fastpubsub/``, whose
engine was the top-level ``engine`` package), with a numba cache directory
of its own emptied at the start: numba's on-disk cache checks only a
kernel's own file, so a cache shared between trees, or kept from older
sources, can run stale code.  A round runs every tree once per workload, in
the order given; each run loads ``--n`` subscriptions of the preset, warms
the kernels on 3,000 others, then times ``--repeat`` passes of
``match_encoded`` over 20,000 events.  Printed per run: events per CPU
second (best pass), wall clock, matches per event, load average; then the
best of each tree over the rounds and its ratio to the first tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import gc, json, os, sys, time
n, workload, repeat, n_events, layout = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
algorithm = sys.argv[6]
if layout == "src":
    from fastpubsub.engine import Matcher
    try:
        from fastpubsub.workloads import PRESETS, generate_events, generate_subscriptions
    except ImportError:  # a tree whose generators were still in the engine
        from fastpubsub.engine.workload import PRESETS, generate_events, generate_subscriptions
else:  # the layout before src/fastpubsub/ (an installed fastpubsub must not stand in for it)
    from engine import Matcher
    from engine.workload import PRESETS, generate_events, generate_subscriptions
import inspect
source = inspect.getsourcefile(Matcher)

options = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(sys.argv[7]).items()}
if workload in ("intervals", "wuyu"):
    from fastpubsub.workloads import intervals as iv
    spec = iv.IntervalSpec() if workload == "intervals" else iv.WuYuSpec()
    gen_s = iv.interval_subscriptions if workload == "intervals" else iv.wuyu_subscriptions
    gen_e = iv.interval_events if workload == "intervals" else iv.wuyu_events
    generate_subscriptions = lambda spec, n, seed: gen_s(spec, n, seed=seed)
    generate_events = lambda spec, n, seed: gen_e(spec, n, seed=seed)
elif workload == "sparse":
    from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions
    spec = SPARSE_PRESETS["opindex"]
    generate_subscriptions = lambda spec, n, seed: generate_sparse_subscriptions(spec, n, seed=seed)
    generate_events = lambda spec, n, seed: generate_sparse_events(spec, n, seed=seed)
else:
    spec = PRESETS[workload]
events = generate_events(spec, n=n_events, seed=2)
warm = Matcher(algorithm, **options)
warm.add_bulk(generate_subscriptions(spec, n=3000, seed=99))
warm.match_encoded(events)
subs = generate_subscriptions(spec, n=n, seed=1)
m = Matcher(algorithm, **options)
t0 = time.perf_counter()
m.add_bulk(subs)
load_s = time.perf_counter() - t0
del subs
gc.collect()
res = m.match_encoded(events)
ids = res[1] if isinstance(res, tuple) else res.ids
best_cpu = best_wall = float("inf")
for _ in range(repeat):
    w0, c0 = time.perf_counter(), time.process_time()
    m.match_encoded(events)
    best_cpu, best_wall = min(best_cpu, time.process_time() - c0), min(best_wall, time.perf_counter() - w0)
print(json.dumps({"source": source, "load_s": round(load_s, 1), "matches_per_event": round(len(ids) / n_events, 2),
                  "cpu_events_s": round(n_events / best_cpu), "wall_events_s": round(n_events / best_wall),
                  "load_average": round(os.getloadavg()[0], 2)}))
"""


def python_path(tree: Path) -> str:
    """``src`` when the tree has ``src/fastpubsub``, else the tree itself (the older layout)."""
    return str(tree / "src") if (tree / "src" / "fastpubsub").is_dir() else str(tree)


def run_one(tree: Path, cache: Path, n: int, workload: str, repeat: int, n_events: int,
            algorithm: str = "dynamic", options: str = "{}") -> dict:
    path = python_path(tree)
    layout = "src" if path.endswith("src") else "flat"
    env = dict(os.environ, PYTHONPATH=path, NUMBA_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), workload, str(repeat), str(n_events), layout, algorithm,
                          options],
                         env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{tree}: {out.stderr[-2000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(row.pop("source")).resolve().is_relative_to(tree):  # (an installed fastpubsub came first)
        raise SystemExit(f"{tree}: the matcher was imported from elsewhere")
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=PATH",
                    help="a source tree (repeat; the first is the reference of the ratios)")
    ap.add_argument("--workloads", default="W1,W2")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--algorithm", default="dynamic", help="the Matcher algorithm every tree runs")
    ap.add_argument("--options", default="{}", help='its Matcher options, JSON (lists become tuples of names: '
                    '\'{"general": ["g0"], "bucketing": "range", "buckets": 4}\')')
    args = ap.parse_args(argv)
    trees = []
    for spec in args.tree:
        name, sep, path = spec.partition("=")
        if not sep or not Path(path).is_dir():
            raise SystemExit(f"--tree wants NAME=PATH of a source tree, got {spec!r}")
        trees.append((name, Path(path).resolve()))
    caches = Path(tempfile.mkdtemp(prefix="fastpubsub-trees-"))
    best: dict[tuple[str, str], int] = {}
    try:
        for r in range(args.rounds):
            for workload in args.workloads.split(","):
                for name, tree in trees:
                    row = run_one(tree, caches / name, args.n, workload, args.repeat, args.events, args.algorithm,
                                  args.options)
                    row.update(round=r + 1, workload=workload, tree=name, n=args.n, algorithm=args.algorithm)
                    print(json.dumps(row), flush=True)
                    key = (workload, name)
                    best[key] = max(best.get(key, 0), row["cpu_events_s"])
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    print(f"\n| workload | {' | '.join(name for name, _ in trees)} |")
    print("|---|" + "---|" * len(trees))
    for workload in args.workloads.split(","):
        first = best[(workload, trees[0][0])]
        cells = [f"{best[(workload, name)]:,} ({best[(workload, name)] / first:.2f}x)" for name, _ in trees]
        print(f"| {workload} | {' | '.join(cells)} |")
    print("\nevents per CPU second, best run of each tree (ratio to the first tree)")


if __name__ == "__main__":
    main()
