"""What every ``pubsub`` subcommand that talks to Kafka shares: the connection options, logging, signals; and what
the three services share: ``/metrics``, ``/healthz`` and ``/readyz``, and how they run until stopped."""

from __future__ import annotations

import functools
import json
import logging
import signal
import sys
from dataclasses import dataclass
from typing import Any, Callable

import click

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.admin import require
from fastpubsub.kafka.schema_registry import RegistryConfig
from fastpubsub.runtime import DEFAULT_STALL_SECONDS, MetricsServer
from fastpubsub.wire.printable import log_to_stderr
from fastpubsub.wire.topics import TopicNames

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def connection_options(command: Callable) -> Callable:
    """``--bootstrap-servers``, ``--client-config FILE`` and repeatable ``-X KEY=VALUE``, given to the command as
    one ``clients`` factory (``ClientFactory.configure``: the file's settings under -X's)."""

    @click.option("--bootstrap-servers", "-b", envvar="PUBSUB_BOOTSTRAP_SERVERS", default=None,
                  help=f"Kafka bootstrap servers (env PUBSUB_BOOTSTRAP_SERVERS; else bootstrap.servers of "
                       f"--client-config; else {DEFAULT_BOOTSTRAP}).")
    @click.option("--client-config", "client_config_file", type=click.Path(exists=True, dir_okay=False),
                  default=None, metavar="FILE",
                  help="librdkafka settings for every Kafka client, one key=value a line (a Kafka client "
                       "properties file: # comments); -X wins over it.")
    @click.option("-X", "client_config", multiple=True, metavar="KEY=VALUE",
                  help="Extra librdkafka setting for every Kafka client (e.g. -X security.protocol=SASL_SSL); "
                       "repeatable.")
    @functools.wraps(command)
    def wrapper(*args, bootstrap_servers: str | None, client_config: tuple[str, ...], client_config_file: str | None,
                **kwargs):
        try:
            clients = ClientFactory.configure(bootstrap_servers, client_config, client_config_file, DEFAULT_BOOTSTRAP)
        except (OSError, ValueError) as exc:
            raise click.BadParameter(str(exc), param_hint="-X or --client-config") from None
        return command(*args, clients=clients, **kwargs)

    return wrapper


def topic_options(command: Callable) -> Callable:
    """The topic names of the deployment (``wire.topics.TopicNames``), given to the command as one ``topics``:
    ``--topic-prefix``, ``--events-topic`` (repeatable), ``--events-pattern`` and a ``--X-topic`` per output, each
    also an environment variable ``PUBSUB_...``."""

    @click.option("--topic-prefix", envvar="PUBSUB_TOPIC_PREFIX", default="", metavar="PREFIX",
                  help="Put PREFIX in front of every topic and consumer group name fastpubsub chooses (not of names "
                       "given below), so that deployments with different prefixes share a cluster (env "
                       "PUBSUB_TOPIC_PREFIX).")
    @click.option("--events-topic", "events_topics", envvar="PUBSUB_EVENTS_TOPIC", multiple=True, metavar="TOPIC",
                  help="Read events from TOPIC; repeatable (env PUBSUB_EVENTS_TOPIC, names separated by spaces).  "
                       "Default: <prefix>pubsub.events, unless --events-pattern is given.")
    @click.option("--events-pattern", envvar="PUBSUB_EVENTS_PATTERN", default=None, metavar="REGEX",
                  help="Read events from every topic whose whole name matches REGEX, also those created while "
                       "running (picked up within topic.metadata.refresh.interval.ms, 5 minutes unless set with "
                       "-X); with --events-topic, from both (env PUBSUB_EVENTS_PATTERN).")
    @click.option("--subscriptions-topic", envvar="PUBSUB_SUBSCRIPTIONS_TOPIC", default=None, metavar="TOPIC",
                  help="Topic of the subscriptions (env PUBSUB_SUBSCRIPTIONS_TOPIC).  Default: "
                       "<prefix>pubsub.subscriptions.")
    @click.option("--notifications-topic", envvar="PUBSUB_NOTIFICATIONS_TOPIC", default=None, metavar="TOPIC",
                  help="Topic of the notifications (env PUBSUB_NOTIFICATIONS_TOPIC).  Default: "
                       "<prefix>pubsub.notifications.")
    @click.option("--dead-letter-topic", envvar="PUBSUB_DEAD_LETTER_TOPIC", default=None, metavar="TOPIC",
                  help="Topic of the dead letters (env PUBSUB_DEAD_LETTER_TOPIC).  Default: <prefix>pubsub.dead-letter.")
    @click.option("--statistics-topic", envvar="PUBSUB_STATISTICS_TOPIC", default=None, metavar="TOPIC",
                  help="Topic of the event statistics snapshots (env PUBSUB_STATISTICS_TOPIC).  Default: "
                       "<prefix>pubsub.statistics.")
    @functools.wraps(command)
    def wrapper(*args, topic_prefix: str, events_topics: tuple[str, ...], events_pattern: str | None,
                subscriptions_topic: str | None, notifications_topic: str | None, dead_letter_topic: str | None,
                statistics_topic: str | None, **kwargs):
        try:
            topics = TopicNames.build(topic_prefix, events_topics, events_pattern, subscriptions_topic,
                                      notifications_topic, dead_letter_topic, statistics_topic)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="topic options") from None
        return command(*args, topics=topics, **kwargs)

    return wrapper


def registry_options(command: Callable) -> Callable:
    """``--schema-registry URL``, ``--schema-registry-config FILE`` and repeatable ``-R KEY=VALUE``, given to the
    command as one ``schema_registry`` (a ``kafka.schema_registry.RegistryConfig``, or None without a URL): the
    registry's settings the way ``--client-config`` and ``-X`` give Kafka's."""

    @click.option("--schema-registry", "schema_registry_url", envvar="PUBSUB_SCHEMA_REGISTRY", default=None,
                  metavar="URL",
                  help="A Confluent-compatible Schema Registry (env PUBSUB_SCHEMA_REGISTRY; `pubsub registry` "
                       "runs one): events framed with its schema ids (Avro, JSON Schema, Protobuf) are decoded "
                       "with the schema registered under the id, their nested fields named by path.")
    @click.option("--schema-registry-config", "registry_config_file", type=click.Path(exists=True, dir_okay=False),
                  default=None, metavar="FILE",
                  help="Settings of the Schema Registry client, one key=value a line (confluent-kafka's keys: "
                       "basic.auth.user.info, ssl.ca.location, ssl.certificate.location, ssl.key.location, "
                       "timeout...); -R wins over it.")
    @click.option("-R", "registry_config", multiple=True, metavar="KEY=VALUE",
                  help="Extra Schema Registry client setting (e.g. -R basic.auth.user.info=USER:PASSWORD); "
                       "repeatable.")
    @functools.wraps(command)
    def wrapper(*args, schema_registry_url: str | None, registry_config: tuple[str, ...],
                registry_config_file: str | None, **kwargs):
        try:
            config = RegistryConfig.configure(schema_registry_url, registry_config, registry_config_file)
        except (OSError, ValueError) as exc:
            raise click.BadParameter(str(exc), param_hint="--schema-registry, -R or --schema-registry-config") from None
        return command(*args, schema_registry=config, **kwargs)

    return wrapper


def deployment_options(command: Callable) -> Callable:
    """:func:`connection_options`, :func:`topic_options` and :func:`registry_options` in that order: what a command
    that reads or writes the deployment's events takes (``clients``, ``topics``, ``schema_registry``)."""
    return connection_options(topic_options(registry_options(command)))


@dataclass(frozen=True)
class Monitoring:
    """Where a service serves ``/metrics``, ``/healthz`` and ``/readyz`` (port 0: nowhere), and how long a loop
    without progress is still alive."""

    port: int = 0
    host: str = "127.0.0.1"
    stall_seconds: float = DEFAULT_STALL_SECONDS


def metrics_options(command: Callable) -> Callable:
    """``--metrics-port``, ``--metrics-host`` and ``--stall-seconds``, given to the command as one ``monitoring``."""

    @click.option("--metrics-port", type=click.IntRange(0, 65535), default=0, show_default=True,
                  help="Serve /metrics (Prometheus), /healthz (liveness) and /readyz on this port; 0: no server.")
    @click.option("--metrics-host", default="127.0.0.1", show_default=True,
                  help="Address the metrics server binds (0.0.0.0 in a container).")
    @click.option("--stall-seconds", type=click.FloatRange(min=1), default=DEFAULT_STALL_SECONDS, show_default=True,
                  help="/healthz answers 503 once the loop has made no progress for this long.")
    @functools.wraps(command)
    def wrapper(*args, metrics_port: int, metrics_host: str, stall_seconds: float, **kwargs):
        return command(*args, monitoring=Monitoring(metrics_port, metrics_host, stall_seconds), **kwargs)

    return wrapper


#: The options every service shares, written once.
delivery_option = click.option(
    "--delivery", type=click.Choice(["auto", "transactional", "at-least-once"]), default="auto", show_default=True,
    help="auto: transactions if the broker supports them, else at-least-once.")
progress_option = click.option("--progress-interval", type=float, default=5.0, show_default=True,
                               help="Seconds between progress lines.")
log_level_option = click.option("--log-level", default="info", show_default=True,
                                type=click.Choice(["debug", "info", "warning", "error"]),
                                help="Verbosity of the log on stderr.")


def setup_logging(level: str) -> None:
    """Log to stderr, one line per record, control characters escaped (records quote untrusted input)."""
    log_to_stderr(level.upper(), "%(asctime)s %(name)s %(levelname)s %(message)s")


def on_signals(handler: Callable[[], None]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: handler())


def serve_in_foreground(server: Any, name: str, announce: Callable[[], None]) -> None:
    """Run an embedded server (Apache Kafka, the Schema Registry) until Ctrl-C or SIGTERM: start it, ``announce``
    where it listens, wait.  A server that exits by itself is an error that shows the end of its log; what it
    logs while it runs (a cluster's node that died and is restarted) goes to stderr."""
    setup_logging("warning")
    stopping = False

    def stop() -> None:
        nonlocal stopping
        stopping = True
        server.interrupt()

    on_signals(stop)
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    announce()
    sys.stdout.flush()
    code = server.wait()
    tail = server.log_tail()
    server.stop()
    if not stopping:
        raise click.ClickException(f"{name} exited with status {code}; its log:\n{tail}")


def require_topic(clients: ClientFactory, topic: str) -> None:
    """A click error unless ``topic`` exists (writing would auto-create it on some brokers)."""
    try:
        require(clients, (topic,))
    except Exception as exc:  # noqa: BLE001 - unreachable broker or missing topic, shown as is
        raise click.ClickException(str(exc)) from None


def run_service(service: Any, monitoring: Monitoring) -> None:
    """Run a service (a ``runtime.host.Host``) until Ctrl-C or SIGTERM, its ``/metrics``, ``/healthz`` and
    ``/readyz`` served meanwhile when ``monitoring`` has a port; print its final statistics as one JSON line, and
    exit non-zero with the reason logged if it failed."""
    server = None
    if monitoring.port:
        try:
            server = MetricsServer(service.metrics, monitoring.port, monitoring.host).start()
        except OSError as exc:
            raise click.ClickException(f"cannot serve metrics on {monitoring.host}:{monitoring.port}: {exc}") from None
    on_signals(service.stop)
    try:
        stats = service.run()
    except Exception as exc:  # noqa: BLE001 - nothing was committed past the failure; say why and exit non-zero
        logging.getLogger("pubsub").error("stopping: %s", str(exc) or type(exc).__name__)
        click.echo(json.dumps(service.stats(), sort_keys=True))
        sys.exit(1)
    finally:
        if server is not None:
            server.stop()
    click.echo(json.dumps(stats, sort_keys=True))
