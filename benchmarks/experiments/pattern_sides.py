"""Two source trees' pattern engines side by side in one process, batch by batch in turn.

    git worktree add /tmp/old main      # or: mkdir /tmp/old && git archive main src | tar -x -C /tmp/old
    python -m benchmarks.experiments.pattern_sides /tmp/old . --subs 100000 --events 200000

On a shared machine the load changes from one process to the next, and a memory-bound kernel slows
down when other jobs share the cache, so two benchmark processes run one after the other compare
badly.  Here both engines (the ``fastpubsub.patterns`` package of each tree, loaded under its own
module name; the rest of ``fastpubsub`` is this one's) get the same subscriptions and the same events of
``benchmarks.stateful.patterns``; the timed batches alternate A B, B A, ..., and each batch's CPU time is
taken.  Printed: events per CPU second of each, and the ratio of B's CPU time to A's per batch
(minimum, median, maximum: the median is the figure to quote).  Both must give the same number of
witnesses.  Numba's compiled kernels go to their own cache directory (``--cache-dir``): a kernel
cached under the borrowed module name would be useless to the tree's ordinary imports.
"""

from __future__ import annotations

import os
import sys

if "NUMBA_CACHE_DIR" not in os.environ:  # before numba is imported (fastpubsub sets its own otherwise)
    _i = sys.argv.index("--cache-dir") + 1 if "--cache-dir" in sys.argv else 0
    os.environ["NUMBA_CACHE_DIR"] = sys.argv[_i] if _i else "/tmp/fastpubsub-pattern-sides-numba"

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from fastpubsub.patterns.engine import Limits  # noqa: E402

from benchmarks.stateful.patterns import Ticks, subscriptions  # noqa: E402


def load_patterns(tree: str, name: str):
    """``<tree>/src/fastpubsub/patterns`` as the package ``fastpubsub.<name>``: (its engine module, the package)."""
    where = os.path.join(os.path.abspath(tree), "src", "fastpubsub", "patterns")
    if not os.path.isfile(os.path.join(where, "__init__.py")):
        raise SystemExit(f"{tree}: no src/fastpubsub/patterns package")
    spec = importlib.util.spec_from_file_location(f"fastpubsub.{name}", os.path.join(where, "__init__.py"),
                                                  submodule_search_locations=[where])
    package = importlib.util.module_from_spec(spec)
    sys.modules[f"fastpubsub.{name}"] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"fastpubsub.{name}.engine"), package


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree_a", help="a source tree (a directory holding src/fastpubsub/patterns)")
    ap.add_argument("tree_b")
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=200_000, help="timed events (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", help="numba's cache for the two trees (default /tmp/fastpubsub-pattern-sides-numba)")
    args = ap.parse_args(argv)
    ticks = Ticks(args.warmup + args.events, seed=args.seed)
    subs = subscriptions(args.subs, ticks, args.seed + 1)
    engines = {}
    for tag, tree in (("a", args.tree_a), ("b", args.tree_b)):
        engine_mod, package = load_patterns(tree, f"patterns_side_{tag}")
        limits = Limits(100, max(1, (2 << 30) // engine_mod.PatternEngine().instance_bytes()))
        engine = engine_mod.PatternEngine("dynamic", limits, capacity=1 << 14)
        engine.subscribe_many((sid, package.parse(text), 0) for sid, text in subs)
        engines[tag] = engine
    gc.collect()
    gc.freeze()
    for engine in engines.values():  # compile or load the kernels, then build up the instances
        for a in range(0, args.warmup, args.batch):
            engine.process(*ticks.batch(a, min(args.warmup, a + args.batch)))
    cpu = {"a": [], "b": []}
    witnesses = {"a": 0, "b": 0}
    for k, a in enumerate(range(args.warmup, args.warmup + args.events, args.batch)):
        batch = ticks.batch(a, min(args.warmup + args.events, a + args.batch))
        for tag in ("ab" if k % 2 == 0 else "ba"):
            t = time.process_time()
            witnesses[tag] += len(engines[tag].process(*batch))
            cpu[tag].append(time.process_time() - t)
    if witnesses["a"] != witnesses["b"]:
        raise SystemExit(f"the trees disagree: {witnesses}")
    ratio = np.array(cpu["b"]) / np.array(cpu["a"])
    print(json.dumps({"subscriptions": args.subs, "events": args.events, "witnesses": witnesses["a"],
                      "a_events_per_cpu_s": round(args.events / sum(cpu["a"])),
                      "b_events_per_cpu_s": round(args.events / sum(cpu["b"])),
                      "b_cpu_over_a_per_batch": {"min": round(float(ratio.min()), 3),
                                                 "median": round(float(np.median(ratio)), 3),
                                                 "max": round(float(ratio.max()), 3)}}))


if __name__ == "__main__":
    main()
