"""``pubsub stats``: the Spark statistics job (``fastpubsub.stats_job``), with its own options."""

from __future__ import annotations

import sys

import click

from .common import DEFAULT_BOOTSTRAP


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []}, add_help_option=False)
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED, metavar="[OPTIONS]")
def stats(job_args) -> None:
    """Compute event statistics with Spark and publish them (`pubsub stats --help`).

    Runs the PySpark job of fastpubsub.stats_job (the same options as `python -m
    fastpubsub.stats_job`): reads a window of pubsub.events (default: everything since
    the last run), computes per-attribute and per-attribute-set statistics,
    publishes the snapshot to pubsub.statistics (running processors adopt it)
    and writes it to out/statistics.json.  --every 10m runs it in a loop.
    Needs the spark extra (pip install 'fastpubsub[spark]') and Java 17.
    """
    try:
        from fastpubsub.stats_job.statistics_job import main as job_main
    except ImportError as exc:
        raise click.ClickException(f"`pubsub stats` needs PySpark: pip install 'fastpubsub[spark]' ({exc})") from None
    sys.exit(job_main(list(job_args), prog="pubsub stats", default_bootstrap=DEFAULT_BOOTSTRAP))
