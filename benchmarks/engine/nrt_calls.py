"""How many times numba's reference-counting runtime (NRT) runs per event, and the matching time beside it.

    python -m benchmarks.engine.nrt_calls --workload W0 --n 1000000 --events 20000
    python -m benchmarks.engine.nrt_calls --workload W1 --n 1000000 --events 20000
    python -m benchmarks.engine.nrt_calls --all --n 1000000 --events 20000 --json out.json

``--all`` measures every algorithm on W0 and each special path on a workload
that takes it (``CASES``): the bit-parallel path on the interval workload
(``bitmaps``, and ``dynamic``'s catch-all there), AMKH with g0's inequalities
in its key on Wu & Yu's workload, OpIndex's sparse workload for ``opindex``
and for ``dynamic``'s packed lists and direct cluster scans (20,000
attributes: ``lists="auto"`` packs; lists longer than ``PACK_MAX`` are
scanned with direct tests).  ``--workload`` is a W preset, ``intervals``,
``wuyu`` or ``sparse``; ``--options key=value,...`` are ``Matcher`` options.

Every array a numba function receives, unpacks from a ``NamedTuple`` or
slices may cost a call to ``NRT_incref`` and one to ``NRT_decref`` (an atomic
add each) that LLVM's pruning pass could not remove.  This counts the calls
that execute: it patches numba's definitions of the two functions (private
API of ``numba.core.runtime.nrtdynmod``, numba 0.6x) to also bump a counter,
before anything is compiled, so it must run in a process of its own.  The
counter's plain increment makes the calls a little slower: the time printed
is for comparison between kernels measured this way, not a throughput figure
(``benchmarks.engine.algorithms``, ``benchmarks.figures.fig3b_ab``).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import time

from llvmlite import ir
import numba.core.runtime.nrtdynmod as nrtdynmod

_COUNTS = (ctypes.c_int64 * 2)()  # executed NRT_incref, NRT_decref
_define_incref, _define_decref = nrtdynmod._define_nrt_incref, nrtdynmod._define_nrt_decref


def _bump(module, name: str, slot: int) -> None:
    """Make function ``name`` of the NRT module add 1 to ``_COUNTS[slot]`` on entry."""
    block = module.get_global(name).blocks[0]
    b = ir.IRBuilder(block)
    b.position_at_start(block)
    i64 = ir.IntType(64)
    p = b.inttoptr(ir.Constant(i64, ctypes.addressof(_COUNTS) + 8 * slot), i64.as_pointer())
    b.store(b.add(b.load(p), ir.Constant(i64, 1)), p)


def _counting_incref(module, atomic):
    _define_incref(module, atomic)
    _bump(module, "NRT_incref", 0)


def _counting_decref(module, atomic):
    _define_decref(module, atomic)
    _bump(module, "NRT_decref", 1)


nrtdynmod._define_nrt_incref, nrtdynmod._define_nrt_decref = _counting_incref, _counting_decref


#: (workload, algorithm, Matcher options) measured by ``--all``.
CASES: tuple[tuple[str, str, dict], ...] = (
    *(("W0", a, {}) for a in ("counting", "propagation", "propagation-wp", "static", "dynamic", "opindex", "bitmaps",
                              "amkh")),
    ("intervals", "bitmaps", {}),
    ("intervals", "dynamic", {}),
    ("wuyu", "amkh", {"general": ("g0",), "bucketing": "range", "buckets": 4}),
    ("sparse", "opindex", {}),
    ("sparse", "dynamic", {}),
)


def workload_batches(workload: str, n: int, n_events: int):
    """(subscriptions, events) of ``workload``: a W preset, ``intervals``, ``wuyu`` (x = 55) or ``sparse`` (OpIndex's)."""
    if workload == "intervals":
        from fastpubsub.workloads.intervals import IntervalSpec, interval_events, interval_subscriptions
        return interval_subscriptions(IntervalSpec(), n, seed=1), interval_events(IntervalSpec(), n_events, seed=2)
    if workload == "wuyu":
        from fastpubsub.workloads.intervals import WuYuSpec, wuyu_events, wuyu_subscriptions
        return wuyu_subscriptions(WuYuSpec(), n, seed=1), wuyu_events(WuYuSpec(), n_events, seed=2)
    if workload == "sparse":
        from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions
        spec = SPARSE_PRESETS["opindex"]
        return generate_sparse_subscriptions(spec, n, seed=1), generate_sparse_events(spec, n_events, seed=2)
    from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions
    spec = PRESETS[workload]
    return generate_subscriptions(spec, n=n, seed=1), generate_events(spec, n=n_events, seed=2)


def measure(workload: str, n: int, n_events: int, algorithm: str = "dynamic", options: dict | None = None) -> dict:
    """NRT calls per event of one ``match_encoded`` pass (after a first, compiling one) over ``n_events`` events."""
    from fastpubsub.engine import Matcher

    subs, events = workload_batches(workload, n, n_events)
    m = Matcher(algorithm, **(options or {}))
    m.add_bulk(subs)
    del subs
    m.match_encoded(events)
    inc0, dec0 = _COUNTS[0], _COUNTS[1]
    t = time.perf_counter()
    res = m.match_encoded(events)
    t = time.perf_counter() - t
    return {"workload": workload, "n": n, "events": n_events, "algorithm": algorithm,
            "options": {k: list(v) if isinstance(v, tuple) else v for k, v in (options or {}).items()},
            "incref_per_event": round((_COUNTS[0] - inc0) / n_events, 2),
            "decref_per_event": round((_COUNTS[1] - dec0) / n_events, 2),
            "matches_per_event": round(len(res.ids) / n_events, 3),
            "us_per_event_counted": round(t / n_events * 1e6, 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="W0")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--algorithm", default="dynamic")
    ap.add_argument("--options", default="", help="Matcher options: key=value,... (integers as digits)")
    ap.add_argument("--all", action="store_true", help="every case of CASES (ignores --workload, --algorithm)")
    ap.add_argument("--json", help="also write the results (with the command and load average) to this file")
    args = ap.parse_args(argv)
    options = {k: int(v) if v.isdigit() else v for k, v in (kv.split("=", 1) for kv in args.options.split(",") if kv)}
    cases = CASES if args.all else ((args.workload, args.algorithm, options),)
    results = []
    for workload, algorithm, opts in cases:
        r = measure(workload, args.n, args.events, algorithm, opts)
        r["load_average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(r, flush=True)
        results.append(r)
        gc.collect()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "python -m benchmarks.engine.nrt_calls " + " ".join(argv if argv is not None else sys.argv[1:]),
                       "date": time.strftime("%Y-%m-%d"), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
