"""Range-heavy workloads: the interval workload at 100K and 1M subscriptions (workloads/intervals.py).

    python -m benchmarks.workloads.intervals                                   # N = 100K, 1M; the four configurations below
    python -m benchmarks.workloads.intervals --n 1000000 --configs dynamic,bitmaps --repeat 5
    python -m benchmarks.workloads.intervals --n 100000 --width 0.1 --ranges 5   # another interval workload
    python -m benchmarks.workloads.intervals --wuyu --n 100000                 # Wu & Yu section 3 at x = 15..95

Configurations (``--configs``): ``counting``, ``propagation-wp``,
``dynamic`` (as it chooses by itself: with the default ``catch_all="auto"``
its range-only catch-all goes to the bit-parallel path when the price says
so), ``dynamic-scan`` (``catch_all="scan"``: the catch-all scanned, as before
the bit-parallel path existed) and ``bitmaps`` (``Matcher("bitmaps")``).

Per configuration and N: load time, ms per event on ``match_encoded``
(best and worst of ``--repeat`` passes over the same events: the machine is
shared), matches per event, ``stats()["memory_bytes"]``, the resident growth
the load caused (``rss_growth_bytes``, freed heap returned first), and for dynamic
which path its catch-all took.  Every configuration's matches are checked
equal to the first one's.  Slow configurations are timed on fewer events:
a first pass over 5 events sets how many (5 at least) fit in ``--budget`` seconds.

It also prints the constants of ``engine.costmodel.bitmaps`` these runs
imply: ``K_bw`` (ns per word ORed) from ``bitmaps``, and ``K_p`` (ns per
satisfied range predicate in phase 1) from ``dynamic-scan``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.harness.memory import rss_bytes
from benchmarks.harness.report import load_numbers, write_json
from fastpubsub.engine import Matcher
from fastpubsub.engine.columnar import take_subscriptions
from fastpubsub.engine.costmodel.bitmaps import RANGE_NU
from fastpubsub.engine.costmodel.model import calibrated_model
from fastpubsub.workloads.intervals import (IntervalSpec, WuYuSpec, interval_events, interval_subscriptions, wuyu_events,
                                         wuyu_subscriptions)

CONFIGS = {
    "counting": ("counting", {}),
    "propagation-wp": ("propagation-wp", {}),
    "dynamic": ("dynamic", {}),
    "dynamic-scan": ("dynamic", {"catch_all": "scan"}),
    "bitmaps": ("bitmaps", {}),
}


def time_passes(m: Matcher, events, repeat: int, budget: float):
    """(best, worst) seconds per event over ``repeat`` passes, events used, and the last result."""
    head = _first(events, min(5, len(events.offsets) - 1))
    t = time.perf_counter()
    m.match_encoded(head)
    per = (time.perf_counter() - t) / max(len(head), 1)
    total = len(events.offsets) - 1
    n = int(min(total, max(5, budget / max(per, 1e-9))))
    sub = events if n == total else _first(events, n)
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = m.match_encoded(sub)
        times.append((time.perf_counter() - t) / n)
    return min(times), max(times), n, out


def _first(events, n: int):
    """The first ``n`` events of a columnar batch."""
    from fastpubsub.engine.columnar import EventBatch

    end = int(events.offsets[n])
    return EventBatch(events.attribute_names, events.offsets[: n + 1].copy(), events.attributes[:end],
                      events.kinds[:end], events.numbers[:end], events.strings)


def run(subs, events, configs: list[str], repeat: int, budget: float) -> list[dict]:
    rows, ref = [], None
    for name in configs:
        algorithm, options = CONFIGS[name]
        warm = Matcher(algorithm, **options)  # the load's and the match's kernels compiled (or loaded) untimed
        warm.add_bulk(take_subscriptions(subs, np.arange(min(len(subs), 20_000))))
        warm.match_encoded(_first(events, 50))
        del warm
        rss0 = rss_bytes()
        m = Matcher(algorithm, **options)
        t = time.perf_counter()
        m.add_bulk(subs)
        load = time.perf_counter() - t
        rss = rss_bytes() - rss0
        m.match_encoded(_first(events, 50))  # compiled or loaded from numba's cache before timing
        best, worst, n_ev, out = time_passes(m, events, repeat, budget)
        if ref is not None:
            k = min(ref[0], n_ev)
            assert np.array_equal(out.offsets[: k + 1], ref[1].offsets[: k + 1]), name
            assert np.array_equal(out.ids[: out.offsets[k]], ref[1].ids[: ref[1].offsets[k]]), name
        else:
            ref = (n_ev, out)
        s = m.stats()
        row = {"config": name, "n": len(subs), "load_s": round(load, 2), "events": n_ev,
               "ms_per_event_best": round(best * 1e3, 4), "ms_per_event_worst": round(worst * 1e3, 4),
               "matches_per_event": round(len(out.ids) / n_ev, 3), "memory_bytes": s["memory_bytes"],
               "rss_growth_bytes": rss,
               "load_average": load_numbers()}
        if "catch_all" in s:
            row["catch_all"] = {k: s["catch_all"][k]
                                for k in ("mode", "active", "subscriptions", "range_only", "price_ns")}
        if "bitmaps" in s:
            row["bitmap_bytes"] = s["bitmaps"]["bitmap_bytes"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        del m
    return rows


def implied_constants(rows: list[dict], spec: IntervalSpec) -> dict:
    """K_bw and K_p as these runs measure them (see the module docstring)."""
    out = {}
    for r in rows:
        n = r["n"]
        if r["config"] == "bitmaps":
            words = spec.n_attributes * ((n + 63) // 64)
            out[f"K_bw@{n}"] = round(r["ms_per_event_best"] * 1e6 / words, 3)
        if r["config"] == "dynamic-scan":
            ranges = 2 * spec.n_ranges * n
            k_c = calibrated_model().K_c
            out[f"K_p@{n}"] = round((r["ms_per_event_best"] * 1e6 - k_c * n) / (RANGE_NU * ranges), 2)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="100000,1000000", help="comma-separated subscription counts")
    ap.add_argument("--configs", default="counting,propagation-wp,dynamic,bitmaps")
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per timed pass at most (fewer events)")
    ap.add_argument("--attributes", type=int, default=20)
    ap.add_argument("--ranges", type=int, default=10)
    ap.add_argument("--width", type=float, default=0.3)
    ap.add_argument("--wuyu", action="store_true", help="Wu & Yu's section 3 workload instead, x = 15, 35, .., 95")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/intervals.json")
    args = ap.parse_args(argv)
    configs = args.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown configuration {c!r}; expected one of {', '.join(CONFIGS)}")
    print(f"load average at start: {load_numbers()}", flush=True)
    rows = []
    for n in [int(x) for x in args.n.split(",")]:
        if args.wuyu:
            for x in (15, 35, 55, 75, 95):
                spec = WuYuSpec(x=x)
                print(f"-- Wu & Yu, x = {x}, N = {n}", flush=True)
                for r in run(wuyu_subscriptions(spec, n, args.seed), wuyu_events(spec, args.events, args.seed + 1),
                             configs, args.repeat, args.budget):
                    rows.append({**r, "x": x})
            continue
        spec = IntervalSpec(n_attributes=args.attributes, n_ranges=args.ranges, width=args.width)
        print(f"-- interval workload {spec}, N = {n}", flush=True)
        rs = run(interval_subscriptions(spec, n, args.seed), interval_events(spec, args.events, args.seed + 1), configs,
                 args.repeat, args.budget)
        rows.extend(rs)
        print("implied constants:", implied_constants(rs, spec), flush=True)
    print(f"load average at end: {load_numbers()}", flush=True)
    write_json(rows, args.out)


if __name__ == "__main__":
    main()
