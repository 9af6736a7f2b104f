"""How `dynamic` scales with N on W0: is the time per event nearly flat from 1M to 6M subscriptions?

The paper (section 6.2.1) says the dynamic algorithm keeps the matching
time "independent of the number of subscriptions" by creating hash tables
as clusters grow.  This sweep measures it past the paper's 6M, on the
paper's plain clusters and on sorted clusters with a run index (``runs``,
docs/design/clustering.md), on both throughputs the issue names: events already
encoded (``match_encoded``: the matcher alone) and dicts (``match_batch``:
with the per-event encoding, which does not depend on N).  Each row also
gives its throughput relative to the smallest N of the same
configuration, the flatness figure.

    python -m benchmarks.engine.scaling                                   # 1M..10M, plain and runs=256, ~15 min
    python -m benchmarks.engine.scaling --plan hundred                    # 1M, 10M, 30M, 100M with runs, ~20 GB, ~25 min
    python -m benchmarks.engine.scaling --n 1000000,6000000 --runs 256    # one configuration
    python -m benchmarks.suite scaling --img-dir docs/img                   # the same sweep, as a figure of the suite

Each N is generated once and loaded into a fresh matcher per configuration
(``benchmarks.engine.algorithms.load_one``, compilation excluded).  Every N is loaded
before any is timed; then ``repeat`` rounds each time one pass of every
matcher of every N in turn; each keeps its best pass, and each N's ratio
to the smallest is also given as the median over the rounds of the two
passes' ratio.  The flatness figure is a ratio of two N's, and on a shared
machine whose memory is also the neighbours' the same kernel at 10M moves
by 1.7x within a minute and a half (docs/benchmarks.md, "How does it scale with the number of subscriptions?"):
timed minutes apart, the two N's of a ratio would see different machines,
and a best of a few passes can fall in a quiet spell for one N only.
Loading first holds every matcher in memory at once (the full sweep: about
5 GB; to 100M: about 141M subscriptions); ``--sequential`` times each N as
soon as it is loaded, and frees it before loading the next.  Subscriptions
are generated and loaded in chunks (``--chunk``, 5M), one ``add_bulk`` each,
as a user loads more than fits in memory twice; ``--check`` events of each N
are checked against every subscription by numpy (:func:`exact_ids`).
"""

from __future__ import annotations

import argparse
import gc
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from fastpubsub.engine.semantics import OP_EQ, OP_GE, OP_GT, OP_LE, OP_LT, OP_NE
from fastpubsub.engine.structures.sorted_runs import RUN_MIN
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions

from benchmarks.harness import report
from benchmarks.engine.algorithms import fill_timings, load_chunks
from benchmarks.harness.timing import best_passes


@dataclass(frozen=True)
class Plan:
    ns: tuple[int, ...]
    runs: tuple[int, ...]  # 0: the paper's plain clusters
    events: int
    repeat: int
    algorithm: str = "dynamic"
    sequential: bool = False  # time each N as soon as it is loaded (less memory; ratios timed minutes apart)
    chunk: int = 5_000_000  # subscriptions generated and loaded per add_bulk (a batch of 100M does not fit twice)
    check: int = 0  # events of each N checked exactly against a numpy evaluation of every subscription


FULL = Plan((1_000_000, 2_000_000, 4_000_000, 6_000_000, 10_000_000), (0, RUN_MIN), 20_000, 25)
QUICK = Plan((5_000, 20_000), (0, RUN_MIN), 200, 1, chunk=7_000, check=20)
#: The sweep to 100M: runs only (plain clusters would scan lists of 80,000 entries per event), 10 rounds.
HUNDRED = Plan((1_000_000, 10_000_000, 30_000_000, 100_000_000), (RUN_MIN,), 20_000, 10, check=50)

_COMPARE = {OP_EQ: np.equal, OP_NE: np.not_equal, OP_LT: np.less, OP_LE: np.less_equal, OP_GT: np.greater,
            OP_GE: np.greater_equal}


def chunk_makers(spec, n: int, chunk: int, seed: int) -> list[Callable[[], object]]:
    """Callables making ``n`` subscriptions in chunks of ``chunk`` with consecutive ids, the same on every call."""
    def make(first: int, size: int, k: int):
        return lambda: generate_subscriptions(spec, n=size, seed=seed + 7919 * k, first_id=first)
    return [make(first, min(chunk, n - first), k) for k, first in enumerate(range(0, n, chunk))]


def exact_ids(chunks: list[Callable[[], object]], events, sample: np.ndarray, n_attributes: int) -> list[np.ndarray]:
    """The ids each sampled event satisfies, by evaluating every subscription's predicates with numpy (fixed
    predicates per subscription, numbers only: the Fabret workloads): the oracle the sweep checks matches against."""
    dense = np.full((len(sample), n_attributes), np.nan)
    for row, e in enumerate(sample):
        lo, hi = events.offsets[e], events.offsets[e + 1]
        dense[row, events.attributes[lo:hi]] = events.numbers[lo:hi]
    found: list[list[np.ndarray]] = [[] for _ in sample]
    for make in chunks:
        subs = make()
        k = int(subs.offsets[1])
        attrs = subs.attributes.reshape(-1, k)
        ops = subs.operators.reshape(-1, k)
        values = subs.numbers.reshape(-1, k)
        for row in range(len(sample)):
            cand = np.arange(len(subs.ids))  # narrowed column by column: W0's first equality keeps 1 in 35
            for j in range(k):
                x, v, op = dense[row][attrs[cand, j]], values[cand, j], ops[cand, j]
                holds = np.zeros(len(cand), dtype=bool)
                for code in np.unique(op):
                    holds |= (op == code) & _COMPARE[int(code)](x, v)
                cand = cand[holds]
            found[row].append(subs.ids[cand])
        del subs
    return [np.sort(np.concatenate(f)) for f in found]


def check_sample(m, chunks, events, plan: Plan, n_attributes: int, seed: int) -> dict:
    """Matches of ``plan.check`` sampled events against :func:`exact_ids`: every id, none missing or extra."""
    sample = np.sort(np.random.default_rng(seed).choice(len(events), size=min(plan.check, len(events)),
                                                        replace=False))
    got = m.match_encoded(events)
    want = exact_ids(chunks, events, sample, n_attributes)
    bad = [int(e) for e, w in zip(sample, want)
           if not np.array_equal(np.sort(got.ids[got.offsets[e]:got.offsets[e + 1]]), w)]
    if bad:
        raise AssertionError(f"{len(bad)} of {len(sample)} sampled events differ from the oracle, first {bad[0]}")
    return {"checked_events": len(sample), "checked_matches": int(sum(len(w) for w in want))}


def label(runs: int) -> str:
    return "plain clusters" if runs == 0 else f"runs from {runs}"


def sweep(plan: Plan, progress: Callable[[str], None] = print, seed: int = 1) -> list[dict]:
    """One row per (N, clusters): both throughputs and each relative to the smallest N."""
    spec = PRESETS["W0"]
    events = generate_events(spec, n=plan.events, seed=seed + 1)
    dicts = events.to_dicts()
    rows: list[dict] = []
    first: dict[int, tuple] = {}  # per clusters: the smallest N's row and its pass times

    def timed(loaded: list[tuple[int, int, object, dict]]) -> None:
        ms = [m for _, _, m, _ in loaded]
        passes = [best_passes(ms, events, dicts, 1) for _ in range(plan.repeat)]  # [round][matcher]
        for i, (n, runs, m, row) in enumerate(loaded):
            enc = np.array([p[i][0] for p in passes])
            dct = np.array([p[i][1] for p in passes])
            fill_timings(row, m, events, dicts, plan.repeat, enc.min(), dct.min(), passes[-1][i][2])
            row.pop("scan_options", None)
            row["clusters"] = label(runs)
            row["runs"] = runs
            base_row, base_enc, base_dct = first.setdefault(runs, (row, enc, dct))
            row["encoded_vs_first"] = round(row["encoded_events_per_s"] / base_row["encoded_events_per_s"], 3)
            row["dicts_vs_first"] = round(row["dict_events_per_s"] / base_row["dict_events_per_s"], 3)
            # the median of the rounds' own ratios, each of two passes timed one after the other (sequential: the
            # ratio of the two medians)
            for key, mine, base in (("encoded", enc, base_enc), ("dicts", dct, base_dct)):
                ratio = np.median(base) / np.median(mine) if plan.sequential else np.median(base / mine)
                row[f"{key}_vs_first_median"] = round(float(ratio), 3)
            rows.append(row)
            progress(f"  N={n:>11,}  {row['clusters']:15}  {row['encoded_events_per_s']:>10,.0f} encoded "
                     f"({row['encoded_vs_first']:.2f}, median {row['encoded_vs_first_median']:.2f})  "
                     f"{row['dict_events_per_s']:>9,.0f} dicts ({row['dicts_vs_first']:.2f}, median "
                     f"{row['dicts_vs_first_median']:.2f})  load {row['load_s']:.1f} s  tables {row['multi_attribute_tables']}")

    pending: list[tuple[int, int, object, dict]] = []
    for n in plan.ns:
        chunks = chunk_makers(spec, n, plan.chunk, seed)
        for runs in plan.runs:
            m, row = load_chunks(plan.algorithm, chunks, events, spec=spec, runs=runs)
            if plan.check:
                row.update(check_sample(m, chunks, events, plan, spec.n_attributes, seed + n))
            pending.append((n, runs, m, row))
            if not plan.sequential:
                progress(f"  N={n:>11,}  {label(runs):15}  loaded in {row['load_s']:.1f} s "
                         f"({row['load_per_s']:,.0f}/s), {row['rss_bytes_per_sub']:.0f} B/sub resident"
                         + (f", {row['checked_events']} events exact" if plan.check else ""))
        if plan.sequential:
            timed(pending)
            pending, m, row = [], None, None
            gc.collect()
    if pending:
        progress(f"  timing every N together: {plan.repeat} rounds of one pass of each")
        timed(pending)
    return rows


def plot(rows: list[dict], path: Path) -> None:
    fig, axes = report.subplots(3, width=5.5)
    log = max(r["n"] for r in rows) >= 20 * min(r["n"] for r in rows)
    for ax, key, title, unit in ((axes[0], "encoded_events_per_s", "match_encoded (the matcher alone)", "events/s"),
                                 (axes[1], "dict_events_per_s", "match_batch (dicts, with encoding)", "events/s"),
                                 (axes[2], "rss_bytes_per_sub", "resident memory", "bytes per subscription")):
        for clusters in dict.fromkeys(r["clusters"] for r in rows):
            mine = [r for r in rows if r["clusters"] == clusters]
            ax.plot([r["n"] / 1e6 for r in mine], [r[key] for r in mine], marker="o", label=clusters)
        ax.set_title(f"W0, {rows[0]['algorithm']}: {title}", fontsize=9)
        ax.set_xlabel("subscriptions (millions)")
        if log:
            ax.set_xscale("log")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    report.save(fig, path)


COLUMNS = [("clusters", "clusters"), ("n", "N"), ("load_s", "load s"), ("encoded_events_per_s", "events/s encoded"),
           ("encoded_vs_first", "encoded / smallest N"), ("encoded_vs_first_median", "median of rounds"),
           ("dict_events_per_s", "events/s dicts"), ("dicts_vs_first", "dicts / smallest N"),
           ("dicts_vs_first_median", "median of rounds"), ("match_us_per_event", "match µs/ev"),
           ("load_per_s", "loaded/s"), ("rss_delta_mb", "RSS Δ MB"), ("rss_bytes_per_sub", "B/sub"),
           ("multi_attribute_tables", "tables"), ("level2_clusters", "clusters with a second level")]


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
            "*/ smallest N* is the best throughput relative to the first N of the same clusters; *median of "
            "rounds* the median over the rounds of that ratio, each round timing one pass of every N one after "
            "the other (with `--sequential`, the ratio of the two N's median passes).\n\n"
            + report.markdown_table(sorted(rows, key=lambda r: (r["runs"], r["n"])), COLUMNS)
            + "\n\n![Scaling](img/scaling.png)\n")
    report.write_markdown(out / "scaling.md", f"Scaling with N: {plan.algorithm} on W0", command, body)
    return rows


PLANS = {"full": FULL, "hundred": HUNDRED}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", choices=PLANS, default="full",
                    help="full: 1M-10M, plain clusters and runs; hundred: 1M-100M, runs (the options below override)")
    ap.add_argument("--n", help="comma-separated subscription counts")
    ap.add_argument("--runs", help="comma-separated run thresholds (0: plain clusters)")
    ap.add_argument("--algorithm", default="dynamic", choices=("static", "dynamic"))
    ap.add_argument("--events", type=int)
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--chunk", type=int, help="subscriptions generated and loaded per add_bulk")
    ap.add_argument("--check", type=int, help="events of each N checked exactly against every subscription")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--sequential", action="store_true",
                    help="time each N as soon as it is loaded, and free it before the next (less memory)")
    args = ap.parse_args(argv)
    base = PLANS[args.plan]
    plan = Plan(tuple(int(x) for x in args.n.split(",")) if args.n else base.ns,
                tuple(int(x) for x in args.runs.split(",")) if args.runs else base.runs,
                args.events or base.events, args.repeat or base.repeat, args.algorithm, args.sequential,
                args.chunk or base.chunk, base.check if args.check is None else args.check)
    command = "python -m benchmarks.engine.scaling " + " ".join(sys.argv[1:] if argv is None else argv)
    scaling(Path(args.out), plan=plan, command=command.strip())
    print((Path(args.out) / "scaling.md").read_text())


if __name__ == "__main__":
    main()
