"""``pubsub subscribe``, ``unsubscribe``, ``publish`` and ``tail``: writing subscriptions and events, reading notifications."""

from __future__ import annotations

import base64
import json
import re
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import click
from confluent_kafka import Producer

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.language import ExpressionError, format_predicates, parse
from fastpubsub.language.lexer import NAME
from fastpubsub.wire import codecs
from fastpubsub.wire.topics import TopicNames
from fastpubsub.wire.eventruler import RuleError, rule_to_subscription
from fastpubsub.wire.dedup import DEFAULT_CAPACITY, Deduplicator
from fastpubsub.wire.placement import partition_for

from .common import connection_options, deployment_options, on_signals, require_topic, topic_options


def _producer(clients: ClientFactory, topic: str) -> Producer:
    """A producer for ``topic``, once it is known to exist (writing would auto-create it on some brokers)."""
    require_topic(clients, topic)
    return clients.producer(**{"enable.idempotence": True})


def _send(clients: ClientFactory, topic: str, key: bytes | None, value: bytes | None) -> None:
    producer = _producer(clients, topic)
    errors: list[str] = []
    producer.produce(topic, value, key, on_delivery=lambda err, _m: err and errors.append(str(err)))
    if producer.flush(30) or errors:
        raise click.ClickException(f"could not write to {topic} on {clients.bootstrap_servers}: {errors or 'timed out'}")


#: An aggregate or select-join subscription's text starts like this (docs/aggregates.md).
AGGREGATE_TEXT = re.compile(r"^\s*((min|max|count|sum|avg|distinct)\s*\(|join\s)", re.IGNORECASE)


def _aggregate_value(clients: ClientFactory, topics: TopicNames, expression: str, subscriber: str,
                     fmt: str) -> tuple[bytes, str]:
    """The value of an aggregate subscription, checked against the tables the table service declared."""
    from fastpubsub.aggregates import AggregateService, parse_subscription
    from fastpubsub.services.tables.service import declared_tables

    try:
        spec = parse_subscription(expression)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="EXPRESSION") from None
    declared = declared_tables(clients, topic=topics.table_schemas)
    if declared is None:
        raise click.ClickException(f"no tables are declared ({topics.table_schemas} does not exist): start "
                                   f"`pubsub tables --table NAME:TOPIC:KEY` first")
    try:
        AggregateService([t.schema() for t in declared.values()]).check(spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="EXPRESSION") from None
    return codecs.encode_aggregate_subscription(codecs.AggregateSubscription(subscriber, spec), fmt), json.dumps(spec.to_json())


#: A pattern subscription's text starts with ``seq NAME:`` (docs/patterns.md); ``seq = 5`` is a plain predicate.
PATTERN_TEXT = re.compile(rf"^\s*seq\s+{NAME}\s*:")


def _pattern_value(_clients: ClientFactory, _topics: TopicNames, expression: str, subscriber: str, fmt: str) -> tuple[bytes, str]:
    """The value of a pattern subscription, compiled here so that a bad one is refused with its column."""
    from fastpubsub.patterns import PatternError, parse as parse_pattern, to_json

    try:
        pattern = parse_pattern(expression)
    except PatternError as exc:
        raise click.BadParameter(str(exc), param_hint="EXPRESSION") from None
    value = codecs.encode_pattern_subscription(codecs.PatternSubscription(subscriber, pattern), fmt)
    return value, "pattern " + json.dumps(to_json(pattern))


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


def rule_from_text(text: str):
    """The subscription an Event Ruler rule in JSON text stands for; :class:`RuleError` if it is not one we take."""
    try:
        rule = json.loads(text)
    except ValueError as exc:
        raise RuleError(f"the rule is not JSON: {exc}") from None
    return rule_to_subscription(rule)


@click.command()
@connection_options
@topic_options
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
def subscribe(clients, topics, expression, sub_id, subscriber, valid_until, valid_from, fmt) -> None:
    """Add or replace a subscription given as text, e.g.

    \b
      pubsub subscribe --id 42 --subscriber alice 'movie = "groundhog day" and price <= 10'
      pubsub subscribe --subscriber bob 'min(per) over stock where risk between 20 and 60'
      pubsub subscribe --subscriber carol 'seq a: price > 0 next b: name = a.name where b.price > 1.05 * a.price within 1d'

    Predicates are joined by `and` and `or` (`and` binds tighter, parentheses
    group); operators = != < <= > >=, in (v, ...), not in (v, ...),
    between lo and hi, not between lo and hi, prefix "s", suffix "s",
    contains "s", exists, not exists, equals ignore case "s", prefix ignore
    case "s", suffix ignore case "s", wildcard "a*b", cidr "10.0.0.0/8",
    range (> lo, <= hi), not prefix "s", not suffix "s", not wildcard "a*b",
    not equals ignore case "s"; values are "strings", numbers, true or false.  An EXPRESSION that
    starts with `{` is an AWS Event Ruler (EventBridge) rule in its JSON
    form, e.g. '{"detail": {"state": [{"anything-but": "x"}]}}'.  An
    aggregate subscription over a table (min, max, count(*), sum, avg,
    distinct ... over TABLE where ATTR between LOW and HIGH, or a select-join)
    is checked against the tables that `pubsub tables` declared and served by
    it (docs/aggregates.md).  A pattern subscription (seq ... within D) is
    compiled here and served by `pubsub patterns` (docs/patterns.md).
    """
    special = "aggregate" if AGGREGATE_TEXT.match(expression) else "pattern" if PATTERN_TEXT.match(expression) else None
    if special:
        if valid_until or valid_from:
            raise click.BadParameter(f"{special} subscriptions have no validity interval"
                                     + (" (a pattern starts at its record's time and ends at its `within`)"
                                        if special == "pattern" else ""), param_hint="--valid-until")
        value, shown = (_aggregate_value if special == "aggregate" else _pattern_value)(clients, topics, expression,
                                                                                        subscriber, fmt)
        if sub_id is None:
            sub_id = uuid.uuid4().int >> 65
        _send(clients, topics.subscriptions, str(sub_id).encode(), value)
        click.echo(f"subscription {sub_id} ({subscriber}): {shown}")
        return
    try:
        predicates = rule_from_text(expression) if expression.lstrip()[:1] == "{" else parse(expression)
    except (ExpressionError, RuleError) as exc:
        raise click.BadParameter(str(exc), param_hint="EXPRESSION") from None
    if sub_id is None:
        sub_id = uuid.uuid4().int >> 65  # positive, fits in a signed 64-bit integer
    start, end = _epoch_ms(valid_from, "--valid-from"), _epoch_ms(valid_until)
    if start is not None and end is not None and start >= end:
        raise click.BadParameter("must be before --valid-until", param_hint="--valid-from")
    value = codecs.encode_subscription(codecs.Subscription(subscriber, predicates, end, start), fmt)
    _send(clients, topics.subscriptions, str(sub_id).encode(), value)
    click.echo(f"subscription {sub_id} ({subscriber}): {format_predicates(predicates)}")


@click.command()
@connection_options
@topic_options
@click.option("--id", "sub_id", type=int, required=True, help="Subscription id to remove.")
def unsubscribe(clients, topics, sub_id) -> None:
    """Remove a subscription (writes a tombstone for its id)."""
    _send(clients, topics.subscriptions, str(sub_id).encode(), None)
    click.echo(f"subscription {sub_id} removed")


@click.command()
@deployment_options
@click.argument("event")
@click.option("--key", default=None, help="Event id (record key).  Default: none, so the id is topic:partition:offset.")
@click.option("--format", "fmt", type=click.Choice(codecs.FORMATS), default="json", show_default=True,
              help="Encoding of the event value.")
@click.option("--value-schema", "value_schema", type=click.Path(exists=True, dir_okay=False), default=None,
              metavar="FILE.avsc",
              help="Write each event as a producer's record of this Avro schema (nesting and all), the schema "
                   "registered under the topic's subject (TopicNameStrategy); needs --schema-registry.")
@click.option("--partition-by", "partition_by", default=None, metavar="ATTR",
              help="Place each event in the partition of its ATTR value (wire.placement: CRC-32 of the value's JSON "
                   "text modulo the partition count), so that the events of one value share a partition: a pattern "
                   "correlated on ATTR (name = a.name) is then exact.  Events without ATTR go where the producer "
                   "puts them.")
def publish(clients, topics, schema_registry, event, key, fmt, value_schema, partition_by) -> None:
    """Publish an event given as a JSON object, e.g.

    \b
      pubsub publish --key e17 '{"movie": "groundhog day", "price": 8, "theater": "odeon"}'

    With EVENT `-`, publishes one JSON object per line of standard input
    (without keys).  The event goes to the events topic: pubsub.events, or
    the one --events-topic given.
    With --schema-registry, an Avro event carries the id the
    registry gave fastpubsub's event schema (as `pubsub run --schema-registry`
    reads it), not the fixed one.  With --value-schema FILE.avsc, each event
    is written as a producer's record of that schema would be (confluent-kafka's
    Avro serializer, the schema registered under TOPIC-value), nested fields
    as nested records.
    """
    if len(topics.events) != 1 or topics.events_pattern is not None:
        raise click.BadParameter("publish writes to one topic: give one --events-topic and no --events-pattern",
                                 param_hint="--events-topic")
    target = topics.events[0]
    ids = None
    if schema_registry is not None and fmt == "avro":
        from fastpubsub.kafka.schema_registry import event_decoders

        try:  # a command does not wait for an absent registry: it says so
            ids = {codecs.SCHEMA_IDS["event"]: event_decoders(schema_registry, stopped=lambda: True).native_event_id}
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from None
    serialize = None
    if value_schema is not None:
        if schema_registry is None:
            raise click.UsageError("--value-schema registers the schema: give --schema-registry (or "
                                   "PUBSUB_SCHEMA_REGISTRY) too")
        serialize = _registered_serializer(schema_registry, value_schema, target)
    lines = [line for line in sys.stdin.read().splitlines() if line.strip()] if event == "-" else [event]
    producer = _producer(clients, target)
    partitions = admin.partitions_of(clients, target) if partition_by else 0
    for n, line in enumerate(lines, 1):
        try:
            parsed = codecs.decode_event(line.strip().encode())
        except codecs.DecodeError as exc:
            raise click.BadParameter(f"line {n}: {exc}" if event == "-" else str(exc), param_hint="EVENT") from None
        try:  # attributes by path; the Avro event's map holds their raw names
            if serialize is not None:
                value = serialize(json.loads(line))
            else:
                value = codecs.encode_event(codecs.native_attributes(parsed) if fmt == "avro" else parsed, fmt)
        except ValueError as exc:
            raise click.BadParameter(f"line {n}: {exc}" if event == "-" else str(exc), param_hint="EVENT") from None
        placed = {"partition": partition_for(parsed[partition_by], partitions)} if partition_by in parsed else {}
        producer.produce(target, codecs.reframed(value, ids),
                         key.encode() if key and event != "-" else None, **placed)
    if producer.flush(30):
        raise click.ClickException(f"could not write to {target} on {clients.bootstrap_servers}")
    click.echo(f"published {len(lines)} event(s)")


def _registered_serializer(schema_registry, schema_file: str, topic: str):
    """``document -> value`` as a producer's Avro serializer writes it (the schema registered under
    ``TOPIC-value`` at the first call); a document the schema refuses is a ``ValueError``."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

    try:
        serializer = AvroSerializer(schema_registry.client(), Path(schema_file).read_text(encoding="utf-8"),
                                    conf={"auto.register.schemas": True})
    except Exception as exc:  # noqa: BLE001 - fastavro's and the client's own errors, shown as they are
        raise click.BadParameter(f"{schema_file}: {exc}", param_hint="--value-schema") from None
    context = SerializationContext(topic, MessageField.VALUE)

    def serialize(document) -> bytes:
        try:
            return serializer(document, context)
        except (SerializationError, TypeError, KeyError) as exc:
            raise ValueError(f"not a record of {schema_file}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - the registry's errors (absent, refused): a command does not wait
            raise click.ClickException(f"the Schema Registry at {schema_registry.url}: {exc}") from None

    return serialize


@click.command()
@deployment_options
@click.option("--dead-letters", is_flag=True, help="Tail the dead-letter topic instead of the notifications topic.")
@click.option("--from-beginning", is_flag=True, help="Start at the oldest record instead of the end.")
@click.option("--max", "max_records", type=int, default=None, help="Stop after this many records.")
@click.option("--timeout", type=float, default=None, help="Stop after this many seconds without a record.")
@click.option("--dedup/--no-dedup", default=True, show_default=True,
              help="Drop notifications whose notification_id was already printed (redeliveries after a failure). "
                   "Dead letters are never de-duplicated.")
@click.option("--dedup-capacity", type=click.IntRange(min=1), default=DEFAULT_CAPACITY, show_default=True,
              help="How many recent notification ids --dedup remembers (bounded memory, ~170 bytes per id).")
def tail(clients, topics, schema_registry, dead_letters, from_beginning, max_records, timeout, dedup, dedup_capacity) -> None:
    """Print notifications (or dead letters) as JSON lines, Avro or JSON alike.

    Notifications are de-duplicated by notification_id by default (see
    --dedup); on exit the number of duplicates dropped goes to stderr.  With
    --schema-registry, Avro records framed with the ids the processor
    registered (`pubsub run --schema-registry`) are read too.
    """
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    fixed_ids = None  # registry id -> fastpubsub's fixed id of the same schema
    if schema_registry is not None:
        from fastpubsub.kafka.schema_registry import output_subjects, register_outputs

        try:  # a command does not wait for an absent registry: it says so
            ids = register_outputs(schema_registry, output_subjects(topics.notifications, topics.dead_letter),
                                   stopped=lambda: True)
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from None
        fixed_ids = {registry_id: fixed for fixed, registry_id in ids.items()}

    dedup = Deduplicator(dedup_capacity) if dedup and not dead_letters else None

    topic = topics.dead_letter if dead_letters else topics.notifications
    consumer = clients.consumer(
        topics.group("pubsub-tail"), **{"enable.auto.commit": False, "isolation.level": "read_committed"})
    start = OFFSET_BEGINNING if from_beginning else OFFSET_END
    try:
        n_partitions = admin.partitions_of(clients, topic)
    except Exception as exc:  # noqa: BLE001 - unreachable broker or missing topic, shown as is
        consumer.close()
        raise click.ClickException(str(exc)) from None
    consumer.assign([TopicPartition(topic, p, start) for p in range(n_partitions)])
    stopping = []
    on_signals(lambda: stopping.append(True))
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
                    dl = codecs.decode_dead_letter(codecs.reframed(msg.value(), fixed_ids))
                    out = {**dl.__dict__, "key": dl.key.decode("utf-8", "replace") if dl.key else None,
                           "value": dl.value.decode("utf-8", "replace") if dl.value else None}
                else:
                    out = codecs.decode_notification(codecs.reframed(msg.value(), fixed_ids))
                    if out.get("original"):  # bytes, printed as base64 as the JSON notification carries them
                        out["original"] = {**out["original"],
                                           "value": base64.b64encode(out["original"]["value"]).decode("ascii")}
                    elif "original" in out:  # the decoded event only: printed as the JSON notification shows it
                        del out["original"]
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
