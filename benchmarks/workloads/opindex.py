"""OpIndex's workloads (Zhang et al., PVLDB 2014, section 7) through the public API: opindex against the engine.

Three measurements, each comparing algorithms side by side in one process on
the same generated data (workloads/sparse.py), with identical matches
checked:

* ``compare``: one workload (default OpIndex's synthetic data at 1M
  subscriptions: 20,000 attributes, subscriptions of 1-8 predicates, 40 %
  ``=``, events of 40 attributes; ``--zipf`` for Zipf-popular attributes):
  insertion time (one ``add_bulk``; ``index_insert_s`` is the part spent in
  the algorithm's index, the rest is the matcher's validation and
  interning, common to all), memory (``stats()["memory_bytes"]``), events/s (best of
  ``--repeat`` rounds, the algorithms taking turns in each round).
* ``changes``: with ``--n`` subscriptions present, single ``add`` and
  ``remove`` calls per second (buffered and applied in bulk by the matcher,
  timed until a match has seen them) and ``remove_bulk`` per second.
* ``sweep``: the shape of section 7.3's synthetic figures scaled to this
  machine: events/s, insertion time and memory as the number of
  subscriptions (0.5M-4M), of attributes (20K-60K), the subscription size
  (Gamma_max) and the event size (m) grow; one CSV row per (point,
  algorithm) and, with ``--img``, a figure.

Commands (the figures in docs/benchmarks.md):

    python -m benchmarks.workloads.opindex compare --n 1000000 --repeat 5
    python -m benchmarks.workloads.opindex compare --n 1000000 --zipf 0.6 --statistics --events 1000 --repeat 2
    python -m benchmarks.workloads.opindex compare --preset ebay --n 1000000 --statistics --events 3000 --repeat 3
    python -m benchmarks.workloads.opindex compare --preset opindex-operators --n 1000000 --events 2000 --repeat 2
    python -m benchmarks.workloads.opindex changes --n 1000000 --changes 20000
    python -m benchmarks.workloads.opindex sweep --n 500000 --events 1000 --repeat 2 --csv benchmarks/results/opindex_sweep.csv --img docs/img/opindex-sweep.png
    python -m benchmarks.workloads.opindex plot --csv benchmarks/results/opindex_sweep.csv --img docs/img/opindex-sweep.png
"""

from __future__ import annotations

import argparse
import csv
import gc
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from fastpubsub.engine import EventStatistics, Matcher
from fastpubsub.engine.costmodel.statistics import StatisticsCollector
from fastpubsub.engine.columnar import take_events, take_subscriptions
from fastpubsub.workloads.sparse import (
    OPINDEX, SPARSE_PRESETS, SparseSpec, generate_sparse_events, generate_sparse_subscriptions,
)

ALGORITHMS = ("opindex", "dynamic", "propagation-wp")
BATCH = 1000  # events per match_encoded call


def load(algorithm: str, subs) -> tuple[Matcher, float, float]:
    """A matcher holding ``subs``, the seconds its ``add_bulk`` took and the part the algorithm's index took.

    The rest (validation, interning predicates) is the matcher's, the same for
    every algorithm.  Kernels are compiled beforehand.
    """
    warm = Matcher(algorithm)
    warm.add_bulk(take_subscriptions(subs, np.arange(min(len(subs), 200))))
    gc.collect()
    m = Matcher(algorithm)
    index, filing = m.index, [0.0]
    add_bulk = index.add_bulk

    def timed(*args):
        t0 = time.perf_counter()
        add_bulk(*args)
        filing[0] += time.perf_counter() - t0

    index.add_bulk = timed
    t = time.perf_counter()
    m.add_bulk(subs)
    secs = time.perf_counter() - t
    del index.add_bulk
    return m, secs, filing[0]


def event_statistics(spec: SparseSpec, n: int = 5000, seed: int = 99) -> EventStatistics:
    """Statistics of a sample of the workload's events (presence and values of each attribute), as the Spark job gives."""
    events = generate_sparse_events(spec, n, seed=seed)
    collector = StatisticsCollector(sample_per_batch=n, half_life=10**9)
    collector.observe(events)
    return collector.snapshot()


def match_all(m: Matcher, batches) -> tuple[float, list]:
    t = time.perf_counter()
    out = [m.match_encoded(b) for b in batches]
    return time.perf_counter() - t, out


def compare(spec: SparseSpec, n: int, n_events: int, repeat: int, algorithms=ALGORITHMS, seed: int = 1,
            progress=print, statistics: bool = False) -> list[dict]:
    """One row per algorithm: insertion seconds, memory, events/s (best round), matches per event.

    ``statistics``: each matcher is given event statistics (``set_statistics``) after loading and before matching.
    """
    stats = event_statistics(spec) if statistics else None
    subs = generate_sparse_subscriptions(spec, n, seed=seed)
    events = generate_sparse_events(spec, n_events, seed=seed + 1)
    batches = [take_events(events, np.arange(i, min(i + BATCH, n_events))) for i in range(0, n_events, BATCH)]
    matchers, rows = {}, {}
    for a in algorithms:
        m, secs, filing = load(a, subs)
        t = time.perf_counter()
        if stats is not None:
            m.set_statistics(stats)
        adopt = time.perf_counter() - t
        m.match_encoded(batches[0])
        matchers[a] = m
        s = m.stats()
        rows[a] = {"algorithm": a, "workload": spec.name, "subscriptions": n, "rows": len(subs), "attributes": spec.n_attributes,
                   "subscription_size": f"{spec.subscription_size[0]}-{spec.subscription_size[1]}",
                   "event_size": f"{spec.event_size[0]}-{spec.event_size[1]}", "zipf": spec.attribute_zipf,
                   "insert_s": round(secs, 2), "inserts_per_s": round(n / secs),
                   "index_insert_s": round(filing, 2), "statistics": statistics,
                   "set_statistics_s": round(adopt, 2),
                   "memory_mb": round(s["memory_bytes"] / 1e6, 1), "best_s": float("inf")}
        progress(f"# loaded {a}: {secs:.1f} s, {rows[a]['memory_mb']} MB")
    reference = None
    for r in range(repeat):
        for a in algorithms:
            secs, out = match_all(matchers[a], batches)
            rows[a]["best_s"] = min(rows[a]["best_s"], secs)
            ids = np.concatenate([o.ids for o in out])
            offs = [np.diff(o.offsets) for o in out]
            got = (ids, np.concatenate(offs))
            if reference is None:
                reference = got
            elif not (np.array_equal(got[0], reference[0]) and np.array_equal(got[1], reference[1])):
                raise AssertionError(f"{a} disagrees with {algorithms[0]}")
    load_avg = os.getloadavg()[0]
    for a in algorithms:
        row = rows[a]
        row["events_per_s"] = round(n_events / row.pop("best_s"))
        row["matches_per_event"] = round(len(reference[0]) / n_events, 1)
        row["load_average"] = round(load_avg, 2)
        progress(" ".join(f"{k}={v}" for k, v in row.items()))
    return list(rows.values())


def changes(spec: SparseSpec, n: int, n_changes: int, algorithms=ALGORITHMS, seed: int = 1, progress=print) -> list[dict]:
    """Single adds/s and removes/s with ``n`` subscriptions present, and bulk removes/s."""
    subs = generate_sparse_subscriptions(spec, n, seed=seed)
    extra = generate_sparse_subscriptions(spec, n_changes, seed=seed + 7, first_id=10 * n + 10).to_lists()
    event = generate_sparse_events(spec, 10, seed=seed + 1)
    stats = event_statistics(spec)
    rows = []
    for a in algorithms:
        m, secs, _ = load(a, subs)
        m.match_encoded(event)
        t = time.perf_counter()
        for sid, preds in extra:
            m.add(sid, preds)
        m.match_encoded(event)
        t_add = time.perf_counter() - t
        ids = [sid for sid, _ in extra]
        t = time.perf_counter()
        for sid in ids:
            m.remove(sid)
        m.match_encoded(event)
        t_remove = time.perf_counter() - t
        t = time.perf_counter()
        m.set_statistics(stats)  # opindex: every row whose rarest attribute changed moves
        t_stats = time.perf_counter() - t
        moved = m.stats().get("moved_by_refresh", 0)
        old = np.unique(np.asarray(subs.ids))[: n_changes]
        t = time.perf_counter()
        m.remove_bulk(old)
        t_bulk = time.perf_counter() - t
        row = {"algorithm": a, "workload": spec.name, "present": n, "changes": len(extra), "single_adds_per_s": round(len(extra) / t_add),
               "single_removes_per_s": round(len(ids) / t_remove), "bulk_removes_per_s": round(len(old) / t_bulk),
               "bulk_inserts_per_s": round(len(subs) / secs), "set_statistics_s": round(t_stats, 2),
               "moved_by_refresh": moved, "load_average": round(os.getloadavg()[0], 2)}
        progress(" ".join(f"{k}={v}" for k, v in row.items()))
        rows.append(row)
        del m
        gc.collect()
    return rows


SWEEP = {  # section 7.3's axes (Table 3), scaled: (parameter, values)
    "subscriptions": (500_000, 1_000_000, 2_000_000, 4_000_000),
    "attributes": (20_000, 40_000, 60_000),
    "subscription_size": (4, 8, 12, 16, 20),
    "event_size": (20, 40, 80, 120),
}


def sweep(n: int, n_events: int, repeat: int, axes: list[str], algorithms=ALGORITHMS, progress=print,
          csv_path: str | None = None) -> list[dict]:
    """Every point of ``axes``; with ``csv_path`` the CSV is rewritten after each point (a long sweep keeps its rows)."""
    rows: list[dict] = []
    for axis in axes:
        for v in SWEEP[axis]:
            spec, size = OPINDEX, n
            if axis == "subscriptions":
                size = v
            elif axis == "attributes":
                spec = replace(OPINDEX, n_attributes=v)
            elif axis == "subscription_size":
                spec = replace(OPINDEX, subscription_size=(1, v))
            else:
                spec = replace(OPINDEX, event_size=(v, v))
            progress(f"# {axis} = {v}")
            for row in compare(spec, size, n_events, repeat, algorithms, progress=progress):
                rows.append({"axis": axis, "value": v, **row})
            if csv_path:
                write_csv(rows, csv_path)
            gc.collect()
    return rows


def write_csv(rows: list[dict], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def read_csv(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: (v if k in ("axis", "algorithm", "subscription_size", "event_size") else float(v))
                 for k, v in r.items()} for r in csv.DictReader(f)]


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = [a for a in SWEEP if any(r["axis"] == a for r in rows)]
    fig, grid = plt.subplots(3, len(axes), figsize=(4 * len(axes), 9), squeeze=False)
    labels = {"subscriptions": "subscriptions N", "attributes": "attributes d", "subscription_size": "Gamma_max",
              "event_size": "event size m"}
    for j, axis in enumerate(axes):
        for metric, i, ylabel in (("events_per_s", 0, "events/s"), ("insert_s", 1, "insertion (s)"),
                                  ("memory_mb", 2, "memory (MB)")):
            ax = grid[i][j]
            for a in dict.fromkeys(r["algorithm"] for r in rows):
                pts = [(r["value"], r[metric]) for r in rows if r["axis"] == axis and r["algorithm"] == a]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=a)
            ax.set_xlabel(labels[axis])
            if axis == "subscriptions":
                ax.ticklabel_format(axis="x", style="plain")
                ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1e6:g}M"))
            ax.set_ylabel(ylabel)
            if metric == "events_per_s":
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
    grid[0][0].legend()
    others = [r for r in rows if r["axis"] != "subscriptions"] or rows
    n = int(others[0]["subscriptions"])
    loads = [float(r["load_average"]) for r in rows]
    fig.suptitle(f"OpIndex's synthetic workload (section 7.3), scaled: N={n:,} unless varied, d=20,000, "
                 f"Gamma 1..8, m=40, 40% '='; one thread, load average {min(loads):.1f}-{max(loads):.1f}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.workloads.opindex", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    plot_cmd = sub.add_parser("plot", help="the sweep's figure from its CSV")
    plot_cmd.add_argument("--csv", required=True)
    plot_cmd.add_argument("--img", required=True)
    for name in ("compare", "changes", "sweep"):
        s = sub.add_parser(name)
        s.add_argument("--n", type=int, default=1_000_000, help="subscriptions (sweep: default of the other axes)")
        s.add_argument("--algorithms", default=",".join(ALGORITHMS))
        s.add_argument("--preset", default="opindex", choices=sorted(SPARSE_PRESETS),
                       help="compare, changes: the workload (workloads/sparse.py); --attributes/--zipf override it")
        s.add_argument("--attributes", type=int)
        s.add_argument("--zipf", type=float, help="Zipf exponent of attribute popularity")
        s.add_argument("--events", type=int, default=5000)
        s.add_argument("--repeat", type=int, default=3)
        s.add_argument("--changes", type=int, default=20_000)
        s.add_argument("--axes", default=",".join(SWEEP))
        s.add_argument("--statistics", action="store_true",
                       help="compare: give every matcher event statistics before matching")
        s.add_argument("--csv")
        s.add_argument("--img")
    args = p.parse_args(argv)
    if args.cmd == "plot":
        plot(read_csv(args.csv), args.img)
        return 0
    algorithms = tuple(a for a in args.algorithms.split(",") if a)
    spec = SPARSE_PRESETS[args.preset]
    if args.attributes is not None:
        spec = replace(spec, n_attributes=args.attributes)
    if args.zipf is not None:
        spec = replace(spec, attribute_zipf=args.zipf)
    print(f"# {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}", flush=True)
    t0 = time.perf_counter()
    if args.cmd == "compare":
        rows = compare(spec, args.n, args.events, args.repeat, algorithms, statistics=args.statistics)
    elif args.cmd == "changes":
        rows = changes(spec, args.n, args.changes, algorithms)
    else:
        rows = sweep(args.n, args.events, args.repeat, [a for a in args.axes.split(",") if a], algorithms,
                     csv_path=args.csv)
        if args.img:
            plot(rows, args.img)
    if args.csv and rows:
        write_csv(rows, args.csv)
    print(f"# {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
