"""``pubsub registry``: a Confluent-compatible Schema Registry on this machine (Apicurio Registry on loopback)."""

from __future__ import annotations


import click

from fastpubsub.kafka import registry_server
from fastpubsub.kafka.registry_server import DEFAULT_HEAP, STORAGES, EmbeddedRegistry

from .common import DEFAULT_BOOTSTRAP, serve_in_foreground


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8081, show_default=True,
              help="HTTP port on 127.0.0.1; 0: any free port.")
@click.option("--storage", type=click.Choice(STORAGES), default="mem", show_default=True,
              help="mem: schemas and ids are lost on exit; kafkasql: kept in topics of the Kafka cluster at "
                   "--bootstrap-servers, so ids survive a restart.")
@click.option("--bootstrap-servers", "-b", envvar="PUBSUB_BOOTSTRAP_SERVERS", default=DEFAULT_BOOTSTRAP,
              show_default=True, help="With --storage kafkasql: the Kafka cluster keeping the registry's journal "
                                      "(env PUBSUB_BOOTSTRAP_SERVERS).")
@click.option("--heap", default=DEFAULT_HEAP, show_default=True, help="Java heap of the registry.")
@click.option("--fetch-only", is_flag=True,
              help=f"Fetch Apicurio Registry {registry_server.VERSION} into the cache and exit.")
def registry(port: int, storage: str, bootstrap_servers: str, heap: str, fetch_only: bool) -> None:
    """Run a Schema Registry on 127.0.0.1 in the foreground until Ctrl-C or SIGTERM.

    Apicurio Registry, whose Confluent-compatible API confluent-kafka's
    serializers, Java clients and `--schema-registry` use.  Prints that URL
    once it answers.  Needs Java 17 or newer; the application comes from Maven
    Central once (`make install` fetches it).
    """
    try:
        if fetch_only:
            click.echo(f"Apicurio Registry {registry_server.VERSION}: {registry_server.fetch()}")
            return
        reg = EmbeddedRegistry(port or None, storage=storage, bootstrap_servers=bootstrap_servers, heap=heap)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    except (RuntimeError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    serve_in_foreground(reg, "Apicurio Registry", lambda: click.echo(reg.url))
