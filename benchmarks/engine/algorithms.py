"""Engine benchmark on Fabret et al.'s workload W0 (section 6.2.1, Figure 3).

    python -m benchmarks.engine.algorithms                       # N = 100K, 1M, 3M, 6M; counting, propagation, propagation-wp
    python -m benchmarks.engine.algorithms --n 1000000,6000000 --algorithms propagation-wp,static,dynamic
    python -m benchmarks.engine.algorithms --n 6000000 --algorithms dynamic --create-factor 1.0   # a maintenance threshold
    python -m benchmarks.engine.algorithms --n 1000000 --algorithms propagation,propagation-wp --repeat 5
    python -m benchmarks.engine.algorithms --tune --n 6000000    # UNFOLD / LOOKAHEAD / prefetched columns grid
    python -m benchmarks.engine.algorithms --n 6000000 --algorithms dynamic --skew 2-16:1-2   # W0 with a2..a16 on 2 values

Per algorithm and N it reports: bulk load time (``add_bulk``), events/s on
``match_encoded`` and on ``match_batch`` (dicts), the time to encode the dicts
alone, matches per event, the RSS growth caused by loading, and
``stats()["memory_bytes"]``.  Timings are best-of-``--repeat``: the machine
is shared, so the minimum is the least disturbed run.  numba compilation is
done on a throw-away matcher first and is not in any figure.
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

from fastpubsub.engine import Matcher
from fastpubsub.engine.frontend.encoding import batch_from_dicts, encode_batch
from fastpubsub.engine.costmodel.maintenance import Thresholds
from fastpubsub.workloads.fabret import PRESETS, W0, WorkloadSpec, generate_events, generate_subscriptions

from benchmarks.harness import report
from benchmarks.harness.memory import rss_bytes
from benchmarks.harness.timing import best_of, best_passes, warm_up


def load_one(algorithm: str, subs, events, create_factor: float | None = None, spec: WorkloadSpec = W0,
             **scan_options) -> tuple[Matcher, dict]:
    """A fresh matcher loaded with ``subs`` (compilation done first) and the load half of its row."""
    return load_chunks(algorithm, [lambda: subs], events, create_factor, spec, **scan_options)


def load_chunks(algorithm: str, chunks, events, create_factor: float | None = None, spec: WorkloadSpec = W0,
                **scan_options) -> tuple[Matcher, dict]:
    """A fresh matcher loaded by one ``add_bulk`` per chunk, each made by a callable of ``chunks`` and freed before
    the next, as a user loads more subscriptions than fit in memory twice; ``load_s`` times the ``add_bulk`` calls
    only, ``generate_s`` the chunks' making, and the resident growth is read with no chunk held."""
    warm_up(algorithm, events, spec, **scan_options)
    gc.collect()
    rss0 = rss_bytes()
    clustering = {}
    if algorithm == "dynamic" and create_factor is not None:
        clustering["thresholds"] = Thresholds(create_factor=create_factor)
    m = Matcher(algorithm, **clustering, **scan_options)
    load = generate = 0.0
    n = 0
    for make in chunks:
        t = time.perf_counter()
        subs = make()
        t1 = time.perf_counter()
        m.add_bulk(subs)
        load += time.perf_counter() - t1
        generate += t1 - t
        n += len(subs)
        del subs
    gc.collect()
    rss1 = rss_bytes()
    row = {
        "algorithm": algorithm,
        "workload": spec.name,
        "n": n,
        "events": len(events),
        "load_s": round(load, 3),
        "load_per_s": round(n / load, 1),
        "rss_delta_mb": round((rss1 - rss0) / 2**20, 1),
        "rss_bytes_per_sub": round((rss1 - rss0) / n, 1),
        "stats_memory_mb": round(m.stats()["memory_bytes"] / 2**20, 1),
        "scan_options": scan_options,
    }
    if len(chunks) > 1:
        row["chunks"] = len(chunks)
        row["generate_s"] = round(generate, 3)
    if algorithm in ("static", "dynamic"):
        st = m.stats()
        row["multi_attribute_tables"] = st["hash_tables"]["multi_attribute"]
        row["subscriptions_moved"] = st["subscriptions_moved"]
        if "level2_min" in st:  # the second level inside the runs: the length the model chose, the clusters with one
            row["level2_min"], row["level2_clusters"] = st["level2_min"], st["level2_clusters"]
        if create_factor is not None and algorithm == "dynamic":
            row["create_factor"] = create_factor
    return m, row


def fill_timings(row: dict, m: Matcher, events, dicts, repeat: int, t_enc: float, t_dict: float | None,
                 matches: int) -> dict:
    """The matching half of a row, from the best pass times (``best_passes``)."""
    n_ev = len(events)
    row.update({
        "encoded_events_per_s": round(n_ev / t_enc, 1),
        "match_s": round(t_enc, 4),
        "match_us_per_event": round(t_enc / n_ev * 1e6, 2),
        "matches_per_event": round(matches / n_ev, 4),
    })
    if t_dict is not None:
        t_code, _ = best_of(repeat, lambda: encode_batch(batch_from_dicts(dicts), m.attributes, m.strings))
        row["dict_events_per_s"] = round(n_ev / t_dict, 1)
        row["encode_us_per_event"] = round(t_code / n_ev * 1e6, 2)
    return row


def run_one(algorithm: str, subs, events, dicts, repeat: int, create_factor: float | None = None,
            spec: WorkloadSpec = W0, **scan_options) -> dict:
    """Load ``subs`` into a fresh matcher and measure it: one row of the tables.

    ``dicts=None`` measures ``match_encoded`` only (no dict path, no encoding
    cost), for sweeps that need events/s, load time and memory (Figure 3).
    """
    m, row = load_one(algorithm, subs, events, create_factor, spec, **scan_options)
    (timings,) = best_passes([m], events, dicts, repeat)
    fill_timings(row, m, events, dicts, repeat, *timings)
    del m
    gc.collect()
    return row


TUNE_GRID = [(0, 16, 0), (1, 8, 256), (1, 16, 256), (2, 8, 64), (2, 8, 256), (2, 16, 64), (2, 16, 256),
             (2, 16, 1024), (2, 32, 256), (3, 16, 64), (3, 16, 256), (4, 16, 256)]


def tune(n: int, n_events: int, repeat: int, grid: list[tuple[int, int, int]] = TUNE_GRID) -> list[dict]:
    """(prefetch_columns, UNFOLD, LOOKAHEAD) grid on one loaded matcher.

    Configurations are measured in interleaved rounds (every configuration
    once per round, best over rounds), so that a burst of load from other
    processes penalises all of them alike instead of whichever ran then.
    Configuration (0, 16, 0) is plain propagation (no prefetch).
    """
    subs = generate_subscriptions(PRESETS["W0"], n=n, seed=1)
    events = generate_events(PRESETS["W0"], n=n_events, seed=2)
    m = Matcher("propagation")
    m.add_bulk(subs)
    del subs
    from fastpubsub.engine.kernels.batch import propagation_kernel

    kernels = {cfg: propagation_kernel(*cfg) for cfg in grid}
    best = {cfg: float("inf") for cfg in grid}
    for cfg, kernel in kernels.items():  # compile
        m.index._kernel = kernel
        m.match_encoded(events)
    for _ in range(repeat):
        for cfg, kernel in kernels.items():
            m.index._kernel = kernel
            t, _ = best_of(1, lambda: m.match_encoded(events))
            best[cfg] = min(best[cfg], t)
    rows = []
    for (pc, u, la), t in best.items():
        row = {"prefetch_columns": pc, "unfold": u, "lookahead": la, "events_per_s": round(n_events / t, 1)}
        print(row, flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="100000,1000000,3000000,6000000", help="comma-separated subscription counts")
    ap.add_argument("--algorithms", default="counting,propagation,propagation-wp")
    ap.add_argument("--events", type=int, default=2000, help="events per measurement (>= 2000 for the record)")
    ap.add_argument("--counting-events", type=int, default=None, help="fewer events for counting (slow at large N)")
    ap.add_argument("--counting-max-n", type=int, default=None, help="skip counting above this N")
    ap.add_argument("--repeat", type=int, default=3, help="best-of repetitions")
    ap.add_argument("--tune", action="store_true", help="grid over prefetch parameters instead")
    ap.add_argument("--grid", default=None, help="tuning grid as pc:unfold:lookahead,... (default: TUNE_GRID)")
    ap.add_argument("--create-factor", type=float, default=None,
                    help="dynamic: Bcreate as a multiple of a table's cost (default: engine.costmodel.maintenance.Thresholds)")
    ap.add_argument("--runs", type=int, default=None,
                    help="static/dynamic: clusters of at least this many entries keep sorted runs "
                         "(0: plain clusters as in the paper; default: engine.structures.sorted_runs.RUN_MIN)")
    ap.add_argument("--skew", default=None, metavar="FIRST-LAST:LO-HI",
                    help="W0 with attributes FIRST..LAST narrowed to values LO..HI, in subscriptions and events "
                         "(e.g. 2-16:1-2: half the free attributes on 2 values)")
    ap.add_argument("--out", default="benchmarks/results/engine.json")
    args = ap.parse_args(argv)
    ns = [int(x) for x in args.n.split(",")]
    spec = PRESETS["W0"]
    if args.skew:
        (first, last), (lo, hi) = (tuple(int(v) for v in part.split("-")) for part in args.skew.split(":"))
        spec = replace(spec, name=f"W0, a{first}..a{last} on {lo}..{hi}",
                       skew={a: (lo, hi) for a in range(first, last + 1)})
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    if args.tune:
        grid = [tuple(int(v) for v in g.split(":")) for g in args.grid.split(",")] if args.grid else TUNE_GRID
        rows = tune(ns[0], args.events, args.repeat, grid)
    else:
        rows = []
        events = generate_events(spec, n=args.events, seed=2)
        dicts = events.to_dicts()
        for n in ns:
            subs = generate_subscriptions(spec, n=n, seed=1)
            for algorithm in args.algorithms.split(","):
                ev, dc = events, dicts
                if algorithm == "counting":
                    if args.counting_max_n is not None and n > args.counting_max_n:
                        continue
                    if args.counting_events:
                        ev = generate_events(spec, n=args.counting_events, seed=2)
                        dc = ev.to_dicts()
                opts = {"runs": args.runs} if args.runs is not None and algorithm in ("static", "dynamic") else {}
                row = run_one(algorithm, subs, ev, dc, args.repeat, create_factor=args.create_factor, spec=spec, **opts)
                print(json.dumps(row), flush=True)
                rows.append(row)
            del subs
            gc.collect()
        print()
        print("| algorithm | N | load s | events/s (encoded) | events/s (dicts) | encode µs/ev | match µs/ev | matches/ev | RSS Δ MB | tables |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['algorithm']} | {r['n']:,} | {r['load_s']:.2f} | {r['encoded_events_per_s']:,.0f} | "
                  f"{r['dict_events_per_s']:,.0f} | {r['encode_us_per_event']:.1f} | {r['match_us_per_event']:.1f} | "
                  f"{r['matches_per_event']:.3f} | {r['rss_delta_mb']:.0f} | {r.get('multi_attribute_tables', '')} |")
    report.write_json(rows, args.out)


if __name__ == "__main__":
    main()
