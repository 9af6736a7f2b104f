"""Fabret et al. Figure 3 (section 6.2.1): throughput, memory and loading time against N.

One sweep per workload: for every N, the subscriptions are generated once and
loaded into a fresh matcher of each algorithm (``benchmarks.engine.algorithms.run_one``: bulk
load timed, RSS growth measured, best of ``repeat`` passes of
``match_encoded`` over the same events).  Figures 3(a), 3(c) and 3(d) are three
views of the one W0 sweep; 3(b) is the W1 and W2 sweeps.

Stopping rule (counting "stops where it becomes too slow"): once one pass of
an algorithm over the events takes longer than ``stop_after_s``, that
algorithm is not run at the larger N; the skipped points are kept as rows
with ``stopped`` set, and the tables say where each algorithm stopped.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions

from benchmarks.figures import paper

from benchmarks.harness import report
from benchmarks.engine.algorithms import run_one

FIG3A_ALGORITHMS = ("counting", "propagation", "propagation-wp", "static", "dynamic")
#: ``dynamic:runs=0`` is dynamic on the paper's plain clusters (``Matcher("dynamic", runs=0)``), beside the default
#: (clusters with runs): the layout the paper measured and the one the engine uses.
FIG3B_ALGORITHMS = ("propagation-wp", "dynamic", "dynamic:runs=0")


@dataclass(frozen=True)
class Sweep:
    ns: tuple[int, ...]
    events: int
    repeat: int
    stop_after_s: float


FIG3A_FULL = Sweep((100_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 6_000_000), 2000, 3, 10.0)
FIG3B_FULL = Sweep((100_000, 500_000, 1_000_000, 2_000_000, 3_000_000, 6_000_000), 2000, 3, 10.0)
QUICK = Sweep((5_000, 20_000), 200, 1, 10.0)


def sweep(workload: str, algorithms: tuple[str, ...], plan: Sweep, progress: Callable[[str], None] = print,
          seed: int = 1) -> list[dict]:
    spec = PRESETS[workload]
    events = generate_events(spec, n=plan.events, seed=seed + 1)
    stopped: dict[str, int] = {}  # algorithm -> the N whose pass was too slow
    rows = []
    for n in plan.ns:
        subs = generate_subscriptions(spec, n=n, seed=seed)
        for algorithm in algorithms:
            if algorithm in stopped:
                rows.append({"workload": workload, "algorithm": algorithm, "n": n,
                             "stopped": f"one pass took > {plan.stop_after_s:g} s at N={stopped[algorithm]:,}"})
                progress(f"  {workload} {algorithm:15} N={n:>9,}  skipped (stopped at N={stopped[algorithm]:,})")
                continue
            name, _, option = algorithm.partition(":")  # "dynamic:runs=0": an option of the matcher
            options = {k: int(v) for k, v in (o.split("=") for o in option.split(",") if o)}
            row = run_one(name, subs, events, None, plan.repeat, spec=spec, **options)
            row["algorithm"] = algorithm
            row.pop("scan_options", None)
            row["stopped"] = ""
            if row["match_s"] > plan.stop_after_s:
                stopped[algorithm] = n
            row["paper_events_per_s"] = paper.fig3a(algorithm, n) if workload == "W0" else None
            rows.append(row)
            progress(f"  {workload} {algorithm:15} N={n:>9,}  {row['encoded_events_per_s']:>11,.0f} events/s  "
                     f"load {row['load_s']:6.2f} s  RSS +{row['rss_delta_mb']:,.0f} MB")
        del subs
        gc.collect()
    return rows


def _pivot(rows: list[dict], key: str, algorithms: tuple[str, ...], workloads: tuple[str, ...] = ("W0",)) -> str:
    """Rows N, one column per (workload,) algorithm; 'stopped' where the rule skipped it."""
    series = [(w, a) for w in workloads for a in algorithms]
    header = [("n", "N")] + [(f"{w}/{a}", a if len(workloads) == 1 else f"{w} {a}") for w, a in series]
    table = []
    for n in sorted({r["n"] for r in rows}):
        line: dict = {"n": n}
        for w, a in series:
            r = next((r for r in rows if r["n"] == n and r["algorithm"] == a and r.get("workload", "W0") == w), None)
            line[f"{w}/{a}"] = None if r is None else ("stopped" if r.get("stopped") else r[key])
        table.append(line)
    return report.markdown_table(table, header)


def _series(rows: list[dict], key: str, algorithms, workloads=("W0",)) -> dict[str, tuple[list, list]]:
    out = {}
    for w in workloads:
        for a in algorithms:
            pts = [(r["n"], r[key]) for r in rows
                   if r["algorithm"] == a and r.get("workload") == w and not r.get("stopped")]
            if pts:
                out[a if len(workloads) == 1 else f"{w} {a}"] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


def _stops(rows: list[dict]) -> str:
    notes = sorted({(r["algorithm"], r["stopped"]) for r in rows if r.get("stopped")})
    return "\n\n" + ("\n".join(f"* {a}: not run at larger N — {why}." for a, why in notes) or "No algorithm was stopped.")


def fig3a(out: Path, quick: bool = False, progress: Callable[[str], None] = print, command: str = "") -> list[dict]:
    """Figures 3(a), 3(c), 3(d) from one W0 sweep."""
    plan = QUICK if quick else FIG3A_FULL
    progress(f"fig3a/c/d: W0, N = {', '.join(f'{n:,}' for n in plan.ns)}; {', '.join(FIG3A_ALGORITHMS)}")
    rows = sweep("W0", FIG3A_ALGORITHMS, plan, progress)
    report.write_csv(rows, out / "fig3a.csv")
    ns = [n for n in plan.ns]
    paper_pts = {a: ([n], [v]) for (a, n), v in paper.FIG3A_EVENTS_PER_S.items() if n in ns}
    report.line_plot(out / "fig3a.png", _series(rows, "encoded_events_per_s", FIG3A_ALGORITHMS),
                     title="Fig. 3(a) W0: matching throughput", xlabel="subscriptions", ylabel="events/s",
                     logy=True, paper=paper_pts)
    report.line_plot(out / "fig3c.png", _series(rows, "rss_delta_mb", FIG3A_ALGORITHMS),
                     title="Fig. 3(c) W0: resident memory of the loaded matcher", xlabel="subscriptions",
                     ylabel="RSS growth (MB)")
    report.line_plot(out / "fig3d.png", _series(rows, "load_s", FIG3A_ALGORITHMS),
                     title="Fig. 3(d) W0: subscription loading time", xlabel="subscriptions", ylabel="seconds")
    at_paper = [{"algorithm": a, "n": n, "ours": next((r["encoded_events_per_s"] for r in rows if r["algorithm"] == a
                                                       and r["n"] == n and not r.get("stopped")), None),
                 "paper": v} for (a, n), v in paper.FIG3A_EVENTS_PER_S.items()]
    for r in at_paper:
        r["ratio"] = round(r["ours"] / r["paper"]) if r["ours"] else None
    ev = plan.events
    body = (
        f"Events/s = {ev:,} W0 events through `match_encoded`, best of {plan.repeat}; "
        f"stopping rule: an algorithm is not run at larger N once one pass took more than {plan.stop_after_s:g} s."
        f"{_stops(rows)}\n\n#### Figure 3(a): events/s\n\n{_pivot(rows, 'encoded_events_per_s', FIG3A_ALGORITHMS)}\n\n"
        f"Beside the paper (its only printed values, 6M W0; machine: {paper.MACHINE}):\n\n"
        + report.markdown_table(at_paper, [("algorithm", "algorithm"), ("n", "N"), ("ours", "events/s here"),
                                           ("paper", "events/s, paper"), ("ratio", "ratio")])
        + f"\n\n![Figure 3(a)](img/fig3a.png)\n\n#### Figure 3(c): resident memory (RSS growth caused by the load, MB)\n\n"
        f"{_pivot(rows, 'rss_delta_mb', FIG3A_ALGORITHMS)}\n\nThe paper prints no values (its order: propagation least, "
        f"counting close, dynamic most).\n\n![Figure 3(c)](img/fig3c.png)\n\n"
        f"#### Figure 3(d): loading time (`add_bulk`, s)\n\n{_pivot(rows, 'load_s', FIG3A_ALGORITHMS)}\n\n"
        f"The paper prints no values (its order: counting fastest, static slowest, dynamic well below static)."
        f"\n\n![Figure 3(d)](img/fig3d.png)\n"
    )
    report.write_markdown(out / "fig3a.md", "Figures 3(a), 3(c), 3(d): W0", command, body)
    return rows


def fig3b(out: Path, quick: bool = False, progress: Callable[[str], None] = print, command: str = "") -> list[dict]:
    """Figure 3(b): W1 (one inequality) and W2 (six) for propagation-wp and dynamic (with runs and on plain clusters)."""
    plan = QUICK if quick else FIG3B_FULL
    workloads = ("W1", "W2")
    progress(f"fig3b: W1, W2, N = {', '.join(f'{n:,}' for n in plan.ns)}; {', '.join(FIG3B_ALGORITHMS)}")
    rows = [r for w in workloads for r in sweep(w, FIG3B_ALGORITHMS, plan, progress)]
    report.write_csv(rows, out / "fig3b.csv")
    report.line_plot(out / "fig3b.png", _series(rows, "encoded_events_per_s", FIG3B_ALGORITHMS, workloads),
                     title="Fig. 3(b) W1, W2: matching throughput", xlabel="subscriptions", ylabel="events/s",
                     logy=True)
    body = (
        f"Events/s = {plan.events:,} events of the same workload through `match_encoded`, best of {plan.repeat}. "
        f"W1: 2 fixed `=`, 1 fixed `<=`, 1 free `=`; W2: 2 fixed `=`, 5 fixed `<=`, 1 fixed `>=`, 1 free `=` "
        f"(`workloads.fabret`). `dynamic` files clusters with runs (the default), `dynamic:runs=0` the paper's plain "
        f"clusters.{_stops(rows)}\n\n"
        f"{_pivot(rows, 'encoded_events_per_s', FIG3B_ALGORITHMS, workloads)}\n\n"
        f"Matches per event (W1 / W2 at the largest N): "
        + ", ".join(f"{r['workload']} {r['algorithm']} {r['matches_per_event']}" for r in rows
                    if r["n"] == plan.ns[-1] and not r.get("stopped"))
        + ".\n\nThe paper prints no values for Figure 3(b) (its finding: both algorithms lose a constant factor "
        "from W1 to W2, and dynamic stays ahead by its multi-attribute hash tables).\n\n![Figure 3(b)](img/fig3b.png)\n"
    )
    report.write_markdown(out / "fig3b.md", "Figure 3(b): W1 and W2", command, body)
    return rows


if __name__ == "__main__":  # the suite's command, its figures named: python -m benchmarks.figures.fig3 --quick
    import sys

    from benchmarks.suite import bench_cmd

    bench_cmd(["fig3a", "fig3b", *sys.argv[1:]], prog_name="python -m benchmarks.suite fig3a fig3b")
