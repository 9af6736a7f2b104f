"""``/metrics`` (Prometheus text format), ``/healthz`` (liveness) and ``/readyz`` of a running processor.

The stages publish their numbers into one :class:`Metrics` and this module
only reads that: plain counters the stages increment
(``processor.counters.PipelineCounters``, the dead-letter counts by reason),
and gauges the loop sets once per iteration (subscriptions, the producer's
queue).  Values that need the Kafka clients or the matcher (consumer lag, the
engine's configuration) are sampled by the loop itself, at most once a second
and once every ``ENGINE_EVERY`` seconds, through
:meth:`Metrics.after_iteration`: the HTTP thread never touches a client or the
matcher while the loop mutates it.

Liveness means "the loop turns": ``/healthz`` answers 200 while the loop has
finished an iteration (or a rebuild step) within ``stall_seconds``, 503 after.
The loop turns even while the broker is unreachable (consume returns empty),
so a broker outage is not a liveness failure; a loop stuck in one call (a
wedged commit, a matcher that never returns) is.  ``/readyz`` is 200 once the
subscriptions are rebuilt and events are being matched.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping

from confluent_kafka import Consumer, KafkaException

from .counters import PipelineCounters

log = logging.getLogger(__name__)

#: Histogram buckets (seconds) of a batch (decode + match + produce) and of a commit.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LAG_EVERY = 1.0
ENGINE_EVERY = 10.0
DEFAULT_STALL_SECONDS = 90.0  # above the 60 s a transaction commit may take before it fails


class Histogram:
    """Cumulative-bucket histogram as Prometheus expects (``_bucket{le=...}``, ``_sum``, ``_count``)."""

    def __init__(self, buckets: tuple[float, ...] = BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str) -> list[str]:
        out, running = [], 0
        for bound, n in zip((*self.buckets, float("inf")), self.counts):
            running += n
            out.append(f'{name}_bucket{{le="{_number(bound)}"}} {running}')
        out += [f"{name}_sum {_number(self.sum)}", f"{name}_count {self.count}"]
        return out


def consumer_lag(consumer: Consumer, timeout: float = 2.0) -> int:
    """Records between the group's committed offsets and the high watermarks of the assigned partitions.

    Committed, not fetched: a batch that is consumed but not delivered (and
    replayed) is still lag.  A partition with nothing committed counts from
    the log start.  Uses the watermarks cached from fetch responses: no
    request of its own on the loop's thread.
    """
    lag = 0
    assignment = consumer.assignment()
    if assignment:
        try:
            committed = consumer.committed(assignment, timeout=timeout)
        except KafkaException as exc:  # no answer now: the next sample tries again
            log.debug("lag: committed offsets unavailable (%s)", exc)
            return -1
        for tp in committed:
            low, high = consumer.get_watermark_offsets(tp, cached=True)
            start = tp.offset if tp.offset >= 0 else max(low, 0)
            if start >= 0 and high >= 0:
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
        self.dead_letters: Mapping[tuple[str, str], int] = {}  # (source topic, reason class) -> count, kept by the dead-letter path
        # gauges the loop sets (Metrics.publish)
        self.subscriptions = 0
        self.changes: dict[str, int] = dict.fromkeys(CHANGE_KINDS, 0)
        self.producer_queue: tuple[int, int, int] | None = None  # (queued, bound, full waits); None before delivery starts
        self.info: dict[str, str] = {"algorithm": "", "delivery": "", "group_id": "", "shard": "0/1"}
        self.batch_seconds = Histogram()
        self.commit_seconds = Histogram()
        self.lag = 0
        self.partitions = 0
        self.engine: dict[str, Any] = {}
        self.last_beat = time.monotonic()
        self.started = time.monotonic()
        self._lag_at = self._engine_at = float("-inf")

    def beat(self) -> None:
        """The loop made progress: a batch delivered, a rebuild step, or a turn with nothing to do."""
        self.last_beat = time.monotonic()

    def publish(self, subscriptions: int, changes: dict[str, int], producer_queue: tuple[int, int, int] | None,
                **info: str) -> None:
        """Gauges the loop sets (cheap: called every iteration, and once before readiness)."""
        self.subscriptions, self.changes, self.producer_queue = subscriptions, changes, producer_queue
        self.info.update(info)

    def after_iteration(self, events: Consumer, matcher: Any) -> None:
        """Called by the loop after each iteration: sample lag and ``matcher.stats()`` when due (it beats on progress)."""
        now = time.monotonic()
        if now - self._lag_at >= LAG_EVERY:
            self._lag_at = now
            lag = consumer_lag(events)
            if lag >= 0:
                self.lag = lag
            self.partitions = len(events.assignment())
        if matcher is not None and now - self._engine_at >= ENGINE_EVERY:
            self._engine_at = now
            self.engine = matcher.stats()

    def alive(self) -> bool:
        return time.monotonic() - self.last_beat < self.stall_seconds


# --- the exposition ---------------------------------------------------------------


def _number(v: float) -> str:
    if v == float("inf"):
        return "+Inf"
    return repr(float(v)) if isinstance(v, float) else str(v)


def _label(v: Any) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _metric(out: list[str], name: str, kind: str, help_: str, samples: list[tuple[dict[str, Any], float]]) -> None:
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} {kind}")
    for labels, value in samples:
        text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
        out.append(f"{name}{{{text}}} {_number(value)}" if text else f"{name} {_number(value)}")


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


def render(metrics: Metrics) -> str:
    """The Prometheus text exposition (format 0.0.4) of what was published to ``metrics``."""
    m, c = metrics, metrics.counters
    out: list[str] = []
    _metric(out, "pubsub_events_total", "counter", "Events decoded and matched.", [({}, c.events)])
    _metric(out, "pubsub_notifications_total", "counter", "Notifications produced.", [({}, c.notifications)])
    _metric(out, "pubsub_batches_total", "counter", "Event batches processed and committed.", [({}, c.batches)])
    _metric(out, "pubsub_commits_total", "counter", "Commits (transactions, or at-least-once offset commits) of one "
            "or more batches.", [({}, c.commits)])
    _metric(out, "pubsub_dead_letters_total", "counter", "Bad input records sent to pubsub.dead-letter, by source and reason class.",
            [({"topic": t, "reason": r}, n) for (t, r), n in sorted(dict(m.dead_letters).items())])
    _metric(out, "pubsub_consumer_lag", "gauge", "Events between the group's committed offsets and the high watermarks.", [({}, m.lag)])
    _metric(out, "pubsub_assigned_partitions", "gauge", "Event partitions assigned to this instance.", [({}, m.partitions)])
    out += ["# HELP pubsub_batch_seconds Time to decode, match and produce one event batch.",
            "# TYPE pubsub_batch_seconds histogram", *m.batch_seconds.lines("pubsub_batch_seconds")]
    out += ["# HELP pubsub_commit_seconds Time of one commit: outputs acknowledged, offsets committed with them.",
            "# TYPE pubsub_commit_seconds histogram", *m.commit_seconds.lines("pubsub_commit_seconds")]
    _metric(out, "pubsub_busy_seconds_total", "counter", "Time spent on event batches.", [({}, c.busy_seconds)])
    _metric(out, "pubsub_subscriptions", "gauge", "Subscriptions in the matcher.", [({}, m.subscriptions)])
    _metric(out, "pubsub_subscription_changes_total", "counter", "Subscription changes applied, by kind.",
            [({"change": k}, m.changes.get(k, 0)) for k in CHANGE_KINDS])
    if m.producer_queue is not None:
        queued, bound, full_waits = m.producer_queue
        _metric(out, "pubsub_producer_queue_messages", "gauge", "Outputs waiting for the broker's acknowledgement.",
                [({}, queued)])
        _metric(out, "pubsub_producer_queue_bound", "gauge", "Bound of that queue (queue.buffering.max.messages).",
                [({}, bound)])
        _metric(out, "pubsub_producer_queue_full_total", "counter", "Times a produce found the queue full and waited.",
                [({}, full_waits)])
    _metric(out, "pubsub_info", "gauge", "Configuration of this instance.", [(dict(m.info), 1)])
    _metric(out, "pubsub_ready", "gauge", "1 once the subscriptions are rebuilt and events are matched.",
            [({}, int(m.ready.is_set()))])
    _metric(out, "pubsub_seconds_since_progress", "gauge", "Seconds since the loop last made progress.",
            [({}, round(time.monotonic() - m.last_beat, 3))])
    for name, value in _engine_numbers({k: v for k, v in m.engine.items() if k not in ("subscriptions", "algorithm")}):
        _metric(out, f"pubsub_engine_{name}", "gauge", f"matcher.stats()['{name}'] (sampled every {ENGINE_EVERY:.0f}s).",
                [({}, value)])
    histogram = m.engine.get("cluster_size_histogram")
    if histogram:
        _metric(out, "pubsub_engine_clusters_by_size", "gauge", "Clusters per size class (matcher.stats()).",
                [({"size": k}, v) for k, v in histogram.items()])
    return "\n".join(out) + "\n"


# --- the server ---------------------------------------------------------------------


class MetricsServer:
    """A daemon thread serving ``/metrics``, ``/healthz`` and ``/readyz`` of ``metrics`` on host:port."""

    def __init__(self, metrics: Metrics, port: int, host: str = "127.0.0.1") -> None:
        target = metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, render(target), "text/plain; version=0.0.4; charset=utf-8")
                elif path == "/healthz":
                    ok = target.alive()
                    self._answer(200 if ok else 503, "ok\n" if ok else
                                 f"stalled: no progress for {time.monotonic() - target.last_beat:.0f}s\n")
                elif path == "/readyz":
                    ok = target.ready.is_set()
                    self._answer(200 if ok else 503, "ready\n" if ok else "rebuilding subscriptions\n")
                else:
                    self._answer(404, "not found: try /metrics, /healthz or /readyz\n")

            def _answer(self, code: int, body: str, ctype: str = "text/plain; charset=utf-8") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # scrapes are not worth a log line each
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
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
