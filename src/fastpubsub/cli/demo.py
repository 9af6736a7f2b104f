"""``pubsub demo``: the whole system on Apache Kafka (started here, on loopback), shown working.

Broker, topics, subscriptions (Fabret's workload, plus a few hand-written ones
that match often enough to see notifications), a processor in its own
process, events, live progress read from Kafka itself (committed offsets,
watermarks, the notifications topic), then the Spark statistics job run once
on those events while the processor runs, the processor adopting its snapshot
(the engine's hash tables before and after), a summary, and a clean shutdown.
With a Schema Registry (the embedded one, started here, or ``--schema-registry``), a producer's nested orders,
registered Avro on a topic of its own, are matched too, on a nested field and an array.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import click
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Producer, TopicPartition

from fastpubsub.workloads import PRESETS, generate_events, generate_subscriptions

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec
from fastpubsub.kafka.distribution import KAFKA_HOME_ENV
from fastpubsub.language import format_predicates, parse
from fastpubsub.runtime import human, RateMeter
from fastpubsub.services.events.statistics_feed import ADOPTED, describe_change
from fastpubsub.wire import codecs
from fastpubsub.wire.topics import DEFAULT, TopicNames

from .common import registry_options, topic_options

GROUP = "pubsub-processor"
SHOWCASE = [  # (subscriber, expression): on W0's values 1..35 they match about 3%, 1.5% and 11% of events
    ("alice", "a0 = 7"),
    ("bob", "a1 <= 3 and a2 >= 30"),
    ("carol", "a3 != 1 and a4 < 5"),
]
#: A producer's topic (named as users name theirs, under the deployment's prefix) of nested orders in Avro,
#: registered in the Schema Registry, and the subscription on its nested fields.
ORDERS_TOPIC = "shop.orders"
ORDERS_SUBSCRIPTION = ("dave", 'customer.address.country = "FR" and items.sku = "a1"')
ORDER_SCHEMA = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
        {"name": "name", "type": "string"},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "country", "type": "string"}]}}]}},
    {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}}]}
COUNTRIES = ("FR", "DE", "IT", "ES")


def order(i: int) -> dict:
    """The demo's i-th order: every 4th in France, every 3rd with an item a1."""
    return {"id": i, "customer": {"name": f"c{i}", "address": {"country": COUNTRIES[i % 4]}},
            "items": [{"sku": "a1" if i % 3 == 0 else "b2", "qty": 1 + i % 5}, {"sku": "c3", "qty": 1}]}


class Demo:
    def __init__(self, n_subscriptions: int, n_events: int, workload: str = "W0", seed: int = 1, port: int = 0,
                 output_format: str = "avro", batch_size: int = 1000, statistics: bool = True,
                 kafka_home: str | None = None, topics: TopicNames = DEFAULT, registry: str = "embedded",
                 schema_registry=None) -> None:
        """``registry``: ``embedded`` (start Apicurio here when it is installed), ``given`` (``schema_registry``,
        a ``RegistryConfig``) or ``none``."""
        if workload not in PRESETS:
            raise click.BadParameter(f"unknown workload {workload!r}; one of {', '.join(PRESETS)}", param_hint="--workload")
        self.n_subscriptions, self.n_events = n_subscriptions, n_events
        self.spec, self.seed, self.port = PRESETS[workload], seed, port
        self.output_format, self.batch_size = output_format, batch_size
        self.statistics = statistics
        self.kafka_home = kafka_home
        if len(topics.events) != 1 or topics.events_pattern is not None:
            raise click.BadParameter("the demo writes its events to one topic: give one --events-topic and no "
                                     "--events-pattern", param_hint="--events-topic")
        self.topics = topics
        self.orders_topic = topics.prefix + ORDERS_TOPIC
        self.registry_mode, self.schema_registry = registry, schema_registry
        self.registry = None  # the embedded registry when this demo started it
        self.event_ids: dict[int, int] | None = None  # fastpubsub's fixed event schema id -> the registry's
        self.broker: EmbeddedBroker | None = None
        self.run_options: list[str] = []  # more `pubsub run` options (benchmarks.pipeline.e2e)
        self.showcase_format = "json"  # of the hand-written subscriptions: both formats flow (benchmarks.peers: Avro)
        self._interrupted = False

    def _say(self, text: str) -> None:
        click.echo(text)
        sys.stdout.flush()

    # --- steps -----------------------------------------------------------------

    def _load_subscriptions(self, bootstrap: str) -> int:
        producer = ClientFactory(bootstrap).producer({"linger.ms": 20}, **{"enable.idempotence": True})
        started = time.monotonic()
        batch = generate_subscriptions(self.spec, self.n_subscriptions, self.seed)
        subs = batch.to_lists()
        for i, (sid, predicates) in enumerate(subs):
            value = codecs.encode_subscription(codecs.Subscription(f"user{sid % 1000}", predicates), "avro")
            _produce(producer, self.topics.subscriptions, str(sid).encode(), value)
            if (i + 1) % 20_000 == 0:
                self._say(f"  loaded {human(i + 1)} / {human(len(subs))} subscriptions")
        first_free = (int(batch.ids.max()) + 1) if len(batch) else 0
        showcase = SHOWCASE + ([ORDERS_SUBSCRIPTION] if self.schema_registry is not None else [])
        for offset, (subscriber, text) in enumerate(showcase):
            sid = first_free + offset
            value = codecs.encode_subscription(codecs.Subscription(subscriber, parse(text)), self.showcase_format)
            _produce(producer, self.topics.subscriptions, str(sid).encode(), value)
            self._say(f"  subscription {sid} ({subscriber}, {self.showcase_format.upper()}): "
                      f"{format_predicates(parse(text))}")
        if producer.flush(60):
            raise click.ClickException("the broker did not acknowledge all subscriptions")
        total = len(subs) + len(showcase)
        self._say(f"  {human(total)} subscriptions written to {self.topics.subscriptions} in {time.monotonic() - started:.1f}s")
        return total

    def _start_processor(self, bootstrap: str, log_path: Path, group_id: str = GROUP,
                         topics: TopicNames | None = None) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "fastpubsub", "run", "--bootstrap-servers", bootstrap, "--group-id", group_id,
               *(topics or self.topics).options(),
               "--output-format", self.output_format, "--batch-size", str(self.batch_size), "--progress-interval", "2",
               *self.run_options]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log_path, "wb"), stdin=subprocess.DEVNULL,
                                preexec_fn=child_preexec)

    def run(self) -> int:
        signal.signal(signal.SIGINT, self._interrupt)
        signal.signal(signal.SIGTERM, self._interrupt)
        workdir = Path(tempfile.mkdtemp(prefix="pubsub-demo-"))
        broker = self.broker = EmbeddedBroker(self.port or None, kafka_home=self.kafka_home)
        processor = None
        started = time.monotonic()
        try:
            self._say("1. broker: Apache Kafka (KRaft, one node, a temporary data directory)")
            try:
                broker.start()
            except (RuntimeError, OSError) as exc:
                raise click.ClickException(f"Apache Kafka did not start: {exc}") from None
            bootstrap = broker.bootstrap_servers
            self._say(f"  Apache Kafka {broker.dist.version} ready on {bootstrap} in {time.monotonic() - started:.1f}s "
                      f"(data in {broker.root}; the demo's logs in {workdir})")
            self._say("2. topics")
            for s in admin.create_topics(bootstrap, topics=self.topics):
                self._say(f"  {s.name:24} partitions={s.partitions} cleanup.policy={s.cleanup_policy or '?'}")
            self._start_registry(bootstrap)
            self._say(f"3. subscriptions: {human(self.n_subscriptions)} generated like Fabret's {self.spec.name} (Avro)")
            n_subs = self._load_subscriptions(bootstrap)
            self._say("4. processor (`pubsub run` in its own process; it rebuilds state from the subscriptions topic)")
            processor = self._start_processor(bootstrap, workdir / "processor.log")
            launched = time.monotonic()
            self._say(f"5. events: {human(self.n_events)} generated like {self.spec.name} (Avro), streamed while we watch")
            result = self._stream_and_watch(bootstrap, processor, workdir / "processor.log")
            if result is None:
                return self._failed(processor, workdir, self._why_stopped(processor))
            result["first_processed"] = result["first_processed_at"] - launched
            step = 6
            if self.schema_registry is not None:
                self._say(f"{step}. your topic: a producer's nested orders on {self.orders_topic}, Avro registered "
                          f"in the Schema Registry, matched on their nested fields by a processor of that topic")
                result["orders"] = self._orders(bootstrap, processor, workdir)
                if result["orders"] is None:
                    return self._failed(processor, workdir, self._why_stopped(processor))
                step += 1
            if self.statistics:
                self._say(f"{step}. statistics: the Spark job (`pubsub stats`, local[2]) over the events, "
                          "its snapshot adopted by the running processor")
                result["statistics_seconds"] = self._statistics(bootstrap, workdir)
                step += 1
            self._say(f"{step}. shutting down")
            stats = _stop_processor(processor)
            processor = None
            self._summary(n_subs, result, stats, time.monotonic() - started)
            return 0
        finally:
            if processor is not None:
                _stop_processor(processor)
            if self.registry is not None:
                self.registry.stop()
            broker.stop()
            self._say("  processor and broker stopped")

    def _start_registry(self, bootstrap: str) -> None:
        """The Schema Registry of the demo's registered topic: the embedded one, or the one given; none if
        Apicurio is not installed (`pubsub registry --fetch-only`) or Java is missing."""
        from fastpubsub.kafka import registry_server
        from fastpubsub.kafka.schema_registry import RegistryConfig, event_decoders

        if self.registry_mode == "none":
            return
        if self.registry_mode == "embedded":
            if registry_server.cached() is None or shutil.which("java") is None:
                self._say("  (no Schema Registry: `pubsub registry --fetch-only` installs Apicurio; the registered "
                          "topic is left out)")
                return
            started = time.monotonic()
            try:
                self.registry = registry_server.EmbeddedRegistry().start()
            except (RuntimeError, OSError) as exc:
                self._say(f"  (the Schema Registry did not start: {str(exc)[:300]}; the registered topic is left out)")
                return
            self.schema_registry = RegistryConfig(self.registry.url)
            self._say(f"  Schema Registry (Apicurio {registry_server.VERSION}, in memory) on {self.registry.url} "
                      f"in {time.monotonic() - started:.1f}s")
        own = TopicNames.build(self.topics.prefix, [self.orders_topic])  # configured as an events topic
        admin.create_topics(bootstrap, partitions=1, names=(self.orders_topic,), topics=own)
        self.event_ids = {codecs.SCHEMA_IDS["event"]: event_decoders(self.schema_registry,
                                                                     stopped=lambda: True).native_event_id}
        self.run_options += self._registry_options()  # the demo's own events carry the registry's id

    def _registry_options(self) -> list[str]:
        """The registry's options for a command the demo starts (none without a registry)."""
        if self.schema_registry is None:
            return []
        return ["--schema-registry", self.schema_registry.url,
                *(x for k, v in self.schema_registry.settings.items() for x in ("-R", f"{k}={v}"))]

    def _orders(self, bootstrap: str, processor: subprocess.Popen, workdir: Path) -> dict | None:
        """Write the orders as a producer does (confluent-kafka's AvroSerializer registers their schema), then wait
        for a processor of that topic to commit them; what matched the subscription on nested fields.  That
        processor is one of its own (its group, `--events-topic shop.orders`): the statistics job's snapshot of
        the demo's events is keyed by their topic, and a processor of both topics would wait for one of both."""
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        started = time.monotonic()
        serialize = AvroSerializer(self.schema_registry.client(), json.dumps(ORDER_SCHEMA))
        context = SerializationContext(self.orders_topic, MessageField.VALUE)
        n = max(20, min(1000, self.n_events // 10))
        producer = ClientFactory(bootstrap).producer({"linger.ms": 20}, **{"enable.idempotence": True})
        for i in range(n):
            _produce(producer, self.orders_topic, f"order-{i}".encode(), serialize(order(i), context))
        producer.flush(30)
        t = self.topics
        own = TopicNames.build(t.prefix, [self.orders_topic], subscriptions=t.subscriptions,
                               notifications=t.notifications, dead_letter=t.dead_letter, statistics=t.statistics)
        shop = self._start_processor(bootstrap, workdir / "orders-processor.log", GROUP + "-shop", own)
        watcher = _Watcher(bootstrap, GROUP + "-shop", topics=self.topics, events=self.orders_topic,
                           registry=self.schema_registry)
        try:
            while watcher.progress(n)[0] < n or not watcher.caught_up():
                if any(p.poll() is not None for p in (processor, shop)) or self._broker_gone() or self._interrupted:
                    return None
                time.sleep(0.2)
            matched = watcher.by_subscriber.get(ORDERS_SUBSCRIPTION[0], 0)
        finally:
            watcher.close()
            _stop_processor(shop)
        expected = sum(1 for i in range(n) if i % 4 == 0 and i % 3 == 0)
        self._say(f"  {n} orders, {matched} matched {ORDERS_SUBSCRIPTION[0]}'s `{ORDERS_SUBSCRIPTION[1]}` "
                  f"(expected {expected}) in {time.monotonic() - started:.1f}s")
        return {"orders": n, "matched": matched, "expected": expected}

    def _statistics(self, bootstrap: str, workdir: Path) -> float | None:
        """Run the job once in its own process and wait until the processor has adopted the snapshot."""
        if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
            self._say("  skipped: needs PySpark (pip install 'fastpubsub[spark]') and Java 17")
            return None
        started = time.monotonic()
        log_path, out = workdir / "spark.log", workdir / "statistics.json"
        cmd = [sys.executable, "-m", "fastpubsub.stats_job", "--bootstrap-servers", bootstrap, "--master", "local[2]",
               "--output", str(out), "--events-topic", self.topics.events[0],
               "--statistics-topic", self.topics.statistics, *self._registry_options()]
        with open(log_path, "wb") as log:
            job = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   preexec_fn=child_preexec)
            while job.poll() is None and not self._interrupted:
                time.sleep(0.2)
            if job.poll() is None:
                job.terminate()
                job.wait(30)
                return None
        if job.returncode != 0:
            lines = log_path.read_text(errors="replace").splitlines()[-10:]
            self._say(f"  the job failed (exit {job.returncode}); last lines of {log_path}:\n    " + "\n    ".join(lines))
            return None
        snapshot = json.loads(out.read_text())
        self._say(f"  {snapshot['event_count']:,} events, {snapshot['bad_records']} bad, {len(snapshot['attributes'])} "
                  f"attributes, {len(snapshot['schemas'])} frequent attribute sets in {time.monotonic() - started:.1f}s "
                  f"(log {log_path}, snapshot {out})")
        processor_log = workdir / "processor.log"
        deadline = time.monotonic() + 120
        while ADOPTED not in processor_log.read_text(errors="replace"):
            if time.monotonic() > deadline or self._interrupted:
                self._say("  the processor did not adopt the snapshot within 120s")
                return None
            time.sleep(0.2)
        self._say(f"  adopted by the processor ({time.monotonic() - started:.1f}s after the job started)")
        return time.monotonic() - started

    def _interrupt(self, *_: object) -> None:
        self._interrupted = True

    def _broker_gone(self) -> bool:
        return self.broker is not None and not self.broker.alive()

    def _why_stopped(self, processor: subprocess.Popen) -> str:
        if self._interrupted:
            return "interrupted"
        if self._broker_gone():
            code = [n.proc.returncode for n in self.broker.nodes if n.proc is not None and n.proc.poll() is not None]
            return f"Apache Kafka stopped (exit status {code[0] if code else '?'}) while the demo ran"
        return f"the processor stopped (exit status {processor.poll()})"

    def _failed(self, processor: subprocess.Popen, workdir: Path, why: str) -> int:
        self._say(f"demo stopped: {why}; stopping the processor (it finishes its batch) and the broker")
        log = (workdir / "processor.log").read_text(errors="replace").splitlines()[-15:]
        if log:
            self._say("last processor log lines:\n  " + "\n  ".join(log))
        return 1

    # --- the live part -----------------------------------------------------------

    def _stream_and_watch(self, bootstrap: str, processor: subprocess.Popen, log_path: Path) -> dict | None:
        events = generate_events(self.spec, self.n_events, self.seed + 1).to_dicts()
        producer = ClientFactory(bootstrap).producer({"linger.ms": 20}, **{"enable.idempotence": True})
        watcher = _Watcher(bootstrap, topics=self.topics, registry=self.schema_registry)
        meter = RateMeter(1.0)
        sent = 0
        first_processed_at = None
        chunk = max(1, min(2000, self.n_events // 20 or 1))
        try:
            while not self._interrupted:
                if processor.poll() is not None or self._broker_gone():
                    return None
                if sent < len(events):
                    for i in range(sent, min(sent + chunk, len(events))):
                        _produce(producer, self.topics.events[0], f"e{i}".encode(),
                                 codecs.reframed(codecs.encode_event(events[i], "avro"), self.event_ids))
                    sent = min(sent + chunk, len(events))
                    producer.poll(0)
                else:
                    producer.flush(30)
                watcher.drain()
                if meter.due() or sent == len(events):
                    processed, lag = watcher.progress(sent)
                    if processed and first_processed_at is None:
                        first_processed_at = time.monotonic()
                    done = processed >= len(events) and sent == len(events)
                    if meter.due() or done:
                        rates = meter.tick({"processed": processed, "notifications": watcher.notifications})
                        starting = "" if processed else _processor_status(log_path)
                        self._say(
                            f"  [{meter.elapsed():6.1f}s] events sent {human(sent)} processed {human(processed)} "
                            f"({human(rates['processed'])}/s) | notifications {human(watcher.notifications)} "
                            f"({human(rates['notifications'])}/s) | lag {human(lag)}"
                            + (f" | processor: {starting}" if starting else "")
                        )
                    if done and watcher.caught_up():
                        return {"events": sent, "notifications": watcher.notifications, "samples": watcher.samples,
                                "seconds": meter.elapsed(), "start": _processor_start(log_path),
                                "first_processed_at": first_processed_at}
                if sent == len(events):
                    time.sleep(0.2)
            return None
        finally:
            watcher.close()

    def _summary(self, n_subs: int, result: dict, stats: dict, total_seconds: float) -> None:
        """Each rate says what it measures: the processor's own, the pipeline's, and the statistics step apart."""
        secs = max(result["seconds"], 1e-9)
        n = result["events"]
        task = stats.get("task") or {}  # the processor's own counts (runtime.task)
        self._say("summary")
        self._say(f"  subscriptions      {n_subs:>12,}  (processor holds {task.get('subscriptions', '?'):,})"
                  if isinstance(task.get("subscriptions"), int) else f"  subscriptions      {n_subs:>12,}")
        self._say(f"  events             {n:>12,}  sent and processed")
        busy = stats.get("busy_seconds") or 0
        match = (stats.get("stage_seconds") or {}).get("match") or 0
        if busy:
            alone = f"; matching alone {n / match:,.0f}/s" if match else ""
            self._say(f"    processor        {n / busy:>12,.0f}/s while busy (decode, match, encode, deliver{alone})")
        self._say(f"    pipeline         {n / secs:>12,.0f}/s from the first event sent to the last notification read "
                  f"({secs:.1f}s, the processor's start included, the statistics step not)")
        start = result.get("start") or {}
        if start.get("ready") is not None:
            compiled = stats.get("kernels_compiled", start.get("compiled", 0))
            kernels = (f"{compiled} numba kernels compiled; `pubsub warmup` compiles them ahead" if compiled
                       else "numba kernels from the cache")
            self._say(f"    processor start  {start['ready']:>11.1f}s  from its first log line to ready ({kernels}); "
                      f"first events committed {result['first_processed']:.1f}s after its launch")
        self._say(f"  notifications      {result['notifications']:>12,}  ({result['notifications'] / secs:,.0f}/s; "
                  f"processor produced {stats.get('notifications', '?')})")
        orders = result.get("orders")
        if orders:
            self._say(f"  registered orders  {orders['orders']:>12,}  on {self.orders_topic}; "
                      f"{orders['matched']:,} matched on nested fields (expected {orders['expected']:,})")
        dead = sum(stats.get("dead_letters", {}).values())
        self._say(f"  dead letters       {dead:>12,}")
        self._say(f"  delivery           {stats.get('delivery', '?')}; matcher: {task.get('matcher', '?')}")
        last = (task.get("statistics") or {}).get("last_snapshot")
        if last:
            self._say(f"  statistics         {last['event_count']:>12,}  events in the adopted snapshot; the step on "
                      f"its own took {result.get('statistics_seconds') or 0:.1f}s (the Spark job's start to the "
                      "processor's adoption)")
            self._say(f"  hash tables before {_tables(last['tables_before'])}")
            self._say(f"  hash tables after  {_tables(last['tables_after'])}")
            self._say(f"  change             {describe_change(last['tables_before'], last['tables_after'])}, "
                      f"{last['tables_created']} created, {last['tables_dropped']} dropped by the dynamic "
                      f"maintenance in {last['seconds']:.2f}s")
        self._say(f"  wall time          {total_seconds:>11.1f}s")
        for n in result["samples"]:
            event = ", ".join(f"{k}={v}" for k, v in list(n["event"].items())[:5])
            self._say(f"  e.g. {n['notification_id']} -> {n['subscriber']}: {event}, ...")


_STATUS = re.compile(r" pubsub INFO ((?:compiling numba kernel|kernels ready|rebuilding|ready:|snapshot loaded).*)$")
_STAMP = "%Y-%m-%d %H:%M:%S,%f"


def _processor_status(log_path: Path) -> str:
    """What the processor is doing before it processes anything (compiling kernels, rebuilding), from its log."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        m = _STATUS.search(line)
        if m:
            return m.group(1)[:120]
    return "starting"


def _processor_start(log_path: Path) -> dict:
    """Seconds from the processor's first log line to its ready line, and kernels compiled meanwhile."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    stamps = [(datetime.strptime(x[:23], _STAMP), x) for x in lines if x[:4].isdigit() and len(x) > 23]
    first = stamps[0][0] if stamps else None
    ready = next((t for t, x in stamps if " pubsub INFO ready: " in x), None)
    compiled = sum(1 for _, x in stamps if " compiling numba kernel" in x)
    return {"ready": (ready - first).total_seconds() if first and ready else None, "compiled": compiled}


def _tables(tables: dict[str, int]) -> str:
    """``{"a0,a1": 100003}`` -> ``(a0,a1): 100,003 subscriptions``; single-attribute tables are not listed."""
    if not tables:
        return "none with two or more attributes"
    return "; ".join(f"({schema}): {n:,} subscriptions" for schema, n in sorted(tables.items()))


def _produce(producer: Producer, topic: str, key: bytes, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value, key)
            return
        except BufferError:
            producer.poll(0.1)


def _stop_processor(processor: subprocess.Popen) -> dict:
    """SIGTERM, wait for its clean exit, return its final statistics (its last stdout line)."""
    if processor.poll() is None:
        processor.send_signal(signal.SIGTERM)
    try:
        out, _ = processor.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        processor.kill()
        out, _ = processor.communicate()
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        return {}


_COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE)


class _Watcher:
    """Progress as Kafka sees it: the group's committed offsets and the notifications written."""

    def __init__(self, bootstrap: str, group_id: str = GROUP, topics: TopicNames = DEFAULT, events: str | None = None,
                 registry=None) -> None:
        clients = ClientFactory(bootstrap)
        self._fixed_ids = None  # with a registry: its ids of fastpubsub's output schemas -> the fixed ones
        if registry is not None:
            from fastpubsub.kafka.schema_registry import output_subjects, register_outputs

            ids = register_outputs(registry, output_subjects(topics.notifications, topics.dead_letter),
                                   stopped=lambda: True)
            self._fixed_ids = {registry_id: fixed for fixed, registry_id in ids.items()}
        self._consumer = clients.consumer(topics.group("pubsub-demo-watcher"),
                                          **{"enable.auto.commit": False, "isolation.level": "read_committed"})
        self._group = clients.consumer(topics.group(group_id), **{"enable.auto.commit": False})
        n_notif = admin.partitions_of(bootstrap, topics.notifications)
        self._notif = [TopicPartition(topics.notifications, p, OFFSET_BEGINNING) for p in range(n_notif)]
        events = events or topics.events[0]
        self._events = [TopicPartition(events, p) for p in range(admin.partitions_of(bootstrap, events))]
        self._consumer.assign(self._notif)
        self.notifications = 0
        self.by_subscriber: dict[str, int] = {}  # notifications are keyed by subscriber
        self.samples: list[dict] = []

    def drain(self, timeout: float = 0.05) -> None:
        for msg in self._consumer.consume(num_messages=10_000, timeout=timeout):
            if msg.error():
                continue
            self.notifications += 1
            subscriber = (msg.key() or b"").decode(errors="replace")
            self.by_subscriber[subscriber] = self.by_subscriber.get(subscriber, 0) + 1
            if len(self.samples) < 3:
                self.samples.append(codecs.decode_notification(codecs.reframed(msg.value(), self._fixed_ids)))

    def progress(self, sent: int) -> tuple[int, int]:
        """(events processed = committed by the processor's group, lag = sent - processed)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                committed = self._group.committed(self._events, timeout=10)
                break
            except KafkaException as exc:  # a new group's coordinator (or __consumer_offsets itself) still loading
                if exc.args[0].code() not in _COORDINATOR_MOVING or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        processed = sum(max(tp.offset, 0) for tp in committed)
        return processed, max(sent - processed, 0)

    def caught_up(self) -> bool:
        """Called once the processor has committed every event, so all its notifications
        are on the broker: done when a second passes without one."""
        before = self.notifications
        self.drain(timeout=1.0)
        return self.notifications == before


    def close(self) -> None:
        self._consumer.close()
        self._group.close()


@click.command()
@topic_options
@registry_options
@click.option("--no-registry", is_flag=True, help="Leave out the registered topic (no Schema Registry started).")
@click.option("--subscriptions", "n_subscriptions", type=int, default=100_000, show_default=True,
              help="Number of generated subscriptions.")
@click.option("--events", "n_events", type=int, default=10_000, show_default=True, help="Number of generated events.")
@click.option("--workload", default="W0", show_default=True, help="Fabret et al. workload preset (workloads.fabret.PRESETS).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the generated subscriptions and events.")
@click.option("--port", type=int, default=0, show_default=True, help="Broker port on 127.0.0.1 (0: any free port).")
@click.option("--kafka-home", envvar=KAFKA_HOME_ENV, type=click.Path(exists=True, file_okay=False), default=None,
              help=f"An unpacked Apache Kafka distribution to run (env {KAFKA_HOME_ENV}); default: the pinned version "
                   "from ~/.cache/fastpubsub (fetched by Maven if missing).")
@click.option("--output-format", type=click.Choice(codecs.FORMATS), default="avro", show_default=True,
              help="The processor's encoding of notifications.")
@click.option("--batch-size", type=int, default=1000, show_default=True, help="Processor events per batch.")
@click.option("--no-stats", is_flag=True, help="Skip the Spark statistics job (a JVM start and a dozen Spark jobs: about a minute on a loaded 2-core machine).")
def demo(topics, schema_registry, no_registry, n_subscriptions, n_events, workload, seed, port, kafka_home,
         output_format, batch_size, no_stats) -> None:
    """Everything end to end on Apache Kafka, then shut it all down.

    Starts Apache Kafka (one KRaft node on 127.0.0.1, Java 17+), creates the topics, loads the generated subscriptions
    (plus a few hand-written ones so that notifications flow: W0 subscriptions
    have five equality predicates and rarely match), starts a processor,
    streams events, prints live progress, runs the Spark statistics job once
    on the events and shows the processor's hash tables before and after it
    adopted the snapshot (--no-stats skips that), and prints a summary.

    A producer's nested orders, Avro registered in a Schema Registry on a
    topic of their own (shop.orders), are matched on their nested fields too:
    the demo starts the embedded registry (`pubsub registry`) when Apicurio
    is installed, or uses the one --schema-registry names; --no-registry
    leaves them out.

    It always starts its own broker (no --bootstrap-servers): nothing is left
    behind, so it can be run again and again.
    """
    if no_registry and schema_registry is not None:
        raise click.UsageError("--no-registry and --schema-registry contradict each other")
    registry = "none" if no_registry else "embedded" if schema_registry is None else "given"
    sys.exit(Demo(n_subscriptions, n_events, workload, seed, port, output_format, batch_size, not no_stats,
                  kafka_home, topics, registry, schema_registry).run())
