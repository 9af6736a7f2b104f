"""``pubsub run``: the processor until Ctrl-C or SIGTERM."""

from __future__ import annotations

import click

from fastpubsub.engine import ALGORITHMS, RUN_MIN
from fastpubsub.kafka.queues import MIN_CONSUMER_KBYTES, QueueBounds
from fastpubsub.kafka.record_limits import MIN_RECORD_LIMIT
from fastpubsub.runtime import MAX_COMMIT_INTERVAL_MS
from fastpubsub.services.events.encode import NOTIFICATION_EVENT_FORMATS, NOTIFICATION_EVENT_MODES
from fastpubsub.services.events.shard import Shard
from fastpubsub.wire import codecs

from .common import (delivery_option, deployment_options, log_level_option, metrics_options, progress_option,
                     run_service, setup_logging)


class ShardType(click.ParamType):
    """``I/K``, checked by ``processor.shard.Shard`` (its message names what is wrong)."""

    name = "I/K"

    def convert(self, value, param, ctx):
        if isinstance(value, Shard):
            return value
        try:
            return Shard.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@click.command()
@deployment_options
@click.option("--group-id", default="pubsub-processor", show_default=True,
              help="Consumer group (after --topic-prefix); instances with the same group share the event "
                   "partitions.")
@click.option("--shard", type=ShardType(), default="0/1", show_default=True,
              help="Hold only the subscriptions of shard I of K (crc32 of the decimal id, modulo K), for more "
                   "subscriptions than one machine holds.  Each shard is its own consumer group, "
                   "<group-id>.shard-I-of-K, reading every event; run one or more instances of every shard 0..K-1 "
                   "(docs/processor.md, \"Sharding\").  0/1: unsharded.")
@click.option("--start-from-group", "start_from_groups", multiple=True, metavar="GROUP",
              help="Repeatable.  A partition of pubsub.events this instance's consumer group has never committed "
                   "starts at the smallest offset these groups committed there, instead of the earliest event: "
                   "for new shards (or a new --shard count) that take over from the groups they replace "
                   "without notifying the retained events again.")
@click.option("--output-format", type=click.Choice(codecs.FORMATS), default="avro", show_default=True,
              help="Encoding of notifications and dead letters.")
@delivery_option
@click.option("--transactional-id", default=None,
              help="transactional.id of this instance; must differ between live instances and should be reused by "
                   "a restarted one.  Default: <group-id>-<hostname>-<lowest free slot on this host>.")
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Most events matched in one batch: a batch is what has arrived, up to this many (a backlog gives "
                   "full batches, a quiet input small ones).")
@click.option("--commit-interval-ms", type=click.IntRange(0, MAX_COMMIT_INTERVAL_MS), default=100, show_default=True,
              help="Longest a transaction (at-least-once: the outputs before an offset commit) stays open over "
                   "successive batches, like Kafka Streams' commit.interval.ms; it is committed sooner as soon as "
                   "the input is drained, but no sooner after the last commit than that commit took.  0: commit "
                   "after every batch.")
@click.option("--commit-linger-ms", type=click.IntRange(0, MAX_COMMIT_INTERVAL_MS), default=0, show_default=True,
              help="When the input is drained, keep the transaction open until it is this old (at most "
                   "--commit-interval-ms) rather than committing at once: fewer commits under a steady load, "
                   "each event waiting up to this much longer.  0: commit as soon as the input is drained.")
@click.option("--overlap-commits/--no-overlap-commits", default=False, show_default=True,
              help="Commit on a thread of its own while what arrives meanwhile is consumed, decoded, matched and "
                   "encoded (its notifications go into the next transaction once the commit has ended); "
                   "a shorter tail at thousands of events/s, a higher p50 at a few hundred; --no-overlap-commits "
                   "(the default) waits for each commit (docs/benchmarks.md, \"Latency at the same offered rates\").")
@click.option("--latency-samples", type=click.IntRange(min=0), default=0, show_default=True,
              help="Follow a batch every 50 ms from its first event's timestamp to its commit and print the last "
                   "this many with the final statistics, their latency split into parts (waiting before the "
                   "consumer, decode, match, produce, waiting for the commit; docs/guide/operations.md).")
@click.option("--algorithm", type=click.Choice(ALGORITHMS), default="dynamic", show_default=True,
              help="Matching algorithm (docs/design/engine.md): dynamic adapts its hash tables to the subscriptions and "
                   "the event statistics; the others are for comparison.")
@click.option("--runs", type=click.IntRange(min=0), default=None,
              help=f"static/dynamic: keep clusters of at least this many subscriptions sorted, with a run index "
                   f"(default {RUN_MIN}; 0: the paper's plain clusters).  The cost model prices indexed lists "
                   f"(docs/design/clustering.md, \"Runs\").")
@click.option("--session-timeout-ms", type=int, default=6000, show_default=True,
              help="Consumer group session timeout: how long a dead instance holds its partitions.")
@progress_option
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
@log_level_option
@metrics_options
@click.option("--producer-queue-messages", type=click.IntRange(min=1), default=QueueBounds.producer_messages,
              show_default=True, help="Most notifications and dead letters held awaiting acknowledgement; when full, "
                                      "the loop waits (back-pressure), nothing is dropped.")
@click.option("--producer-queue-kbytes", type=click.IntRange(min=1), default=QueueBounds.producer_kbytes,
              show_default=True, help="The same bound in kilobytes.")
@click.option("--consumer-queue-kbytes", type=click.IntRange(min=MIN_CONSUMER_KBYTES), default=QueueBounds.consumer_kbytes,
              show_default=True, help="Most kilobytes each consumer fetches ahead of the loop, per partition.")
@click.option("--notification-event", type=click.Choice(NOTIFICATION_EVENT_MODES), default="auto", show_default=True,
              help="How a notification carries its event: full embeds it (an event whose notification would exceed "
                   "pubsub.notifications' record limit is dead-lettered), reference gives the event's topic, "
                   "partition and offset instead, auto embeds it when it fits and refers to it otherwise.")
@click.option("--notification-event-format", type=click.Choice(NOTIFICATION_EVENT_FORMATS), default="decoded",
              show_default=True,
              help="What an embedded event is: decoded, its attributes in --output-format; original, the record's "
                   "value as it was, with its schema id when it is in the Confluent wire format, for consumers that "
                   "read the producers' own format.  Either way the notification names the event's topic, "
                   "partition and offset (source).")
@click.option("--max-output-bytes", type=click.IntRange(min=MIN_RECORD_LIMIT), default=None,
              help="Largest record written to pubsub.notifications and pubsub.dead-letter.  Default: each topic's "
                   "max.message.bytes as the broker reports it, capped by the producer's message.max.bytes "
                   "(1,000,000 unless set with -X).")
@click.option("--max-record-bytes", type=click.IntRange(min=MIN_RECORD_LIMIT), default=None,
              help="Input records (key plus value) larger than this are dead-lettered before they are decoded, "
                   "which bounds the memory one record can take.  Default: the input topics' max.message.bytes, "
                   "1,048,588 (Kafka's default) where the broker does not report it.")
def run(clients, topics, schema_registry, group_id, shard, start_from_groups, output_format, delivery, transactional_id, batch_size,
        commit_interval_ms, commit_linger_ms, overlap_commits, latency_samples, algorithm, runs,
        session_timeout_ms,
        progress_interval, snapshot_dir, snapshot_every, snapshot_changes, max_valid_events, max_valid_event_bytes,
        log_level, monitoring,
        producer_queue_messages, producer_queue_kbytes, consumer_queue_kbytes,
        notification_event, notification_event_format, max_output_bytes, max_record_bytes) -> None:
    """Run the processor until Ctrl-C or SIGTERM.

    Rebuilds the subscriptions from pubsub.subscriptions, then matches events
    from pubsub.events in batches.  Input offsets are committed only with (or
    after) the notifications they caused; see --delivery and
    --commit-interval-ms.  Progress goes to stderr; on shutdown the
    final statistics are printed to stdout as one JSON line.
    """
    from fastpubsub.runtime import HostConfig
    from fastpubsub.services.events.processor import Processor, ProcessorConfig

    setup_logging(log_level)
    try:
        host = HostConfig(
            clients.bootstrap_servers, topics.group(group_id), dict(clients.settings), delivery, transactional_id,
            batch_size, session_timeout_ms, progress_interval, output_format, stall_seconds=monitoring.stall_seconds,
            queue_bounds=QueueBounds(producer_queue_messages, producer_queue_kbytes, consumer_queue_kbytes),
            commit_interval_ms=commit_interval_ms, commit_linger_ms=commit_linger_ms, overlap_commits=overlap_commits,
            latency_samples=latency_samples, max_output_bytes=max_output_bytes, max_record_bytes=max_record_bytes,
            start_from_groups=start_from_groups, topics=topics)
        processor = Processor(ProcessorConfig(
            host, algorithm=algorithm, runs=runs, max_valid_events=max_valid_events,
            max_valid_event_bytes=max_valid_event_bytes, snapshot_dir=snapshot_dir, snapshot_every=snapshot_every,
            snapshot_changes=snapshot_changes, notification_event=notification_event, shard=shard,
            notification_event_format=notification_event_format, schema_registry=schema_registry))
    except ValueError as exc:  # options the matcher refuses (e.g. --runs with propagation)
        raise click.UsageError(str(exc)) from None
    run_service(processor, monitoring)
