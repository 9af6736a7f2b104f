"""Whether the Kafka cluster is there for the service: /readyz says not ready while no broker answers, or while the
broker's authorizer refuses what the service needs, and the loop waits for it.

Two signs of an outage: librdkafka's ``_ALL_BROKERS_DOWN`` on any client (:meth:`Presence.client_error`), and a
metadata request the idle loop sends every :data:`IDLE_PROBE` seconds that goes unanswered.  While the cluster is
away the loop turns (``/healthz`` stays healthy) and asks again once a second; a batch or an answer shows it back
(:meth:`Presence.returned`), and the host then starts afresh from the committed offsets (``runtime.host``).

A refusal (an ACL revoked while the service runs: ``kafka.delivery.AUTHORIZATION``) is the other absence
(:meth:`Presence.refused`): asking again at once would be refused again, so the loop takes no turn
(:meth:`Presence.waiting`) and asks the cluster whether the access is back (the start's access check) after
:data:`ACCESS_BACKOFF` seconds, twice as long after each refusal since the last commit, up to
:data:`MAX_ACCESS_BACKOFF`, saying so once each time; once it is, the host starts afresh as after an outage.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from fastpubsub.kafka.admin import ConnectionFailed

from .metrics import Metrics

#: Seconds without input after which the loop asks the cluster whether it is there (no more often than that).
IDLE_PROBE = 3.0
PROBE_TIMEOUT = 5.0
#: Seconds a refused service waits before it asks whether the access is back; each refusal without a commit since
#: the last one doubles the wait, up to the longest.
ACCESS_BACKOFF, MAX_ACCESS_BACKOFF = 1.0, 30.0


class Presence:
    """The cluster's presence as the loop sees it; ``metrics.unreachable`` and ``metrics.refused`` are what /readyz
    reads.  ``access``: the start's access check (raises ``RuntimeError`` naming what the principal lacks)."""

    def __init__(self, metrics: Metrics, log: logging.Logger, access: Callable[[], None]) -> None:
        self.metrics, self.log, self.access = metrics, log, access
        self._probed = 0.0  # when the loop last asked for metadata (idle, or while the cluster was unreachable)
        self._heard = time.monotonic()  # when the loop last had input or an answer from the cluster
        self._backoff = ACCESS_BACKOFF
        self._commits = -1  # the commits counted at the last refusal: none since then doubles the back-off
        self._asking_at: float | None = None  # refused: when the loop asks again whether the access is back
        self._granted = False  # the access is back: the caller starts afresh (:meth:`returned`)

    def client_error(self, err: KafkaError) -> None:
        """librdkafka's error callback (every client's): all brokers down makes the service not ready."""
        if err.code() == KafkaError._ALL_BROKERS_DOWN and not self.metrics.unreachable:
            self.metrics.unreachable = True
            self.log.warning("the Kafka cluster is unreachable (%s): waiting for it, not ready", err.str())

    def refused(self, reason: str) -> None:
        """A step was refused by the broker's authorizer (``reason``): not ready, with what the principal lacks as
        the access check names it; the loop waits (:meth:`waiting`).  Said once per back-off: a second refusal
        before the loop asks again (the recovery after the step's) only confirms it."""
        if self._asking_at is None:
            self._refuse(self._lacking() or reason)

    def _refuse(self, reason: str) -> None:
        commits = self.metrics.counters.commits
        self._backoff = ACCESS_BACKOFF if commits != self._commits else min(2 * self._backoff, MAX_ACCESS_BACKOFF)
        self._commits, self._asking_at, self._granted = commits, time.monotonic() + self._backoff, False
        self.metrics.refused = reason
        self.log.warning("refused by the Kafka cluster's authorizer: %s; not ready, asking again in %.0fs",
                         self.metrics.refused, self._backoff)

    def waiting(self) -> bool:
        """While refused: True until the back-off has passed (a short sleep each call, so the loop still turns),
        then asks whether the access is back: refused again (:meth:`refused`), or granted, and the caller goes on
        to start afresh (:meth:`returned`)."""
        if self._asking_at is None:
            return False
        left = self._asking_at - time.monotonic()
        if left > 0:
            time.sleep(min(left, 0.2))
            return True
        self._asking_at = None
        lacking = self._lacking()
        if lacking is not None:
            self._refuse(lacking)
            return True
        self._granted = True
        return False

    def _lacking(self) -> str | None:
        """What the access check says the principal lacks (None: nothing it can see, or no answer)."""
        try:
            self.access()
        except (ConnectionFailed, KafkaException):
            return None
        except RuntimeError as exc:
            return str(exc)
        return None

    def returned(self, batch: list[Message], consumer: Consumer) -> bool:
        """After a consume: whether the cluster, unreachable or refusing until now, is back (then the caller starts
        afresh).  A batch is an answer; an idle loop probes (:meth:`_probe`), an unreachable one asks a second
        (:meth:`_answers`)."""
        if self._granted:
            return True
        if batch:
            self._heard = time.monotonic()
        elif not self.metrics.unreachable:
            self._probe(consumer)
        return self.metrics.unreachable and (bool(batch) or self._answers(consumer))

    def renewed(self) -> str:
        """The caller starts afresh: ready again; why, for its log."""
        why = "the Kafka cluster grants the access again" if self._granted else "the Kafka cluster answers again"
        self.metrics.unreachable, self.metrics.refused, self._granted = False, None, False
        return why

    def _probe(self, consumer: Consumer) -> None:
        """No input for :data:`IDLE_PROBE` seconds: a metadata request, at most that often.  librdkafka says
        ``_ALL_BROKERS_DOWN`` only once every broker it knows has failed a connection, and a broker it has not
        needed since the start is not counted as down: after a whole cluster's loss that can take long, or never
        come, while /readyz ought to say so within seconds."""
        now = time.monotonic()
        if now - self._heard < IDLE_PROBE or now - self._probed < IDLE_PROBE:
            return
        self._probed = now
        try:
            consumer.list_topics(timeout=PROBE_TIMEOUT)
        except KafkaException as exc:
            if not self.metrics.unreachable:
                self.metrics.unreachable = True
                self.log.warning("the Kafka cluster is unreachable (no broker answered a metadata request in %.0fs: "
                                 "%s): waiting for it, not ready", PROBE_TIMEOUT, exc.args[0].str())
            return
        self._heard = time.monotonic()

    def _answers(self, consumer: Consumer) -> bool:
        """While the cluster is unreachable, a metadata request a second: whether it answers again."""
        if time.monotonic() - self._probed < 1.0:
            return False
        self._probed = time.monotonic()
        try:
            consumer.list_topics(timeout=1.0)
        except KafkaException:
            return False
        return True
