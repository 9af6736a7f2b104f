"""``python -m benchmarks.suite``: Fabret et al.'s Figures 3 and 4 and the end-to-end run, as code.

Every figure writes ``<name>.csv``, ``<name>.png`` and ``<name>.md`` (a
section to paste into docs/benchmarks.md) into the output directory; a run
also writes ``report.md``, the sections of that run in order.  ``--quick``
runs every figure at small sizes (minutes, for the tests); the full sizes are
the paper's for Figure 3 (up to 6M subscriptions); the scaling sweep of
``benchmarks.engine.scaling`` up to 10M; Figure 4 at 1M (the paper: 3M) and end to end at 1M.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Callable

import click

from fastpubsub.kafka.clients import parse_settings
from fastpubsub.runtime.checkpoint import MAX_COMMIT_INTERVAL_MS

from benchmarks.pipeline import e2e as e2e_mod
from benchmarks.figures import fig3
from benchmarks.harness import report
from benchmarks.engine import scaling

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
    """Figure 4(a) and 4(b): the equilibrium experiments of ``benchmarks.figures.equilibrium``, dynamic against no-change."""
    try:
        from benchmarks.figures import equilibrium
    except ImportError as exc:
        raise Unavailable(f"benchmarks.figures.equilibrium not available on this branch ({exc})") from None
    from benchmarks.figures import paper

    n = FIG4_N[quick]
    everything = []
    for name, scenario in FIG4_SCENARIOS:
        progress(f"{name}: {scenario}, {' and '.join(FIG4_STRATEGIES)} in lockstep, N={n:,}")
        # the paper's figure: its plain clusters and its cost model (the run-priced default: benchmarks.figures.equilibrium)
        # (the static rebuilt at the turnover is benchmarks.figures.equilibrium's, not the paper's figure)
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
            f"(`benchmarks.figures.equilibrium`; the paper: 3,000,000); every tick is in `{name}.csv`.\n\n"
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
        command = f"python -m benchmarks.suite {name}{' --quick' if quick else ''}{e2e.flags() if name == 'e2e' else ''}"
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
        f"* **Command:** `python -m benchmarks.suite {' '.join(figures)}{' --quick' if quick else ''}` "
        f"(finished: {report.load_average(when=True)})\n\n" + "\n".join(sections))
    return outcome


# --- the command line ----------------------------------------------------------------


def _settings(ctx, param, value: tuple[str, ...]) -> tuple[str, ...]:
    try:
        parse_settings(value, "--processor-x")
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


@click.command("python -m benchmarks.suite")
@click.argument("figures", nargs=-1, required=True, type=click.Choice(["fig3a", "fig3b", "scaling", "fig4", "e2e", "all"]))
@click.option("--quick", is_flag=True, help="Small sizes: every figure in a few minutes (what the tests run).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("benchmarks/results"),
              show_default=True, help="Directory for the CSV, PNG and markdown of each figure, and report.md.")
@click.option("--img-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also copy the PNGs here (docs/img to refresh docs/benchmarks.md).")
@click.option("--delivery", type=click.Choice(["transactional", "at-least-once"]), default="transactional",
              show_default=True, help="e2e: the processor's --delivery.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="e2e: the processor's --batch-size (default: pubsub run's).")
@click.option("--commit-interval-ms", type=click.IntRange(0, MAX_COMMIT_INTERVAL_MS), default=None,
              help="e2e: the processor's --commit-interval-ms (default: pubsub run's).")
@click.option("--commit-linger-ms", type=click.IntRange(0, MAX_COMMIT_INTERVAL_MS), default=None,
              help="e2e: the processor's --commit-linger-ms (default: pubsub run's).")
@click.option("--overlap-commits/--no-overlap-commits", default=None,
              help="e2e: the processor's --overlap-commits (default: pubsub run's).")
@click.option("--offered-rate", type=click.FloatRange(min=1.0), default=None,
              help="e2e: events/s offered in the latency phase (default: half the maximum measured).")
@click.option("--also-at", "also_at", type=click.FloatRange(min=0.001, max=1.0), multiple=True,
              help="e2e: a further latency phase at this fraction of the maximum measured (repeatable: "
                   "--also-at 0.25 --also-at 0.1); each reports its percentiles and the CPU of each process.")
@click.option("--also-rate", "also_rates", type=click.FloatRange(min=1.0), multiple=True,
              help="e2e: a further latency phase at this many events/s (repeatable: --also-rate 400).")
@click.option("--pin-broker", is_flag=True,
              help="e2e: the broker's JVM on core 0, the processor and the load on the other cores, to tell the "
                   "processor's own latency from the time it waits for a broker sharing its cores.")
@click.option("--processor-x", "processor_config", multiple=True, metavar="KEY=VALUE", callback=_settings,
              help="e2e: a librdkafka setting for the processor's clients (its -X; repeatable), "
                   "e.g. --processor-x fetch.wait.max.ms=30.")
@click.option("--producer-linger-ms", type=click.IntRange(0, 10_000), default=5, show_default=True,
              help="e2e: linger.ms of the load producer.")
@click.option("--clock-fetch-wait-ms", type=click.IntRange(1, 10_000), default=10, show_default=True,
              help="e2e: fetch.wait.max.ms of the consumer that times the notifications.")
@click.option("--event-format", type=click.Choice(e2e_mod.EVENT_FORMATS), default="native", show_default=True,
              help="e2e: how the events travel: fastpubsub's Avro map, a producer's registered nested Avro record "
                   "(the embedded Schema Registry), or the same record as nested JSON.")
def bench_cmd(figures, quick, out, img_dir, delivery, batch_size, commit_interval_ms, commit_linger_ms, overlap_commits,
              offered_rate, also_at, also_rates, pin_broker, processor_config, producer_linger_ms, clock_fetch_wait_ms,
              event_format) -> None:
    """Reproduce Fabret et al.'s figures, and the end-to-end run through the broker.

    Runs from a checkout of the fastpubsub repository (the benchmarks are not
    part of the installed package): python -m benchmarks.suite FIGURE...

    \b
      fig3a  W0, N = 100K..6M: events/s (3a), memory (3c), loading time (3d)
             for counting, propagation, propagation-wp, static, dynamic
      fig3b  W1 and W2 for propagation-wp and dynamic (with runs and on plain clusters)
      scaling  W0, N = 1M..10M: dynamic on plain clusters and with runs,
             events/s encoded and as dicts, each relative to 1M
      fig4   the equilibrium experiments (W3->W4, W5->W6), dynamic vs no-change
      e2e    events topic -> notifications topic through the embedded broker,
             1M W0 subscriptions: maximum events/s, latency at half of it
      all    all of them (under an hour on the 2-core development machine)

    Each writes <figure>.csv, .png and .md (the paper's values beside ours)
    into --out, plus report.md for the whole run.
    """
    chosen = list(FIGURES) if "all" in figures else list(dict.fromkeys(figures))
    options = e2e_mod.Options(delivery, batch_size, commit_interval_ms, overlap_commits, commit_linger_ms,
                                    offered_rate, tuple(also_at), tuple(also_rates), pin_broker,
                                    tuple(processor_config), producer_linger_ms, clock_fetch_wait_ms, event_format)
    outcome = run(chosen, out, quick, img_dir, progress=lambda text: click.echo(text) or sys.stdout.flush(),
                        e2e=options)
    failed = {k: v for k, v in outcome.items() if v != "ok"}
    click.echo(f"report: {out / 'report.md'}")
    if failed:
        raise click.ClickException("; ".join(f"{k}: {v}" for k, v in failed.items()))


if __name__ == "__main__":
    bench_cmd()
