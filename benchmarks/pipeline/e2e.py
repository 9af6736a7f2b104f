"""End to end through the embedded broker: events topic -> processor -> notifications topic.

Set-up as ``pubsub demo`` (and with its helpers): Apache Kafka on loopback (one node),
the four topics, N W0 subscriptions plus the demo's three hand-written ones
(``cli.demo.SHOWCASE``; W0 subscriptions almost never match), a
processor in its own process (``pubsub run``, dynamic matcher, transactional
delivery when the broker offers it).  Two phases:

1. **Maximum throughput.**  A backlog of events is written before the
   processor starts; once it has rebuilt its subscriptions it drains the
   backlog as fast as it can.  Events/s = events committed by the processor's
   group (its notifications are in the same transactions) between the first
   and the last commit we observe, divided by the time between them.
2. **Latency at half that rate.**  A rate-limited producer offers events at
   half the measured maximum for a fixed duration; each record carries an
   explicit timestamp (the moment it is handed to the producer).  *Latency* of
   an event = the arrival of its first notification at a consumer
   (read_committed, on its own thread) minus that timestamp; the
   *processor-side* latency uses the notification record's own timestamp
   (set when the processor produced it) instead of the arrival.  Percentiles
   are over the events that caused a notification.  Two consumers time the
   arrivals: one with ``fetch.wait.max.ms`` = 10 (the figure), one with
   librdkafka's defaults (500), to show what a reader with default settings
   sees (Apache Kafka answers a waiting fetch as soon as records arrive).

What bounds the maximum comes from the processor's busy time by stage
(``stage_seconds`` in its final statistics: consume, decode, match, produce, commit),
so the processor of phase 1 is stopped after the backlog and a second one
(same group, subscriptions rebuilt again) serves phase 2.
"""

from __future__ import annotations

import io
import json
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import fastavro
import numpy as np
import orjson
from confluent_kafka import OFFSET_BEGINNING, Producer, TopicPartition

from fastpubsub.workloads.fabret import PRESETS, generate_events

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.wire import codecs, topics
from fastpubsub.runtime import HostConfig
from fastpubsub.services.events.processor import ProcessorConfig
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.cli.demo import SHOWCASE, Demo, _stop_processor, _Watcher
from fastpubsub.runtime.trace import KEPT

from benchmarks.harness import report
from benchmarks.harness.cpu import CpuMeter
from benchmarks.harness.cpu import pin_self_off_core_0, pin_to_core_0
from benchmarks.harness.cpu import table as cpu_table
from benchmarks.harness.records import produce_all
from benchmarks.harness.timing import warm_up
from benchmarks.processor.registered_decode import NESTED_FIELDS, nested_values

ALGORITHM = ProcessorConfig.algorithm  # what `pubsub run` matches with


@dataclass(frozen=True)
class Plan:
    subscriptions: int
    backlog: int  # events of the maximum-throughput phase
    latency_seconds: float  # duration of the rate-limited phase


FULL = Plan(1_000_000, 500_000, 30.0)  # a backlog of several seconds at 100,000 events/s: many commits to time
QUICK = Plan(20_000, 20_000, 4.0)

#: fetch.wait.max.ms of the consumer that times the notifications (None: librdkafka's default, 500)
FAST_FETCH_WAIT_MS = 10


@dataclass(frozen=True)
class Options:
    """The processor's settings in the run (None: ``pubsub run``'s default)."""

    delivery: str = "transactional"
    batch_size: int | None = None
    commit_interval_ms: int | None = None
    overlap_commits: bool | None = None
    commit_linger_ms: int | None = None
    offered_rate: float | None = None  # events/s of the latency phase (None: half the maximum measured)
    also_at: tuple[float, ...] = ()  # further latency phases, each at this fraction of the maximum measured
    also_rates: tuple[float, ...] = ()  # further latency phases, each at this many events/s
    pin_broker: bool = False  # the broker's JVM on core 0, the processor and the load on the others
    processor_config: tuple[str, ...] = ()  # KEY=VALUE librdkafka settings for the processor's clients (`pubsub run -X`)
    producer_linger_ms: int = 5  # linger.ms of the load producer (each batch it sends is a batch the broker stores)
    clock_fetch_wait_ms: int = FAST_FETCH_WAIT_MS  # fetch.wait.max.ms of the consumer that times the notifications
    event_format: str = "native"  # how the events travel (EVENT_FORMATS)

    def run_options(self) -> list[str]:
        out = ["--delivery", self.delivery, "--latency-samples", str(KEPT)]  # where the time goes (breakdown)
        if self.batch_size is not None:
            out += ["--batch-size", str(self.batch_size)]
        if self.commit_interval_ms is not None:
            out += ["--commit-interval-ms", str(self.commit_interval_ms)]
        if self.commit_linger_ms is not None:
            out += ["--commit-linger-ms", str(self.commit_linger_ms)]
        if self.overlap_commits is not None:
            out += ["--overlap-commits" if self.overlap_commits else "--no-overlap-commits"]
        for setting in self.processor_config:
            out += ["-X", setting]
        return out

    def flags(self) -> str:
        """The `python -m benchmarks.suite` flags that give these options."""
        rate = f" --offered-rate {self.offered_rate:g}" if self.offered_rate else ""
        rate += "".join(f" --also-at {f:g}" for f in self.also_at)
        rate += "".join(f" --also-rate {r:g}" for r in self.also_rates)
        rate += " --pin-broker" if self.pin_broker else ""
        if self.producer_linger_ms != Options.producer_linger_ms:
            rate += f" --producer-linger-ms {self.producer_linger_ms}"
        if self.clock_fetch_wait_ms != Options.clock_fetch_wait_ms:
            rate += f" --clock-fetch-wait-ms {self.clock_fetch_wait_ms}"
        if self.event_format != Options.event_format:
            rate += f" --event-format {self.event_format}"
        flags = "".join(f" {a}" for a in self.run_options()).replace(" --delivery transactional", "")
        flags = flags.replace(f" --latency-samples {KEPT}", "")
        return flags.replace(" -X ", " --processor-x ") + rate


class _NotificationClock(threading.Thread):
    """Reads the notifications topic on its own thread and keeps, per event id, the first (arrival, record time),
    and every (subscription id, event id) that arrived."""

    def __init__(self, bootstrap: str, fetch_wait_ms: int | None = FAST_FETCH_WAIT_MS) -> None:
        super().__init__(daemon=True)
        wait = {} if fetch_wait_ms is None else {"fetch.wait.max.ms": fetch_wait_ms}
        self._consumer = ClientFactory(bootstrap).consumer(
            f"pubsub-bench-e2e-{fetch_wait_ms}", **{"enable.auto.commit": False, "isolation.level": "read_committed",
                                                    **wait})
        n = admin.partitions_of(bootstrap, topics.NOTIFICATIONS)
        self._consumer.assign([TopicPartition(topics.NOTIFICATIONS, p, OFFSET_BEGINNING) for p in range(n)])
        self.first: dict[str, tuple[float, int]] = {}  # filled by stop()
        self.notified: list[tuple[int, str]] = []  # filled by stop()
        self.count = 0
        self._seen: list[tuple[bytes, float, int]] = []  # (value, arrival, record time): decoded after the run
        self.fixed_ids: dict[int, int] | None = None  # with a registry: its ids of the output schemas -> the fixed ones
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                # the first record to arrive, then what is already there: consume(10_000, 0.05) alone returns
                # only after 50 ms unless 10,000 records came, which added up to 50 ms to the latencies measured
                msgs = self._consumer.consume(num_messages=1, timeout=0.05)
                arrived = time.time()
                if msgs:
                    msgs += self._consumer.consume(num_messages=10_000, timeout=0)
                for msg in msgs:
                    if not msg.error():
                        self._seen.append((msg.value(), arrived, msg.timestamp()[1]))
                self.count = len(self._seen)
        finally:
            self._consumer.close()

    def stop(self) -> None:
        """Stop reading; then decode what arrived (not while timing: it would take CPU from the processor)."""
        self._stopping.set()
        self.join(30)
        for value, arrived, ms in self._seen:
            n = codecs.decode_notification(codecs.reframed(value, self.fixed_ids))
            self.first.setdefault(n["event_id"], (arrived, ms))
            self.notified.append((n["subscription_id"], n["event_id"]))
        self._seen = []


#: How the events travel: fastpubsub's own Avro attribute map; a producer's registered Avro record (the embedded
#: Schema Registry, ``pubsub run --schema-registry``); the same record as nested JSON text.
EVENT_FORMATS = ("native", "registered-avro", "nested-json")

#: The producer's record: W0's 32 attributes at the top (what the subscriptions name) beside the nested fields of
#: benchmarks.processor.registered_decode, which no subscription names: 40 leaves, of which the processor's decoder for the
#: registered schema skips 8 unread.
PRODUCER_SCHEMA = {"type": "record", "name": "Reading", "namespace": "bench",
                   "fields": [*({"name": f"a{i}", "type": "long"} for i in range(32)), *NESTED_FIELDS]}


def producer_record(event: dict, i: int) -> dict:
    """One W0 event as the producer's nested record (its attributes unchanged, so the matches are the same)."""
    return {**{k: int(v) for k, v in event.items()}, **nested_values(i)}


def run_default(option: str):
    """``pubsub run``'s default for one of its options (by its parameter name), what a run without it gets."""
    from fastpubsub.cli.run import run as run_command
    return next(p.default for p in run_command.params if p.name == option)


def _encoded_events(n: int, seed: int, fmt: str = "native", schema_id: int | None = None) -> list[bytes]:
    events = generate_events(PRESETS["W0"], n, seed).to_dicts()
    if fmt == "native":
        return [codecs.encode_event(e, "avro") for e in events]
    if fmt == "nested-json":
        return [orjson.dumps(producer_record(e, i)) for i, e in enumerate(events)]
    assert fmt == "registered-avro" and schema_id is not None, fmt
    parsed, head = fastavro.parse_schema(PRODUCER_SCHEMA), struct.pack(">bI", 0, schema_id)
    out = []
    for i, e in enumerate(events):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, producer_record(e, i))
        out.append(head + buf.getvalue())
    return out


def _producer_schema_id(demo: Demo, bootstrap: str) -> int:
    """Start the embedded Schema Registry (the demo's way: the processor gets ``--schema-registry``) and register
    the producer's schema under the events topic's subject, as a producer's serializer does."""
    from confluent_kafka.schema_registry import Schema

    demo._start_registry(bootstrap)
    if demo.schema_registry is None:
        raise RuntimeError("no Schema Registry for registered-avro: `pubsub registry --fetch-only` installs Apicurio")
    return demo.schema_registry.client().register_schema(f"{topics.EVENTS}-value",
                                                         Schema(json.dumps(PRODUCER_SCHEMA), "AVRO"))


def _output_ids(demo: Demo) -> dict[int, int] | None:
    """With a registry the processor frames its notifications with the registry's ids: those -> the fixed ones."""
    if demo.schema_registry is None:
        return None
    from fastpubsub.kafka.schema_registry import output_subjects, register_outputs

    ids = register_outputs(demo.schema_registry, output_subjects(topics.NOTIFICATIONS, topics.DEAD_LETTER),
                           stopped=lambda: True)
    return {registry_id: fixed for fixed, registry_id in ids.items()}


def _wait_committed(watcher: _Watcher, total: int, processor, timeout: float,
                    progress: Callable[[str], None]) -> list[tuple[float, int]]:
    """(time, committed events) samples until the group has committed ``total`` events: for each count, the first
    and the last time it was seen (so the sample before a change is at most one poll before it)."""
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + timeout
    last_say = 0.0
    while True:
        processed, _ = watcher.progress(total)
        now = time.monotonic()
        if len(samples) >= 2 and processed == samples[-1][1] == samples[-2][1]:
            samples[-1] = (now, processed)  # unchanged: keep the last time it was still seen at this count
        else:
            samples.append((now, processed))
        if processed >= total:
            return samples
        if processor.poll() is not None:
            raise RuntimeError("the processor stopped")
        if now > deadline:
            raise TimeoutError(f"only {processed:,} of {total:,} events processed within {timeout:.0f}s")
        if now - last_say > 5:
            progress(f"  processed {processed:,} / {total:,} events")
            last_say = now
        time.sleep(0.1)


def drain_rate(samples: list[tuple[float, int]]) -> tuple[float, float, int, float]:
    """(events/s, time of the first commit, events, seconds) of a backlog drained, from :func:`_wait_committed`'s
    samples: from the first commit observed to the last (the rebuild and the first batch before it are not
    throughput)."""
    first = next(i for i, s in enumerate(samples) if s[1] > 0)
    (t0, c0), (t1, c1) = samples[first], samples[-1]
    if c1 == c0 and first > 0:  # the whole backlog went in one commit: time it from the sample before
        t0, c0 = samples[first - 1]
    return (c1 - c0) / max(t1 - t0, 1e-9), t0, c1 - c0, t1 - t0


def await_quiet(clock: _NotificationClock, timeout: float = 30.0) -> None:
    """Until a second passes without a notification (once every event is committed, its notifications are on the
    broker: these are the last ones arriving)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = clock.count
        time.sleep(1.0)
        if clock.count == before:
            return


def latencies(first: dict[str, tuple[float, int]], stamps: list[int], key: str) -> tuple[list[float], list[int]]:
    """Of each notified event offered at ``stamps`` (keys ``key``0, ``key``1, ...): ms from its timestamp to its
    first notification's arrival at a consumer, and to that notification's record timestamp."""
    at, side = [], []
    for i, ms in enumerate(stamps):
        seen = first.get(f"{key}{i}")
        if seen is not None:
            at.append(seen[0] * 1000 - ms)
            side.append(seen[1] - ms)
    return at, side


def slowest(first: dict[str, tuple[float, int]], stamps: list[int], key: str, n: int = 10) -> list[list[float]]:
    """The ``n`` slowest notified events of a phase as [seconds into the phase, ms at a consumer]: whether the tail
    is spread over the phase (commits, maintenance) or bunched (a start, one stall)."""
    if not stamps:
        return []
    rows = [((stamps[i] - stamps[0]) / 1000, first[f"{key}{i}"][0] * 1000 - ms) for i, ms in enumerate(stamps)
            if f"{key}{i}" in first]
    return [[round(t, 2), round(ms, 1)] for t, ms in sorted(rows, key=lambda r: -r[1])[:n]]


def _wait_ready(log: Path, processor, timeout: float) -> None:
    """Until the processor's log says it has rebuilt its subscriptions and been assigned the event partitions."""
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text(errors="replace") if log.exists() else ""
        if " ready: " in text and " assigned " in text:
            return
        if processor.poll() is not None:
            raise RuntimeError(f"the processor stopped; see {log}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the processor was not ready within {timeout:.0f}s; see {log}")
        time.sleep(0.2)


def _rate_limited(producer: Producer, values: list[bytes], rate: float, seconds: float, key: str = "L") -> list[int]:
    """Offer events at ``rate``/s for ``seconds`` (keys L0, L1, ...); returns each one's timestamp (ms)."""
    start = time.time()
    stamps: list[int] = []
    while True:
        elapsed = time.time() - start
        if elapsed >= seconds:
            return stamps
        due = min(int(elapsed * rate), len(values))
        while len(stamps) < due:
            i = len(stamps)
            stamps.append(_produce_at(producer, f"{key}{i}".encode(), values[i]))
        producer.poll(0)
        time.sleep(0.002)


def write_backlog(bootstrap: str, backlog: list[bytes], linger_ms: int) -> Producer:
    """``backlog`` on the events topic, keys ``e0``, ``e1``, ...; the idempotent producer, for the phases after it."""
    producer = ClientFactory(bootstrap).producer({"linger.ms": linger_ms}, **{"enable.idempotence": True})
    produce_all(producer, topics.EVENTS, ((f"e{i}".encode(), value) for i, value in enumerate(backlog)), timeout=60,
                wait=0.1)
    return producer


def _produce_at(producer: Producer, key: bytes, value: bytes) -> int:
    while True:
        ms = int(time.time() * 1000)
        try:
            producer.produce(topics.EVENTS, value, key, timestamp=ms)
            return ms
        except BufferError:
            producer.poll(0.01)


#: The parts of a sampled event's latency (``runtime.trace``): before the processor's consumer handed it over
#: (the load producer's linger, the broker, the fetch, the batch before it), decoding and matching its batch,
#: producing the batch's outputs, waiting for the transaction's commit, and from that commit to the arrival of the
#: event's first notification at a read_committed reader.
PARTS = ("consumer_ms", "decode_ms", "match_ms", "produce_ms", "commit_ms", "visible_ms")


def breakdown(samples: list[dict], first: dict[str, tuple[float, int]], key: str = "L") -> dict:
    """Where the time of the sampled events offered with keys ``key``0, ``key``1, ... goes: p50 / p99 / max of each
    part (:data:`PARTS`), and the mean of each part over the slowest tenth of the notified ones (the tail), whose
    largest part is what bounds it."""
    rows = []
    for s in samples:
        if not (s["key"].startswith(key) and s["key"][len(key):].isdigit()):
            continue
        row = dict(s)
        seen = first.get(s["key"])
        if seen is not None:
            row["visible_ms"] = round(seen[0] * 1e3 - s["committed"] * 1e3, 2)
            row["total_ms"] = round(seen[0] * 1e3 - s["stamp"] * 1e3, 2)
        rows.append(row)
    out: dict = {"samples": len(rows), "notified": sum(1 for r in rows if "total_ms" in r)}
    for part in (*PARTS, "total_ms"):
        out[part] = {k: round(v, 2) for k, v in percentiles(np.array([r[part] for r in rows if part in r])).items()}
    notified = sorted((r for r in rows if "total_ms" in r), key=lambda r: r["total_ms"])
    tail = notified[int(len(notified) * 0.9):]
    if tail:
        out["tail"] = {part: round(float(np.mean([r[part] for r in tail])), 2) for part in (*PARTS, "total_ms")}
        out["tail_bound"] = max(PARTS, key=lambda part: out["tail"][part])
    return out


def percentiles(ms: np.ndarray) -> dict[str, float]:
    if len(ms) == 0:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)), "max": float(ms.max())}


def run(plan: Plan, progress: Callable[[str], None] = print, seed: int = 1, options: Options = Options()) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="pubsub-bench-e2e-"))
    broker = EmbeddedBroker()
    if options.event_format not in EVENT_FORMATS:
        raise ValueError(f"event format {options.event_format!r}: one of {', '.join(EVENT_FORMATS)}")
    demo = Demo(plan.subscriptions, 0, "W0", seed)  # its subscription loading and processor start
    demo.run_options = options.run_options()
    schema_id = None
    processor = clock = slow_clock = watcher = producer = None
    phases: list[dict] = []  # one per offered rate
    try:
        if options.pin_broker:
            pin_self_off_core_0()
        broker.start()
        if options.pin_broker:
            pin_to_core_0(broker.pids())
        bootstrap = broker.bootstrap_servers
        admin.create_topics(bootstrap)
        progress(f"e2e: broker {bootstrap}; {plan.subscriptions:,} W0 subscriptions + {len(SHOWCASE)} hand-written")
        n_subs = demo._load_subscriptions(bootstrap)
        if options.event_format == "registered-avro":
            schema_id = _producer_schema_id(demo, bootstrap)
        backlog = _encoded_events(plan.backlog, seed + 1, options.event_format, schema_id)
        producer = write_backlog(bootstrap, backlog, options.producer_linger_ms)
        progress(f"  backlog of {plan.backlog:,} W0 events written; starting the processor (it rebuilds first)")
        warm_up(ALGORITHM, generate_events(PRESETS["W0"], 100, seed))  # numba's disk cache, which the processor loads
        clock = _NotificationClock(bootstrap, options.clock_fetch_wait_ms)
        clock.start()
        slow_clock = _NotificationClock(bootstrap, None)
        slow_clock.start()
        clock.fixed_ids = slow_clock.fixed_ids = _output_ids(demo)
        started = time.monotonic()
        processor = demo._start_processor(bootstrap, workdir / "processor.log")
        watcher = _Watcher(bootstrap)
        samples = _wait_committed(watcher, plan.backlog, processor, 600 + plan.subscriptions / 1000, progress)
        max_rate, t0, drained, seconds = drain_rate(samples)
        ready = t0 - started
        progress(f"  maximum: {max_rate:,.0f} events/s ({drained:,} events in {seconds:.1f} s)")
        stats = _stop_processor(processor)  # its busy time by stage covers the backlog alone
        if not stats:
            raise RuntimeError(f"the processor printed no statistics; see {workdir / 'processor.log'}")
        rates = [options.offered_rate or max_rate / 2] + [max_rate * f for f in options.also_at] + list(
            options.also_rates)
        done = plan.backlog
        for k, offered in enumerate(rates):  # the figure's phase first, then the other rates
            name = "" if k == 0 else f"-{k}"
            log = workdir / f"processor-latency{name}.log"
            processor = demo._start_processor(bootstrap, log)
            _wait_ready(log, processor, 600 + plan.subscriptions / 1000)
            values = _encoded_events(int(offered * plan.latency_seconds) + 1, seed + 2 + k, options.event_format,
                                     schema_id)
            progress(f"  latency phase: offering {offered:,.0f} events/s for {plan.latency_seconds:g} s")
            meter = CpuMeter({"broker": broker.pids()[0], "processor": processor.pid}, "bench",
                             {"bench: load producer": [threading.main_thread()],
                              "bench: timing consumers": [clock, slow_clock]})
            meter.start()
            stamps = _rate_limited(producer, values, offered, plan.latency_seconds, f"L{k}-" if k else "L")
            cpu = meter.stop()
            progress(f"  {cpu_table(cpu)}")
            if producer.flush(60):
                raise RuntimeError("the broker did not acknowledge the latency phase's events")
            done += len(stamps)
            _wait_committed(watcher, done, processor, 300, progress)
            await_quiet(clock)  # the last notifications (all produced before the last commit)
            phases.append({"offered": offered, "stamps": stamps, "key": f"L{k}-" if k else "L", "cpu": cpu,
                           "stats": _stop_processor(processor)})
            processor = None
        latency_stats, stamps = phases[0]["stats"], phases[0]["stamps"]
    finally:
        if processor is not None:
            _stop_processor(processor)
        if clock is not None:
            clock.stop()
        if slow_clock is not None:
            slow_clock.stop()
        if watcher is not None:
            watcher.close()
        producer = None  # closed before the broker goes, or librdkafka logs the disconnection
        if demo.registry is not None:
            demo.registry.stop()
        broker.stop()

    for phase in phases:  # percentiles of each phase: at a consumer, and processor side; where the time goes
        phase["latency"], phase["processor_side"] = latencies(clock.first, phase["stamps"], phase["key"])
        phase["breakdown"] = breakdown(phase["stats"].get("latency_samples", []), clock.first, phase["key"])
        phase["slowest"] = slowest(clock.first, phase["stamps"], phase["key"])
    latency, processor_side = phases[0]["latency"], phases[0]["processor_side"]
    lat, proc = percentiles(np.array(latency)), percentiles(np.array(processor_side))
    slow = percentiles(np.array([slow_clock.first[f"L{i}"][0] * 1000 - ms for i, ms in enumerate(stamps)
                                 if f"L{i}" in slow_clock.first]))
    busy = stats.get("busy_seconds") or 0.0
    stages = stats.get("stage_seconds", {})
    return {
        "subscriptions": n_subs,
        "event_format": options.event_format,
        "backlog_events": plan.backlog,
        "max_events_per_s": round(max_rate, 1),
        "rebuild_and_join_s": round(ready, 1),
        "offered_events_per_s": round(phases[0]["offered"], 1),
        "latency_events": len(stamps),
        "achieved_events_per_s": round(len(stamps) / plan.latency_seconds, 1),
        "events_notified": len(latency),
        "match_rate": round(len(latency) / max(len(stamps), 1), 4),
        "backlog_match_rate": round(sum(1 for e in clock.first if e.startswith("e")) / plan.backlog, 4),
        "notifications": clock.count,
        "latency_p50_ms": round(lat["p50"], 1),
        "latency_p99_ms": round(lat["p99"], 1),
        "latency_max_ms": round(lat["max"], 1),
        "processor_latency_p50_ms": round(proc["p50"], 1),
        "processor_latency_p99_ms": round(proc["p99"], 1),
        "default_consumer_latency_p50_ms": round(slow["p50"], 1),
        "default_consumer_latency_p99_ms": round(slow["p99"], 1),
        "batch_size": options.batch_size or HostConfig.batch_size,
        "commit_interval_ms": HostConfig.commit_interval_ms if options.commit_interval_ms is None
        else options.commit_interval_ms,
        "commit_linger_ms": HostConfig.commit_linger_ms if options.commit_linger_ms is None
        else options.commit_linger_ms,
        "overlap_commits": run_default("overlap_commits") if options.overlap_commits is None
        else options.overlap_commits,
        "processor_config": " ".join(options.processor_config),
        "pin_broker": options.pin_broker,
        "producer_linger_ms": options.producer_linger_ms,
        "clock_fetch_wait_ms": options.clock_fetch_wait_ms,
        "batches": stats.get("batches"),
        "commits": stats.get("commits"),
        "latency_phase_batches": latency_stats.get("batches"),
        "latency_phase_commits": latency_stats.get("commits"),
        "latency_phase_busy_s": latency_stats.get("busy_seconds"),
        "latency_phase_overlapped_batches": latency_stats.get("overlapped_batches"),
        # the garbage collector while the loop ran: collections and seconds by generation, the longest pause
        "latency_phase_gc": json.dumps(latency_stats.get("gc")) if latency_stats.get("gc") else "",  # of plan.latency_seconds (and its tail)
        **{f"latency_phase_{k}_s": v for k, v in latency_stats.get("stage_seconds", {}).items()},
        # the commits' time by part (waiting for acknowledgements, the offsets, the transaction's end) and the
        # batch sizes the loop took, at half the maximum
        **{f"latency_phase_commit_{k}_s": v for k, v in latency_stats.get("commit_seconds", {}).items()},
        "latency_phase_batch_sizes": _sizes(latency_stats.get("batch_sizes", {})),
        # each sampled event's latency by part (PARTS), and what bounds the slowest tenth
        "latency_breakdown": json.dumps(phases[0]["breakdown"]),
        "latency_slowest": json.dumps(phases[0]["slowest"]),  # [seconds into the phase, ms] of the slowest events
        "delivery": stats.get("delivery"),
        "matcher": (stats.get("task") or {}).get("matcher"),
        "processor_events": stats.get("events"),
        "busy_s": busy,
        **{f"{k}_s": v for k, v in stages.items()},
        # CPU seconds of each process while the events were offered (benchmarks.harness.cpu), against cores x seconds
        **{f"latency_phase_cpu_{k}_s": v for k, v in phases[0]["cpu"]["cpu"].items()},
        **{f"latency_phase_cpu_{k}_s": v for k, v in phases[0]["cpu"]["threads"].items()},
        "latency_phase_cpu_total_s": phases[0]["cpu"]["total"],
        "latency_phase_cpu_busy": phases[0]["cpu"]["busy"],
        "latency_phase_seconds": phases[0]["cpu"]["seconds"],
        "latency_phase_cpu_machine_s": phases[0]["cpu"]["machine"],  # every process on the machine, others' too
        # the other offered rates (--also-at): rate, p50/p99 at a consumer and processor side, CPU
        "other_rates": json.dumps([_phase_summary(ph, max_rate) for ph in phases[1:]]),
        "workdir": str(workdir),
    }, latency


def _cpu_of(row: dict) -> dict:
    """The latency phase's CPU measurement back from its row."""
    threads = ("bench: load producer", "bench: timing consumers", "bench (other threads)")
    return {"seconds": row["latency_phase_seconds"], "cores": CpuMeter({}).cores,
            "cpu": {k: row[f"latency_phase_cpu_{k}_s"] for k in ("broker", "processor", "bench")},
            "threads": {k: row[f"latency_phase_cpu_{k}_s"] for k in threads},
            "total": row["latency_phase_cpu_total_s"], "busy": row["latency_phase_cpu_busy"],
            "machine": row["latency_phase_cpu_machine_s"]}


def _other_rates(row: dict) -> str:
    """The latency phases at the other offered rates (``--also-at``), one line each."""
    others = json.loads(row.get("other_rates") or "[]")
    if not others:
        return ""
    lines = [{"rate": f"{o['offered']:,.0f} events/s ({o['of_max']:.0%} of the maximum)",
              "p": f"{o['p50_ms']:,.1f} / {o['p99_ms']:,.1f} ms", "side": f"{o['processor_p50_ms']:,.1f} / "
              f"{o['processor_p99_ms']:,.1f} ms", "busy": f"{o['busy_s'] or 0:,.1f} s, {o['commits'] or 0:,} commits",
              "cpu": cpu_table(o["cpu"])} for o in others]
    return ("\n\nThe latency at other offered rates (each phase with a processor of its own, started afresh):\n\n"
            + report.markdown_table(lines, [("rate", "offered"), ("p", "p50 / p99 at a consumer"),
                                           ("side", "processor side p50 / p99"), ("busy", "processor busy"),
                                           ("cpu", "CPU by process")]))


def _phase_summary(phase: dict, max_rate: float) -> dict:
    at, side = percentiles(np.array(phase["latency"])), percentiles(np.array(phase["processor_side"]))
    stats = phase["stats"]
    return {"offered": round(phase["offered"], 1), "of_max": round(phase["offered"] / max(max_rate, 1e-9), 3),
            "events": len(phase["stamps"]), "notified": len(phase["latency"]),
            "p50_ms": round(at["p50"], 1), "p99_ms": round(at["p99"], 1),
            "processor_p50_ms": round(side["p50"], 1), "processor_p99_ms": round(side["p99"], 1),
            "busy_s": stats.get("busy_seconds"), "commits": stats.get("commits"), "batches": stats.get("batches"),
            "stage_seconds": stats.get("stage_seconds"), "cpu": phase["cpu"], "breakdown": phase["breakdown"],
            "slowest": phase["slowest"]}


STAGES = ("consume", "decode", "match", "produce", "commit")


def _breakdown_cell(text: str) -> str:
    b = json.loads(text or "{}")
    if not b.get("samples"):
        return "no samples"
    parts = ", ".join(f"{p.removesuffix('_ms')} {b[p]['p99']:,.1f}" for p in PARTS)
    return f"{parts} ms ({b['samples']:,} samples); tail bound: {b.get('tail_bound', 'n/a')}"


def _sizes(by_bucket: dict[str, int]) -> str:
    """``{"1": 3, "2-3": 5}`` as ``1:3 2-3:5``, smallest first (one CSV cell)."""
    return " ".join(f"{k}:{v}" for k, v in sorted(by_bucket.items(), key=lambda kv: int(kv[0].split("-")[0])))


def bound(row: dict) -> tuple[list[dict], str]:
    """Per-event cost of each stage during the backlog drain, and the stage that bounds the maximum."""
    n = max(row["processor_events"] or 0, 1)
    wall_us = 1e6 / row["max_events_per_s"]
    table = [{"stage": s, "us_per_event": round(row[f"{s}_s"] / n * 1e6, 1)} for s in STAGES]
    other = wall_us - sum(r["us_per_event"] for r in table)
    table.append({"stage": "rest (loop, waiting for the CPU or the broker, idle)", "us_per_event": round(other, 1)})
    for r in table:
        r["share"] = f"{r['us_per_event'] / wall_us:.0%}"
    top = max(table, key=lambda r: r["us_per_event"])
    return table, top["stage"]


def e2e(out: Path, quick: bool = False, progress: Callable[[str], None] = print, command: str = "",
        options: Options = Options()) -> dict:
    plan = QUICK if quick else FULL
    row, latency = run(plan, progress, options=options)
    report.write_csv([row], out / "e2e.csv")
    stages, top = bound(row)
    fig, (left, right) = report.subplots(2, width=6)
    if latency:
        xs = np.sort(np.array(latency))
        left.plot(xs, np.arange(1, len(xs) + 1) / len(xs))
        left.set_xscale("log")
    left.set_title(f"notification latency at {row['achieved_events_per_s']:,.0f} events/s offered")
    left.set_xlabel("ms from the event's timestamp to the notification's arrival")
    left.set_ylabel("fraction of notified events")
    left.grid(True, which="both", alpha=0.3)
    right.bar([r["stage"].split(" ")[0] for r in stages], [r["us_per_event"] for r in stages])
    right.set_title(f"processor time per event at the maximum ({row['max_events_per_s']:,.0f} events/s)")
    right.set_ylabel("µs per event")
    report.save(fig, out / "e2e.png")
    body = (
        f"{row['subscriptions']:,} subscriptions ({plan.subscriptions:,} W0 + the demo's three hand-written ones, "
        f"`cli.demo.SHOWCASE`); matcher {row['matcher']}, delivery {row['delivery']}, 4 partitions, "
        f"processor batches of at most {row['batch_size']:,} events, commit interval {row['commit_interval_ms']} ms, "
        f"commit linger {row['commit_linger_ms']} ms, "
        f"commits {'overlapped with the next batch' if row['overlap_commits'] else 'waited for'}, "
        + (f"processor clients `-X {row['processor_config']}`, " if row["processor_config"] else "")
        + ("the broker's JVM alone on core 0 (`--pin-broker`), " if row["pin_broker"] else "")
        + f"load producer linger {row['producer_linger_ms']} ms, timing consumer fetch wait "
        f"{row['clock_fetch_wait_ms']} ms, Avro in and out.\n\n"
        + report.markdown_table([
            {"what": "maximum throughput, events topic → notifications topic (backlog of "
                     f"{row['backlog_events']:,} events drained)", "value": f"{row['max_events_per_s']:,.0f} events/s"},
            {"what": "offered load (half the maximum, or --offered-rate; achieved by the rate-limited producer)",
             "value": f"{row['offered_events_per_s']:,.0f} ({row['achieved_events_per_s']:,.0f}) events/s"},
            {"what": "events that caused a notification (match rate)",
             "value": f"{row['match_rate']:.1%} (backlog: {row['backlog_match_rate']:.1%})"},
            {"what": "latency p50 / p99 / max: event timestamp → notification arrives at a consumer",
             "value": f"{row['latency_p50_ms']:,.1f} / {row['latency_p99_ms']:,.1f} / {row['latency_max_ms']:,.1f} ms"},
            {"what": "processor-side p50 / p99: event timestamp → notification record timestamp",
             "value": f"{row['processor_latency_p50_ms']:,.1f} / {row['processor_latency_p99_ms']:,.1f} ms"},
            {"what": "latency p50 / p99 at a consumer with librdkafka's default fetch.wait.max.ms (500)",
             "value": f"{row['default_consumer_latency_p50_ms']:,.1f} / {row['default_consumer_latency_p99_ms']:,.1f} ms"},
            {"what": "processor busy at half the maximum (decode, match, produce, commit; of the phase's "
                     f"{plan.latency_seconds:g} s)", "value": f"{row['latency_phase_busy_s'] or 0:,.1f} s"},
            {"what": "batches / commits: draining the backlog; at half the maximum",
             "value": f"{row['batches']:,} / {row['commits']:,}; "
                      f"{row['latency_phase_batches']:,} / {row['latency_phase_commits']:,}"},
            {"what": "at half the maximum: busy time by stage (consume includes waiting for a first event)",
             "value": ", ".join(f"{st} {row.get(f'latency_phase_{st}_s') or 0:,.1f} s" for st in STAGES)},
            {"what": "at half the maximum: commits by part (flush: outputs acknowledged; offsets; transaction end)",
             "value": ", ".join(f"{part} {row.get(f'latency_phase_commit_{part}_s') or 0:,.1f} s"
                                for part in ("flush", "offsets", "transaction"))},
            {"what": "at half the maximum: batches by number of events", "value": row["latency_phase_batch_sizes"]},
            {"what": "at half the maximum: sampled events' latency by part, p99 (consumer, decode, match, produce, "
                     "commit, visible to a read_committed reader), and the part that bounds the slowest tenth",
             "value": _breakdown_cell(row["latency_breakdown"])},
            {"what": "at half the maximum: batches taken while the previous commit was in flight",
             "value": f"{row['latency_phase_overlapped_batches'] or 0:,}"},
            {"what": "at half the maximum: garbage collections by generation (0, 1, 2), their seconds, the longest",
             "value": row["latency_phase_gc"] or "not reported"},
            {"what": "start of the processor to its first commit (rebuild of the subscriptions, group join)",
             "value": f"{row['rebuild_and_join_s']:,.1f} s"},
            {"what": "CPU seconds while the events were offered, by process (broker, processor, this benchmark: "
                     "load producer, timing consumers, their librdkafka threads), against cores x seconds",
             "value": cpu_table(_cpu_of(row))},
        ], [("what", "measure"), ("value", "value")])
        + _other_rates(row)
        + "\n\nWhere the time goes while draining the backlog (the processor's busy time by stage, per event; "
        "*rest* = wall time per event at the maximum minus the five stages):\n\n"
        + report.markdown_table(stages, [("stage", "stage"), ("us_per_event", "µs/event"), ("share", "share")])
        + f"\n\nBound: **{top}**. The paper measured no Kafka path (its figures include inter-process "
        "communication with the workload generator on the same machine).\n\n![end to end](img/e2e.png)\n"
    )
    report.write_markdown(out / "e2e.md", "End to end on Apache Kafka", command, body)
    return row


if __name__ == "__main__":  # the suite's command, its figure named: python -m benchmarks.pipeline.e2e --quick
    import sys

    from benchmarks.suite import bench_cmd

    bench_cmd(["e2e", *sys.argv[1:]], prog_name="python -m benchmarks.suite e2e")
