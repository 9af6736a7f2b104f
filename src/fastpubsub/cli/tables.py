"""``pubsub tables``: the table service (aggregate subscriptions over tables) until Ctrl-C or SIGTERM."""

from __future__ import annotations

import click

from fastpubsub.wire import codecs

from .common import (delivery_option, deployment_options, log_level_option, metrics_options, progress_option,
                     run_service, setup_logging)


@click.command("tables")
@deployment_options
@click.option("--table", "tables", multiple=True, required=True, metavar="NAME:TOPIC:KEY[:ATTR=KIND,...]",
              help="A table: its name, the topic of its rows (keyed by the row key), the key attribute and, "
                   "optionally, the kind (number, string, bool) of each attribute, which lets subscriptions over "
                   "unknown attributes be refused.  Repeat for several tables.  "
                   "E.g. stock:pubsub.tables.stock:symbol:risk=number,per=number,sector=string")
@click.option("--mode", type=click.Choice(["s-un", "s-cn"]), default="s-un", show_default=True,
              help="s-un: a notification per affected subscription on pubsub.notifications; s-cn: the reformulated "
                   "messages on pubsub.reformulated, from which subscribers keep their own answers "
                   "(fastpubsub.aggregates.client).  Initial answers go to pubsub.notifications either way.")
@click.option("--group-id", default="pubsub-tables", show_default=True,
              help="Consumer group (after --topic-prefix) whose committed offsets say where the service is; also names its "
                   "transactional.id, so a second instance with the same group fences the first.")
@delivery_option
@click.option("--transactional-id", default=None, help="Default: <group-id>-tables.")
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Input records per transaction.")
@click.option("--output-format", type=click.Choice(codecs.FORMATS), default="avro", show_default=True,
              help="Encoding of dead letters (notifications and reformulated messages are JSON).")
@progress_option
@log_level_option
@metrics_options
def tables_cmd(clients, topics, schema_registry, tables, mode, group_id, delivery, transactional_id, batch_size, output_format,
               progress_interval, log_level, monitoring) -> None:
    """Serve aggregate subscriptions over tables (docs/aggregates.md).

    Reads the declared tables' topics and the aggregate subscriptions of
    pubsub.subscriptions (plain ones are the processor's, `pubsub run`);
    writes notifications, reformulated messages, dead letters and each
    table's changelog in one transaction with the input offsets.  With
    --schema-registry, rows in producers' registered schemas are read,
    their nested fields named by path.  One
    instance owns all the tables it declares.  On shutdown the final
    statistics are printed to stdout as one JSON line.
    """
    from fastpubsub.runtime import HostConfig
    from fastpubsub.services.tables.service import TableDeclaration, TableService, TableServiceConfig

    setup_logging(log_level)
    try:
        host = HostConfig(clients.bootstrap_servers, topics.group(group_id), dict(clients.settings), delivery,
                          transactional_id, batch_size, progress_interval=progress_interval,
                          output_format=output_format, stall_seconds=monitoring.stall_seconds, topics=topics)
        service = TableService(TableServiceConfig(host, [TableDeclaration.parse(t) for t in tables], mode,
                                                  schema_registry=schema_registry))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    run_service(service, monitoring)
