"""The host's wait for an access the broker's authorizer refuses (``runtime.presence``, ``runtime.recovery``),
without a broker: the access check is a function the test answers, and time is the presence module's clock moved by
hand.  Through a secured broker: tests/kafka/test_security.py."""

from __future__ import annotations

import logging

import pytest

from fastpubsub.kafka.delivery import DeliveryError
from fastpubsub.runtime import presence as presence_module
from fastpubsub.runtime.checkpoint import Checkpoint
from fastpubsub.runtime.metrics import Metrics
from fastpubsub.runtime.presence import ACCESS_BACKOFF, MAX_ACCESS_BACKOFF, Presence
from fastpubsub.runtime.recovery import Recovery

LACKING = "User:p is not authorized to WRITE topic pubsub.notifications on b:9093: grant it"


class Clock:
    """``time.monotonic`` and ``time.sleep`` of the presence module: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(presence_module, "time", clock)
    return clock


class Answering:
    """A consumer whose metadata requests the cluster answers (the idle loop's probe)."""

    def list_topics(self, timeout: float) -> None:
        return None


def refusing(lacking: list[str | None]):
    """An access check that raises ``lacking[0]`` while it is set, and counts the questions."""
    asked = []

    def check() -> None:
        asked.append(lacking[0])
        if lacking[0] is not None:
            raise RuntimeError(lacking[0])

    return check, asked


def turns_until_granted(p: Presence, clock: Clock, limit: float) -> float:
    """Seconds the loop waits (its turns while :meth:`Presence.waiting`) before the access is found back."""
    start = clock.now
    while p.waiting():
        assert clock.now - start < limit, "still waiting"
    return clock.now - start


def test_a_refusal_makes_the_service_not_ready_and_is_asked_about_again_with_a_growing_back_off(clock, caplog):
    lacking = [LACKING]
    check, asked = refusing(lacking)
    metrics = Metrics()
    p = Presence(metrics, logging.getLogger("t"), check)
    with caplog.at_level(logging.WARNING, "t"):
        p.refused("transaction commit failed: TOPIC_AUTHORIZATION_FAILED")
        p.refused("recovery: refused again")  # the recovery after the step: the same attempt, not said again
        assert metrics.refused == LACKING  # what the access check names, not the client's error
        waits, said = [], len(caplog.records)
        for _ in range(8):  # refused at every question: each wait twice the last, up to the longest
            start = clock.now
            while p.waiting() and len(caplog.records) == said:
                pass
            waits.append(clock.now - start)
            said = len(caplog.records)
    assert waits == pytest.approx([min(ACCESS_BACKOFF * 2 ** i, MAX_ACCESS_BACKOFF) for i in range(8)])
    assert len(caplog.records) == 9 and all("not authorized to WRITE topic" in r.getMessage() for r in caplog.records)
    assert len(asked) == 9  # once when refused (to name it), then once per back-off
    assert not p.returned([], Answering())
    lacking[0] = None  # granted again
    assert turns_until_granted(p, clock, MAX_ACCESS_BACKOFF + 1) == pytest.approx(MAX_ACCESS_BACKOFF)
    assert p.returned([], Answering()) and metrics.refused == LACKING  # not ready until the host has started afresh
    assert "grants the access again" in p.renewed()
    assert metrics.refused is None and not p.returned([], Answering()) and not p.waiting()


def test_the_back_off_starts_again_only_after_a_commit(clock):
    lacking = [LACKING]
    check, _ = refusing(lacking)
    metrics = Metrics()
    p = Presence(metrics, logging.getLogger("t"), check)
    waits = []
    for committed in (False, False, True):
        p.refused("refused")
        lacking[0] = None
        waits.append(turns_until_granted(p, clock, MAX_ACCESS_BACKOFF + 1))
        p.renewed()
        lacking[0] = LACKING  # refused again after the fresh start: before a commit, or after one
        metrics.counters.commits += committed
    p.refused("refused")
    lacking[0] = None
    waits.append(turns_until_granted(p, clock, MAX_ACCESS_BACKOFF + 1))
    assert waits == pytest.approx([ACCESS_BACKOFF, 2 * ACCESS_BACKOFF, 4 * ACCESS_BACKOFF, ACCESS_BACKOFF])


def test_a_check_that_names_nothing_keeps_the_clients_reason(clock):
    check, _ = refusing([None])  # a group or transactional id ACL: the topic check sees nothing lacking
    metrics = Metrics()
    p = Presence(metrics, logging.getLogger("t"), check)
    p.refused("recovery: Broker: Transactional Id authorization failed")
    assert p.waiting() and metrics.refused == "recovery: Broker: Transactional Id authorization failed"


class Sink:
    """The sink's recovery (a new producer, the consumer rewound), refused by the authorizer or not."""

    def __init__(self, refuse: bool) -> None:
        self.refuse, self.recoveries = refuse, 0

    def recover(self, consumer, stopped, on_wait) -> bool:
        self.recoveries += 1
        if self.refuse:
            raise DeliveryError("recovery: Broker: Transactional Id authorization failed", denied=True)
        return True


@pytest.mark.parametrize("recovery_refused", [False, True])
def test_a_step_the_authorizer_refuses_is_replayed_and_said_once(clock, caplog, recovery_refused):
    check, _ = refusing([None])
    metrics, log, sink, rewinds = Metrics(), logging.getLogger("t"), Sink(recovery_refused), []
    p = Presence(metrics, log, check)
    recovery = Recovery(Checkpoint(100), metrics.counters, metrics, p, log, "dl", lambda: sink,
                        lambda: rewinds.append(1), lambda: False)

    def commit() -> None:
        raise DeliveryError("transaction commit failed: TOPIC_AUTHORIZATION_FAILED", denied=True)

    with caplog.at_level(logging.INFO, "t"):
        assert not recovery.guarded(None, commit)
    assert metrics.refused == "transaction commit failed: TOPIC_AUTHORIZATION_FAILED" and p.waiting()
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # said once, not "not delivered"
    assert (sink.recoveries, len(rewinds), metrics.counters.replays) == (1, int(not recovery_refused), 1)
    assert not metrics.recovering
