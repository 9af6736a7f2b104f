"""``pubsub``: the one command line of fastpubsub.

Every subcommand that talks to Kafka takes ``--bootstrap-servers`` (env
``PUBSUB_BOOTSTRAP_SERVERS``), so the same processor runs against the embedded
broker or any Kafka cluster.  ``broker`` and ``demo`` run an embedded broker
of their own and take ``--port`` instead.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import click

from fastpubsub.engine import ALGORITHMS
from fastpubsub.engine import RUN_MIN

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.wire import codecs, topics

from fastpubsub.wire.dedup import DEFAULT_CAPACITY, Deduplicator
from .metrics import DEFAULT_STALL_SECONDS
from fastpubsub.kafka.queues import MIN_CONSUMER_KBYTES, QueueBounds
from fastpubsub.language import ExpressionError, format_predicates, parse

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

bootstrap_option = click.option(
    "--bootstrap-servers", "-b", envvar="PUBSUB_BOOTSTRAP_SERVERS", default=DEFAULT_BOOTSTRAP, show_default=True,
    help="Kafka bootstrap servers (env PUBSUB_BOOTSTRAP_SERVERS).",
)


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def _on_signals(handler) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: handler())


def _producer(bootstrap_servers: str, topic: str):
    """A producer for ``topic``, once it is known to exist (writing would auto-create it on some brokers)."""
    try:
        admin.require(bootstrap_servers, (topic,))
    except Exception as exc:  # noqa: BLE001 - unreachable broker or missing topic, shown as is
        raise click.ClickException(str(exc)) from None
    return ClientFactory(bootstrap_servers).producer(**{"enable.idempotence": True})


def _send(bootstrap_servers: str, topic: str, key: bytes | None, value: bytes | None) -> None:
    producer = _producer(bootstrap_servers, topic)
    errors: list[str] = []
    producer.produce(topic, value, key, on_delivery=lambda err, _m: err and errors.append(str(err)))
    if producer.flush(30) or errors:
        raise click.ClickException(f"could not write to {topic} on {bootstrap_servers}: {errors or 'timed out'}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """fastpubsub: content-based publish/subscribe between Kafka topics.

    Subscriptions (conjunctions of predicates) arrive on pubsub.subscriptions,
    events on pubsub.events; every event is matched against every subscription
    and a notification per match goes to pubsub.notifications.  Bad input goes
    to pubsub.dead-letter.  Quick look: `pubsub demo`.
    """


@main.command()
@click.option("--port", type=int, default=9092, show_default=True, help="Port on 127.0.0.1 to listen on (0: any free port).")
def broker(port: int) -> None:
    """Run the embedded broker (Tansu, in-memory) in the foreground until Ctrl-C.

    It listens on 127.0.0.1 only and keeps everything in memory: stopping it
    discards all topics.  Prints the bootstrap address to use with
    --bootstrap-servers.
    """
    from fastpubsub.kafka.broker import EmbeddedBroker

    b = EmbeddedBroker(port or None)
    try:
        b.start()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(b.bootstrap_servers, nl=True)
    sys.stdout.flush()
    _on_signals(b.interrupt)
    code = b.wait()
    if code not in (0, -signal.SIGINT, 128 + signal.SIGINT):
        raise click.ClickException(f"the broker exited with status {code}")


@main.command("topics")
@bootstrap_option
@click.option("--partitions", type=int, default=4, show_default=True, help="Partitions of each new topic.")
@click.option("--replication-factor", type=int, default=1, show_default=True, help="Replicas of each new topic.")
def topics_cmd(bootstrap_servers: str, partitions: int, replication_factor: int) -> None:
    """Create the five topics (existing ones are left as they are).

    pubsub.subscriptions, pubsub.dead-letter and pubsub.statistics are
    compacted (the statistics topic always has one partition); pubsub.events
    and pubsub.notifications are deleted by retention.  Prints each topic with
    its partitions and the cleanup.policy the broker reports.
    """
    try:
        statuses = admin.create_topics(bootstrap_servers, partitions, replication_factor)
    except Exception as exc:  # noqa: BLE001 - shown to the user as is
        raise click.ClickException(f"creating topics on {bootstrap_servers}: {exc}") from None
    for s in statuses:
        click.echo(
            f"{s.name:24} {'created' if s.created else 'exists':8} partitions={s.partitions} "
            f"cleanup.policy={s.cleanup_policy or '?'}"
        )


@main.command()
@bootstrap_option
@click.option("--group-id", default="pubsub-processor", show_default=True,
              help="Consumer group; instances with the same group share the event partitions.")
@click.option("--output-format", type=click.Choice(codecs.FORMATS), default="avro", show_default=True,
              help="Encoding of notifications and dead letters.")
@click.option("--delivery", type=click.Choice(["auto", "transactional", "at-least-once"]), default="auto",
              show_default=True,
              help="auto: transactions if the broker supports them, else at-least-once.")
@click.option("--transactional-id", default=None,
              help="transactional.id of this instance; must differ between live instances and should be reused by "
                   "a restarted one.  Default: <group-id>-<hostname>-<lowest free slot on this host>.")
@click.option("--batch-size", type=int, default=1000, show_default=True, help="Events per match_batch and commit.")
@click.option("--algorithm", type=click.Choice(ALGORITHMS), default="dynamic", show_default=True,
              help="Matching algorithm (docs/engine.md): dynamic adapts its hash tables to the subscriptions and "
                   "the event statistics; the others are for comparison.")
@click.option("--runs", type=click.IntRange(min=0), default=0, show_default=True,
              help=f"static/dynamic: keep clusters of at least this many subscriptions sorted, with a run index "
                   f"(0: off; {RUN_MIN} is the tested value).  Faster on large, stable populations, slower under "
                   f"heavy churn (docs/clustering.md, \"Runs\").")
@click.option("--session-timeout-ms", type=int, default=6000, show_default=True,
              help="Consumer group session timeout (a join takes about half of it on Tansu).")
@click.option("--progress-interval", type=float, default=5.0, show_default=True, help="Seconds between progress lines.")
@click.option("--snapshot-dir", type=click.Path(file_okay=False), default=None,
              help="Directory of this instance's snapshot: loaded on start (then only later subscription changes "
                   "are replayed), written periodically and on stop.  Default: none, every start rebuilds from "
                   "pubsub.subscriptions.")
@click.option("--snapshot-every", type=click.FloatRange(min=0.0), default=300.0, show_default=True,
              help="Seconds between snapshots (only when something changed).")
@click.option("--snapshot-changes", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="... or a snapshot after this many subscription changes, whichever comes first.")
@click.option("--max-valid-events", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Bound of the valid-event store (events with a valid_until header); past it the events "
                   "closest to expiry are dropped.")
@click.option("--max-valid-event-bytes", type=click.IntRange(min=1), default=256 << 20, show_default=True,
              help="Bound of the valid-event store in bytes (approximate: values, ids and per-attribute overhead).")
@click.option("-X", "client_config", multiple=True, metavar="KEY=VALUE",
              help="Extra librdkafka setting for every client (e.g. -X security.protocol=SASL_SSL); repeatable.")
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]),
              help="Verbosity of the log on stderr.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Serve /metrics (Prometheus), /healthz (liveness) and /readyz on this port; 0: no server.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True,
              help="Address the metrics server binds (0.0.0.0 in a container).")
@click.option("--stall-seconds", type=click.FloatRange(min=1), default=DEFAULT_STALL_SECONDS, show_default=True,
              help="/healthz answers 503 once the loop has made no progress for this long.")
@click.option("--producer-queue-messages", type=click.IntRange(min=1), default=QueueBounds.producer_messages,
              show_default=True, help="Most notifications and dead letters held awaiting acknowledgement; when full, "
                                      "the loop waits (back-pressure), nothing is dropped.")
@click.option("--producer-queue-kbytes", type=click.IntRange(min=1), default=QueueBounds.producer_kbytes,
              show_default=True, help="The same bound in kilobytes.")
@click.option("--consumer-queue-kbytes", type=click.IntRange(min=MIN_CONSUMER_KBYTES), default=QueueBounds.consumer_kbytes,
              show_default=True, help="Most kilobytes each consumer fetches ahead of the loop.")
def run(bootstrap_servers, group_id, output_format, delivery, transactional_id, batch_size, algorithm, runs,
        session_timeout_ms,
        progress_interval, snapshot_dir, snapshot_every, snapshot_changes, max_valid_events, max_valid_event_bytes,
        client_config, log_level, metrics_port, metrics_host, stall_seconds,
        producer_queue_messages, producer_queue_kbytes, consumer_queue_kbytes) -> None:
    """Run the processor until Ctrl-C or SIGTERM.

    Rebuilds the subscriptions from pubsub.subscriptions, then matches events
    from pubsub.events in batches.  Input offsets are committed only with (or
    after) the notifications they caused; see --delivery.  Progress goes to stderr; on shutdown the
    final statistics are printed to stdout as one JSON line.
    """
    from .app import Processor, ProcessorConfig, stats_json
    from .metrics import MetricsServer

    _setup_logging(log_level)
    extra = {}
    for item in client_config:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="-X")
        extra[key] = value
    try:
        processor = Processor(ProcessorConfig(
            bootstrap_servers, group_id, output_format, delivery, batch_size, session_timeout_ms, progress_interval,
            algorithm=algorithm, runs=runs, client_config=extra, transactional_id=transactional_id,
            stall_seconds=stall_seconds,
            snapshot_dir=snapshot_dir, snapshot_every=snapshot_every, snapshot_changes=snapshot_changes,
            max_valid_events=max_valid_events, max_valid_event_bytes=max_valid_event_bytes,
            queue_bounds=QueueBounds(producer_queue_messages, producer_queue_kbytes, consumer_queue_kbytes),
        ))
    except ValueError as exc:  # options the matcher refuses (e.g. --runs with propagation)
        raise click.UsageError(str(exc)) from None
    server = None
    if metrics_port:
        try:
            server = MetricsServer(processor.metrics, metrics_port, metrics_host).start()
        except OSError as exc:
            raise click.ClickException(f"cannot serve metrics on {metrics_host}:{metrics_port}: {exc}") from None
    _on_signals(processor.stop)
    try:
        stats = processor.run()
    except Exception as exc:  # noqa: BLE001 - nothing was committed past the failure; say why and exit non-zero
        logging.getLogger("pubsub").error("stopping: %s", exc)
        click.echo(stats_json(processor.stats()))
        sys.exit(1)
    finally:
        if server is not None:
            server.stop()
    click.echo(stats_json(stats))


def _epoch_ms(text: str | None, option: str = "--valid-until") -> int | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"not an ISO-8601 date/time: {text!r}", param_hint=option) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


@main.command()
@bootstrap_option
@click.argument("expression")
@click.option("--id", "sub_id", type=int, default=None,
              help="Subscription id; an existing id is replaced.  Default: a new random id (printed).")
@click.option("--subscriber", required=True, help="Owner; the key of its notifications.")
@click.option("--valid-until", default=None,
              help="ISO-8601 expiry in event time, e.g. 2030-01-01T00:00:00+00:00 (UTC if no zone): events "
                   "timestamped then or later do not match.")
@click.option("--valid-from", default=None,
              help="ISO-8601 start of validity in event time (UTC if no zone): events timestamped earlier do "
                   "not match.")
@click.option("--format", "fmt", type=click.Choice(codecs.FORMATS), default="avro", show_default=True,
              help="Encoding of the subscription value.")
def subscribe(bootstrap_servers, expression, sub_id, subscriber, valid_until, valid_from, fmt) -> None:
    """Add or replace a subscription given as text, e.g.

    \b
      pubsub subscribe --id 42 --subscriber alice 'movie = "groundhog day" and price <= 10'

    Predicates are joined by `and`; operators = != < <= > >=; values are
    "strings", numbers, true or false.
    """
    try:
        predicates = parse(expression)
    except ExpressionError as exc:
        raise click.BadParameter(str(exc), param_hint="EXPRESSION") from None
    if sub_id is None:
        sub_id = uuid.uuid4().int >> 65  # positive, fits in a signed 64-bit integer
    start, end = _epoch_ms(valid_from, "--valid-from"), _epoch_ms(valid_until)
    if start is not None and end is not None and start >= end:
        raise click.BadParameter("must be before --valid-until", param_hint="--valid-from")
    value = codecs.encode_subscription(codecs.Subscription(subscriber, predicates, end, start), fmt)
    _send(bootstrap_servers, topics.SUBSCRIPTIONS, str(sub_id).encode(), value)
    click.echo(f"subscription {sub_id} ({subscriber}): {format_predicates(predicates)}")


@main.command()
@bootstrap_option
@click.option("--id", "sub_id", type=int, required=True, help="Subscription id to remove.")
def unsubscribe(bootstrap_servers, sub_id) -> None:
    """Remove a subscription (writes a tombstone for its id)."""
    _send(bootstrap_servers, topics.SUBSCRIPTIONS, str(sub_id).encode(), None)
    click.echo(f"subscription {sub_id} removed")


@main.command()
@bootstrap_option
@click.argument("event")
@click.option("--key", default=None, help="Event id (record key).  Default: none, so the id is topic:partition:offset.")
@click.option("--format", "fmt", type=click.Choice(codecs.FORMATS), default="json", show_default=True,
              help="Encoding of the event value.")
def publish(bootstrap_servers, event, key, fmt) -> None:
    """Publish an event given as a JSON object, e.g.

    \b
      pubsub publish --key e17 '{"movie": "groundhog day", "price": 8, "theater": "odeon"}'

    With EVENT `-`, publishes one JSON object per line of standard input
    (without keys).
    """
    lines = [line for line in sys.stdin.read().splitlines() if line.strip()] if event == "-" else [event]
    producer = _producer(bootstrap_servers, topics.EVENTS)
    for n, line in enumerate(lines, 1):
        try:
            parsed = codecs.decode_event(line.strip().encode())
        except codecs.DecodeError as exc:
            raise click.BadParameter(f"line {n}: {exc}" if event == "-" else str(exc), param_hint="EVENT") from None
        producer.produce(topics.EVENTS, codecs.encode_event(parsed, fmt), key.encode() if key and event != "-" else None)
    if producer.flush(30):
        raise click.ClickException(f"could not write to {topics.EVENTS} on {bootstrap_servers}")
    click.echo(f"published {len(lines)} event(s)")


@main.command()
@bootstrap_option
@click.option("--dead-letters", is_flag=True, help="Tail pubsub.dead-letter instead of pubsub.notifications.")
@click.option("--from-beginning", is_flag=True, help="Start at the oldest record instead of the end.")
@click.option("--max", "max_records", type=int, default=None, help="Stop after this many records.")
@click.option("--timeout", type=float, default=None, help="Stop after this many seconds without a record.")
@click.option("--dedup/--no-dedup", default=True, show_default=True,
              help="Drop notifications whose notification_id was already printed (redeliveries after a failure). "
                   "Dead letters are never de-duplicated.")
@click.option("--dedup-capacity", type=click.IntRange(min=1), default=DEFAULT_CAPACITY, show_default=True,
              help="How many recent notification ids --dedup remembers (bounded memory, ~170 bytes per id).")
def tail(bootstrap_servers, dead_letters, from_beginning, max_records, timeout, dedup, dedup_capacity) -> None:
    """Print notifications (or dead letters) as JSON lines, Avro or JSON alike.

    Notifications are de-duplicated by notification_id by default (see
    --dedup); on exit the number of duplicates dropped goes to stderr.
    """
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    dedup = Deduplicator(dedup_capacity) if dedup and not dead_letters else None

    topic = topics.DEAD_LETTER if dead_letters else topics.NOTIFICATIONS
    consumer = ClientFactory(bootstrap_servers).consumer(
        "pubsub-tail", **{"enable.auto.commit": False, "isolation.level": "read_committed"})
    start = OFFSET_BEGINNING if from_beginning else OFFSET_END
    try:
        n_partitions = admin.partitions_of(bootstrap_servers, topic)
    except Exception as exc:  # noqa: BLE001 - unreachable broker or missing topic, shown as is
        consumer.close()
        raise click.ClickException(str(exc)) from None
    consumer.assign([TopicPartition(topic, p, start) for p in range(n_partitions)])
    stopping = []
    _on_signals(lambda: stopping.append(True))
    seen, last = 0, time.monotonic()
    try:
        while not stopping and (max_records is None or seen < max_records):
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                if timeout is not None and time.monotonic() - last > timeout:
                    break
                continue
            last = time.monotonic()
            try:
                if dead_letters:
                    dl = codecs.decode_dead_letter(msg.value())
                    out = {**dl.__dict__, "key": dl.key.decode("utf-8", "replace") if dl.key else None,
                           "value": dl.value.decode("utf-8", "replace") if dl.value else None}
                else:
                    out = codecs.decode_notification(msg.value())
            except codecs.DecodeError as exc:
                out = {"undecodable": str(exc), "partition": msg.partition(), "offset": msg.offset()}
            if dedup is not None and "notification_id" in out and dedup.seen(str(out["notification_id"])):
                continue
            click.echo(json.dumps(out))
            seen += 1
    finally:
        consumer.close()
        if dedup is not None:
            click.echo(f"{dedup.dropped} duplicate notification(s) dropped (of {dedup.passed + dedup.dropped})", err=True)


@main.command(context_settings={"ignore_unknown_options": True, "help_option_names": []}, add_help_option=False)
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED, metavar="[OPTIONS]")
def stats(job_args) -> None:
    """Compute event statistics with Spark and publish them (`pubsub stats --help`).

    Runs the PySpark job of spark_jobs (the same options as `python -m
    spark_jobs`): reads a window of pubsub.events (default: everything since
    the last run), computes per-attribute and per-attribute-set statistics,
    publishes the snapshot to pubsub.statistics (running processors adopt it)
    and writes it to out/statistics.json.  --every 10m runs it in a loop.
    Needs the spark extra (pip install -e '.[spark]') and Java 17.
    """
    try:
        from fastpubsub.stats_job.statistics_job import main as job_main
    except ImportError as exc:
        raise click.ClickException(f"`pubsub stats` needs PySpark: pip install -e '.[spark]' ({exc})") from None
    sys.exit(job_main(list(job_args), prog="pubsub stats", default_bootstrap=DEFAULT_BOOTSTRAP))


@main.command()
@click.option("--subscriptions", "n_subscriptions", type=int, default=100_000, show_default=True,
              help="Number of generated subscriptions.")
@click.option("--events", "n_events", type=int, default=10_000, show_default=True, help="Number of generated events.")
@click.option("--workload", default="W0", show_default=True, help="Fabret et al. workload preset (engine.workload.PRESETS).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the generated subscriptions and events.")
@click.option("--port", type=int, default=0, show_default=True, help="Broker port on 127.0.0.1 (0: any free port).")
@click.option("--output-format", type=click.Choice(codecs.FORMATS), default="avro", show_default=True,
              help="The processor's encoding of notifications.")
@click.option("--batch-size", type=int, default=1000, show_default=True, help="Processor events per batch.")
@click.option("--no-stats", is_flag=True, help="Skip the Spark statistics job (a JVM start and a dozen Spark jobs: about a minute on a loaded 2-core machine).")
def demo(n_subscriptions, n_events, workload, seed, port, output_format, batch_size, no_stats) -> None:
    """Everything end to end on the embedded broker, then shut it all down.

    Starts the broker, creates the topics, loads the generated subscriptions
    (plus a few hand-written ones so that notifications flow: W0 subscriptions
    have five equality predicates and rarely match), starts a processor,
    streams events, prints live progress, runs the Spark statistics job once
    on the events and shows the processor's hash tables before and after it
    adopted the snapshot (--no-stats skips that), and prints a summary.

    It always starts its own broker (no --bootstrap-servers): nothing is left
    behind, so it can be run again and again.
    """
    from .demo import Demo

    sys.exit(Demo(n_subscriptions, n_events, workload, seed, port, output_format, batch_size, not no_stats).run())


@main.command("bench")
@click.argument("figures", nargs=-1, required=True, type=click.Choice(["fig3a", "fig3b", "scaling", "fig4", "e2e", "all"]))
@click.option("--quick", is_flag=True, help="Small sizes: every figure in a few minutes (what the tests run).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("benchmarks/results"),
              show_default=True, help="Directory for the CSV, PNG and markdown of each figure, and report.md.")
@click.option("--img-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also copy the PNGs here (docs/img to refresh docs/benchmarks.md).")
def bench_cmd(figures, quick, out, img_dir) -> None:
    """Reproduce Fabret et al.'s figures, and the end-to-end run through the broker.

    \b
      fig3a  W0, N = 100K..6M: events/s (3a), memory (3c), loading time (3d)
             for counting, propagation, propagation-wp, static, dynamic
      fig3b  W1 and W2 for propagation-wp and dynamic
      scaling  W0, N = 1M..10M: dynamic on plain clusters and with runs,
             events/s encoded and as dicts, each relative to 1M
      fig4   the equilibrium experiments (W3->W4, W5->W6), dynamic vs no-change
      e2e    events topic -> notifications topic through the embedded broker,
             1M W0 subscriptions: maximum events/s, latency at half of it
      all    all of them (under an hour on the 2-core development machine)

    Each writes <figure>.csv, .png and .md (the paper's values beside ours)
    into --out, plus report.md for the whole run.
    """
    from benchmarks.suite import FIGURES, run as run_suite

    chosen = list(FIGURES) if "all" in figures else list(dict.fromkeys(figures))
    outcome = run_suite(chosen, out, quick, img_dir, progress=lambda text: click.echo(text) or sys.stdout.flush())
    failed = {k: v for k, v in outcome.items() if v != "ok"}
    click.echo(f"report: {out / 'report.md'}")
    if failed:
        raise click.ClickException("; ".join(f"{k}: {v}" for k, v in failed.items()))


if __name__ == "__main__":
    main()
