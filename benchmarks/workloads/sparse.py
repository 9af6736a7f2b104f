"""Sparse, high-dimensional workloads: OpIndex's synthetic data and the eBay-like catalogue (workloads/sparse.py).

    python -m benchmarks.workloads.sparse                                   # 1M, opindex preset: dynamic, static, propagation-wp
    python -m benchmarks.workloads.sparse --algorithms dynamic,dynamic:presence=off,opindex --repeat 3
    python -m benchmarks.workloads.sparse --n 1000000 --algorithms opindex,dynamic,dynamic:lists=clusters --events 2000 --repeat 3
    python -m benchmarks.workloads.sparse --n 1000000 --algorithms dynamic --alternate-lists --events 2000 --repeat 3
    python -m benchmarks.workloads.sparse --preset ebay --n 1000000
    python -m benchmarks.workloads.sparse --n 500000,1000000,2000000 --attributes 20000,40000,60000 --json out.json

An algorithm is any name ``Matcher`` knows (``opindex`` once registered; an
unknown one is reported and skipped) with options after a colon:
``dynamic:presence=off`` is ``Matcher("dynamic", presence=False)`` (no
presence keys: subscriptions without ``=`` go to the catch-all list),
``dynamic:lists=clusters`` keeps the bit-vector path of clusters where
thousands of fields would pack the lists (docs/design/engine.md, "Sparse
attributes: packed lists and direct predicate tests").

Every matcher is given the same event statistics first (``set_statistics``:
an online snapshot of a separate sample of 20,000 events, what the Spark job
or the dynamic algorithm's own sampling would provide), then loaded with
``add_bulk``; matching is ``match_encoded`` on batches of events, best of
``--repeat`` passes (after a first batch, timed apart: ``first_match_s``), in wall-clock time and in the process's CPU time (on a
shared machine the second is far less disturbed by other work).  Sweeps over the attribute count (``--attributes``),
subscription size (``--gamma``, sizes 1..Gamma_max) and event size
(``--event-size``) follow Table 3.  Reported: load time, events/s, µs per event,
matches per event, subscriptions without ``=``, how they are filed
(presence keys, catch-all) and ``stats()["memory_bytes"]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
from dataclasses import replace

import numpy as np

from fastpubsub.engine import ALGORITHMS, Matcher
from fastpubsub.workloads.sparse import SPARSE_PRESETS, SparseSpec, generate_sparse_events, generate_sparse_subscriptions
from fastpubsub.engine.costmodel.statistics import StatisticsCollector

STATISTICS_SAMPLE = 20_000


def parse_algorithm(text: str) -> tuple[str, dict]:
    """``name[:key=value+key=value]`` -> (name, Matcher options); ``on``/``off`` are booleans, digits integers."""
    name, _, rest = text.partition(":")
    options: dict = {}
    for item in filter(None, rest.split("+")):
        k, _, v = item.partition("=")
        options[k] = {"on": True, "off": False}.get(v, int(v) if v.isdigit() else v)
    return name, options


def statistics_for(spec: SparseSpec, seed: int = 12345, sample: int = STATISTICS_SAMPLE):
    """Event statistics from a separate sample of the stream (as a statistics snapshot would give)."""
    col = StatisticsCollector(sample_per_batch=10**9, half_life=10**9)
    ev = generate_sparse_events(spec, sample, seed=seed)
    col.observe(ev)
    return col.snapshot()


def no_equality_share(subs) -> float:
    d = subs.disjunct_flags()
    ops = subs.operators
    has_eq = np.add.reduceat((ops == 0).astype(np.int64), subs.offsets[:-1]) > 0 if len(subs) else np.zeros(0, bool)
    head = np.cumsum(d == 0) - 1  # a subscription of several rows has an equality if every row has one
    all_rows = np.bincount(head, weights=has_eq, minlength=head[-1] + 1) == np.bincount(head, minlength=head[-1] + 1)
    return float(1.0 - all_rows.mean())


def run_one(label: str, name: str, options: dict, subs, batches: list, statistics, repeat: int) -> dict:
    warm = Matcher(name, **options)  # compiles (or loads) the kernels outside the figures
    warm.set_statistics(statistics)
    warm.add_bulk(generate_sparse_subscriptions(replace(SPARSE_PRESETS["opindex-operators"], n_attributes=500), 300,
                                                seed=99))
    warm.match_encoded(batches[0])
    del warm
    gc.collect()
    m = Matcher(name, **options)
    m.set_statistics(statistics)
    t = time.perf_counter()
    m.add_bulk(subs)
    load = time.perf_counter() - t
    t = time.perf_counter()
    m.match_encoded(batches[0])  # the first match after the load (static and dynamic pack their lists here)
    first = time.perf_counter() - t
    n_events = sum(len(b) for b in batches)
    best = best_cpu = float("inf")
    matches = 0
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        matches = 0
        for b in batches:
            matches += len(m.match_encoded(b).ids)
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    st = m.stats()
    ht = st.get("hash_tables", {})
    return {
        "algorithm": label, "subscriptions": subs.n_subscriptions, "load_s": round(load, 3),
        "first_match_s": round(first, 3), "lists": st.get("lists"),
        "events_per_s": round(n_events / best), "us_per_event": round(best / n_events * 1e6, 2),
        "cpu_events_per_s": round(n_events / max(best_cpu, 1e-9)),
        "matches_per_event": round(matches / n_events, 2), "memory_mb": round(st["memory_bytes"] / 2**20, 1),
        "presence_subscriptions": ht.get("presence_subscriptions"), "catch_all_subscriptions": ht.get("catch_all_subscriptions"),
        "tables": ht.get("multi_attribute"),
    }


def alternate_lists(name: str, options: dict, subs, batches: list, statistics, repeat: int) -> dict:
    """One static/dynamic matcher, its packed lists and its clusters measured alternately (same data, same process)."""
    m = Matcher(name, **options)
    m.set_statistics(statistics)
    m.add_bulk(subs)
    n_events = sum(len(b) for b in batches)
    best = {"packed": float("inf"), "clusters": float("inf")}
    results = {}
    for _ in range(repeat):
        for mode in best:
            m.index.lists = mode
            m.match_encoded(batches[0])  # packs (or repacks) outside the timing
            c = time.process_time()
            out = [m.match_encoded(b) for b in batches]
            best[mode] = min(best[mode], time.process_time() - c)
            results[mode] = np.concatenate([r.ids for r in out])
    assert np.array_equal(results["packed"], results["clusters"])
    return {mode: {"cpu_us_per_event": round(t / n_events * 1e6, 2), "cpu_events_per_s": round(n_events / t)}
            for mode, t in best.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="opindex", choices=sorted(SPARSE_PRESETS))
    ap.add_argument("--n", default="1000000", help="subscription counts, comma separated")
    ap.add_argument("--algorithms", default="dynamic,static,propagation-wp")
    ap.add_argument("--attributes", default="", help="attribute counts d to sweep (default: the preset's)")
    ap.add_argument("--gamma", default="", help="Gamma_max values to sweep (sizes 1..Gamma_max)")
    ap.add_argument("--event-size", default="", help="event sizes m to sweep")
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--statistics-sample", type=int, default=STATISTICS_SAMPLE, help="events the statistics are taken from")
    ap.add_argument("--alternate-lists", action="store_true",
                    help="static/dynamic only: packed lists and clusters alternately in one matcher (CPU time)")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    base = SPARSE_PRESETS[args.preset]
    specs = [base]
    if args.attributes:
        specs = [replace(s, n_attributes=int(d)) for s in specs for d in args.attributes.split(",")]
    if args.gamma:
        specs = [replace(s, subscription_size=(1, int(g))) for s in specs for g in args.gamma.split(",")]
    if args.event_size:
        specs = [replace(s, event_size=(int(m), int(m))) for s in specs for m in args.event_size.split(",")]
    print(f"# {platform.node()} {os.cpu_count()} cpus, load average {os.getloadavg()}")
    rows = []
    for spec in specs:
        statistics = statistics_for(spec, sample=args.statistics_sample)
        events = generate_sparse_events(spec, args.events, seed=args.seed + 1)
        from fastpubsub.engine.columnar import take_events
        batches = [take_events(events, np.arange(i, min(i + args.batch, len(events)))) for i in range(0, len(events), args.batch)]
        for n in (int(x) for x in args.n.split(",")):
            subs = generate_sparse_subscriptions(spec, n, seed=args.seed)
            share = no_equality_share(subs)
            for text in args.algorithms.split(","):
                name, options = parse_algorithm(text)
                if name not in ALGORITHMS:
                    print(f"# {name}: not registered here (Matcher knows {', '.join(ALGORITHMS)}); skipped")
                    continue
                if args.alternate_lists:
                    print(json.dumps({"algorithm": text, "subscriptions": n, "load_average": os.getloadavg(),
                                      **alternate_lists(name, options, subs, batches, statistics, args.repeat)}),
                          flush=True)
                    continue
                row = run_one(text, name, options, subs, batches, statistics, args.repeat)
                row.update({"preset": spec.name, "d": spec.n_attributes, "gamma_max": spec.subscription_size[1],
                            "m": spec.event_size[1], "no_equality": round(share, 3)})
                rows.append(row)
                print(json.dumps(row), flush=True)
                gc.collect()
    print(f"# load average {os.getloadavg()}")
    print("| algorithm | N | d | Γmax | m | load s | first match s | events/s | events/s of CPU time | µs/event | matches/event | presence / catch-all subs | memory MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['algorithm']} | {r['subscriptions']:,} | {r['d']:,} | {r['gamma_max']} | {r['m']} | {r['load_s']:.1f} | {r['first_match_s']:.2f} | "
              f"{r['events_per_s']:,} | {r['cpu_events_per_s']:,} | {r['us_per_event']} | {r['matches_per_event']} | "
              f"{r['presence_subscriptions']} / {r['catch_all_subscriptions']} | {r['memory_mb']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
