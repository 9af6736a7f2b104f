"""How `dynamic` scales with N on W0: the "nearly flat from 1M to 6M" target of issue 3.

The paper (section 6.2.1) says the dynamic algorithm keeps the matching
time "independent of the number of subscriptions" by creating hash tables
as clusters grow.  This sweep measures it past the paper's 6M, on the
paper's plain clusters and on sorted clusters with a run index (``runs``,
docs/clustering.md), on both throughputs the issue names: events already
encoded (``match_encoded``: the matcher alone) and dicts (``match_batch``:
with the per-event encoding, which does not depend on N).  Each row also
gives its throughput relative to the smallest N of the same
configuration, the flatness figure.

    python -m benchmarks.scaling                                   # 1M..10M, plain and runs=256, ~10 min
    python -m benchmarks.scaling --n 1000000,6000000 --runs 256    # one configuration
    pubsub bench scaling --img-dir docs/img                   # the same sweep, as a figure of the suite

Each N is generated once and loaded into a fresh matcher per configuration
(``benchmarks.engine.load_one``, compilation excluded); then ``repeat`` rounds
each time one pass of every configuration in turn, and each keeps its best
pass, so that a slow spell of the shared machine does not fall on one
configuration only.
"""

from __future__ import annotations

import argparse
import gc
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from fastpubsub.engine.cluster_store import RUN_MIN
from fastpubsub.engine.workload import PRESETS, generate_events, generate_subscriptions

from . import report
from .engine import best_passes, fill_timings, load_one


@dataclass(frozen=True)
class Plan:
    ns: tuple[int, ...]
    runs: tuple[int, ...]  # 0: the paper's plain clusters
    events: int
    repeat: int
    algorithm: str = "dynamic"


FULL = Plan((1_000_000, 2_000_000, 4_000_000, 6_000_000, 10_000_000), (0, RUN_MIN), 20_000, 9)
QUICK = Plan((5_000, 20_000), (0, RUN_MIN), 200, 1)


def label(runs: int) -> str:
    return "plain clusters" if runs == 0 else f"runs from {runs}"


def sweep(plan: Plan, progress: Callable[[str], None] = print, seed: int = 1) -> list[dict]:
    """One row per (N, clusters): both throughputs and each relative to the smallest N."""
    spec = PRESETS["W0"]
    events = generate_events(spec, n=plan.events, seed=seed + 1)
    dicts = events.to_dicts()
    rows: list[dict] = []
    first: dict[int, dict] = {}
    for n in plan.ns:
        subs = generate_subscriptions(spec, n=n, seed=seed)
        loaded = [load_one(plan.algorithm, subs, events, spec=spec, runs=runs) for runs in plan.runs]
        del subs
        best = best_passes([m for m, _ in loaded], events, dicts, plan.repeat)
        for runs, timings, (m, row) in zip(plan.runs, best, loaded):
            fill_timings(row, m, events, dicts, plan.repeat, *timings)
            row.pop("scan_options", None)
            row["clusters"] = label(runs)
            row["runs"] = runs
            base = first.setdefault(runs, row)
            row["encoded_vs_first"] = round(row["encoded_events_per_s"] / base["encoded_events_per_s"], 3)
            row["dicts_vs_first"] = round(row["dict_events_per_s"] / base["dict_events_per_s"], 3)
            rows.append(row)
            progress(f"  N={n:>11,}  {row['clusters']:15}  {row['encoded_events_per_s']:>10,.0f} encoded "
                     f"({row['encoded_vs_first']:.2f})  {row['dict_events_per_s']:>9,.0f} dicts "
                     f"({row['dicts_vs_first']:.2f})  load {row['load_s']:.1f} s  tables {row['multi_attribute_tables']}")
        del loaded
        gc.collect()
    return rows


def plot(rows: list[dict], path: Path) -> None:
    fig, axes = report.subplots(2)
    for ax, key, title in ((axes[0], "encoded_events_per_s", "match_encoded (the matcher alone)"),
                           (axes[1], "dict_events_per_s", "match_batch (dicts, with encoding)")):
        for clusters in dict.fromkeys(r["clusters"] for r in rows):
            mine = [r for r in rows if r["clusters"] == clusters]
            ax.plot([r["n"] / 1e6 for r in mine], [r[key] for r in mine], marker="o", label=clusters)
        ax.set_title(f"W0, {rows[0]['algorithm']}: {title}")
        ax.set_xlabel("subscriptions (millions)")
        ax.set_ylabel("events/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    report.save(fig, path)


COLUMNS = [("clusters", "clusters"), ("n", "N"), ("load_s", "load s"), ("encoded_events_per_s", "events/s encoded"),
           ("encoded_vs_first", "encoded / smallest N"), ("dict_events_per_s", "events/s dicts"),
           ("dicts_vs_first", "dicts / smallest N"), ("match_us_per_event", "match µs/ev"),
           ("rss_delta_mb", "RSS Δ MB"), ("multi_attribute_tables", "tables")]


def scaling(out: Path, quick: bool = False, progress: Callable[[str], None] = print, command: str = "",
            plan: Plan | None = None) -> list[dict]:
    """The sweep, written as ``scaling.csv``, ``scaling.png`` and ``scaling.md`` into ``out``."""
    plan = plan or (QUICK if quick else FULL)
    progress(f"scaling: W0, {plan.algorithm}, N = {', '.join(f'{n:,}' for n in plan.ns)}, "
             f"{' and '.join(label(r) for r in plan.runs)}")
    rows = sweep(plan, progress)
    out.mkdir(parents=True, exist_ok=True)
    report.write_csv(rows, out / "scaling.csv")
    plot(rows, out / "scaling.png")
    body = (f"{plan.events:,} W0 events, best of {plan.repeat}; `{plan.algorithm}`; "
            "*/ smallest N* is the throughput relative to the first N of the same clusters.\n\n"
            + report.markdown_table(sorted(rows, key=lambda r: (r["runs"], r["n"])), COLUMNS)
            + "\n\n![Scaling](img/scaling.png)\n")
    report.write_markdown(out / "scaling.md", f"Scaling with N: {plan.algorithm} on W0", command, body)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default=",".join(str(n) for n in FULL.ns), help="comma-separated subscription counts")
    ap.add_argument("--runs", default=",".join(str(r) for r in FULL.runs),
                    help="comma-separated run thresholds (0: plain clusters)")
    ap.add_argument("--algorithm", default="dynamic", choices=("static", "dynamic"))
    ap.add_argument("--events", type=int, default=FULL.events)
    ap.add_argument("--repeat", type=int, default=FULL.repeat)
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args(argv)
    plan = Plan(tuple(int(x) for x in args.n.split(",")), tuple(int(x) for x in args.runs.split(",")),
                args.events, args.repeat, args.algorithm)
    command = "python -m benchmarks.scaling " + " ".join(sys.argv[1:] if argv is None else argv)
    scaling(Path(args.out), plan=plan, command=command.strip())
    print((Path(args.out) / "scaling.md").read_text())


if __name__ == "__main__":
    main()
