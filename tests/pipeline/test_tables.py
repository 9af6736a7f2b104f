"""The table service end to end through the broker: S-UN and S-CN exact against the brute-force oracle, a kill -9
and restart whose de-duplicated notifications equal the oracle's, bad subscriptions and rows dead-lettered with
their reasons, and `pubsub subscribe` refusing what the service would refuse.

Order matters for aggregates (an update's notification depends on every earlier update), so each test sends
its rows, then its subscriptions, then its updates, waiting for the service to commit each step: the oracle
then sees the same order as the service.  The table topic has one partition (a table's update order).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition
from tests.support.kafka_helpers import RunningService, dead_letters, end_offsets, read_all, send, started_services, wait_committed
from tests.support.oracles.aggregates import AggregateOracle

from fastpubsub.aggregates import parse_subscription
from fastpubsub.runtime import HostConfig
from fastpubsub.aggregates.client import Follower
from fastpubsub.aggregates.service import ReformulatedRecord
from fastpubsub.cli import main
from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.broker import child_preexec
from fastpubsub.services.events.subscriptions import SubscriptionState
from fastpubsub.services.tables.service import TableDeclaration, TableService, TableServiceConfig
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import AggregateSubscription, Subscription
from fastpubsub.wire.dedup import deduplicate

STOCK = "stock:pubsub.tables.stock:symbol:risk=number,per=number,sector=string"
ORDERS = "orders:pubsub.tables.orders:order_id:order_id=number,amount=number"
SHIPMENTS = "shipments:pubsub.tables.shipments:ship_id:ship_id=number,order_id=string,carrier=string"
STOCK_TOPIC = "pubsub.tables.stock"


@pytest.fixture
def tables_bootstrap(bootstrap):
    """The session broker with the table service's topics gone and fresh one-partition table topics."""
    client = ClientFactory(bootstrap).admin()
    stale = [t for t in client.list_topics(timeout=10).topics
             if t in topics.TABLE_SERVICE or t.startswith((topics.CHANGELOG_PREFIX, topics.TABLE_PREFIX))]
    if stale:
        for f in client.delete_topics(stale, operation_timeout=10).values():
            f.result(10)
        deadline = time.monotonic() + 10
        while set(stale) & set(client.list_topics(timeout=10).topics) and time.monotonic() < deadline:
            time.sleep(0.1)
    from confluent_kafka.admin import NewTopic
    for f in client.create_topics([NewTopic(f"pubsub.tables.{t}", 1, 1) for t in ("stock", "orders", "shipments")],
                                  operation_timeout=10).values():
        f.result(10)
    return bootstrap


def RunningTables(bootstrap: str, group_id: str, mode: str = "s-un", tables=(STOCK,), **settings) -> RunningService:
    host = HostConfig(bootstrap, group_id, batch_size=50, progress_interval=60, client_config=settings)
    return RunningService(TableService(TableServiceConfig(host, [TableDeclaration.parse(t) for t in tables], mode)))


@pytest.fixture
def running(tables_bootstrap, group_id):
    yield from started_services(lambda **kw: RunningTables(tables_bootstrap, group_id, **kw))


# --- a workload and what the oracle says of it ------------------------------------------------

SECTORS = ("tech", "energy", "retail")


def stock_row(rng: random.Random, symbol: str) -> dict:
    return {"symbol": symbol, "risk": rng.randint(0, 100), "per": rng.randint(1, 60), "sector": rng.choice(SECTORS)}


def workload(seed: int, n_rows: int, n_updates: int):
    """(initial rows, updates): each a list of (symbol, row or None)."""
    rng = random.Random(seed)
    symbols = [f"S{i}" for i in range(n_rows)]
    rows = [(s, stock_row(rng, s)) for s in symbols]
    live, updates, fresh = set(symbols), [], n_rows
    for _ in range(n_updates):
        r = rng.random()
        if r < 0.12 and live:
            s = rng.choice(sorted(live))
            live.discard(s)
            updates.append((s, None))
        elif r < 0.25:
            s = f"S{fresh}"
            fresh += 1
            live.add(s)
            updates.append((s, stock_row(rng, s)))
        else:
            s = rng.choice(sorted(live)) if live else "S0"
            live.add(s)
            updates.append((s, stock_row(rng, s)))
    return rows, updates


def subscriptions(seed: int, n: int, fns=("min", "max", "count", "sum", "avg", "distinct")) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        fn = fns[i % len(fns)]
        lo = rng.randint(0, 90)
        hi = rng.randint(lo, 100)
        value = {"count": "*", "distinct": "sector"}.get(fn, "per")
        where = ' and sector = "tech"' if i % 7 == 3 else ""
        out.append((1000 + i, f"{fn}({value}) over stock where risk between {lo} and {hi}{where}"))
    return out


def encode_subs(subs: list[tuple[int, str]]) -> list[tuple[bytes, bytes]]:
    """Text, JSON and Avro forms in turn: all three travel on pubsub.subscriptions."""
    out = []
    for i, (sid, text) in enumerate(subs):
        if i % 3 == 0:
            value = json.dumps({"subscriber": f"u{sid}", "aggregate": text}).encode()
        else:
            value = codecs.encode_aggregate_subscription(AggregateSubscription(f"u{sid}", parse_subscription(text)),
                                                         "json" if i % 3 == 1 else "avro")
        out.append((str(sid).encode(), value))
    return out


def row_records(rows) -> list[tuple[bytes, bytes | None]]:
    return [(s.encode(), None if r is None else codecs.encode_event(r, "json")) for s, r in rows]


def plain(v: Any) -> Any:
    if isinstance(v, (frozenset, set)):
        return sorted(v, key=repr)
    if isinstance(v, float) and v == int(v):
        return int(v)
    return v


def expected(rows, subs, updates, first_offset: int) -> dict[tuple[int, str], Any]:
    """(subscription, update id or 'init') -> the answer each notification must carry."""
    oracle = AggregateOracle()
    for s, r in rows:
        oracle.apply("stock", s, r)
    out = {}
    for sid, text in subs:
        out[sid, "init"] = plain(oracle.subscribe(sid, parse_subscription(text)))
    for i, (s, r) in enumerate(updates):
        for sid, v in oracle.apply("stock", s, r).items():
            out[sid, f"{STOCK_TOPIC}:0:{first_offset + i}"] = plain(v)
    return out


def received(notes: list[dict]) -> dict[tuple[int, str], Any]:
    out = {}
    for n in notes:
        update = "init" if "/init/" in n["notification_id"] else n["update_id"]
        key = (n["subscription"], update)
        assert key not in out, f"two notifications for {key}"
        out[key] = plain(n["value"])
    return out


def assert_same(got: dict, want: dict) -> None:
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    assert not missing and not extra, f"missing {missing[:5]} ({len(missing)}), extra {extra[:5]} ({len(extra)})"
    for k, v in want.items():
        g = got[k]
        if isinstance(v, float) or isinstance(g, float):
            assert g is not None and v is not None and math.isclose(g, v, rel_tol=1e-9), (k, g, v)
        else:
            assert g == v, (k, g, v)


def notifications_of(bootstrap: str) -> list[dict]:
    notes = [json.loads(m.value()) for m in read_all(bootstrap, topics.NOTIFICATIONS)]
    return deduplicate(notes) if notes else notes


def run_steps(bootstrap, group_id, rows, subs, updates) -> None:
    """The rows, then the subscriptions (their initial answers), then the updates, each processed by the running
    table service before the next is written."""
    send(bootstrap, STOCK_TOPIC, row_records(rows))
    wait_committed(bootstrap, group_id, STOCK_TOPIC)
    send(bootstrap, topics.SUBSCRIPTIONS, encode_subs(subs))
    wait_committed(bootstrap, group_id, topics.SUBSCRIPTIONS)
    send(bootstrap, STOCK_TOPIC, row_records(updates))
    wait_committed(bootstrap, group_id, STOCK_TOPIC)


def served(running, bootstrap, group_id, mode, rows, subs, updates) -> tuple[RunningService, list[dict]]:
    """A table service in ``mode`` through :func:`run_steps`; stopped, with the notifications it wrote
    (de-duplicated)."""
    svc = running(mode=mode)
    run_steps(bootstrap, group_id, rows, subs, updates)
    svc.stop()
    return svc, notifications_of(bootstrap)


# --- the tests --------------------------------------------------------------------------------


def test_s_un_notifications_equal_the_oracle(running, tables_bootstrap, group_id):
    rows, updates = workload(1, 40, 400)
    subs = subscriptions(2, 60)
    svc, notes = served(running, tables_bootstrap, group_id, "s-un", rows, subs, updates)
    assert all(n["subscriber"] == f"u{n['subscription']}" for n in notes)
    for n in notes:  # an update's notification carries the row that caused it
        if "/init/" not in n["notification_id"]:
            symbol, row = updates[int(n["update_id"].rsplit(":", 1)[1]) - len(rows)]
            assert n["key"] == symbol and n["row"] == row
    want = expected(rows, subs, updates, len(rows))
    assert_same(received(notes), want)
    assert sum(1 for k in want if k[1] != "init") > 100  # the workload does change answers
    assert svc.service.stats()["dead_letters"] == {}


def test_s_cn_followers_keep_the_oracle_answers_from_the_reformulated_topic(running, tables_bootstrap, group_id):
    rows, updates = workload(3, 40, 300)
    subs = subscriptions(4, 60)
    _, notes = served(running, tables_bootstrap, group_id, "s-cn", rows, subs, updates)
    assert all("/init/" in n["notification_id"] for n in notes)  # S-CN: only the initial answers are unicast
    assert {n["position"][f"{STOCK_TOPIC}:0"] for n in notes} == {len(rows)}
    followers = {n["subscription"]: Follower(n["subscription"], parse_subscription(dict(subs)[n["subscription"]]), n)
                 for n in notes}
    records = [ReformulatedRecord.from_bytes(m.value()) for m in read_all(tables_bootstrap, topics.REFORMULATED)]
    by_update: dict[str, list[ReformulatedRecord]] = {}
    for r in records:
        by_update.setdefault(r.update_id, []).append(r)
    got = {(n["subscription"], "init"): plain(n["value"]) for n in notes}
    for update_id in sorted(by_update, key=lambda u: int(u.rsplit(":", 1)[1])):
        for sid, f in followers.items():
            change = f.apply(by_update[update_id])
            if change is not None:
                assert change[1].startswith(f"{sid}/{update_id}/")
                got[sid, update_id] = plain(change[0])
    assert_same(got, expected(rows, subs, updates, len(rows)))
    groups = {f.group for f in followers.values()}
    assert len(records) < len(updates) * 2 * len(groups)  # a few messages per update and group, whatever the subscribers


class TablesProcess:
    def __init__(self, bootstrap: str, group_id: str, *options: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fastpubsub", "tables", "-b", bootstrap, "--group-id", group_id, "--table", STOCK,
             "--batch-size", "20", "--progress-interval", "60", *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=child_preexec)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def committed(bootstrap: str, group_id: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False})
    try:
        return max(c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset, 0)
    finally:
        c.close()


@pytest.mark.parametrize("delay", [0.0, pytest.param(0.25, marks=pytest.mark.long)])
def test_kill_9_and_restart_deduplicated_notifications_equal_the_oracle(tables_bootstrap, group_id, delay):
    rows, updates = workload(5, 60, 3000)
    subs = subscriptions(6, 80)
    first = TablesProcess(tables_bootstrap, group_id)
    # the updates arrive as a backlog, so that the service is busy (likely inside a transaction) when killed;
    # the first third is written at once, the rest in chunks, so that the kill cannot come after the end
    writer = threading.Thread(target=lambda: [(send(tables_bootstrap, STOCK_TOPIC, row_records(updates[i:i + 100])),
                                               time.sleep(0.02 if i >= len(updates) // 3 else 0))
                                              for i in range(0, len(updates), 100)])
    try:
        send(tables_bootstrap, STOCK_TOPIC, row_records(rows))
        wait_committed(tables_bootstrap, group_id, STOCK_TOPIC, timeout=120)
        send(tables_bootstrap, topics.SUBSCRIPTIONS, encode_subs(subs))
        wait_committed(tables_bootstrap, group_id, topics.SUBSCRIPTIONS)
        writer.start()
        deadline = time.monotonic() + 60
        while committed(tables_bootstrap, group_id, STOCK_TOPIC) < len(rows) + 300:
            assert time.monotonic() < deadline and first.proc.poll() is None, "no progress before the kill"
            time.sleep(0.05)
        time.sleep(delay)  # the kill falls at different points of a batch
    finally:
        first.kill()
        if writer.is_alive() or writer.ident is not None:
            writer.join(60)
    done_at_kill = committed(tables_bootstrap, group_id, STOCK_TOPIC)
    assert done_at_kill < len(rows) + len(updates), "the kill came after the end: nothing to recover"
    second = TablesProcess(tables_bootstrap, group_id)
    try:
        wait_committed(tables_bootstrap, group_id, STOCK_TOPIC, timeout=180)
    finally:
        second.proc.terminate()
        out, err = second.proc.communicate(timeout=60)
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["task"]["restored_rows"] > 0 and stats["task"]["subscriptions"] == len(subs), err[-2000:]
    raw = [json.loads(m.value()) for m in read_all(tables_bootstrap, topics.NOTIFICATIONS)]
    notes = deduplicate(raw)
    print(f"\nkill -9 at {done_at_kill - len(rows)} of {len(updates)} updates: {len(raw)} notifications read, "
          f"{len(raw) - len(notes)} duplicates dropped, {stats['task']['discarded_changes']} changelog changes discarded")
    assert_same(received(notes), expected(rows, subs, updates, len(rows)))


def test_bad_subscriptions_and_rows_are_dead_lettered_with_their_reasons(running, tables_bootstrap, group_id):
    svc = running(tables=(STOCK, ORDERS, SHIPMENTS))
    good = parse_subscription("min(per) over stock where risk between 20 and 60").to_json()
    bad = {
        1: {"subscriber": "a", "aggregate": "min(per) over bonds where risk between 20 and 60"},
        2: {"subscriber": "a", "aggregate": "min(yield) over stock where risk between 20 and 60"},
        3: {"subscriber": "a", "aggregate": {**good, "range": {"attribute": "risk", "low": 60, "high": 20}}},
        4: {"subscriber": "a", "aggregate": {**good, "range": {"attribute": "risk", "low": float("nan"), "high": 20}}},
        5: {"subscriber": "a", "aggregate": "join orders o, shipments s on o.order_id = s.order_id"},
    }
    send(tables_bootstrap, topics.SUBSCRIPTIONS, [(str(k).encode(), json.dumps(v).encode()) for k, v in bad.items()]
         + [(b"6", json.dumps({"subscriber": "a", "aggregate": good}).encode()),
            (b"7", codecs.encode_subscription(Subscription("b", [("x", "=", 1)]))),  # plain: the processor's
            (b"8", b'{"subscriber": "b", "predicates": [["x", "~", 1]]}')])  # plain and invalid: the processor's too
    wait_committed(tables_bootstrap, group_id, topics.SUBSCRIPTIONS)  # the aggregate exists before the rows come
    send(tables_bootstrap, STOCK_TOPIC, [(b"IBM", json.dumps({"symbol": "IBM", "risk": 42}).encode()),
                                        (b"HP", json.dumps({"symbol": "HP", "per": 3}).encode()),
                                        (b"SUN", b"{not json"),
                                        (None, json.dumps({"symbol": "X", "risk": 1, "per": 2}).encode()),
                                        (b"DELL", json.dumps({"symbol": "DEC", "risk": 1, "per": 2}).encode())])
    wait_committed(tables_bootstrap, group_id, topics.SUBSCRIPTIONS)
    wait_committed(tables_bootstrap, group_id, STOCK_TOPIC)
    svc.stop()
    letters = {(d.source_topic, d.offset if d.source_topic == STOCK_TOPIC else int(d.key)): d.reason
               for d in dead_letters(tables_bootstrap)}
    subs = {k: v for (t, k), v in letters.items() if t == topics.SUBSCRIPTIONS}
    assert sorted(subs) == [1, 2, 3, 4, 5]
    assert "unknown table 'bonds'" in subs[1]
    assert "unknown attribute 'yield'" in subs[2]
    assert "range low 60.0 is above range high 20.0" in subs[3]
    assert "NaN" in subs[4]
    assert "different kinds" in subs[5]
    rows = {k: v for (t, k), v in letters.items() if t == STOCK_TOPIC}
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert "kept out of an aggregate" in rows[0] and "'per'" in rows[0]  # lacks the value attribute
    assert "kept out of an aggregate" in rows[1] and "'risk'" in rows[1]  # lacks the range attribute
    assert "invalid row" in rows[2]
    assert "no key" in rows[3]
    assert "differs from the record key" in rows[4]
    assert svc.service.stats()["task"]["rows"]["stock"] == 2  # rows outside an aggregate stay in the table
    assert svc.service.stats()["task"]["subscriptions"] == 1  # 6 only


def test_the_event_processor_ignores_aggregate_subscriptions_and_the_service_ignores_plain_ones():
    state = SubscriptionState()
    good = codecs.encode_aggregate_subscription(
        AggregateSubscription("a", parse_subscription("count(*) over stock where risk between 1 and 2")))
    broken = json.dumps({"subscriber": "a", "aggregate": "min(per) over stock where risk between 9 and 1"}).encode()
    plain_sub = codecs.encode_subscription(Subscription("b", [("x", "=", 1)]))
    state.apply(b"7", plain_sub)
    applied = state.apply_records([(b"7", good), (b"8", broken), (b"not-an-id", broken), (b"9", plain_sub)])
    assert applied.errors == [] and sorted(state.subscribers) == [9]  # 7 is an aggregate one now: gone here
    assert codecs.is_aggregate_subscription(good) and codecs.is_aggregate_subscription(broken)
    assert not codecs.is_aggregate_subscription(plain_sub)
    with pytest.raises(codecs.AggregateDecodeError, match="above range high"):
        codecs.decode_any_subscription(broken)


def test_pubsub_subscribe_refuses_what_the_service_would(running, tables_bootstrap):
    running(tables=(STOCK, ORDERS, SHIPMENTS))

    def subscribe(text: str):
        return CliRunner().invoke(main, ["subscribe", "-b", tables_bootstrap, "--subscriber", "a", text])

    for text, reason in [("min(per) over bonds where risk between 1 and 2", "unknown table 'bonds'"),
                         ("min(yield) over stock where risk between 1 and 2", "unknown attribute 'yield'"),
                         ("min(per) over stock where risk between 9 and 1", "above range high"),
                         ("join orders o, shipments s on o.order_id = s.order_id", "different kinds")]:
        result = subscribe(text)
        assert result.exit_code != 0 and reason in result.output, result.output
    result = subscribe("avg(per) over stock where risk between 20 and 60")
    assert result.exit_code == 0, result.output
    assert '"fn": "avg"' in result.output


def test_a_missing_table_topic_is_created_with_one_partition(running, tables_bootstrap):
    running(tables=(STOCK, "fresh:pubsub.tables.fresh:id"))
    from fastpubsub.kafka import admin
    assert admin.partitions_of(tables_bootstrap, "pubsub.tables.fresh") == 1
    assert admin.cleanup_policies(ClientFactory(tables_bootstrap).admin(), names=("pubsub.tables.fresh",)).get(
        "pubsub.tables.fresh", "compact") == "compact"


def test_a_table_declaration_names_its_mistake():
    t = TableDeclaration.parse("stock:pubsub.tables.stock:symbol:risk=number,per=number")
    assert (t.name, t.topic, t.key, t.kinds) == ("stock", "pubsub.tables.stock", "symbol",
                                                 {"risk": "number", "per": "number", "symbol": "string"})
    assert TableDeclaration.parse("t:topic:k").kinds is None
    for text, reason in [("stock", "NAME:TOPIC:KEY"), ("stock:t:k:risk", "ATTR=KIND"), ("stock:t:k:risk=float", "kind"),
                         ("9x:t:k", "table name"), ("s::k", "must not be empty")]:
        with pytest.raises(ValueError, match=reason):
            TableDeclaration.parse(text)
    result = CliRunner().invoke(main, ["tables", "-b", "127.0.0.1:1", "--table", "stock:t:k", "--table", "stock:u:k"])
    assert result.exit_code == 2 and "declared twice" in result.output


def test_an_output_too_large_dead_letters_its_update_and_the_service_goes_on(running, tables_bootstrap, group_id):
    svc = running(**{"message.max.bytes": "20000"})
    send(tables_bootstrap, topics.SUBSCRIPTIONS,
         [(b"1", json.dumps({"subscriber": "a", "aggregate": "distinct(sector) over stock where risk between 0 and 9"}).encode())])
    wait_committed(tables_bootstrap, group_id, topics.SUBSCRIPTIONS)
    rows = [(f"S{i}", {"symbol": f"S{i}", "risk": 1, "per": 1, "sector": f"{i:04d}" + "x" * 2000}) for i in range(12)]
    send(tables_bootstrap, STOCK_TOPIC, row_records(rows))
    wait_committed(tables_bootstrap, group_id, STOCK_TOPIC)
    svc.stop()
    refused = [d for d in dead_letters(tables_bootstrap) if d.source_topic == STOCK_TOPIC]
    assert refused and all("output refused" in d.reason for d in refused)
    assert svc.service.stats()["task"]["rows"]["stock"] == 12  # every row is in the table, the service went on
