"""``pubsub bench``: Fabret et al.'s Figures 3 and 4 and the end-to-end run, as code.

Every figure writes ``<name>.csv``, ``<name>.png`` and ``<name>.md`` (a
section to paste into docs/benchmarks.md) into the output directory; a run
also writes ``report.md``, the sections of that run in order.  ``--quick``
runs every figure at small sizes (minutes, for the tests); the full sizes are
the paper's for Figure 3 (up to 6M subscriptions); the scaling sweep of
``benchmarks.scaling`` up to 10M; Figure 4 at 1M (the paper: 3M) and end to end at 1M.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable

from . import e2e as e2e_mod
from . import fig3, report, scaling

FIGURES = ("fig3a", "fig3b", "scaling", "fig4", "e2e")
FIG4_SCENARIOS = (("fig4a", "W3-W4"), ("fig4b", "W5-W6"))
FIG4_STRATEGIES = ("dynamic", "no-change")
FIG4_N = {False: 1_000_000, True: 20_000}  # the paper: 3M; 1M keeps `all` under an hour


class Unavailable(RuntimeError):
    """A figure whose code is not on this branch."""


def _mean(rows: list[dict], key: str, phase: str, fallback: int) -> float | None:
    """Mean of ``key`` over the rows of ``phase`` (before the shift, after the turnover), or one row if unphased."""
    vals = [r[key] for r in rows if r.get("phase") == phase] or [rows[fallback][key]]
    return round(sum(vals) / len(vals), 1)


def fig4(out: Path, quick: bool = False, progress: Callable[[str], None] = print, command: str = "") -> list[dict]:
    """Figure 4(a) and 4(b): the equilibrium experiments of ``benchmarks.equilibrium``, dynamic against no-change."""
    try:
        from . import equilibrium
    except ImportError as exc:
        raise Unavailable(f"benchmarks.equilibrium not available on this branch ({exc})") from None
    from . import paper

    n = FIG4_N[quick]
    everything = []
    for name, scenario in FIG4_SCENARIOS:
        progress(f"{name}: {scenario}, {' and '.join(FIG4_STRATEGIES)} in lockstep, N={n:,}")
        # the paper's figure: its plain clusters and its cost model (the run-priced default: benchmarks.equilibrium)
        # (the static rebuilt at the turnover is benchmarks.equilibrium's, not the paper's figure)
        rows = equilibrium.simulate(scenario, FIG4_STRATEGIES, n, equilibrium.setup_for(n, quick), progress=progress,
                                    cluster_runs=0, rebuilt=False)
        report.write_csv(rows, out / f"{name}.csv")
        equilibrium.plot(rows, out / f"{name}.png")
        twin = equilibrium.summarize(rows)[scenario].get("dynamic", {}).get("end_over_shift_state")
        summary = []
        for strategy in FIG4_STRATEGIES:
            mine = [r for r in rows if r["strategy"] == strategy]
            before, end = _mean(mine, "events_per_s", "before", 0), _mean(mine, "events_per_s", "after", -1)
            summary.append({
                "strategy": strategy, "before": before, "end": end,
                "ratio": round(end / before, 2) if before else None,
                "paper_end": paper.FIG4_FINAL_EVENTS_PER_S.get((scenario, strategy)),
                "paper_ratio": paper.FIG4_NO_CHANGE_END_RATIO.get(scenario) if strategy == "no-change" else None,
                "same_ticks": round(twin, 2) if strategy == "dynamic" and twin else None,
            })
        body = (
            f"N = {n:,} subscriptions at equilibrium, 50 deleted and 50 inserted per simulated second "
            f"(`benchmarks.equilibrium`; the paper: 3,000,000); every tick is in `{name}.csv`.\n\n"
            + report.markdown_table(summary, [
                ("strategy", "strategy"), ("before", "events/s before the shift"), ("end", "events/s at the end"),
                ("ratio", "end / before"),
                ("same_ticks", "end / state at the shift, timed in the same ticks"),
                ("paper_end", "paper: events/s at the end"),
                ("paper_ratio", "paper: end / before")])
            + f"\n\n![Figure 4({name[-1]})](img/{name}.png)\n"
        )
        report.write_markdown(out / f"{name}.md", f"Figure 4({name[-1]}): {scenario}", command, body)
        everything += rows
    return everything


RUNNERS = {"fig3a": fig3.fig3a, "fig3b": fig3.fig3b, "scaling": scaling.scaling, "fig4": fig4, "e2e": e2e_mod.e2e}
OUTPUTS = {"fig3a": ("fig3a", "fig3c", "fig3d"), "fig3b": ("fig3b",), "scaling": ("scaling",), "fig4": ("fig4a", "fig4b"),
           "e2e": ("e2e",)}
MARKDOWN = {"fig3a": ("fig3a",), "fig3b": ("fig3b",), "scaling": ("scaling",), "fig4": ("fig4a", "fig4b"),
            "e2e": ("e2e",)}


def run(figures: list[str], out: Path, quick: bool = False, img_dir: Path | None = None,
        progress: Callable[[str], None] = print, e2e: e2e_mod.Options = e2e_mod.Options()) -> dict[str, str]:
    """Run ``figures`` in order; returns {figure: "ok" or why it failed}.  A failing figure does not stop the others.

    ``e2e``: the processor's delivery, batch size and commit interval in the end-to-end run.
    """
    out.mkdir(parents=True, exist_ok=True)
    if img_dir is not None:
        img_dir.mkdir(parents=True, exist_ok=True)
    outcome: dict[str, str] = {}
    sections = []
    for name in figures:
        command = f"pubsub bench {name}{' --quick' if quick else ''}{e2e.flags() if name == 'e2e' else ''}"
        started = time.monotonic()
        try:
            if name == "e2e":
                e2e_mod.e2e(out, quick, progress, command, e2e)
            else:
                RUNNERS[name](out, quick, progress, command)
        except Unavailable as exc:
            outcome[name] = str(exc)
            progress(f"{name}: {exc}")
            continue
        outcome[name] = "ok"
        progress(f"{name}: done in {time.monotonic() - started:.0f} s -> {out}")
        sections += [(out / f"{m}.md").read_text() for m in MARKDOWN[name]]
        if img_dir is not None:
            for png in OUTPUTS[name]:
                shutil.copy(out / f"{png}.png", img_dir / f"{png}.png")
    (out / "report.md").write_text(
        f"## Reproducing the paper's figures\n\n* **Machine:** {report.machine()}\n"
        f"* **Command:** `pubsub bench {' '.join(figures)}{' --quick' if quick else ''}` "
        f"(finished: {report.load_average(when=True)})\n\n" + "\n".join(sections))
    return outcome
