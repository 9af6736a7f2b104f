"""Nothing is lost when a processor is killed mid-stream: a restarted one picks up from the committed offsets.

The subscription changes sent while it runs (and while it is down) leave the
expected notifications unchanged — same-value replacements, and subscriptions
on an attribute no event has, added and removed — so the oracle's answer is
exact whatever the interleaving; the restarted processor must hold exactly the
final subscriptions, from the topic or from its snapshot plus the later changes.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Producer
from kafka_helpers import committed_events, notifications, producer, wait_processed
from random_workload import by_event, expected_matches, random_events, random_subscriptions, send_subscriptions
from test_scale_out import ProcessorProcess

from processor import codecs, topics
from processor.codecs import Subscription

pytestmark = pytest.mark.broker


class Changes:
    """Subscription changes that do not change which events match what."""

    def __init__(self, bootstrap: str, subs) -> None:
        self.producer, self.subs = producer(bootstrap), dict(subs)
        self.live = set(self.subs)
        self.round = 0

    def send(self) -> None:
        r, self.round = self.round, self.round + 1
        records = [(str(sid), codecs.encode_subscription(self.subs[sid])) for sid in (r % 200, (r * 7) % 200)]
        new = 10_000 + r
        records.append((str(new), codecs.encode_subscription(Subscription("nobody", [("never", "=", r)]), "json")))
        self.live.add(new)
        if r % 3 == 0 and new - 2 in self.live:
            records.append((str(new - 2), None))
            self.live.discard(new - 2)
        for key, value in records:
            self.producer.produce(topics.SUBSCRIPTIONS, value, key)
        assert self.producer.flush(30) == 0


@pytest.mark.parametrize("delivery, snapshots", [("auto", False), ("at-least-once", False), ("auto", True)])
def test_kill_and_restart_loses_nothing(bootstrap, group_id, delivery, snapshots, tmp_path):
    subs = random_subscriptions(200, seed=8)
    events = random_events(2000, seed=9)
    send_subscriptions(bootstrap, subs)
    producer = Producer({"bootstrap.servers": bootstrap})
    for e in events:
        producer.produce(topics.EVENTS, codecs.encode_event(e), f"k{e['n']}", partition=e["n"] % 4)
    assert producer.flush(30) == 0
    options = ["--delivery", delivery, *(["--snapshot-dir", str(tmp_path), "--snapshot-every", "0"] if snapshots else [])]
    changes = Changes(bootstrap, subs)

    first = second = None
    try:
        first = ProcessorProcess(bootstrap, group_id, *options, "--batch-size", "10")
        deadline = time.monotonic() + 60
        polls = 0
        while committed_events(bootstrap, group_id) < 100:  # kill it without warning once it has done some work
            assert time.monotonic() < deadline and first.proc.poll() is None, first.log[-5:]
            polls += 1
            if polls % 5 == 0:
                changes.send()
            time.sleep(0.02)
        changes.send()
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
        for _ in range(3):  # while it is down
            changes.send()

        second = ProcessorProcess(bootstrap, group_id, *options)
        deadline = time.monotonic() + 60
        while not any(" ready: " in line for line in second.log):  # it may stop only once it has started
            assert time.monotonic() < deadline and second.proc.poll() is None, second.log[-5:]
            time.sleep(0.05)
        wait_processed(bootstrap, group_id, timeout=120)
        stats = second.stop()
        assert 0 < stats["events"] < len(events)  # the first one did part of the work
        assert stats["subscriptions"] == len(changes.live)
        if snapshots:
            assert any("snapshot loaded" in line for line in second.log), second.log[-10:]
            assert any("snapshot written" in line for line in first.log)
    finally:
        for p in (first, second):
            if p is not None:
                p.kill()

    notes = notifications(bootstrap)
    expected = {n: s for n, s in expected_matches(subs, events).items() if s}
    assert by_event(notes) == expected  # every notification is there (duplicates allowed)
    ids = {n["notification_id"] for n in notes}  # after de-duplication: exactly one of each expected
    assert ids == {codecs.notification_id(f"k{n}", sid) for n, hits in expected.items() for sid in hits}
