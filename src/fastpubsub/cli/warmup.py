"""``pubsub warmup``: compile the numba kernels into the on-disk cache once, at installation time."""

from __future__ import annotations

import os
import sys
import time

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import fastpubsub
from fastpubsub.engine import ALGORITHMS
from fastpubsub.services.warmup import STEPS, clear_cache, warm_up


@click.command()
@click.option("--algorithm", "algorithms", multiple=True, type=click.Choice((*ALGORITHMS, "all")),
              default=("dynamic",), show_default=True,
              help="Matcher algorithm to compile for (the processor's --algorithm); repeatable, or 'all'.")
@click.option("--runs", type=click.IntRange(min=0), default=None,
              help="The processor's --runs (sorted runs in clusters of at least this many entries; default the "
                   "engine's, 0: off).")
@click.option("--clear", is_flag=True, help="Delete this installation's compiled kernels first (after editing a "
                                            "kernel of a checkout, numba may not notice a change in a called function).")
@click.option("--processes", type=click.IntRange(min=1, max=2), default=min(2, os.cpu_count() or 1),
              show_default="2 where there are 2 cores or more",
              help="Compile in this many processes: the other services' engines in a second one, beside the "
                   "processor's kernels.")
def warmup(algorithms: tuple[str, ...], runs: int | None, clear: bool, processes: int) -> None:
    """Compile the matching kernels ahead, so that the first run matches its first events at once.

    numba compiles each kernel on first use and caches the machine code on
    disk (in NUMBA_CACHE_DIR, by default ~/.cache/fastpubsub/<version>-<layout>/numba,
    which survives reinstalls of the same version).  Without this step the
    first `pubsub run` after installation compiles them at its start (about a
    minute on 2 cores; it logs each kernel).  The pattern and table
    services' kernels compile in a second process, beside the processor's.
    `make install` and the Docker image run it; running it again costs a
    second or two.
    """
    chosen = tuple(ALGORITHMS) if "all" in algorithms else tuple(dict.fromkeys(algorithms))
    console = Console(stderr=True)
    click.echo(f"numba cache: {fastpubsub.numba_cache_dir()}", err=True)
    if clear:
        click.echo(f"cleared {clear_cache()} cached kernel files", err=True)
    started = time.monotonic()
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[kernel]}"))
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("compiling kernels", total=len(chosen) * len(STEPS), kernel="")

        def compiling(step: int, total: int, name: str, kernel: str, count: int) -> None:
            progress.update(task, description=f"compiling kernels: {name}", kernel=f"{count} compiled ({kernel})")

        def done(step: int, total: int, name: str) -> None:
            progress.update(task, completed=step, description=f"compiling kernels: {name}")

        report = warm_up(chosen, STEPS, runs, on_step=done, on_compile=compiling, processes=processes)
        progress.update(task, description="kernels ready")
    what = f"{report.compiled} kernels compiled" if report.compiled else "every kernel was already in the cache"
    click.echo(f"warmup: {what} for {', '.join(chosen)} in {time.monotonic() - started:.1f}s")
    sys.stdout.flush()
