"""``pubsub patterns``: the pattern service (pattern subscriptions over the events) until Ctrl-C or SIGTERM."""

from __future__ import annotations

import click

from fastpubsub.wire import codecs

from .common import (delivery_option, deployment_options, log_level_option, metrics_options, progress_option,
                     run_service, setup_logging)


@click.command("patterns")
@deployment_options
@click.option("--group-id", default="pubsub-patterns", show_default=True,
              help="Consumer group of the events (after --topic-prefix): instances with the same group share the events partitions, and "
                   "its committed offsets say where each partition is.  Also names the transactional.id.")
@delivery_option
@click.option("--transactional-id", default=None,
              help="Default: <group-id>-<hostname>-<slot>, the lowest slot free on this host (a restarted "
                   "instance takes its predecessor's and ends its open transaction).")
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Events per transaction (at most).")
@click.option("--max-per-subscription", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Live instances of one subscription per events partition; more are refused and counted.")
@click.option("--max-state-mb", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Bound of the instance store of one events partition, in MB (converted to a number of instances).")
@click.option("--output-format", type=click.Choice(codecs.FORMATS), default="avro", show_default=True,
              help="Encoding of dead letters (notifications are JSON).")
@click.option("--session-timeout-ms", type=click.IntRange(min=1000), default=6000, show_default=True,
              help="Consumer group session timeout: how soon a dead instance's partitions move to the others.")
@click.option("--repartition-by", "repartition_by", metavar="ATTR", default=None,
              help="Re-key the events by this attribute into the topic <group-id>-ATTR-repartition (created with the "
                   "events topic's partition count) and run the patterns on it, so that patterns correlated on ATTR "
                   "are exact whatever partition the producers chose (docs/patterns.md 6.5).")
@click.option("--grace-ms", type=int, default=None,
              help="With --repartition-by: how far (ms of event time) an event may arrive behind the largest "
                   "timestamp of its repartition partition and still take its place in event-time order; later "
                   "events are dead-lettered and counted (late_events).  [default: 1000]")
@progress_option
@log_level_option
@metrics_options
def patterns_cmd(clients, topics, schema_registry, group_id, delivery, transactional_id, batch_size, max_per_subscription, max_state_mb,
                 output_format, session_timeout_ms, repartition_by, grace_ms, progress_interval, log_level,
                 monitoring) -> None:
    """Serve pattern subscriptions over the events (docs/patterns.md).

    Reads pubsub.events, or the one --events-topic (partitions shared by
    the instances of a group), and
    the pattern subscriptions of pubsub.subscriptions (plain ones are
    `pubsub run`'s, aggregate ones `pubsub tables`'s); writes a notification
    per completed pattern, dead letters and each events partition's state to
    pubsub.changelog.patterns, in one transaction with the events offsets.
    On shutdown the final statistics are printed to stdout as one JSON line.
    """
    from fastpubsub.runtime import HostConfig
    from fastpubsub.services.patterns.service import PatternService, PatternServiceConfig

    setup_logging(log_level)
    if grace_ms is not None and repartition_by is None:
        raise click.UsageError("--grace-ms applies to the repartition topic: give --repartition-by ATTR as well")
    try:
        host = HostConfig(clients.bootstrap_servers, topics.group(group_id), dict(clients.settings), delivery,
                          transactional_id, batch_size, session_timeout_ms, progress_interval, output_format,
                          stall_seconds=monitoring.stall_seconds, topics=topics)
        service = PatternService(PatternServiceConfig(
            host, max_per_subscription, max_state_mb << 20, repartition_by, 1000 if grace_ms is None else grace_ms,
            schema_registry=schema_registry))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    run_service(service, monitoring)
