"""The pattern service end to end through the broker: de-duplicated notification ids equal the oracle's (run per
events partition over the events read back), with the bound events' contents and the aggregates; events placed by
their symbol give the same matches as the oracle over the whole stream; a kill -9 and restart loses nothing and adds
nothing; a restore discards the changelog changes of an aborted transaction; replacing and deleting a pattern while
the service runs drops its instances; partitions move between two instances; bad pattern subscriptions are
dead-lettered with their reasons and refused by `pubsub subscribe` with their column.

Subscriptions are written before the service starts (it loads them before it joins the group), so the oracle sees
them at the same point of the stream as the service.  Record timestamps are set by the test: event time is theirs.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from tests.support.kafka_helpers import RunningService, committed_events, dead_letters, read_all, service_config, started_services, wait_processed
from tests.support.oracles.patterns import OraclePatterns

from fastpubsub.cli import main
from fastpubsub.kafka.broker import child_preexec
from fastpubsub.patterns import parse
from fastpubsub.services.patterns.service import PatternService, PatternServiceConfig, pattern_notification_id
from fastpubsub.state import source_headers
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.dedup import deduplicate
from fastpubsub.wire.placement import partition_for

SYMBOLS = ["IBM", "MSFT", "AAPL", "ORCL", "SAP"]
BASE_TS = 1_700_000_000_000
PARTITIONS = 4  # of pubsub.events (the bootstrap fixture)

TEMPLATES = [
    'seq a: name = "{s1}" and price > {c1} next b: name = "{s2}" where b.price < {c2} within {w}s',  # S2
    "seq a: price > {c1} next b: name = a.name where b.price > {f} * a.price within {w}s",  # S3
    ("seq a: volume > {v} fold r: name = a.name while r.price >= r.last.price "
     "agg n = count(), lo = min(price) until dur >= {d}s within {w}s"),  # S4
    ('seq a: name = "{s1}" fold r: name = "{s1}" agg avg = avg(price) until dur >= {d}s '
     'next b: name = "{s1}" where b.price > r.avg within {w}s'),  # S5
]
#: templates whose every step stays within one symbol: exact over partitions placed by symbol
PER_SYMBOL = (1, 2, 3)


@pytest.fixture
def patterns_bootstrap(bootstrap):
    """The session broker with fresh topics and no pattern changelog (``fresh_topics`` deletes every topic)."""
    return bootstrap


def subscriptions(seed: int, n: int) -> list[tuple[int, str, int]]:
    """(id, pattern text, template) of S2-S5 patterns with random constants."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = i % len(TEMPLATES)
        text = TEMPLATES[t].format(s1=rng.choice(SYMBOLS), s2=rng.choice(SYMBOLS), c1=rng.randint(90, 110),
                                   c2=rng.randint(95, 105), f=rng.choice(["1.005", "1.01", "1.02"]),
                                   v=rng.choice([0, 500, 900]), d=rng.randint(2, 8), w=rng.randint(10, 40))
        out.append((100 + i, text, t))
    return out


def events(seed: int, n: int, ties: bool = True) -> list[tuple[int, dict]]:
    """(timestamp, attributes): random-walk prices, timestamps increasing (with ties, or strictly without
    ``ties``), a sequence number ``n``."""
    rng = random.Random(seed)
    price = {s: 100.0 for s in SYMBOLS}
    ts, out = BASE_TS, []
    for i in range(n):
        ts += rng.choice([0 if ties else 100, 200, 500, 1000, 1500])
        s = rng.choice(SYMBOLS)
        price[s] = round(max(1.0, price[s] * (1 + rng.choice([-0.01, -0.005, 0, 0.005, 0.01, 0.02]))), 3)
        out.append((ts, {"name": s, "price": price[s], "volume": rng.choice([100, 600, 1000]), "n": i}))
    return out


def send_subscriptions(bootstrap: str, subs: list[tuple[int, str, int]], since: int = BASE_TS) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i, (sid, text, _) in enumerate(subs):
        fmt = "avro" if i % 2 else "json"  # both forms
        p.produce(topics.SUBSCRIPTIONS, codecs.encode_pattern_subscription(
            codecs.PatternSubscription(f"user{sid % 3}", parse(text)), fmt), str(sid).encode(), timestamp=since)
    assert p.flush(30) == 0


def send_events(bootstrap: str, evs: list[tuple[int, dict]], pause: float = 0.0, chunk: int = 100) -> None:
    """Placed by symbol (wire.placement), JSON and Avro alternately."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (ts, attrs) in enumerate(evs):
        p.produce(topics.EVENTS, codecs.encode_event(attrs, "avro" if i % 2 else "json"),
                  partition=partition_for(attrs["name"], PARTITIONS), timestamp=ts)
        if pause and i % chunk == chunk - 1:
            p.flush(30)
            time.sleep(pause)
    assert p.flush(30) == 0


def stored_events(bootstrap: str) -> dict[int, list[tuple[int, int, dict]]]:
    """Partition -> [(offset, timestamp, attributes)] in offset order, as the broker holds them."""
    out: dict[int, list] = {}
    for m in read_all(bootstrap, topics.EVENTS):
        out.setdefault(m.partition(), []).append((m.offset(), m.timestamp()[1], codecs.decode_event(m.value())))
    return {p: sorted(v, key=lambda e: e[0]) for p, v in out.items()}


def oracle(subs: list[tuple[int, str, int]], stored: dict[int, list], since: int = BASE_TS) -> dict[str, Any]:
    """notification id -> witness, the oracle run per events partition."""
    out = {}
    for p, evs in stored.items():
        o = OraclePatterns()
        for sid, text, _ in subs:
            o.subscribe(sid, parse(text), since)
        for w in o.process(evs):
            out[pattern_notification_id(w.sid, p, w.bound)] = w
    return out


def received(bootstrap: str) -> tuple[list[dict], dict[str, dict]]:
    raw = [json.loads(m.value()) for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    notes = deduplicate(raw)
    return raw, {n["notification_id"]: n for n in notes}


def RunningPatterns(bootstrap: str, group_id: str, **kw) -> RunningService:
    return RunningService(PatternService(service_config(PatternServiceConfig, bootstrap, group_id=group_id,
                                                        batch_size=50, progress_interval=60, **kw)))


@pytest.fixture
def running(patterns_bootstrap, group_id):
    yield from started_services(lambda **kw: RunningPatterns(patterns_bootstrap, group_id, **kw))


def test_notifications_equal_the_oracle_with_the_bound_events_and_aggregates(running, patterns_bootstrap, group_id):
    """Per events partition, and over the whole stream for the patterns that stay within one symbol."""
    subs = subscriptions(1, 24)
    evs = events(2, 600)
    # a subscription whose record is younger than most events: it starts only at events not older than it
    late = (999, "seq a: price > 0 next b: name = a.name where b.price > a.price within 20s", 1)
    late_since = evs[len(evs) // 2][0]
    send_subscriptions(patterns_bootstrap, subs)
    send_subscriptions(patterns_bootstrap, [late], since=late_since)
    service = running()
    send_events(patterns_bootstrap, evs)
    wait_processed(patterns_bootstrap, group_id, timeout=120)
    stats = service.stop()
    stored = stored_events(patterns_bootstrap)
    expected = oracle(subs, stored)
    expected.update(oracle([late], stored, since=late_since))
    raw, got = received(patterns_bootstrap)
    assert len(expected) > 100, "the workload completes too few patterns to say much"
    assert sorted(got) == sorted(expected)
    assert stats["task"]["subscriptions"] == len(subs) + 1 and stats["task"]["events"] == len(evs)
    assert not any(w.start_ts < late_since for nid, w in expected.items() if nid.startswith("999/"))
    by_offset = {(p, off): (ts, attrs) for p, es in stored.items() for off, ts, attrs in es}
    names = {sid: [parse(text).bind] + [s.bind for s in parse(text).steps] for sid, text, _ in subs + [late]}
    for nid, n in got.items():
        w = expected[nid]
        assert n["subscription_id"] == w.sid and n["subscriber"] == f"user{w.sid % 3}" and n["kind"] == "pattern"
        assert (n["start_ts"], n["end_ts"]) == (w.start_ts, w.end_ts)
        assert n["aggregates"] == dict(w.aggregates)
        assert [b["bind"] for b in n["events"]] == names[w.sid]
        for b, (offset, iterations) in zip(n["events"], w.bound):
            assert (b["offset"], b["iterations"]) == (offset, iterations)
            assert (b["ts"], b["event"]) == by_offset[n["partition"], offset]  # the bound event itself
    # the keyed-producer route: events placed by `name`, so patterns that stay within one symbol find over the
    # partitions what the oracle finds over the whole stream (events named by their sequence number ``n``)
    whole = OraclePatterns()
    for sid, text, t in subs + [late]:
        if t in PER_SYMBOL:
            whole.subscribe(sid, parse(text), late_since if sid == late[0] else BASE_TS)
    expected_whole = {(w.sid, w.bound) for w in whole.process([(attrs["n"], ts, attrs) for ts, attrs in evs])}
    found = {(n["subscription_id"], tuple((b["event"]["n"], b["iterations"]) for b in n["events"]))
             for n in got.values() if n["subscription_id"] in whole.subscriptions}
    assert len(expected_whole) > 50 and found == expected_whole


class PatternsProcess:
    def __init__(self, bootstrap: str, group_id: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fastpubsub", "patterns", "-b", bootstrap, "--group-id", group_id,
             "--batch-size", "40", "--progress-interval", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=child_preexec)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def test_kill_9_and_restart_none_missing_none_unexpected(patterns_bootstrap, group_id):
    subs = subscriptions(5, 24)
    evs = events(6, 1600)
    send_subscriptions(patterns_bootstrap, subs)
    first = PatternsProcess(patterns_bootstrap, group_id)
    # a backlog written in chunks, so that the service is busy (likely inside a transaction) when killed
    writer = threading.Thread(target=send_events, args=(patterns_bootstrap, evs, 0.03))
    try:
        writer.start()
        deadline = time.monotonic() + 90
        while committed_events(patterns_bootstrap, group_id) < 400:
            assert time.monotonic() < deadline and first.proc.poll() is None, "no progress before the kill"
            time.sleep(0.05)
        time.sleep(0.1)  # likely inside a transaction
    finally:
        first.kill()
        writer.join(60)
    done_at_kill = committed_events(patterns_bootstrap, group_id)
    assert done_at_kill < len(evs), "the kill came after the end: nothing to recover"
    second = PatternsProcess(patterns_bootstrap, group_id)
    try:
        wait_processed(patterns_bootstrap, group_id, timeout=180)
    finally:
        second.proc.terminate()
        out, err = second.proc.communicate(timeout=60)
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["task"]["restores"] == PARTITIONS and stats["task"]["restored_instances"] > 0, err[-3000:]
    expected = oracle(subs, stored_events(patterns_bootstrap))
    raw, got = received(patterns_bootstrap)
    print(f"\nkill -9 at {done_at_kill} of {len(evs)} events: {len(raw)} notifications read, "
          f"{len(raw) - len(got)} duplicates dropped, {stats['task']['discarded_changes']} changelog changes discarded, "
          f"{stats['task']['restored_instances']} instances restored")
    assert sorted(set(expected) - set(got)) == [], "missing"
    assert sorted(set(got) - set(expected)) == [], "unexpected"


def test_partitions_move_between_two_instances(running, patterns_bootstrap, group_id):
    subs = subscriptions(7, 16)
    evs = events(8, 600)
    send_subscriptions(patterns_bootstrap, subs)
    a = running()
    send_events(patterns_bootstrap, evs[:200])
    b = running()  # a rebalance: partitions move to b with their state
    send_events(patterns_bootstrap, evs[200:400])
    deadline = time.monotonic() + 60
    while not b.service.task.parts:
        assert time.monotonic() < deadline, "the second instance got no partition"
        time.sleep(0.1)
    a.stop()  # and back: b owns them all
    send_events(patterns_bootstrap, evs[400:])
    wait_processed(patterns_bootstrap, group_id, timeout=120)
    stats_b = b.stop()
    assert stats_b["task"]["restores"] > PARTITIONS // 2 and stats_b["task"]["restored_instances"] > 0  # the state moved with them
    expected = oracle(subs, stored_events(patterns_bootstrap))
    _, got = received(patterns_bootstrap)
    assert sorted(got) == sorted(expected)


BAD = [
    ("seq a: price > 1 next b: name = a.name", "column 39: a pattern needs 'within"),
    ("seq a: price > 1 next b: name = c.name within 1h", "column 33: unknown binding 'c'"),
    ('seq a: price > 1 next b: price > a.price * "x" within 1h', "column 42: type error"),
]


def test_bad_pattern_subscriptions_are_dead_lettered_with_their_reasons(running, patterns_bootstrap, group_id):
    bad_json = b'{"subscriber": "eve", "pattern": {"start": {"bind": "a", "predicates": [["price", ">", 1]]}, "steps": []}}'
    avro = codecs.encode_pattern_subscription(codecs.PatternSubscription("eve", parse("seq a: price > 1 within 1s")))
    records = [(b"1", json.dumps({"subscriber": "eve", "pattern": text}).encode()) for text, _ in BAD]
    records += [(b"2", bad_json), (b"3", avro[:-3]), (b"not-an-id", avro), (b"4", avro)]
    p = Producer({"bootstrap.servers": patterns_bootstrap})
    for k, v in records:
        p.produce(topics.SUBSCRIPTIONS, v, k, partition=0)
    assert p.flush(30) == 0
    service = running()
    deadline = time.monotonic() + 30
    while service.service.dead_letters.total < 6:
        assert time.monotonic() < deadline, service.service.dead_letters.counts
        time.sleep(0.1)
    assert set(service.service.task.subs) == {4}
    service.stop()
    reasons = sorted((dl.offset, dl.reason) for dl in dead_letters(patterns_bootstrap))
    assert [o for o, _ in reasons] == list(range(6))
    for (_, reason), (_, expected) in zip(reasons, BAD):
        assert reason.startswith("invalid pattern: ") and expected in reason
    assert "within" in reasons[3][1] and "invalid Avro" in reasons[4][1] and "not a decimal" in reasons[5][1]


def test_pubsub_subscribe_compiles_patterns_and_refuses_bad_ones_with_the_column(patterns_bootstrap):
    runner = CliRunner()
    for text, expected in BAD:
        result = runner.invoke(main, ["subscribe", "-b", patterns_bootstrap, "--subscriber", "eve", text])
        assert result.exit_code == 2 and expected in result.output, result.output
    ok = runner.invoke(main, ["subscribe", "-b", patterns_bootstrap, "--id", "7", "--subscriber", "eve",
                              "--format", "json", TEMPLATES[1].format(c1=1, f="1.01", w=60)])
    assert ok.exit_code == 0, ok.output
    (msg,) = read_all(patterns_bootstrap, topics.SUBSCRIPTIONS)
    sub = codecs.decode_any_subscription(msg.value())
    assert isinstance(sub, codecs.PatternSubscription) and sub.pattern == parse(TEMPLATES[1].format(c1=1, f="1.01", w=60))


def test_an_aborted_changelog_transaction_changes_nothing_and_replacing_or_deleting_a_pattern_drops_its_instances(
        running, patterns_bootstrap, group_id):
    """Between two runs, a changelog transaction that deletes every instance and bound event, tagged at the committed
    offsets, then aborts: the read_committed restore never sees it, so it changes nothing (no change is even read
    to be discarded); then, while the second run goes on, a pattern is deleted and another replaced: their instances
    are dropped, the replacement starts at its record's time."""
    subs = subscriptions(9, 16)
    evs = events(10, 600)
    send_subscriptions(patterns_bootstrap, subs)
    a = running()
    send_events(patterns_bootstrap, evs[:300])
    wait_processed(patterns_bootstrap, group_id, timeout=120)
    a.stop()
    done = {p: max(e[-1][0] + 1, 0) for p, e in stored_events(patterns_bootstrap).items()}
    live: dict[tuple[int, bytes], bool] = {}
    for m in read_all(patterns_bootstrap, topics.PATTERN_CHANGELOG):
        live[m.partition(), m.key()] = m.value() is not None
    doomed = [(p, k) for (p, k), alive in live.items() if alive and k != b"meta"]
    assert doomed
    p = Producer({"bootstrap.servers": patterns_bootstrap, "transactional.id": f"{group_id}-aborted"})
    p.init_transactions(15)
    p.begin_transaction()
    for part, key in doomed:
        p.produce(topics.PATTERN_CHANGELOG, None, key, partition=part, headers=source_headers(part, done[part]))
    p.flush(30)
    p.abort_transaction(15)
    b = running()
    service = b.service.task
    deadline = time.monotonic() + 60
    while service.restores < len(done):
        assert time.monotonic() < deadline, "the partitions were not restored"
        time.sleep(0.05)
    (gone, _, _), (replaced, _, t) = subs[1], subs[2]
    new_text = TEMPLATES[t].format(s1="IBM", s2="IBM", c1=95, c2=100, f="1.005", v=0, d=3, w=30)
    since = evs[299][0] + 1
    p = Producer({"bootstrap.servers": patterns_bootstrap})
    p.produce(topics.SUBSCRIPTIONS, None, str(gone).encode())
    p.produce(topics.SUBSCRIPTIONS, codecs.encode_pattern_subscription(
        codecs.PatternSubscription("user0", parse(new_text))), str(replaced).encode(), timestamp=since)
    assert p.flush(30) == 0
    while gone in service.subs or service.subs[replaced][1] != parse(new_text):
        assert time.monotonic() < deadline, "the changes did not arrive"
        time.sleep(0.05)
    send_events(patterns_bootstrap, evs[300:])
    wait_processed(patterns_bootstrap, group_id, timeout=120)
    stats = b.stop()
    assert stats["task"]["restored_instances"] > 0 and stats["task"]["discarded_changes"] == 0
    assert stats["task"]["instances"]["dropped"] > 0
    expected = {}
    for part, stored in stored_events(patterns_bootstrap).items():
        o = OraclePatterns()
        for sid, text, _ in subs:
            o.subscribe(sid, parse(text), BASE_TS)
        witnesses = o.process([e for e in stored if e[2]["n"] < 300])
        o.unsubscribe(gone)
        o.subscribe(replaced, parse(new_text), since)  # replaced: its old instances are dropped
        witnesses += o.process([e for e in stored if e[2]["n"] >= 300])
        expected.update({pattern_notification_id(w.sid, part, w.bound): w for w in witnesses})
    _, got = received(patterns_bootstrap)
    assert sorted(got) == sorted(expected)


def test_pubsub_publish_places_events_by_an_attribute(patterns_bootstrap):
    lines = "".join(json.dumps({"name": name, "price": 1}) + "\n" for name in ("IBM", "MSFT", "IBM", "SAP"))
    result = CliRunner().invoke(main, ["publish", "-b", patterns_bootstrap, "--partition-by", "name", "-"], input=lines)
    assert result.exit_code == 0, result.output
    placed = {(codecs.decode_event(m.value())["name"], m.partition()) for m in read_all(patterns_bootstrap, topics.EVENTS)}
    assert placed == {(name, partition_for(name, PARTITIONS)) for name in ("IBM", "MSFT", "SAP")}
