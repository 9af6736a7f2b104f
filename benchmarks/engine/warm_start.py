"""Warm start: a new process loads every kernel from numba's on-disk cache and matches within a second.

    python -m benchmarks.engine.warm_start                 # every algorithm, 3 fresh processes each
    python -m benchmarks.engine.warm_start --algorithms dynamic --processes 5

Each measurement is a fresh Python process that imports the engine, builds a
small W0 matcher (``--n`` subscriptions) with ``add_bulk``, single ``add`` and
``remove``, and matches one encoded batch.  It reports the seconds from the
start of the process to the first match (interpreter start-up excluded, the
engine's import included) and how many kernels numba had to compile rather
than load (``cache_misses`` summed over every dispatcher of the engine).
The first process may compile (a cold cache); the figures are from the
processes after it, split into the engine's import, building the matcher
(``--n`` subscriptions loaded) and the first ``match_encoded`` call.  ``cache=True`` fails silently when a kernel's argument
types cannot be pickled into the cache index, or when a kernel captures
another dispatcher (docs/design/engine.md, "Known limits"), so the miss count is
the check that matters; the time says what a user waits.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

T0 = time.perf_counter()


def child(algorithm: str, n: int) -> dict:
    """Runs in the measured process: build, add, remove, match once; time and cache misses."""
    import numpy as np

    from fastpubsub.engine import Matcher
    from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions

    t_import = time.perf_counter() - T0
    subs = generate_subscriptions(PRESETS["W0"], n=n, seed=1)
    events = generate_events(PRESETS["W0"], 200, seed=2)
    t_build = time.perf_counter()
    m = Matcher(algorithm)
    m.add_bulk(subs)
    m.add(10 * n, [("a0", "=", 1), ("a1", ">", 2)])
    m.remove(10 * n)
    m.remove_bulk(np.asarray(subs.ids[:10]))
    t_match = time.perf_counter()
    first = m.match_encoded(events)
    t_first = time.perf_counter() - T0
    return {"algorithm": algorithm, "n": n, "import_s": round(t_import, 3),
            "build_s": round(t_match - t_build, 3), "first_call_s": round(time.perf_counter() - t_match, 3),
            "first_match_s": round(t_first, 3), "events": len(first), "matches": int(len(first.ids)), "compiled": compiled_kernels(m),
            "loaded": compiled_kernels(m, loaded=True)}


def compiled_kernels(matcher, loaded: bool = False) -> list[str]:
    """Kernels this process compiled instead of loading from the cache (every engine dispatcher, and the index's).

    ``loaded``: the kernels it loaded from the cache instead.
    """
    from numba.core.registry import CPUDispatcher

    seen: dict[int, object] = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith("fastpubsub.engine") and mod is not None:
            for obj in vars(mod).values():
                if isinstance(obj, CPUDispatcher):
                    seen[id(obj)] = obj
    kernel = getattr(matcher.index, "_kernel", None)
    if isinstance(kernel, CPUDispatcher):
        seen[id(kernel)] = kernel
    out = []
    for d in seen.values():
        counts = d.stats.cache_hits if loaded else d.stats.cache_misses
        if sum(counts.values()):
            out.append(f"{d.py_func.__module__}.{d.py_func.__qualname__}")
    return sorted(out)


def run_process(algorithm: str, n: int) -> dict:
    """One fresh process running :func:`child`; its JSON line."""
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "benchmarks.engine.warm_start", "--child", algorithm, "--n", str(n)],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine.warm_start", description=__doc__.splitlines()[0])
    ap.add_argument("--algorithms", default="counting,propagation,propagation-wp,static,dynamic")
    ap.add_argument("--processes", type=int, default=3, help="fresh processes per algorithm after the first")
    ap.add_argument("--n", type=int, default=2_000, help="W0 subscriptions")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n)))
        return
    print("| algorithm | first process s | warm: first match s (best / worst) | warm: import / build / first call s "
          "(best run) | kernels compiled when warm |")
    print("|---|---|---|---|---|")
    for algorithm in args.algorithms.split(","):
        cold = run_process(algorithm, args.n)
        warm = [run_process(algorithm, args.n) for _ in range(args.processes)]
        times = [w["first_match_s"] for w in warm]
        compiled = sorted({k for w in warm for k in w["compiled"]})
        b = min(warm, key=lambda w: w["first_match_s"])
        print(f"| {algorithm} | {cold['first_match_s']} | {min(times)} / {max(times)} | "
              f"{b['import_s']} / {b['build_s']} / {b['first_call_s']} | {', '.join(compiled) or 'none'} |", flush=True)


if __name__ == "__main__":
    main()
