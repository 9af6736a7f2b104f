"""Whether the Kafka cluster is there: /readyz says not ready while no broker answers, and the loop waits for it.

Two signs of an outage: librdkafka's ``_ALL_BROKERS_DOWN`` on any client (:meth:`Presence.client_error`), and a
metadata request the idle loop sends every :data:`IDLE_PROBE` seconds that goes unanswered.  While the cluster is
away the loop turns (``/healthz`` stays healthy) and asks again once a second; a batch or an answer shows it back
(:meth:`Presence.returned`), and the host then starts afresh from the committed offsets (``runtime.host``).
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from .metrics import Metrics

#: Seconds without input after which the loop asks the cluster whether it is there (no more often than that).
IDLE_PROBE = 3.0
PROBE_TIMEOUT = 5.0


class Presence:
    """The cluster's presence as the loop sees it; ``metrics.unreachable`` is what /readyz reads."""

    def __init__(self, metrics: Metrics, log: logging.Logger) -> None:
        self.metrics, self.log = metrics, log
        self._probed = 0.0  # when the loop last asked for metadata (idle, or while the cluster was unreachable)
        self._heard = time.monotonic()  # when the loop last had input or an answer from the cluster

    def client_error(self, err: KafkaError) -> None:
        """librdkafka's error callback (every client's): all brokers down makes the service not ready."""
        if err.code() == KafkaError._ALL_BROKERS_DOWN and not self.metrics.unreachable:
            self.metrics.unreachable = True
            self.log.warning("the Kafka cluster is unreachable (%s): waiting for it, not ready", err.str())

    def returned(self, batch: list[Message], consumer: Consumer) -> bool:
        """After a consume: whether the cluster, unreachable until now, is back (then the caller starts afresh).
        A batch is an answer; an idle loop probes (:meth:`_probe`), an unreachable one asks a second
        (:meth:`_answers`)."""
        if batch:
            self._heard = time.monotonic()
        elif not self.metrics.unreachable:
            self._probe(consumer)
        return self.metrics.unreachable and (bool(batch) or self._answers(consumer))

    def renewed(self) -> None:
        """The caller started afresh: ready again."""
        self.metrics.unreachable = False

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
