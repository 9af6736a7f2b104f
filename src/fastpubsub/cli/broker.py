"""``pubsub broker`` and ``pubsub topics``: the embedded broker, and the topics on any cluster."""

from __future__ import annotations

import signal
import sys

import click

from fastpubsub.kafka import admin
from fastpubsub.kafka.broker import EmbeddedBroker

from .common import connection_options, on_signals


@click.command()
@click.option("--port", type=int, default=9092, show_default=True, help="Port on 127.0.0.1 to listen on (0: any free port).")
def broker(port: int) -> None:
    """Run the embedded broker (Tansu, in-memory) in the foreground until Ctrl-C.

    It listens on 127.0.0.1 only and keeps everything in memory: stopping it
    discards all topics.  Prints the bootstrap address to use with
    --bootstrap-servers.
    """
    b = EmbeddedBroker(port or None)
    try:
        b.start()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(b.bootstrap_servers, nl=True)
    sys.stdout.flush()
    on_signals(b.interrupt)
    code = b.wait()
    if code not in (0, -signal.SIGINT, 128 + signal.SIGINT):
        raise click.ClickException(f"the broker exited with status {code}")


@click.command("topics")
@connection_options
@click.option("--partitions", type=int, default=4, show_default=True, help="Partitions of each new topic.")
@click.option("--replication-factor", type=int, default=1, show_default=True, help="Replicas of each new topic.")
def topics_cmd(clients, partitions: int, replication_factor: int) -> None:
    """Create the five topics (existing ones are left as they are).

    pubsub.subscriptions, pubsub.dead-letter and pubsub.statistics are
    compacted (the statistics topic always has one partition); pubsub.events
    and pubsub.notifications are deleted by retention.  Prints each topic with
    its partitions and the cleanup.policy the broker reports.
    """
    try:
        statuses = admin.create_topics(clients, partitions, replication_factor)
    except Exception as exc:  # noqa: BLE001 - shown to the user as is
        raise click.ClickException(f"creating topics on {clients.bootstrap_servers}: {exc}") from None
    for s in statuses:
        click.echo(
            f"{s.name:24} {'created' if s.created else 'exists':8} partitions={s.partitions} "
            f"cleanup.policy={s.cleanup_policy or '?'}"
        )
