"""Exactly once, as Kafka defines it: a read_committed consumer sees every notification once, without de-duplication.

Each service (the event processor, the pattern service, the table service) runs in a child process fed a steady
stream of input, and is killed with SIGKILL at seeded random points, some of them during start-up (right after the
launch, before it is ready), and restarted every time; the event processor with and without snapshots.  The
notifications are then read back read_committed and counted against the oracle's: none missing, none twice, none
unexpected.  Apache Kafka hides what the killed instances' open transactions wrote once the restarted instance's
``init_transactions`` aborts them; the restarted instance replays from the offsets committed in the same
transactions as their outputs.

A zombie is fenced: an instance paused (SIGSTOP) while another with the same ``transactional.id`` takes over, then
resumed, writes nothing that becomes visible, and exits non-zero saying that it was fenced.

Restores still discard changelog changes past the committed input offsets: not for transactions (a read_committed
restore sees a change only with its offsets), but for at-least-once delivery, shown by the last test.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable

import pytest
from confluent_kafka import KafkaException, Producer
from tests.support.history import check
from tests.support.kafka_helpers import committed_events, notifications, read_all, send, wait_processed
from tests.support.random_workload import expected_matches, random_events, random_subscriptions, send_subscriptions
from tests.pipeline import test_pattern_service as patterns_spec
from tests.pipeline import test_tables as tables_spec

from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.broker import child_preexec
from fastpubsub.kafka.delivery import Delivery, DeliveryError, Fenced
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

pytestmark = pytest.mark.slow

#: SIGKILLs per run, and how many of them come right after the launch, before the service is ready: five in CI,
#: ten in the long version (make test-faults)
KILLS = {False: (5, 2), True: (10, 3)}


# --- a service in a child process, its kill loop, the input stream, the count -----------------------------


class Service:
    """``pubsub <command>`` in a child process; ``ready`` once its log says so."""

    def __init__(self, command: str, bootstrap: str, options: Iterable[str], ready: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fastpubsub", command, "-b", bootstrap, "--progress-interval", "60", *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=child_preexec)
        self.log: list[str] = []
        self.ready = threading.Event()
        self._marker = ready
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)
            if self._marker in line:
                self.ready.set()

    def tail(self, n: int = 15) -> str:
        return "".join(self.log[-n:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> bool:
        """SIGKILL; whether it had been ready."""
        if self.alive():
            self.proc.kill()
        self.proc.wait(10)
        return self.ready.is_set()

    def stop(self) -> dict:
        """SIGTERM, a clean exit, its final statistics."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self._reader.join(10)
        assert self.proc.returncode == 0, self.tail()
        return json.loads(self.proc.stdout.read().strip().splitlines()[-1])


@dataclass
class Kills:
    done: int = 0
    during_startup: int = 0  # killed before it was ready
    snapshots_loaded: int = 0  # restarts that loaded a snapshot (the event processor)

    def __str__(self) -> str:
        return (f"{self.done} kill -9 ({self.during_startup} during start-up"
                f"{f', {self.snapshots_loaded} restarts from a snapshot' if self.snapshots_loaded else ''})")


def kill_loop(launch: Callable[[], Service], progress: Callable[[], int], seed: int, plan: tuple[int, int],
              timeout: float = 60.0) -> Kills:
    """``plan`` = (kills, during_startup): ``kills`` SIGKILLs of what ``launch`` starts, a new instance launched
    after each.

    ``during_startup`` of them come 0-1.2 s after the launch (Python, the clients, the restore: before it is
    ready); the others once it is ready and has committed something (so that the stream moves on between two
    kills), 0-0.8 s later: inside a batch, a commit, a rebalance or a snapshot, wherever that falls.
    """
    kills, during_startup = plan
    rng = random.Random(seed)
    plan = [True] * during_startup + [False] * (kills - during_startup)
    rng.shuffle(plan)
    out = Kills()
    for early in plan:
        s = launch()
        try:
            if early:
                time.sleep(rng.uniform(0.0, 1.2))
            else:
                assert s.ready.wait(timeout), f"not ready within {timeout}s:\n{s.tail()}"
                before, deadline = progress(), time.monotonic() + timeout
                while progress() <= before:
                    assert time.monotonic() < deadline and s.alive(), f"no progress:\n{s.tail()}"
                    time.sleep(0.05)
                time.sleep(rng.uniform(0.0, 0.8))
            assert s.alive(), f"it died by itself:\n{s.tail()}"
        finally:
            ready = s.kill()
        out.done += 1
        out.during_startup += not ready
        out.snapshots_loaded += any("snapshot loaded" in line for line in s.log)
    return out


class Stream:
    """A writer thread that sends ``produce(i)`` for i = 0, 1, ... in chunks at a steady pace until stopped; a chunk
    counts as sent once every record of it is acknowledged."""

    def __init__(self, produce: Callable[[Producer, int], None], chunk: int, pause: float, bootstrap: str,
                 limit: int) -> None:
        self.sent = 0
        self._produce, self._chunk, self._pause, self._limit = produce, chunk, pause, limit
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < self._limit:
            for i in range(self.sent, min(self.sent + self._chunk, self._limit)):
                self._produce(self._producer, i)
            deadline = time.monotonic() + 300  # acknowledged, however long the cluster is away
            while self._producer.flush(1) > 0:
                assert time.monotonic() < deadline, "the stream's records were not acknowledged within 300 s"
            self.sent = min(self.sent + self._chunk, self._limit)
            time.sleep(self._pause)

    def abandon(self) -> None:
        """Stop without waiting for what is not acknowledged (after a failure, the cluster perhaps away)."""
        self._stop.set()
        self._thread.join(5)

    def stop(self) -> int:
        """Stop; how many were sent (all of them acknowledged)."""
        self._stop.set()
        self._thread.join(60)
        assert self.sent < self._limit, "the stream ran out before the kills ended: raise its limit"
        return self.sent


# --- the event processor --------------------------------------------------------------------------------------

EVENTS = random_events(60_000, seed=61)  # far more than a run sends: the stream is stopped once the kills are done


def produce_event(p: Producer, i: int) -> None:
    e = EVENTS[i]
    p.produce(topics.EVENTS, codecs.encode_event(e, "avro" if i % 2 else "json"), f"k{e['n']}", partition=i % 4)


def churn(bootstrap: str, stop: threading.Event) -> None:
    """Subscriptions added and removed every 0.3 s that match no event (no event has a ``phase``): the state keeps
    changing, so that a processor with ``--snapshot-every 1`` writes snapshots while it is killed."""
    sid = 50_000
    while not stop.is_set():
        send(bootstrap, topics.SUBSCRIPTIONS, [(str(sid), codecs.encode_subscription(
            Subscription("churn", [("phase", "=", "Z")]))), (str(sid - 3), None)])
        sid += 1
        stop.wait(0.3)


def processor(bootstrap: str, group_id: str, *options: str) -> Service:
    return Service("run", bootstrap, ["--group-id", group_id, "--batch-size", "20", *options], ready=" INFO ready: ")


@pytest.mark.parametrize("snapshots", [False, pytest.param(True, marks=pytest.mark.long)], ids=["rebuild", "snapshots"])
def test_the_event_processor_killed_repeatedly_notifies_exactly_once(bootstrap, group_id, snapshots, tmp_path,
                                                                     long_faults):
    """Without snapshots every start rebuilds the subscriptions from the topic; with them (one a second while the
    subscriptions change) a start loads the latest one and replays what followed, and kills fall inside snapshot
    writes too."""
    subs = random_subscriptions(200, seed=60)
    options = ("--snapshot-dir", str(tmp_path), "--snapshot-every", "1") if snapshots else ()
    send_subscriptions(bootstrap, subs)
    stop_churn = threading.Event()
    churner = threading.Thread(target=churn, args=(bootstrap, stop_churn), daemon=True)
    churner.start()
    stream = Stream(produce_event, 20, 0.1, bootstrap, len(EVENTS))
    last = None
    try:
        kills = kill_loop(lambda: processor(bootstrap, group_id, *options),
                          lambda: committed_events(bootstrap, group_id), seed=62 + snapshots,
                          plan=KILLS[long_faults])
        last = processor(bootstrap, group_id, *options)
        assert last.ready.wait(60), last.tail()
    finally:
        sent = stream.stop()
        stop_churn.set()
        churner.join(10)
    try:
        wait_processed(bootstrap, group_id, timeout=120)
        stats = last.stop()
    finally:
        last.kill()
    assert any("delivery: transactional" in line for line in last.log), last.tail()
    assert stats["replays"] == 0  # no delivery failed: what is checked is the kills alone
    if snapshots:
        assert kills.snapshots_loaded > 0 and any("snapshot loaded" in line for line in last.log)
    sent_events = EVENTS[:sent]
    assert not any(expected_matches([(0, Subscription("churn", [("phase", "=", "Z")]))], sent_events).values())
    expected = {f"k{n}/{sid}" for n, sids in expected_matches(subs, sent_events).items() for sid in sids}
    history = check(f"event processor ({'snapshots' if snapshots else 'rebuild'})", sent, expected,
                    [n["notification_id"] for n in notifications(bootstrap)], bootstrap, {group_id: [topics.EVENTS]},
                    [topics.NOTIFICATIONS])
    print("\n" + history.report(str(kills)))
    assert kills.done >= KILLS[long_faults][0] and kills.during_startup >= 1
    history.assert_exactly_once()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0, *logs: Service) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}\n" + "\n".join(s.tail(40) for s in logs)
        time.sleep(0.05)


def test_a_paused_processor_is_fenced_by_the_one_that_took_over_its_transactional_id(bootstrap, group_id):
    """Two instances with one ``--transactional-id`` (a pod thought dead and its replacement).  The first is paused
    (SIGSTOP) mid-stream; the second's ``init_transactions`` aborts the first's open transaction and fences it, and
    the second takes the partitions once the first's session has expired.  Resumed (SIGCONT), the first finds out
    at its next write: it commits nothing more and exits non-zero saying it was fenced, instead of recovering with
    a new producer of the same id, which would fence the second in turn."""
    every = (999, Subscription("everyone", [("n", ">=", 0)]))  # every event notifies: every batch writes
    subs = random_subscriptions(100, seed=70) + [every]
    send_subscriptions(bootstrap, subs)
    options = ("--transactional-id", f"{group_id}-pod-0", "--commit-interval-ms", "300")  # transactions stay open
    stream = Stream(produce_event, 20, 0.1, bootstrap, len(EVENTS))
    first = second = None
    try:
        first = processor(bootstrap, group_id, *options)
        assert first.ready.wait(60), first.tail()
        wait_until(lambda: committed_events(bootstrap, group_id) >= 200, "the first has committed 200 events")
        time.sleep(0.15)  # inside a transaction, most likely
        first.proc.send_signal(signal.SIGSTOP)
        second = processor(bootstrap, group_id, *options)
        assert second.ready.wait(60), second.tail()
        # the first's open transaction (and the offsets in it) aborted: the committed offsets can be read again,
        # and they are the first's (the second gets partitions only once the first's session has expired)
        paused_at = committed_events(bootstrap, group_id)
        wait_until(lambda: committed_events(bootstrap, group_id) > paused_at + 200, "the second took over")
        first.proc.send_signal(signal.SIGCONT)
        wait_until(lambda: not first.alive(), "the first has exited", 60, first)
        wait_until(lambda: committed_events(bootstrap, group_id) > paused_at + 600, "the second goes on")
    finally:
        sent = stream.stop()
        if first is not None:
            first.proc.send_signal(signal.SIGCONT)
            first.kill()
    try:
        wait_processed(bootstrap, group_id, timeout=120)
        second.stop()
    except BaseException:
        print(f"\nthe first:\n{first.tail(40)}\nthe second:\n{second.tail(40)}")
        raise
    finally:
        second.kill()
    first._reader.join(10)
    fenced = [line for line in first.log if f"stopping: fenced: another instance with transactional.id "
                                              f"{group_id}-pod-0 took over" in line]
    assert first.proc.returncode == 1 and fenced, first.tail()
    first_stats = json.loads(first.proc.stdout.read().strip().splitlines()[-1])
    assert 0 < first_stats["events"] <= paused_at  # all it committed, it committed before it was paused
    expected = {f"k{n}/{sid}" for n, sids in expected_matches(subs, EVENTS[:sent]).items() for sid in sids}
    history = check("zombie event processor", sent, expected, [n["notification_id"] for n in notifications(bootstrap)],
                    bootstrap, {group_id: [topics.EVENTS]}, [topics.NOTIFICATIONS])
    print("\n" + history.report(f"fenced: {fenced[0].split('stopping: ')[1].strip()}"))
    history.assert_exactly_once()


# --- the pattern service and the table service ------------------------------------------------------------------


@pytest.fixture
def service_topics(bootstrap):
    """The session broker with fresh topics, no changelog of an earlier test, and the stock table's topic."""
    client = ClientFactory(bootstrap).admin()
    stale = [t for t in client.list_topics(timeout=10).topics
             if t == topics.PATTERN_CHANGELOG or t in topics.TABLE_SERVICE
             or t.startswith((topics.CHANGELOG_PREFIX, topics.TABLE_PREFIX))]
    if stale:
        for f in client.delete_topics(stale, operation_timeout=10).values():
            f.result(10)
        wait_until(lambda: not set(stale) & set(client.list_topics(timeout=10).topics), "old topics deleted", 10)
    from confluent_kafka.admin import NewTopic
    for f in client.create_topics([NewTopic(tables_spec.STOCK_TOPIC, 1, 1)], operation_timeout=10).values():
        f.result(10)
    return bootstrap


#: Event time starts 8 hours ago, not at test_pattern_service's BASE_TS: records three years old are past the events
#: topic's retention (7 days), and Kafka deletes them at its next check (every 10 s here), leaving the oracle a tail.
SINCE = (int(time.time()) - 8 * 3600) * 1000
PATTERN_EVENTS = [(ts - patterns_spec.BASE_TS + SINCE, attrs) for ts, attrs in patterns_spec.events(80, 40_000)]


def produce_pattern_event(p: Producer, i: int) -> None:
    ts, attrs = PATTERN_EVENTS[i]
    p.produce(topics.EVENTS, codecs.encode_event(attrs, "avro" if i % 2 else "json"),
              partition=patterns_spec.partition_for(attrs["name"], patterns_spec.PARTITIONS), timestamp=ts)


def test_the_pattern_service_killed_repeatedly_notifies_exactly_once(service_topics, group_id, long_faults):
    """Each start restores every partition's engine from the changelog (read_committed) at the committed offsets."""
    bootstrap = service_topics
    subs = patterns_spec.subscriptions(81, 24)
    patterns_spec.send_subscriptions(bootstrap, subs, since=SINCE)
    stream = Stream(produce_pattern_event, 10, 0.1, bootstrap, len(PATTERN_EVENTS))
    launch = lambda: Service("patterns", bootstrap, ["--group-id", group_id, "--batch-size", "40"],  # noqa: E731
                             ready="pattern subscriptions loaded")
    last = None
    try:
        kills = kill_loop(launch, lambda: committed_events(bootstrap, group_id), seed=82, plan=KILLS[long_faults])
        last = launch()
        assert last.ready.wait(60), last.tail()
    finally:
        sent = stream.stop()
    try:
        wait_processed(bootstrap, group_id, timeout=120)
        stats = last.stop()
    finally:
        last.kill()
    assert stats["delivery"] == "transactional" and stats["task"]["restores"] == patterns_spec.PARTITIONS
    assert stats["task"]["restored_instances"] > 0  # the state came from the changelog
    stored = patterns_spec.stored_events(bootstrap)
    assert sum(len(v) for v in stored.values()) == sent  # none past the retention
    expected = patterns_spec.oracle(subs, stored, since=SINCE)
    assert len(expected) > 200, "the workload completes too few patterns to say much"
    history = check("pattern service", sent, expected,
                    [json.loads(m.value())["notification_id"] for m in read_all(bootstrap, topics.NOTIFICATIONS)],
                    bootstrap, {group_id: [topics.EVENTS]}, [topics.NOTIFICATIONS, topics.PATTERN_CHANGELOG])
    print("\n" + history.report(str(kills)))
    assert kills.done >= KILLS[long_faults][0] and kills.during_startup >= 1
    history.assert_exactly_once()


TABLE_ROWS, TABLE_UPDATES = tables_spec.workload(90, 60, 40_000)


def produce_update(p: Producer, i: int) -> None:
    key, value = tables_spec.row_records(TABLE_UPDATES[i:i + 1])[0]
    p.produce(tables_spec.STOCK_TOPIC, value, key)


def table_service(bootstrap: str, group_id: str, *options: str) -> Service:
    return Service("tables", bootstrap, ["--group-id", group_id, "--table", tables_spec.STOCK, "--batch-size", "20",
                                         *options], ready="restored: ")


def table_notifications(bootstrap: str) -> list[tuple[tuple[int, str], object]]:
    """((subscription, "init" or the update's id), value) of every notification read back, repeats included."""
    out = []
    for m in read_all(bootstrap, topics.NOTIFICATIONS):
        n = json.loads(m.value())
        out.append(((n["subscription"], "init" if "/init/" in n["notification_id"] else n["update_id"]),
                    tables_spec.plain(n["value"])))
    return out


def test_the_table_service_killed_repeatedly_notifies_exactly_once(service_topics, group_id, long_faults):
    """Each start restores the table from its changelog (read_committed) and the subscriptions up to their committed
    offsets, silently; then the updates from the committed offset.  The rows and the subscriptions come first (the
    oracle's order), the updates as the stream."""
    bootstrap = service_topics
    subs = tables_spec.subscriptions(91, 80)
    first = table_service(bootstrap, group_id)
    send(bootstrap, tables_spec.STOCK_TOPIC, tables_spec.row_records(TABLE_ROWS))
    tables_spec.wait_committed(bootstrap, group_id, tables_spec.STOCK_TOPIC)
    send(bootstrap, topics.SUBSCRIPTIONS, tables_spec.encode_subs(subs))
    tables_spec.wait_committed(bootstrap, group_id, topics.SUBSCRIPTIONS)
    first.kill()
    stream = Stream(produce_update, 20, 0.1, bootstrap, len(TABLE_UPDATES))
    last = None
    try:
        kills = kill_loop(lambda: table_service(bootstrap, group_id),
                          lambda: tables_spec.committed(bootstrap, group_id, tables_spec.STOCK_TOPIC), seed=92,
                          plan=KILLS[long_faults])
        last = table_service(bootstrap, group_id)
        assert last.ready.wait(60), last.tail()
    finally:
        sent = stream.stop()
    try:
        tables_spec.wait_committed(bootstrap, group_id, tables_spec.STOCK_TOPIC, timeout=120)
        stats = last.stop()
    finally:
        last.kill()
    assert stats["delivery"] == "transactional" and stats["task"]["restored_rows"] > 0
    want = tables_spec.expected(TABLE_ROWS, subs, TABLE_UPDATES[:sent], len(TABLE_ROWS))
    got = table_notifications(bootstrap)
    history = check("table service", sent, want, [k for k, _ in got], bootstrap,
                    {group_id: [tables_spec.STOCK_TOPIC, topics.SUBSCRIPTIONS]},
                    [topics.NOTIFICATIONS, topics.changelog_topic("stock")])
    print("\n" + history.report(str(kills)))
    assert kills.done >= KILLS[long_faults][0] and kills.during_startup >= 1
    history.assert_exactly_once()
    tables_spec.assert_same(dict(got), want)  # and each carries the oracle's answer


# --- the parts: a fenced producer, and a restore after an at-least-once crash -------------------------------------


@pytest.mark.parametrize("finds_out", ["at its commit", "at a produce once fatal"])
def test_a_fenced_producer_raises_fenced_not_a_delivery_error(bootstrap, group_id, finds_out):
    """The one that took over aborted the old one's transaction; the old one must stop, not recover (``Fenced`` is
    no ``DeliveryError``, and ``recover`` refuses to start a producer that would fence the new one in turn).  Once
    librdkafka knows the producer is fatal, a produce fails with ``_FATAL`` alone: the reason is asked for."""
    clients, tid = ClientFactory(bootstrap), f"{group_id}-fenced"
    old = Delivery(clients, "transactional", tid)
    old.produce(topics.NOTIFICATIONS, b"k", b"old, aborted")
    old.producer.flush(10)
    new = Delivery(clients, "transactional", tid)  # init_transactions: aborts the old one's transaction, fences it
    with pytest.raises(Fenced, match=f"fenced: another instance with transactional.id {tid} took over") as caught:
        old.produce(topics.NOTIFICATIONS, b"k", b"old, after")
        if finds_out == "at a produce once fatal":
            with contextlib.suppress(KafkaException, SystemError):
                old.producer.flush(10)  # the broker's answer: fenced, fatal
            old.produce(topics.NOTIFICATIONS, b"k", b"old, once more")
        old.commit()
    assert not isinstance(caught.value, DeliveryError)
    with pytest.raises(Fenced):
        old.recover(None)
    old.close()
    new.produce(topics.NOTIFICATIONS, b"k", b"new")
    new.commit()
    new.close()
    assert [m.value() for m in read_all(bootstrap, topics.NOTIFICATIONS)] == [b"new"]


def test_a_recovery_ends_the_transaction_a_failed_commit_left_open_before_it_rewinds(bootstrap, group_id, caplog):
    """A commit_transaction that fails after send_offsets_to_transaction (a record refused, an ACL revoked) leaves
    the transaction open on the coordinator, offsets included, and a read_committed consumer's committed() waits
    for such pending offsets until the transaction times out.  The recovery's new producer (its init_transactions)
    ends that transaction first, so the rewind finds the last committed offset at once."""
    from confluent_kafka import TopicPartition

    clients = ClientFactory(bootstrap)
    consumer = clients.consumer(group_id, {"enable.auto.commit": False, "isolation.level": "read_committed"})
    tp = TopicPartition(topics.EVENTS, 0)
    writer = clients.producer()
    for _ in range(10):
        writer.produce(topics.EVENTS, b"e", partition=0)
    assert writer.flush(10) == 0
    consumer.assign([tp])
    consumer.commit(offsets=[TopicPartition(topics.EVENTS, 0, 4)], asynchronous=False)
    delivery = Delivery(clients, "transactional", f"{group_id}-left-open")
    try:
        delivery.produce(topics.NOTIFICATIONS, b"k", b"of the failed transaction")
        delivery.producer.send_offsets_to_transaction([TopicPartition(topics.EVENTS, 0, 9)],
                                                      consumer.consumer_group_metadata(), 10)
        delivery.producer.flush(10)
        delivery._in_transaction = False  # as a failed commit_transaction leaves it: no abort of its own
        with caplog.at_level("WARNING", logger="fastpubsub.kafka.delivery"):
            assert delivery.recover(consumer)
        assert not [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
        assert [m.offset() for m in consumer.consume(1, timeout=10)] == [4]  # rewound to the committed offset
        assert consumer.committed([tp], timeout=10)[0].offset == 4  # the failed transaction's offsets: aborted
    finally:
        delivery.close()
        consumer.close()
    assert [m.value() for m in read_all(bootstrap, topics.NOTIFICATIONS)] == []


def test_an_at_least_once_restore_discards_the_changelog_changes_past_the_committed_offset(service_topics, group_id):
    """Why restores still drop changelog changes at or past the committed input offset on Apache Kafka.

    A read_committed restore of *transactional* outputs needs no such filter: a change is visible only with the
    offsets committed in its transaction.  With ``--delivery at-least-once`` the changes are acknowledged before
    the offsets are committed, and a crash in between leaves changes past the committed offset.  The group's offset
    is moved back here to make that state exactly: the restart must discard those changes, or it would apply the
    replayed updates a second time, on top of themselves, and notify other answers than the first time."""
    bootstrap = service_topics
    subs = tables_spec.subscriptions(93, 40)
    rows, updates = tables_spec.workload(94, 30, 300)
    run = lambda: table_service(bootstrap, group_id, "--delivery", "at-least-once")  # noqa: E731
    first = run()
    try:
        tables_spec.run_steps(bootstrap, group_id, rows, subs, updates)
        first.stop()
    finally:
        first.kill()
    back = 100  # the last 100 updates: delivered, their offsets "never committed"
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(tables_spec.STOCK_TOPIC, 0, len(rows) + len(updates) - back)], asynchronous=False)
    c.close()
    second = run()
    try:
        assert second.ready.wait(60), second.tail()
        tables_spec.wait_committed(bootstrap, group_id, tables_spec.STOCK_TOPIC)
        stats = second.stop()
    finally:
        second.kill()
    assert stats["delivery"] == "at-least-once" and stats["task"]["discarded_changes"] == back
    got = table_notifications(bootstrap)
    first_answer: dict = {}
    for key, value in got:  # a replayed notification repeats the first one, answer included
        assert first_answer.setdefault(key, value) == value, key
    assert len(got) > len(first_answer)  # there were replays
    tables_spec.assert_same(first_answer, tables_spec.expected(rows, subs, updates, len(rows)))
