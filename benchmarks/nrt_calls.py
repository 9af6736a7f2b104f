"""How many times numba's reference-counting runtime (NRT) runs per event, and the matching time beside it.

    python -m benchmarks.nrt_calls --workload W0 --n 1000000 --events 20000
    python -m benchmarks.nrt_calls --workload W1 --n 1000000 --events 20000

Every array a numba function receives, unpacks from a ``NamedTuple`` or
slices may cost a call to ``NRT_incref`` and one to ``NRT_decref`` (an atomic
add each) that LLVM's pruning pass could not remove.  This counts the calls
that execute: it patches numba's definitions of the two functions (private
API of ``numba.core.runtime.nrtdynmod``, numba 0.6x) to also bump a counter,
before anything is compiled, so it must run in a process of its own.  The
counter's plain increment makes the calls a little slower: the time printed
is for comparison between kernels measured this way, not a throughput figure
(``benchmarks.engine``, ``benchmarks.fig3b_ab``).
"""

from __future__ import annotations

import argparse
import ctypes
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


def measure(workload: str, n: int, n_events: int, algorithm: str = "dynamic") -> dict:
    """NRT calls per event of one ``match_encoded`` pass (after a first, compiling one) over ``n_events`` events."""
    from fastpubsub.engine import Matcher
    from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions

    spec = PRESETS[workload]
    events = generate_events(spec, n=n_events, seed=2)
    m = Matcher(algorithm)
    m.add_bulk(generate_subscriptions(spec, n=n, seed=1))
    m.match_encoded(events)
    inc0, dec0 = _COUNTS[0], _COUNTS[1]
    t = time.perf_counter()
    res = m.match_encoded(events)
    t = time.perf_counter() - t
    return {"workload": workload, "n": n, "events": n_events, "algorithm": algorithm,
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
    args = ap.parse_args(argv)
    print(measure(args.workload, args.n, args.events, args.algorithm), flush=True)


if __name__ == "__main__":
    main()
