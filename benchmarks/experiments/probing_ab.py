"""Versions of the probing kernel side by side in one process, on one matcher's arrays.

    git show <commit>:src/fastpubsub/engine/kernels/probing.py > /tmp/probing_before.py
    python -m benchmarks.experiments.probing_ab --variant before=/tmp/probing_before.py --workloads W2,W1 --n 6000000

``benchmarks.experiments.trees`` runs each source tree in a process of its own, and
from one process to the next the same tree moves by up to a third on this
machine (where the arena lands, how the kernel maps it), more than a change
of the kernel often gains.  Here one process loads the preset once with
``dynamic`` and runs :func:`engine.kernels.probing.clustered_events` of the current
tree and of each ``--variant`` (a ``probing.py`` file, imported as a module
of ``fastpubsub.engine.kernels`` beside the current one, so that it must agree with
the current tree's other modules) over the same arrays and events, the
passes alternating; every variant must return the current kernel's matches.
Printed per workload: events per CPU second (best pass) and the ratio of
each to the first.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import time

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.engine.costmodel.constants import MAX_SCHEMA
from fastpubsub.engine.frontend.encoding import encode_batch
from fastpubsub.engine.kernels import probing
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions


def load_variant(index: int, path: str):
    """``path`` imported as ``fastpubsub.engine.kernels.probing_variant<index>`` (its relative imports: the current tree's)."""
    spec = importlib.util.spec_from_file_location(f"fastpubsub.engine.kernels.probing_variant{index}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_workload(workload: str, n: int, kernels: list[tuple[str, object]], n_events: int, repeat: int) -> dict:
    """Events per CPU second of each kernel module over one matcher's arrays (best of ``repeat`` passes)."""
    spec = PRESETS[workload]
    events = generate_events(spec, n=n_events, seed=2)
    m = Matcher("dynamic")
    m.add_bulk(generate_subscriptions(spec, n=n, seed=1))
    gc.collect()
    m.match_encoded(events)  # (compiles; the maintenance settles)
    want = m.match_encoded(events)
    ix = m.index
    ix.preds.prepare()
    ev = encode_batch(events, m.attributes, m.strings).arrays()
    store, runs, access = ix.store.arrays(), ix.store.run_arrays(), ix.keys.arrays(ix.sch_fields)

    def run(module):
        probe = np.empty((module.GROUP * max(len(ix.schemas), 1), MAX_SCHEMA), dtype=np.int64)
        out = np.empty(int(n_events * ix.matches_per_event * 1.25) + 1024, dtype=np.int64)
        scratch = module.ProbeScratch(ix.eq_of_field, probe, ix.gmask, out, ix.n_first_not_eq == 0)
        return module.clustered_events(ev, ix.preds.arrays(), store, runs, access, scratch, m.handle_id, 0, 8, 256)

    for name, module in kernels:  # (compiles)
        off, ids = run(module)
        if not (np.array_equal(off, want.offsets) and np.array_equal(ids, want.ids)):
            raise SystemExit(f"{name}: other matches than the matcher's on {workload}")
    best = {name: float("inf") for name, _ in kernels}
    for _ in range(repeat):  # alternating, so that a slow spell of the machine hits every kernel
        for name, module in kernels:
            t0 = time.process_time()
            run(module)
            best[name] = min(best[name], time.process_time() - t0)
    return {name: n_events / best[name] for name, _ in kernels}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=PATH",
                    help="a probing.py to run beside the current one (repeatable)")
    ap.add_argument("--workloads", default="W1,W2")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args(argv)
    kernels = [(name, load_variant(i, path))
               for i, (name, path) in enumerate(v.split("=", 1) for v in args.variant)] + [("now", probing)]
    print(f"| workload | {' | '.join(name for name, _ in kernels)} |")
    print(f"|---|{'---|' * len(kernels)}")
    for workload in args.workloads.split(","):
        rate = run_workload(workload, args.n, kernels, args.events, args.repeat)
        first = rate[kernels[0][0]]
        print(f"| {workload} | " + " | ".join(f"{rate[name]:,.0f} ({rate[name] / first:.2f}x)" for name, _ in kernels)
              + f" |  (load average {os.getloadavg()[0]:.2f})", flush=True)
    print("\nevents per CPU second of the kernel alone, best pass (ratio to the first)")


if __name__ == "__main__":
    main()
