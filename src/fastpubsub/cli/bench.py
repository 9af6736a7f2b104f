"""``pubsub bench``: a thin launcher of the benchmarks, which live in the checkout (``benchmarks/``), not in the package."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from fastpubsub.kafka.clients import parse_settings
from fastpubsub.runtime.checkpoint import MAX_COMMIT_INTERVAL_MS


def _benchmarks_suite():
    """``benchmarks.suite`` from the checkout in the current directory (never installed), or a clear error."""
    try:
        import benchmarks.suite as suite
    except ImportError:
        if not (Path.cwd() / "benchmarks" / "suite.py").is_file():
            raise click.ClickException(
                "`pubsub bench` runs from a checkout of the fastpubsub repository: the benchmarks (benchmarks/) are "
                "not installed with the package.  Run it in the checkout's top directory.") from None
        sys.path.insert(0, str(Path.cwd()))
        import benchmarks.suite as suite
    return suite


def _settings(ctx, param, value: tuple[str, ...]) -> tuple[str, ...]:
    try:
        parse_settings(value, "--processor-x")
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


@click.command("bench")
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
@click.option("--processor-x", "processor_config", multiple=True, metavar="KEY=VALUE", callback=_settings,
              help="e2e: a librdkafka setting for the processor's clients (its -X; repeatable), "
                   "e.g. --processor-x fetch.wait.max.ms=30.")
@click.option("--producer-linger-ms", type=click.IntRange(0, 10_000), default=5, show_default=True,
              help="e2e: linger.ms of the load producer.")
@click.option("--clock-fetch-wait-ms", type=click.IntRange(1, 10_000), default=10, show_default=True,
              help="e2e: fetch.wait.max.ms of the consumer that times the notifications.")
def bench_cmd(figures, quick, out, img_dir, delivery, batch_size, commit_interval_ms, commit_linger_ms, overlap_commits,
              offered_rate, also_at, processor_config, producer_linger_ms, clock_fetch_wait_ms) -> None:
    """Reproduce Fabret et al.'s figures, and the end-to-end run through the broker.

    Runs from a checkout of the fastpubsub repository only: the benchmarks
    (benchmarks/ beside src/) are not part of the installed package.  Run it
    in the checkout's top directory.

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
    suite = _benchmarks_suite()
    FIGURES, run_suite = suite.FIGURES, suite.run

    chosen = list(FIGURES) if "all" in figures else list(dict.fromkeys(figures))
    options = suite.e2e_mod.Options(delivery, batch_size, commit_interval_ms, overlap_commits, commit_linger_ms,
                                    offered_rate, tuple(also_at), tuple(processor_config), producer_linger_ms,
                                    clock_fetch_wait_ms)
    outcome = run_suite(chosen, out, quick, img_dir, progress=lambda text: click.echo(text) or sys.stdout.flush(),
                        e2e=options)
    failed = {k: v for k, v in outcome.items() if v != "ok"}
    click.echo(f"report: {out / 'report.md'}")
    if failed:
        raise click.ClickException("; ".join(f"{k}: {v}" for k, v in failed.items()))
