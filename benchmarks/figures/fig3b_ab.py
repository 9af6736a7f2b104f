"""Figure 3(b)'s workloads (W1, W2) at one N, several matcher configurations side by side.

    python -m benchmarks.figures.fig3b_ab --n 6000000 --workloads W1,W2 --configs dynamic,dynamic:runs=0 --repeat 5
    python -m benchmarks.figures.fig3b_ab --n 1000000 --workloads W2 --configs dynamic,static,dynamic:runs=0
    python -m benchmarks.figures.fig3b_ab --n 6000000 --counters --buckets 2,4,8   # entries examined per event, no matcher
    python -m benchmarks.figures.fig3b_ab --n 6000000 --variants --configs dynamic  # where an event's time goes

``python -m benchmarks.suite fig3b`` sweeps N for one configuration per algorithm, one
after the other; on a shared machine a figure taken minutes after another
says little about their ratio.  Here, per workload, every configuration is
loaded with the same subscriptions, then each round times one
``match_encoded`` pass of every matcher in turn, in wall-clock and in CPU
time (best and worst over the rounds), and checks that they all return the
same matches.  A configuration is ``algorithm[:option=value,...]`` with the
matcher's keyword options (``runs=0``: the paper's plain clusters, what
Figure 3(b) measured).  One workload is in memory at a time.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.engine.semantics import OP_EQ, OP_GE, OP_GT, OP_LE, OP_LT
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions

from benchmarks.harness import report
from benchmarks.harness.memory import rss_bytes


def parse_config(text: str) -> tuple[str, dict]:
    """``dynamic:runs=0,foo=1`` -> ("dynamic", {"runs": 0, "foo": 1}); values are ints when they parse as ints."""
    algorithm, _, rest = text.partition(":")
    options: dict = {}
    for part in filter(None, rest.split(",")):
        key, _, value = part.partition("=")
        try:
            options[key] = int(value)
        except ValueError:
            options[key] = value
    return algorithm, options


def _warm(algorithm: str, options: dict, spec, events) -> None:
    m = Matcher(algorithm, **options)
    m.add_bulk(generate_subscriptions(spec, n=3000, seed=99))
    m.match_encoded(events)


def run_workload(workload: str, n: int, configs: list[str], n_events: int, repeat: int,
                 progress=print) -> list[dict]:
    spec = PRESETS[workload]
    events = generate_events(spec, n=n_events, seed=2)
    subs = generate_subscriptions(spec, n=n, seed=1)
    ms: dict[str, Matcher] = {}
    rows: dict[str, dict] = {}
    for config in configs:
        algorithm, options = parse_config(config)
        _warm(algorithm, options, spec, events)
        gc.collect()
        rss0 = rss_bytes()
        m = Matcher(algorithm, **options)
        t0 = time.perf_counter()
        m.add_bulk(subs)
        load_s = time.perf_counter() - t0
        rss1 = rss_bytes()
        st = m.stats()
        row = {"workload": workload, "config": config, "n": n, "events": n_events, "load_s": round(load_s, 1),
               "rss_delta_mb": round((rss1 - rss0) / 2**20), "memory_mb": round(st["memory_bytes"] / 2**20)}
        tables = st.get("hash_tables", {}).get("schemas")
        if tables is not None:
            row["tables"] = [t["fields"] for t in tables]
        progress(json.dumps(row))
        ms[config], rows[config] = m, row
    del subs
    gc.collect()
    wall = {c: [] for c in ms}
    cpu = {c: [] for c in ms}
    reference = None
    load = [os.getloadavg()[0]]
    for _ in range(repeat):
        for c, m in ms.items():
            w, p = time.perf_counter(), time.process_time()
            res = m.match_encoded(events)
            wall[c].append(time.perf_counter() - w)
            cpu[c].append(time.process_time() - p)
            if reference is None:
                reference = res
            elif not (np.array_equal(res.offsets, reference.offsets) and np.array_equal(res.ids, reference.ids)):
                raise AssertionError(f"{workload}: {c} matched differently from {configs[0]}")
            rows[c]["matches_per_event"] = round(len(res.ids) / n_events, 2)
        load.append(os.getloadavg()[0])
    for c in ms:
        rows[c].update({
            "events_per_s_best": round(n_events / min(wall[c])), "events_per_s_worst": round(n_events / max(wall[c])),
            "events_per_cpu_s_best": round(n_events / min(cpu[c])),
            "events_per_cpu_s_worst": round(n_events / max(cpu[c])),
            "load_average": [round(min(load), 2), round(max(load), 2)],
        })
    base = rows[configs[-1]]
    for c in ms:
        rows[c][f"cpu_over_{configs[-1]}"] = round(rows[c]["events_per_cpu_s_best"] / base["events_per_cpu_s_best"], 2)
    ms.clear()
    gc.collect()
    return list(rows.values())


def event_variants(spec, events) -> dict[str, object]:
    """The workload's events as drawn, and with one part of every subscription made to hold always or never.

    ``free never``: the free attributes' values lie outside the domain, so no entry's free equality (the first
    column with runs) holds; ``inequalities never`` / ``always``: the fixed inequality attributes take values
    that no / every constant satisfies.  The time differences price the entries that pass the first column
    and the matches themselves.
    """
    from fastpubsub.engine.columnar import EventBatch

    lo, hi = spec.domain
    n_fix = len(spec.fixed)
    ineq = [(a, op) for a, op in enumerate(spec.fixed) if op != "="]

    def with_values(assign) -> EventBatch:
        num = np.asarray(events.numbers).reshape(-1, spec.n_attributes).copy()
        for a, v in assign:
            num[:, a] = v
        return EventBatch(attribute_names=events.attribute_names, offsets=events.offsets,
                          attributes=events.attributes, kinds=events.kinds, numbers=num.ravel())

    return {
        "drawn": events,
        "free never": with_values([(a, lo - 1) for a in range(n_fix, spec.n_attributes)]),
        "inequalities never": with_values([(a, hi + 1 if op in ("<=", "<") else lo - 1) for a, op in ineq]),
        "inequalities always": with_values([(a, lo - 1 if op in ("<=", "<") else hi + 1) for a, op in ineq]),
    }


def run_variants(workload: str, n: int, configs: list[str], n_events: int, repeat: int) -> list[dict]:
    """CPU events/s of each configuration on each event variant (:func:`event_variants`), best of ``repeat``."""
    spec = PRESETS[workload]
    variants = event_variants(spec, generate_events(spec, n=n_events, seed=2))
    subs = generate_subscriptions(spec, n=n, seed=1)
    rows = []
    for config in configs:
        algorithm, options = parse_config(config)
        _warm(algorithm, options, spec, variants["drawn"])
        m = Matcher(algorithm, **options)
        m.add_bulk(subs)
        best = {v: float("inf") for v in variants}
        matches = {}
        for _ in range(repeat):
            for v, ev in variants.items():
                p = time.process_time()
                res = m.match_encoded(ev)
                best[v] = min(best[v], time.process_time() - p)
                matches[v] = round(len(res.ids) / n_events, 2)
        for v in variants:
            rows.append({"workload": workload, "config": config, "n": n, "events": v,
                         "events_per_cpu_s": round(n_events / best[v]), "us_per_event": round(best[v] / n_events * 1e6, 2),
                         "matches_per_event": matches[v], "load_average": round(os.getloadavg()[0], 2)})
        del m
        gc.collect()
    return rows


def counters(workload: str, n: int, n_events: int, buckets: list[int]) -> list[dict]:
    """Entries an event examines in the layout static and dynamic build on W1/W2, counted from the subscriptions.

    Both put every subscription under the (a0, a1) pair table, so an event reaches one list.  Plain clusters
    (``runs=0``) test every entry of it; with runs the list is sorted by its first column, the free equality
    (the rarest one left), and the run index hands over only the entries whose free equality the event
    satisfies.  A value-range bucket member on the first fixed inequality (a2 ``<=``, ``buckets`` equal-width
    buckets of its constants) would split the list further: an event probes the buckets holding a constant its
    value satisfies.  Counted with numpy from the workload itself (no matcher), on ``n_events`` events.
    """
    spec = PRESETS[workload]
    subs = generate_subscriptions(spec, n=n, seed=1)
    k = spec.n_predicates
    vals = np.asarray(subs.numbers).reshape(n, k).astype(np.int64)
    attrs = np.asarray(subs.attributes).reshape(n, k)
    ops = np.asarray(subs.operators).reshape(n, k)
    del subs
    events = generate_events(spec, n=n_events, seed=2)
    ev = np.asarray(events.numbers).reshape(n_events, spec.n_attributes).astype(np.int64)
    lo, hi = spec.domain
    width = hi - lo + 1
    key = (vals[:, 0] - lo) * width + (vals[:, 1] - lo)
    order = np.argsort(key, kind="stable")
    starts = np.searchsorted(key[order], np.arange(width * width + 1))
    n_fix = len(spec.fixed)
    totals = {"list": 0, "first_column": 0, "matches": 0}
    for b in buckets:
        totals[f"bucket{b}"] = 0
        totals[f"bucket{b}_probes"] = 0
    for e in ev:
        q = (e[0] - lo) * width + (e[1] - lo)
        idx = order[starts[q]:starts[q + 1]]
        totals["list"] += len(idx)
        free = ev_free = e[attrs[idx, -1]] == vals[idx, -1]
        totals["first_column"] += int(free.sum())
        ok = ev_free.copy()
        for j in range(2, n_fix):
            x, c = e[attrs[idx, j]], vals[idx, j]
            op = ops[idx[0], j] if len(idx) else 0
            ok &= {OP_LE: x <= c, OP_GE: x >= c, OP_LT: x < c, OP_GT: x > c, OP_EQ: x == c}[int(op)]
        totals["matches"] += int(ok.sum())
        for b in buckets:
            # a2 <= c holds for c >= e[2]: the buckets whose largest constant is >= e[2] are probed
            edges = lo + (np.arange(b + 1) * width) // b  # bucket i holds constants [edges[i], edges[i+1])
            probed = edges[1:] - 1 >= e[2]
            bucket_of = np.searchsorted(edges, vals[idx, 2], side="right") - 1
            totals[f"bucket{b}"] += int((free & probed[bucket_of]).sum())
            totals[f"bucket{b}_probes"] += int(probed.sum())
    row = {"workload": workload, "n": n, "events": n_events}
    row.update({name: round(v / n_events, 2) for name, v in totals.items()})
    return [row]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=6_000_000)
    ap.add_argument("--workloads", default="W1,W2")
    ap.add_argument("--configs", default="dynamic,dynamic:runs=0",
                    help="configurations, algorithm[:option=value,...], separated by commas (or by ';')")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/fig3b_ab.json")
    ap.add_argument("--counters", action="store_true",
                    help="count entries examined per event in each layout instead (numpy, no matcher)")
    ap.add_argument("--buckets", default="2,4", help="--counters: bucket counts for the a2 inequality")
    ap.add_argument("--variants", action="store_true",
                    help="time each configuration on variants of the events (free equalities never hold, "
                         "inequalities never / always hold) instead")
    args = ap.parse_args(argv)
    if args.variants:
        for workload in args.workloads.split(","):
            for row in run_variants(workload, args.n, _split_configs(args.configs), args.events, args.repeat):
                print(json.dumps(row), flush=True)
        return
    if args.counters:
        for workload in args.workloads.split(","):
            for row in counters(workload, args.n, min(args.events, 2000),
                                [int(b) for b in args.buckets.split(",") if b]):
                print(json.dumps(row), flush=True)
        return
    configs = [c for c in (args.configs.split(";") if ";" in args.configs else _split_configs(args.configs)) if c]
    rows = []
    for workload in args.workloads.split(","):
        for row in run_workload(workload, args.n, configs, args.events, args.repeat):
            print(json.dumps(row), flush=True)
            rows.append(row)
    print()
    print("| workload | configuration | events/s (wall, best-worst) | events/s (CPU, best-worst) | matches/event | "
          "load average | tables |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | `{r['config']}` | {r['events_per_s_best']:,}-{r['events_per_s_worst']:,} | "
              f"{r['events_per_cpu_s_best']:,}-{r['events_per_cpu_s_worst']:,} | {r['matches_per_event']} | "
              f"{r['load_average'][0]}-{r['load_average'][1]} | {r.get('tables', '')} |")
    report.write_json(rows, args.out)


def _split_configs(text: str) -> list[str]:
    """Split on commas that start a new configuration (``name`` or ``name:...``), not on those between options."""
    out: list[str] = []
    for part in text.split(","):
        if out and "=" in part and ":" not in part:
            out[-1] += "," + part
        else:
            out.append(part)
    return out


if __name__ == "__main__":
    main()
