"""/metrics, /healthz and /readyz of a real processor, scraped over HTTP."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request

import pytest
from kafka_helpers import send, wait_processed

from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription
from fastpubsub.runtime.metrics import MetricsServer, render

pytestmark = pytest.mark.broker

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    """Prometheus text format -> {(name, labels): value}; every line must be a comment or a sample."""
    out, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        if line.startswith("# HELP "):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.groups()
        assert name in types or name.rsplit("_", 1)[0] in types, f"{name} has no TYPE line"
        out[name, frozenset(_LABEL.findall(labels or ""))] = float(value)
    return out


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_counters_move_and_liveness_follows_the_loop(bootstrap, group_id, start_processor):
    send(bootstrap, topics.SUBSCRIPTIONS, [
        ("1", codecs.encode_subscription(Subscription("alice", [("price", "<", 10)]))),
        ("2", codecs.encode_subscription(Subscription("bob", [("price", ">=", 5)]))),
        ("3", b'{"subscriber": "eve", "predicates": [["price", "~", 1]]}'),  # bad: unknown operator
    ])
    p = start_processor()
    server = MetricsServer(p.processor.metrics, 0).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        status, text = get(f"{base}/metrics")
        before = parse(text)
        assert status == 200 and before["pubsub_events_total", frozenset()] == 0
        assert before["pubsub_subscriptions", frozenset()] == 2
        assert before["pubsub_dead_letters_total", frozenset({("topic", topics.SUBSCRIPTIONS), ("reason", "predicates")})] == 1
        assert get(f"{base}/healthz")[0] == 200 and get(f"{base}/readyz")[0] == 200

        send(bootstrap, topics.EVENTS, [(f"e{i}", codecs.encode_event({"price": i})) for i in range(20)]
             + [(b"e-bad", b"\x07garbage")])
        wait_processed(bootstrap, group_id)
        p.wait_for(lambda: parse(get(f"{base}/metrics")[1])["pubsub_batch_seconds_count", frozenset()] > 0,
                   what="a batch observed")
        after = parse(get(f"{base}/metrics")[1])
        assert after["pubsub_events_total", frozenset()] == 20
        assert after["pubsub_notifications_total", frozenset()] == 10 + 15  # price < 10, price >= 5
        assert after["pubsub_dead_letters_total", frozenset({("topic", topics.EVENTS), ("reason", "not_json_or_avro")})] == 1
        inf = after["pubsub_batch_seconds_bucket", frozenset({("le", "+Inf")})]
        assert inf == after["pubsub_batch_seconds_count", frozenset()] >= 1
        assert after["pubsub_consumer_lag", frozenset()] >= 0 and after["pubsub_producer_queue_bound", frozenset()] > 0
        assert after["pubsub_info", frozenset({("algorithm", "dynamic"), ("delivery", "transactional"),
                                                ("group_id", group_id), ("shard", "0/1")})] == 1
        assert after["pubsub_engine_clusters", frozenset()] >= 1  # the matcher's configuration
        assert "pubsub_engine_hash_tables_multi_attribute" in {name for name, _ in after}

        p.processor.metrics.stall_seconds = 1.0  # liveness: a loop that stops turning is reported dead
        time.sleep(1.2)
        assert get(f"{base}/healthz")[0] == 200  # idle, but turning (it beats every 0.2 s)
        stats = p.stop()
        time.sleep(1.2)
        status, body = get(f"{base}/healthz")
        assert status == 503 and body.startswith("stalled")
        assert get(f"{base}/nothing")[0] == 404
    finally:
        server.stop()
    assert stats["events"] == 20


def test_render_before_the_loop_starts():
    from fastpubsub.services.events.processor import Processor, ProcessorConfig

    metrics = parse(render(Processor(ProcessorConfig("127.0.0.1:1")).metrics))
    assert metrics["pubsub_ready", frozenset()] == 0 and metrics["pubsub_subscriptions", frozenset()] == 0
