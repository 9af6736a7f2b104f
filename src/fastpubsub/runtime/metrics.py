"""``/metrics`` (Prometheus, through ``prometheus_client``), ``/healthz`` (liveness) and ``/readyz`` of a service.

The stages publish their numbers into one :class:`Metrics` and this module
only reads that: plain counters the stages increment
(``runtime.counters.PipelineCounters``, the dead-letter counts by reason),
and gauges the loop sets once per iteration (subscriptions, the producer's
queue).  Values that need the Kafka clients or the matcher (consumer lag, the
engine's configuration) are sampled by the loop itself, at most once a second
and once every ``ENGINE_EVERY`` seconds, through
:meth:`Metrics.after_iteration`: the HTTP thread never touches a client or the
matcher while the loop mutates it.

The exposition is ``prometheus_client``'s: each :class:`Metrics` has a
registry of its own (several hosts share a process in tests) holding one
collector, :class:`PublishedCollector`, which builds the metric families from
what was published when a scraper asks, so the loop pays nothing per event
for them.  The histograms are bucket counts the loop keeps
(:class:`Histogram`) and the collector exposes as ``HistogramMetricFamily``,
rather than ``prometheus_client.Histogram``: the loop's ``observe`` takes no
lock the HTTP thread also takes, is a fraction of the cost of the client's
(one ``bisect``), and the histograms carry no ``_created`` series, like every
counter here.  The server answers ``/metrics`` with the client's own handler
(``MetricsHandler``): the text format 0.0.4 unless the scraper asks for
OpenMetrics, gzip when accepted, ``name[]`` filters.  A connection has a few
seconds to be served and only so many are served at once
(:data:`CONNECTION_SECONDS`, :data:`MAX_CONNECTIONS`): slow or half-sent
requests cannot pile up threads.

Liveness means "the loop turns": ``/healthz`` answers 200 while the loop has
finished an iteration (or a rebuild step) within ``stall_seconds``, 503 after.
The loop turns even while the broker is unreachable (consume returns empty),
so a broker outage is not a liveness failure; a loop stuck in one call (a
wedged commit, a matcher that never returns) is.  ``/readyz`` is 200 once the
subscriptions are rebuilt and events are being matched, and 503 again while
no broker of the cluster answers, or while its authorizer refuses what the
service needs (the service waits for it, it does not exit).
"""

from __future__ import annotations

import bisect
import logging
import socket
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any, Iterator, Mapping
from urllib.parse import urlparse

from confluent_kafka import Consumer, KafkaException
from prometheus_client.exposition import MetricsHandler
from prometheus_client.metrics_core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily,
                                            InfoMetricFamily, Metric)
from prometheus_client.registry import Collector, CollectorRegistry

from .counters import PipelineCounters

log = logging.getLogger(__name__)

#: Histogram buckets (seconds) of a batch (decode + match + produce), of a commit and of an event's wait for it.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Histogram buckets (records) of a batch's size.
SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
LAG_EVERY = 1.0
ENGINE_EVERY = 10.0
DEFAULT_STALL_SECONDS = 90.0  # above the 60 s a transaction commit may take before it fails
#: A commit that has waited this long (seconds) makes the service not ready until it ends: the cluster went away
#: in its middle, or answers too slowly to serve.
COMMIT_PATIENCE = 3.0


class Histogram:
    """Bucket counts of one latency, kept by the loop (``observe``) and exposed by :class:`PublishedCollector`."""

    def __init__(self, buckets: tuple[float, ...] = BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        """Cumulative buckets; the count is the +Inf bucket's, so the two agree whenever the loop observes."""
        counts, total, running, buckets = list(self.counts), self.sum, 0, []
        for bound, n in zip((*self.buckets, float("inf")), counts):
            running += n
            buckets.append((_bound(bound), running))
        return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=total)


def consumer_lag(consumer: Consumer, committed: Mapping[tuple[str, int], int] | None = None) -> int:
    """Records between the committed offsets and the high watermarks of the assigned partitions, from local state.

    Committed, not fetched: a batch that is consumed but not yet committed
    (and replayed if its commit fails) is still lag.  ``committed`` is what
    this instance committed of each partition (``Checkpoint.known``); a
    partition it has not committed since it was assigned counts from the
    consumer's position (where it started: the group's committed offset), or
    is left out until the consumer has one.  The high watermarks are those
    cached from fetch responses.  No request to the broker: asking the group
    coordinator (``consumer.committed()``) is a round trip, and just after a
    transaction a read_committed consumer is told the offsets are not yet
    stable and librdkafka asks again later, which held the loop for about
    100 ms (``python -m benchmarks.pipeline.commit_path``).
    """
    lag = 0
    assignment = consumer.assignment()
    if not assignment:
        return 0
    known = committed or {}
    try:
        positions = consumer.position(assignment)
    except KafkaException as exc:  # a consumer closed meanwhile: the next sample tries again
        log.debug("lag: positions unavailable (%s)", exc)
        return -1
    for tp in positions:
        start = known.get((tp.topic, tp.partition), tp.offset)
        if start < 0:
            continue  # no position yet: nothing fetched from it
        try:
            _, high = consumer.get_watermark_offsets(tp, cached=True)
        except KafkaException:
            continue
        if high >= 0:
            lag += max(high - start, 0)
    return lag


#: Kinds of subscription change counted (``SubscriptionState``'s counters of the same names).
CHANGE_KINDS = ("added", "replaced", "removed", "expired")


class Metrics:
    """Everything ``/metrics``, ``/healthz`` and ``/readyz`` show, as the stages and the loop published it."""

    def __init__(self, stall_seconds: float = DEFAULT_STALL_SECONDS, counters: PipelineCounters | None = None) -> None:
        self.stall_seconds = stall_seconds
        self.counters = counters or PipelineCounters()  # incremented by the stages
        self.ready = threading.Event()  # set once the subscriptions are rebuilt
        self.unreachable = False  # no broker answers (runtime.presence): not ready until one does
        self.refused: str | None = None  # what the broker's authorizer refuses (runtime.presence): not ready meanwhile
        self.registry_unreachable = False  # the Schema Registry does not answer (kafka.schema_registry): not ready
        self.recovering = False  # a failed step is being replayed: a new producer, the inputs at their offsets
        self.committing_since: float | None = None  # monotonic start of the commit under way (runtime.host)
        self.dead_letters: Mapping[tuple[str, str], int] = {}  # (source topic, reason class) -> count, kept by the dead-letter path
        # gauges the loop sets (Metrics.publish)
        self.subscriptions = 0
        self.changes: dict[str, int] = dict.fromkeys(CHANGE_KINDS, 0)
        self.producer_queue: tuple[int, int, int] | None = None  # (queued, bound, full waits); None before delivery starts
        self.info: dict[str, str] = {"algorithm": "", "delivery": "", "group_id": "", "shard": "0/1"}
        self.batch_seconds = Histogram()
        self.commit_seconds = Histogram()
        self.event_commit_seconds = Histogram()  # each batch's first record: its timestamp to its commit
        self.batch_records = Histogram(SIZE_BUCKETS)
        self.lag = 0
        self.partitions = 0
        self.engine: dict[str, Any] = {}
        self.last_beat = time.monotonic()
        self.started = time.monotonic()
        self._lag_at = self._engine_at = float("-inf")
        self.registry = CollectorRegistry()  # this instance's own: what /metrics exposes
        self.registry.register(PublishedCollector(self))

    def registry_waiting(self, waiting: bool) -> None:
        """The Schema Registry does not answer (True, said at every attempt) or answers again (False): not ready
        meanwhile, but alive: the loop waits on purpose, it is not stalled."""
        self.registry_unreachable = waiting
        self.beat()

    def beat(self) -> None:
        """The loop made progress: a batch delivered, a rebuild step, or a turn with nothing to do."""
        self.last_beat = time.monotonic()

    def publish(self, subscriptions: int, changes: dict[str, int], producer_queue: tuple[int, int, int] | None,
                **info: str) -> None:
        """Gauges the loop sets (cheap: called every iteration, and once before readiness)."""
        self.subscriptions, self.changes, self.producer_queue = subscriptions, changes, producer_queue
        self.info.update(info)

    def after_iteration(self, events: Consumer, matcher: Any,
                        committed: Mapping[tuple[str, int], int] | None = None) -> None:
        """Called by the loop after each iteration: sample lag (``committed``: what the loop committed of each
        partition) and ``matcher.stats()`` when due (it beats on progress)."""
        now = time.monotonic()
        if now - self._lag_at >= LAG_EVERY:
            self._lag_at = now
            lag = consumer_lag(events, committed)
            if lag >= 0:
                self.lag = lag
            self.partitions = len(events.assignment())
        if matcher is not None and now - self._engine_at >= ENGINE_EVERY:
            self._engine_at = now
            self.engine = matcher.stats()

    def commit_waiting(self) -> float | None:
        """Seconds the commit under way has waited, once past :data:`COMMIT_PATIENCE`; else None.  A commit
        blocks the loop (``commit_transaction`` waits up to its timeout when the cluster goes away in its middle),
        and no client is polled meanwhile whose error callback would say the cluster is unreachable."""
        since = self.committing_since
        if since is None or time.monotonic() - since < COMMIT_PATIENCE:
            return None
        return time.monotonic() - since

    def alive(self) -> bool:
        return time.monotonic() - self.last_beat < self.stall_seconds


# --- the exposition ---------------------------------------------------------------


def _bound(v: float) -> str:
    return "+Inf" if v == float("inf") else repr(float(v))


def _engine_numbers(stats: dict[str, Any], prefix: str = "") -> list[tuple[str, float]]:
    """Numeric leaves of ``matcher.stats()``, flattened with ``_`` (lists and strings left out)."""
    out = []
    for key, value in stats.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            if key != "cluster_size_histogram":  # size -> count: shown as its own labelled metric
                out += _engine_numbers(value, f"{name}_")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append((name, value))
    return out


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class PublishedCollector(Collector):
    """The metric families of what was published to one :class:`Metrics`, built on the HTTP thread per scrape."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m, c = self.metrics, self.metrics.counters
        yield _counter("pubsub_events_total", "Events decoded and matched.", c.events)
        yield _counter("pubsub_notifications_total", "Notifications produced.", c.notifications)
        yield _counter("pubsub_batches_total", "Event batches processed and committed.", c.batches)
        yield _counter("pubsub_commits_total", "Commits (transactions, or at-least-once offset commits) of one or "
                       "more batches.", c.commits)
        dead = CounterMetricFamily("pubsub_dead_letters_total", "Bad input records sent to pubsub.dead-letter, by "
                                   "source and reason class.", labels=("topic", "reason"))
        for (topic, reason), n in sorted(dict(m.dead_letters).items()):
            dead.add_metric((topic, reason), n)
        yield dead
        yield _gauge("pubsub_consumer_lag", "Events between the group's committed offsets and the high watermarks.",
                     m.lag)
        yield _gauge("pubsub_assigned_partitions", "Event partitions assigned to this instance.", m.partitions)
        yield m.batch_seconds.family("pubsub_batch_seconds", "Time to decode, match and produce one event batch.")
        yield m.commit_seconds.family("pubsub_commit_seconds", "Time of one commit: outputs acknowledged, offsets "
                                      "committed with them.")
        yield m.event_commit_seconds.family("pubsub_event_commit_seconds", "From the timestamp of each batch's first "
                                            "record to the commit of the transaction holding its outputs.")
        yield m.batch_records.family("pubsub_batch_records", "Records in one batch taken from the consumer.")
        yield _counter("pubsub_busy_seconds_total", "Time spent on event batches.", c.busy_seconds)
        yield _gauge("pubsub_subscriptions", "Subscriptions in the matcher.", m.subscriptions)
        changes = CounterMetricFamily("pubsub_subscription_changes_total", "Subscription changes applied, by kind.",
                                      labels=("change",))
        published = m.changes
        for kind in CHANGE_KINDS:
            changes.add_metric((kind,), published.get(kind, 0))
        yield changes
        if m.producer_queue is not None:
            queued, bound, full_waits = m.producer_queue
            yield _gauge("pubsub_producer_queue_messages", "Outputs waiting for the broker's acknowledgement.", queued)
            yield _gauge("pubsub_producer_queue_bound", "Bound of that queue (queue.buffering.max.messages).", bound)
            yield _counter("pubsub_producer_queue_full_total", "Times a produce found the queue full and waited.",
                           full_waits)
        yield InfoMetricFamily("pubsub", "Configuration of this instance.", value=dict(m.info))
        yield _gauge("pubsub_ready", "1 once the subscriptions are rebuilt and events are matched, 0 while no broker or no Schema Registry answers.",
                     int(m.ready.is_set() and not m.unreachable and m.refused is None and not m.registry_unreachable
                         and not m.recovering and m.commit_waiting() is None))
        yield _gauge("pubsub_seconds_since_progress", "Seconds since the loop last made progress.",
                     round(time.monotonic() - m.last_beat, 3))
        engine = m.engine
        for name, value in _engine_numbers({k: v for k, v in engine.items()
                                            if k not in ("subscriptions", "algorithm", "memory")}):
            yield _gauge(f"pubsub_engine_{name}", f"matcher.stats()['{name}'] (sampled every {ENGINE_EVERY:.0f}s).",
                         value)
        memory = engine.get("memory")
        if memory:
            by = GaugeMetricFamily("pubsub_engine_structure_bytes", "Bytes the matcher's structures hold, by structure "
                                   f"(matcher.stats()['memory'], sampled every {ENGINE_EVERY:.0f}s); they sum to "
                                   "pubsub_engine_memory_bytes.", labels=("structure",))
            for structure, n in memory.items():
                by.add_metric((structure,), n)
            yield by
        histogram = engine.get("cluster_size_histogram")
        if histogram:
            sizes = GaugeMetricFamily("pubsub_engine_clusters_by_size", "Clusters per size class (matcher.stats()).",
                                      labels=("size",))
            for size, n in histogram.items():
                sizes.add_metric((str(size),), n)
            yield sizes


# --- the server ---------------------------------------------------------------------


#: Seconds a connection may take to send its request and read the answer, and how many are served at once: a
#: scraper asks one short request at a time, and a client that sends half a request (or reads its answer a byte
#: at a time) neither holds a thread for longer nor makes the server start one thread per connection.
CONNECTION_SECONDS = 5.0
MAX_CONNECTIONS = 16


class _BoundedServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` that serves at most ``limit`` connections at once (the others are closed as they are
    accepted) and closes each one ``seconds`` after it was accepted, whatever it is waiting for."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type, seconds: float, limit: int) -> None:
        super().__init__(address, handler)
        self.seconds = seconds
        self._slots = threading.BoundedSemaphore(limit)
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # refused: as many as allowed are being served
            return
        with self._lock:
            self._deadlines[request] = time.monotonic() + self.seconds
        try:
            super().process_request(request, client_address)  # its own thread
        except BaseException:
            self._release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def _release(self, request: Any) -> None:
        with self._lock:
            self._deadlines.pop(request, None)
        self._slots.release()

    def service_actions(self) -> None:
        """Between two polls of the listening socket: cut the connections past their deadline (their threads see
        the end of the stream and finish)."""
        now = time.monotonic()
        with self._lock:
            late = [request for request, deadline in self._deadlines.items() if deadline <= now]
        for request in late:
            try:
                request.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed meanwhile
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("metrics: connection from %s ended: %s", client_address, sys.exc_info()[1])


class MetricsServer:
    """A daemon thread serving ``/metrics``, ``/healthz`` and ``/readyz`` of ``metrics`` on host:port.

    Each connection has ``seconds`` to be served (each read also times out after that), and at most ``limit``
    are served at once (see :data:`CONNECTION_SECONDS`)."""

    def __init__(self, metrics: Metrics, port: int, host: str = "127.0.0.1", seconds: float = CONNECTION_SECONDS,
                 limit: int = MAX_CONNECTIONS) -> None:
        target = metrics

        class Handler(MetricsHandler):
            registry = target.registry
            timeout = seconds  # of every read and write on the connection (StreamRequestHandler.setup)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = urlparse(self.path).path
                if path == "/metrics":
                    super().do_GET()  # prometheus_client's: format negotiated from Accept, gzip, name[] filters
                elif path == "/healthz":
                    ok = target.alive()
                    self._answer(200 if ok else 503, "ok\n" if ok else
                                 f"stalled: no progress for {time.monotonic() - target.last_beat:.0f}s\n")
                elif path == "/readyz":
                    if not target.ready.is_set():
                        self._answer(503, "rebuilding subscriptions\n")
                    elif target.unreachable:
                        self._answer(503, "the Kafka cluster is unreachable: waiting for it\n")
                    elif target.refused is not None:
                        self._answer(503, f"refused by the Kafka cluster's authorizer: {target.refused}; waiting for "
                                     "the access\n")
                    elif target.registry_unreachable:
                        self._answer(503, "the Schema Registry is unreachable: waiting for it\n")
                    elif target.recovering:
                        self._answer(503, "recovering: a new producer and the inputs at their committed offsets\n")
                    elif (waiting := target.commit_waiting()) is not None:
                        self._answer(503, f"a commit has waited {waiting:.0f}s for the Kafka cluster\n")
                    else:
                        self._answer(200, "ready\n")
                else:
                    self._answer(404, "not found: try /metrics, /healthz or /readyz\n")

            def _answer(self, code: int, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = _BoundedServer((host, port), Handler, seconds, limit)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    def start(self) -> "MetricsServer":
        self._thread.start()
        log.info("metrics on http://%s:%d/metrics (liveness /healthz, readiness /readyz)", *self._server.server_address[:2])
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
