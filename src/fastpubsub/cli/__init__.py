"""``pubsub``: the one command line of fastpubsub, one module per group of subcommands.

* ``run``: the processor;
* ``tables``: the table service (aggregate subscriptions over tables);
* ``patterns``: the pattern service (pattern subscriptions over the events);
* ``messages``: ``subscribe``, ``unsubscribe``, ``publish``, ``tail``;
* ``broker``: ``broker`` (the embedded one) and ``topics``;
* ``registry``: the embedded Schema Registry;
* ``demo``: everything end to end on the embedded broker;
* ``stats``: the Spark statistics job;
* ``warmup``: compile the numba kernels into the on-disk cache (once per installation).

Every subcommand that talks to Kafka takes ``--bootstrap-servers`` (env
``PUBSUB_BOOTSTRAP_SERVERS``) and ``-X KEY=VALUE`` settings for every client
it builds (``kafka.ClientFactory``), so the same commands run against the
embedded broker or a secured Kafka cluster.  ``broker`` and ``demo`` run an
embedded broker of their own and take ``--port`` instead.
"""

from __future__ import annotations

import click

from . import broker, demo, messages, patterns, registry, run, stats, tables, warmup


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """fastpubsub: content-based publish/subscribe between Kafka topics.

    Subscriptions (conjunctions of predicates) arrive on pubsub.subscriptions,
    events on pubsub.events; every event is matched against every subscription
    and a notification per match goes to pubsub.notifications.  Bad input goes
    to pubsub.dead-letter.  Quick look: `pubsub demo`.
    """


for command in (broker.broker, broker.topics_cmd, run.run, tables.tables_cmd, patterns.patterns_cmd, messages.subscribe, messages.unsubscribe,
                messages.publish, messages.tail, stats.stats, demo.demo, warmup.warmup, registry.registry):
    main.add_command(command)

__all__ = ["main"]
