"""``pubsub bench``: Fabret et al.'s Figures 3 and 4 and the end-to-end run, as code.

Every figure writes ``<name>.csv``, ``<name>.png`` and ``<name>.md`` (a
section to paste into docs/benchmarks.md) into the output directory; a run
also writes ``report.md``, the sections of that run in order.  ``--quick``
runs every figure at small sizes (minutes, for the tests); the full sizes are
the paper's (Figure 3 up to 6M subscriptions, Figure 4 at 3M, end to end at 1M).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable

from . import e2e as e2e_mod
from . import fig3, report

FIGURES = ("fig3a", "fig3b", "fig4", "e2e")
FIG4_SCENARIOS = (("fig4a", "W3-W4"), ("fig4b", "W5-W6"))
FIG4_STRATEGIES = ("dynamic", "no-change")
FIG4_N = {False: 3_000_000, True: 20_000}


class Unavailable(RuntimeError):
    """A figure whose code is not on this branch."""


def _first_key(rows: list[dict], *words: str) -> str | None:
    for key in rows[0] if rows else ():
        if all(w in key.replace("/", "_per_") for w in words):
            return key
    return None


def fig4(out: Path, quick: bool = False, progress: Callable[[str], None] = print, command: str = "") -> list[dict]:
    """Figure 4(a) and 4(b): the equilibrium experiments of ``bench.equilibrium``, dynamic against no-change."""
    try:
        from . import equilibrium
    except ImportError as exc:
        raise Unavailable(f"bench.equilibrium not available on this branch ({exc})") from None
    from . import paper

    n = FIG4_N[quick]
    everything = []
    for name, scenario in FIG4_SCENARIOS:
        rows = []
        for strategy in FIG4_STRATEGIES:
            progress(f"{name}: {scenario}, {strategy}, N={n:,}")
            rows += equilibrium.run(scenario, strategy, n, quick=quick, progress=progress)
        report.write_csv(rows, out / f"{name}.csv")
        equilibrium.plot(rows, out / f"{name}.png")
        rate = _first_key(rows, "events", "per_s")
        ends = []
        for strategy in FIG4_STRATEGIES:
            mine = [r for r in rows if r.get("strategy") == strategy]
            if mine and rate:
                first, last = mine[0][rate], mine[-1][rate]
                ends.append({"strategy": strategy, "first": first, "last": last,
                             "ratio": round(last / first, 2) if first else None,
                             "paper_last": paper.FIG4_FINAL_EVENTS_PER_S.get((scenario, strategy)),
                             "paper_ratio": paper.FIG4_NO_CHANGE_END_RATIO.get(scenario) if strategy == "no-change"
                             else None})
        columns = [(k, k) for k in rows[0]] if rows else []
        body = (
            f"N = {n:,} subscriptions at equilibrium (`bench.equilibrium`).\n\n"
            + report.markdown_table(ends, [("strategy", "strategy"), ("first", "events/s, first tick"),
                                           ("last", "events/s, last tick"), ("ratio", "last / first"),
                                           ("paper_last", "paper, last two hours"), ("paper_ratio", "paper, last / first")])
            + "\n\n<details><summary>every tick</summary>\n\n" + report.markdown_table(rows, columns)
            + f"\n\n</details>\n\n![Figure {name[-2:]}](img/{name}.png)\n"
        )
        report.write_markdown(out / f"{name}.md", f"Figure 4({name[-1]}): {scenario}", command, body)
        everything += rows
    return everything


RUNNERS = {"fig3a": fig3.fig3a, "fig3b": fig3.fig3b, "fig4": fig4, "e2e": e2e_mod.e2e}
OUTPUTS = {"fig3a": ("fig3a", "fig3c", "fig3d"), "fig3b": ("fig3b",), "fig4": ("fig4a", "fig4b"), "e2e": ("e2e",)}
MARKDOWN = {"fig3a": ("fig3a",), "fig3b": ("fig3b",), "fig4": ("fig4a", "fig4b"), "e2e": ("e2e",)}


def run(figures: list[str], out: Path, quick: bool = False, img_dir: Path | None = None,
        progress: Callable[[str], None] = print) -> dict[str, str]:
    """Run ``figures`` in order; returns {figure: "ok" or why it failed}.  A failing figure does not stop the others."""
    out.mkdir(parents=True, exist_ok=True)
    if img_dir is not None:
        img_dir.mkdir(parents=True, exist_ok=True)
    outcome: dict[str, str] = {}
    sections = []
    for name in figures:
        command = f"pubsub bench {name}{' --quick' if quick else ''}"
        started = time.monotonic()
        try:
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
        f"## Reproducing the paper's figures (issue 5)\n\n* **Machine:** {report.machine()}\n"
        f"* **Command:** `pubsub bench {' '.join(figures)}{' --quick' if quick else ''}` "
        f"(finished: {report.load_average()})\n\n" + "\n".join(sections))
    return outcome
