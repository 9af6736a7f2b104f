"""Two processor processes in one consumer group share the event partitions."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time

from confluent_kafka import Producer
from tests.support.kafka_helpers import committed_events, notifications, wait_processed
from tests.support.random_workload import by_event, expected_matches, random_events, random_subscriptions, send_subscriptions

from fastpubsub.wire import codecs, topics
from fastpubsub.kafka.broker import child_preexec


class ProcessorProcess:
    """`pubsub run` in a child process; remembers its latest partition assignment."""

    def __init__(self, bootstrap: str, group_id: str, *options: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fastpubsub", "run", "-b", bootstrap, "--group-id", group_id,
             "--progress-interval", "60", "--batch-size", "50", *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=child_preexec,  # dies with the test run, whatever happens
        )
        self.assigned: int | None = None
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"(assigned|revoked) (\d+) partitions", line)
            if m:
                self.assigned = int(m.group(2)) if m.group(1) == "assigned" else 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        self._reader.join(10)
        assert self.proc.returncode == 0, "".join(self.log[-20:])
        return json.loads(out.strip().splitlines()[-1])


def test_two_processes_share_the_events(bootstrap, group_id):
    subs = random_subscriptions(600, seed=5)
    events = random_events(400, seed=6)
    send_subscriptions(bootstrap, subs)
    procs = [ProcessorProcess(bootstrap, group_id) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while not (all(p.assigned for p in procs) and sum(p.assigned for p in procs) == 4):
            assert time.monotonic() < deadline, [p.log[-5:] for p in procs]
            assert all(p.proc.poll() is None for p in procs), [p.log[-5:] for p in procs]
            time.sleep(0.1)
        producer = Producer({"bootstrap.servers": bootstrap})
        for e in events:  # spread over the four partitions explicitly
            producer.produce(topics.EVENTS, codecs.encode_event(e), f"k{e['n']}", partition=e["n"] % 4)
        assert producer.flush(30) == 0
        wait_processed(bootstrap, group_id)
        stats = [p.stop() for p in procs]
    finally:
        for p in procs:
            p.kill()

    assert all(s["events"] > 0 for s in stats) and sum(s["events"] for s in stats) == len(events)
    assert all(s["task"]["subscriptions"] == len(subs) for s in stats)  # each instance holds every subscription
    notes = notifications(bootstrap)
    assert by_event(notes) == {n: s for n, s in expected_matches(subs, events).items() if s}
    assert len({n["notification_id"] for n in notes}) == len(notes)


def test_killing_one_of_two_moves_its_partitions_to_the_other(bootstrap, group_id):
    """kill -9 one instance mid-stream: the survivor takes its partitions; nothing is lost (oracle, after dedup).

    At-least-once delivery: a killed transactional producer's open transaction
    holds read_committed readers at the last stable offset until a producer
    with the same transactional.id starts, or the broker aborts it after
    ``transaction.timeout.ms`` (60 s), and a lone survivor is no such producer;
    test_crash.py and test_exactly_once.py cover that restart.
    """
    from tests.support.history import check
    from tests.faults.test_crash import expected_ids

    from fastpubsub.wire.dedup import deduplicate

    subs = random_subscriptions(300, seed=41)
    events = random_events(1500, seed=42)
    send_subscriptions(bootstrap, subs)
    opts = ("--delivery", "at-least-once", "--batch-size", "10")
    procs = [ProcessorProcess(bootstrap, group_id, *opts) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while not (all(p.assigned for p in procs) and sum(p.assigned for p in procs) == 4):
            assert time.monotonic() < deadline and all(p.proc.poll() is None for p in procs), [p.log[-5:] for p in procs]
            time.sleep(0.1)
        producer = Producer({"bootstrap.servers": bootstrap})
        for e in events:
            producer.produce(topics.EVENTS, codecs.encode_event(e), f"k{e['n']}", partition=e["n"] % 4)
        assert producer.flush(30) == 0
        while committed_events(bootstrap, group_id) < 200:
            assert time.monotonic() < deadline, [p.log[-5:] for p in procs]
            time.sleep(0.02)
        victim, survivor = procs
        victim.kill()  # SIGKILL
        wait_processed(bootstrap, group_id, timeout=90)
        # the victim may have committed its partitions before the kill: the survivor takes them once the group
        # notices the death (session.timeout.ms), which wait_processed need not wait for
        rebalanced = time.monotonic() + 60
        while survivor.assigned != 4:
            assert time.monotonic() < rebalanced, survivor.log[-5:]
            time.sleep(0.1)
        stats = survivor.stop()
    finally:
        for p in procs:
            p.kill()

    assert 0 < stats["events"] < len(events) + 10 * 4  # the victim did part of the work
    notes = notifications(bootstrap)
    expected = expected_ids(subs, events)
    history = check("scale-out kill (at-least-once)", len(events), expected, [n["notification_id"] for n in notes])
    print("\n" + history.report("1 kill -9"))
    assert not (history.lost or history.unexpected), history.report()  # the victim's batches may come twice
    assert sorted(n["notification_id"] for n in deduplicate(notes)) == expected
