"""The Kafka Streams peer (benchmarks/peers/kafka-streams) notifies exactly what the oracle says, in both versions.

Its figures beside the processor's (benchmarks/peers/streams.py) mean something only if it does the same job: W0
subscriptions and hand-written ones over numbers, strings (code point order) and booleans, a subscription deleted
and one replaced before it starts, an invalid value that removes one, and a delete, a replacement and an addition
while it runs; read back read_committed, compared as sets of (subscription id, event).
"""

from __future__ import annotations

import random
import re
import shutil
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from tests.support.kafka_helpers import notifications, send, wait_processed

from benchmarks.peers import streams
from fastpubsub.cli.demo import _stop_processor
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.workloads import PRESETS, generate_events, generate_subscriptions
from fastpubsub.kafka import admin
from fastpubsub.language import parse
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

pytestmark = [pytest.mark.slow, pytest.mark.broker]

CITIES = ["rex", "odeon", "abc", "Zürich", "\uff21", "\U0001d11e"]  # U+FF21 < U+1D11E by code point, not in UTF-16
HAND = {  # id: (subscriber, expression)
    10_000: ("alice", "a0 = 7"),
    10_001: ("bob", "a1 <= 3 and a2 >= 30"),
    10_002: ("carol", "a3 != 1 and a4 < 5"),
    10_003: ("dave", 'city = "rex" and a5 > 30'),
    10_004: ("erin", 'city >= "m"'),
    10_005: ("frank", 'city > "\uff21"'),
    10_006: ("gina", "a6 = 7.0 and a7 > 34.5"),
    10_007: ("hal", 'a8 = "7"'),  # a string never equals a number
    10_008: ("ivy", "ok = true and a0 < 10"),
    10_009: ("jack", "price < 2.0 and ok != false"),
    10_010: ("kim", "a0 >= 1"),  # deleted before the peer starts
    10_011: ("lou", "a0 = 1"),  # replaced before the peer starts
    10_012: ("mia", "a0 <= 35"),  # then an invalid value: removed
}
LIVE = {10_000: None, 10_001: ("bob", "a1 >= 34"), 10_013: ("ned", 'a9 = 9 and city = "odeon"')}
PROBE = {"a0": 7, "a1": 35, "a2": 1, "a9": 9, "city": "odeon"}  # erin always; alice before LIVE, bob and ned after


def _events(n: int, first: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i, event in enumerate(generate_events(PRESETS["W0"], n, seed).to_dicts(), first):
        event.update(n=i, city=rng.choice(CITIES), ok=rng.random() < 0.5, price=rng.choice([0.5, 1.5, 2.0, 3.5]))
        out.append(event)
    return out


def _value(subscriber: str, text: str) -> bytes:
    return codecs.encode_subscription(Subscription(subscriber, parse(text)), "avro")


def _send_events(bootstrap: str, events: list[dict]) -> None:
    """Every tenth without a key (its id is then topic:partition:offset)."""
    send(bootstrap, topics.EVENTS, [(None if e["n"] % 10 == 0 else f"e{e['n']}", codecs.encode_event(e, "avro"))
                                    for e in events])


def _expected(subs: dict[int, list], events: list[dict]) -> set[tuple[int, int]]:
    oracle = OracleMatcher()
    for sid, predicates in subs.items():
        oracle.add(sid, predicates)
    return {(sid, e["n"]) for e in events for sid in oracle.match(e).tolist()}


def _wait_for_probe(bootstrap: str, want: set[str], unwanted: set[str], timeout: float = 60.0) -> None:
    """Send probe events until one is notified to every subscriber of ``want`` and none of ``unwanted``: the live
    changes (on any partitions of the subscriptions topic) have all reached the peer."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe-reader", "enable.auto.commit": False,
                       "isolation.level": "read_committed"})
    reader.assign([TopicPartition(topics.NOTIFICATIONS, p, OFFSET_BEGINNING)
                   for p in range(admin.partitions_of(bootstrap, topics.NOTIFICATIONS))])
    seen: dict[str, set[str]] = {}
    deadline = time.monotonic() + timeout
    try:
        for k in range(10_000):
            assert time.monotonic() < deadline, f"the live changes did not take effect within {timeout:.0f}s: {seen}"
            send(bootstrap, topics.EVENTS, [(f"probe{k}", codecs.encode_event({"n": -1 - k, **PROBE}, "avro"))])
            until = time.monotonic() + 5
            while "erin" not in seen.get(f"probe{k}", ()) and time.monotonic() < until:
                for msg in reader.consume(1000, 0.2):
                    if msg.error() is None:
                        n = codecs.decode_notification(msg.value())
                        seen.setdefault(n["event_id"], set()).add(n["subscriber"])
            got = seen.get(f"probe{k}", set())
            if want <= got and not unwanted & got:
                return
    finally:
        reader.close()


@pytest.fixture(scope="module")
def jar():
    if shutil.which("mvn") is None:
        pytest.skip("Maven (mvn) is not on PATH: it builds the Kafka Streams peer")
    return streams.build()


@pytest.mark.parametrize("matcher", ["scan", "indexed"])
def test_peer_notifications_equal_the_oracle(jar, bootstrap, group_id, tmp_path, matcher):
    w0 = dict(generate_subscriptions(PRESETS["W0"], 200, seed=3).to_lists())
    hand = {sid: parse(text) for sid, (_, text) in HAND.items()}
    owner = {sid: "w0" for sid in w0} | {sid: c[0] for sid, c in [*HAND.items(), *LIVE.items()] if c}
    send(bootstrap, topics.SUBSCRIPTIONS,
         [(str(sid), codecs.encode_subscription(Subscription("w0", p), "avro")) for sid, p in w0.items()]
         + [(str(sid), _value(who, text)) for sid, (who, text) in HAND.items()]
         + [("10010", None), ("10011", _value("lou", "a0 = 2")), ("10012", b"\x00\x00\x00\x00\x01garbage")])
    before = w0 | {sid: p for sid, p in hand.items() if sid not in (10_010, 10_012)} | {10_011: parse("a0 = 2")}
    first, second = _events(1000, 0, seed=4), _events(1000, 1000, seed=5)
    _send_events(bootstrap, first)

    peer = streams.start_peer(bootstrap, group_id, matcher, tmp_path / "peer.log", tmp_path / "state")
    try:
        wait_processed(bootstrap, group_id, timeout=60)
        send(bootstrap, topics.SUBSCRIPTIONS,
             [(str(sid), None if change is None else _value(*change)) for sid, change in LIVE.items()])
        _wait_for_probe(bootstrap, want={"bob", "ned"}, unwanted={"alice"})
        _send_events(bootstrap, second)
        wait_processed(bootstrap, group_id, timeout=60)
        notes = notifications(bootstrap)
    finally:
        stats = _stop_processor(peer)
    assert peer.returncode == 0, (tmp_path / "peer.log").read_text()[-3000:]
    after = {sid: p for sid, p in before.items() if sid != 10_000} | {10_001: parse("a1 >= 34"),
                                                                       10_013: parse(LIVE[10_013][1])}

    notes = [n for n in notes if n["event"]["n"] >= 0]  # not the probes
    got = [(n["subscription_id"], n["event"]["n"]) for n in notes]
    expected = _expected(before, first) | _expected(after, second)
    assert len(expected) > 1000  # the hand-written subscriptions do match
    assert set(got) == expected
    assert len(got) == len(set(got))  # exactly once
    events = {e["n"]: e for e in first + second}
    for n in notes:
        i = n["event"]["n"]
        assert n["event"] == events[i]  # the event's attributes as its record carried them
        assert n["subscriber"] == owner[n["subscription_id"]]
        if i % 10:
            assert n["event_id"] == f"e{i}"
        else:
            assert re.fullmatch(r"pubsub\.events:\d:\d+", n["event_id"])
        assert n["notification_id"] == f"{n['event_id']}/{n['subscription_id']}"
    assert stats["matcher"] == matcher and stats["subscriptions"] == len(after)
    assert stats["bad_subscriptions"] == 1 and stats["bad_events"] == 0
