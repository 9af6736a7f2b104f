"""``pubsub broker`` and ``pubsub topics``: Apache Kafka on this machine, and the topics on any cluster."""

from __future__ import annotations


import click

from fastpubsub.kafka import admin
from fastpubsub.kafka import distribution
from fastpubsub.kafka.broker import DEFAULT_HEAP, EmbeddedBroker, valid_node_count
from fastpubsub.kafka.distribution import KAFKA_HOME_ENV
from fastpubsub.kafka.security import BrokerSecurity

from .common import connection_options, serve_in_foreground, topic_options


@click.command()
@click.option("--port", type=int, default=9092, show_default=True,
              help="Client port of the first node on 127.0.0.1 (the others take the next ones); 0: any free ports.")
@click.option("--nodes", type=int, default=1, show_default=True,
              help="Nodes of the cluster: 1, or 3 and more (replication factor 3, min.insync.replicas 2).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Keep the cluster here; starting again on it resumes it.  Default: a temporary directory, "
                   "removed on exit.")
@click.option("--heap", default=DEFAULT_HEAP, show_default=True, help="Java heap of each node.")
@click.option("--kafka-home", envvar=KAFKA_HOME_ENV, type=click.Path(exists=True, file_okay=False), default=None,
              help=f"An unpacked Apache Kafka distribution to run (env {KAFKA_HOME_ENV}); default: the version "
                   "fastpubsub pins, fetched once by Maven into ~/.cache/fastpubsub.")
@click.option("--fetch-only", is_flag=True, help="Fetch the pinned Apache Kafka into the cache and exit.")
@click.option("--security", "security_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Clients connect through SASL_SSL (SCRAM-SHA-512 over TLS) only, with ACLs enforced: the CA, the "
                   "broker's certificate, the users' passwords and a client configuration file per user "
                   "(DIR/USER.properties, for --client-config) are made in DIR, or taken from it.")
@click.option("--user", "users", multiple=True, metavar="NAME",
              help="With --security: a user besides admin (the only super user), created with the cluster; "
                   "repeatable.  Grant it ACLs as admin.")
def broker(port: int, nodes: int, data_dir: str | None, heap: str, kafka_home: str | None, fetch_only: bool,
           security_dir: str | None, users: tuple[str, ...]) -> None:
    """Run Apache Kafka in KRaft mode on 127.0.0.1 in the foreground until Ctrl-C or SIGTERM.

    Prints the bootstrap servers (to use with --bootstrap-servers) once the
    cluster answers metadata requests and accepts transactions; with
    --security, then the client configuration file of each user.  Needs Java
    17 or newer; the jars come from --kafka-home, or from Maven Central once
    (`make install` fetches them).
    """
    try:
        if fetch_only:
            dist = distribution.resolve(kafka_home)
            click.echo(f"Apache Kafka {dist.version}: {dist.libs}")
            return
        if users and security_dir is None:
            raise click.BadParameter("users are created on a secured broker only: give --security DIR too",
                                     param_hint="--user")
        security = None if security_dir is None else BrokerSecurity.create(security_dir, users)
        b = EmbeddedBroker(port or None, nodes=valid_node_count(nodes), data_dir=data_dir, heap=heap,
                           kafka_home=kafka_home, security=security)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--nodes") from None
    except (RuntimeError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    def announce() -> None:
        click.echo(b.bootstrap_servers, nl=True)
        if b.security is not None:
            for user in b.security.passwords:
                click.echo(f"{user}: --client-config {b.security.properties_file(user)}")

    serve_in_foreground(b, "Apache Kafka", announce)


@click.command("topics")
@connection_options
@topic_options
@click.option("--partitions", type=int, default=4, show_default=True, help="Partitions of each new topic.")
@click.option("--replication-factor", type=int, default=-1, show_default=True,
              help="Replicas of each new topic; -1: the cluster's default.replication.factor (3 on `pubsub broker "
                   "--nodes 3`).")
def topics_cmd(clients, topics, partitions: int, replication_factor: int) -> None:
    """Create the five topics (existing ones are left as they are).

    pubsub.subscriptions, pubsub.dead-letter and pubsub.statistics are
    compacted (the statistics topic always has one partition); pubsub.events
    and pubsub.notifications are deleted by retention.  The topic options
    rename them (every --events-topic is created if missing; topics matching
    --events-pattern are the publishers').  Prints each topic with its
    partitions and the cleanup.policy the broker reports.
    """
    try:
        statuses = admin.create_topics(clients, partitions, replication_factor, topics=topics)
    except Exception as exc:  # noqa: BLE001 - shown to the user as is
        raise click.ClickException(f"creating topics on {clients.bootstrap_servers}: {exc}") from None
    for s in statuses:
        click.echo(
            f"{s.name:24} {'created' if s.created else 'exists':8} partitions={s.partitions} "
            f"replicas={s.replicas} cleanup.policy={s.cleanup_policy or '?'}"
        )
