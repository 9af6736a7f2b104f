"""What every ``pubsub`` subcommand that talks to Kafka shares: the connection options, logging, signals."""

from __future__ import annotations

import functools
import json
import logging
import signal
import sys
from typing import Any, Callable

import click

from fastpubsub.kafka import ClientFactory, parse_settings
from fastpubsub.kafka.admin import require

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def connection_options(command: Callable) -> Callable:
    """``--bootstrap-servers`` and repeatable ``-X KEY=VALUE``, given to the command as one ``clients`` factory."""

    @click.option("--bootstrap-servers", "-b", envvar="PUBSUB_BOOTSTRAP_SERVERS", default=DEFAULT_BOOTSTRAP,
                  show_default=True, help="Kafka bootstrap servers (env PUBSUB_BOOTSTRAP_SERVERS).")
    @click.option("-X", "client_config", multiple=True, metavar="KEY=VALUE",
                  help="Extra librdkafka setting for every Kafka client (e.g. -X security.protocol=SASL_SSL); "
                       "repeatable.")
    @functools.wraps(command)
    def wrapper(*args, bootstrap_servers: str, client_config: tuple[str, ...], **kwargs):
        try:
            clients = ClientFactory(bootstrap_servers, parse_settings(client_config))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="-X") from None
        return command(*args, clients=clients, **kwargs)

    return wrapper


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def on_signals(handler: Callable[[], None]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: handler())


def require_topic(clients: ClientFactory, topic: str) -> None:
    """A click error unless ``topic`` exists (writing would auto-create it on some brokers)."""
    try:
        require(clients, (topic,))
    except Exception as exc:  # noqa: BLE001 - unreachable broker or missing topic, shown as is
        raise click.ClickException(str(exc)) from None


def run_service(service: Any) -> None:
    """Run a service (``run()`` -> statistics, ``stop()``, ``stats()``) until Ctrl-C or SIGTERM; print its final
    statistics as one JSON line, and exit non-zero with the reason logged if it failed."""
    on_signals(service.stop)
    try:
        stats = service.run()
    except Exception as exc:  # noqa: BLE001 - nothing was committed past the failure; say why and exit non-zero
        logging.getLogger("pubsub").error("stopping: %s", exc)
        click.echo(json.dumps(service.stats(), sort_keys=True))
        sys.exit(1)
    click.echo(json.dumps(stats, sort_keys=True))
