"""Failures: a step that produces and commits fails, and the inputs and the task go back to the committed offsets.

A failed delivery (``kafka.delivery.DeliveryError``) or a consumer's call that failed for want of the cluster is
replayed: what was consumed since the last commit is consumed again by a new producer's transaction, and the task's
state is rewound with it (``Task.rewind``), so that what is replayed meets the state it met the first time.
Records the broker refused are dead-lettered on the replay; a refusal shared by many records narrows the replay to
one record per batch until the one at fault shows (``runtime.checkpoint``).  A refusal by the broker's authorizer
(``DeliveryError.denied``: an ACL revoked) is replayed too, but the loop then waits for the access with a back-off
(``runtime.presence``) instead of being refused again at once.  A fenced producer (``kafka.delivery.Fenced``) is no
``DeliveryError``: it goes up and stops the host.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, TypeVar

from confluent_kafka import Consumer, KafkaException, Message

from fastpubsub.kafka.admin import transient
from fastpubsub.kafka.delivery import DeliveryError, denied

from .checkpoint import Checkpoint
from .counters import PipelineCounters
from .metrics import Metrics
from .presence import Presence
from .sink import Reject, Sink
from .task import Outputs

T = TypeVar("T")


class Recovery:
    """Runs the loop's steps guarded (:meth:`guarded`) and replays from the committed offsets when one fails."""

    def __init__(self, checkpoint: Checkpoint, counters: PipelineCounters, metrics: Metrics, presence: Presence,
                 log: logging.Logger, dead_letter_topic: str, sink: Callable[[], Sink], rewind: Callable[[], None],
                 stopped: Callable[[], bool]) -> None:
        self.checkpoint, self.counters, self.metrics, self.presence, self.log = checkpoint, counters, metrics, presence, log
        self.dead_letter_topic, self.sink, self.rewind, self.stopped = dead_letter_topic, sink, rewind, stopped

    def guarded(self, consumer: Consumer | None, step: Callable[..., None], *args: Any) -> bool:
        """Run a step that produces and commits; if it fails, replay from the committed offsets (kafka.delivery).

        Input records whose outputs the broker refused for what they are (``DeliveryError.refused``) are
        dead-lettered on the replay (``Checkpoint.screen``); a refusal shared by several records splits the replay
        into batches of one record until the committed offsets pass them.  Other failures (a broker gone, or a
        consumer's call that failed for want of the cluster) are retried as long as they last, and /healthz turns
        unhealthy meanwhile.  False if the step failed.
        """
        try:
            step(*args)
            return True
        except KafkaException as exc:  # a consumer's call (a restore, a rewind) while the cluster is away, or refused
            return self._replay(consumer, DeliveryError(f"{getattr(step, '__name__', 'step')} failed: {exc.args[0]}",
                                                        denied=denied(exc.args[0])))
        except DeliveryError as exc:
            return self._replay(consumer, exc)

    def _replay(self, consumer: Consumer | None, exc: DeliveryError) -> bool:
        """What :meth:`guarded` does with a failed step: the inputs and the task back at the committed offsets."""
        self.checkpoint.abandon_in_flight(close=False)  # nothing is in flight when a step fails, but be sure of it
        self.checkpoint.failed(exc)
        self.counters.replays += 1
        if exc.denied:
            self.presence.refused(str(exc))  # said once per back-off, not per replay
        else:
            self.log.error("not delivered (%s): new producer, input again from the committed offsets%s", exc,
                           f"; {len(exc.refused)} refused records go to {self.dead_letter_topic}" if exc.refused else "")
        self.recover(consumer)
        return False

    def renew(self, consumer: Consumer, why: str) -> None:
        """The cluster answers again after an outage, or grants the access again (``why``).  A producer that knew its old coordinators can wait on them
        for good (``send_offsets_to_transaction``, confluentinc/librdkafka#5456; 15 s until its watchdog): start
        afresh at once instead, as after a failed delivery, with a new producer and the inputs and the task back at
        the committed offsets (what was consumed and not committed is consumed again)."""
        self.log.info("%s: ready; a new producer, input again from the committed offsets", why)
        self.checkpoint.abandon_in_flight(close=False)
        self.checkpoint.failed(DeliveryError(why))
        self.recover(consumer)

    def recover(self, consumer: Consumer | None) -> None:
        """The producer and the consumer first: recover waits for the cluster (a new transactional producer may wait
        minutes for its coordinator), and a task's rewind may read it (the table service restores from its
        changelog).  Not ready meanwhile: the loop serves nothing, and polls no client whose error callback would
        say the cluster is away.  A recovery the authorizer refuses (the transactional id's or the group's ACL
        revoked) waits for the access as a refused step does; the next one starts afresh."""
        self.metrics.recovering = True
        try:
            if self.sink().recover(consumer, self.stopped, lambda: None):
                self.rewind()
        except DeliveryError as exc:
            if not exc.denied:
                raise
            self.presence.refused(str(exc))
        finally:
            self.metrics.recovering = False


def isolating(process: Callable[[list[Message], Outputs], int], msgs: list[Message], out: Outputs,
              rejects: list[Reject], log: logging.Logger) -> int:
    """``process(msgs, out)`` (the task on a batch).  If it raises, the batch is a suspect: alone, its record is
    dead-lettered with the reason; with others, they are replayed one by one (as a refusal of many records is) to
    find it."""
    try:
        return process(msgs, out)
    except (DeliveryError, KafkaException):
        raise
    except Exception as exc:  # noqa: BLE001 -- a record the task cannot process must not stop the pipeline
        reason = f"processing failed: {type(exc).__name__}: {exc}"
        log.exception("%s (%d records)", reason, len(msgs))
        if len(msgs) == 1:
            rejects.append((msgs[0], reason))
            out.clear()  # the task's partial outputs are dropped with the record
            return 0
        raise DeliveryError(reason, {(m.topic(), m.partition(), m.offset()): reason for m in msgs}) from exc


def while_away(step: Callable[[], T], stopped: Callable[[], bool], log: logging.Logger, patience: float | None = None,
               what: str | None = None) -> T:
    """``step()``, again every second while the cluster does not answer it (until ``stopped()``); its result.

    ``patience`` (seconds): only a transient failure (a timeout, a retriable error) is retried, for that long;
    then, or for any other error, the step's error is raised with what the cluster last said."""
    deadline = None if patience is None else time.monotonic() + patience
    while True:
        try:
            return step()
        except (KafkaException, FutureTimeout) as exc:
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            said = error if error is not None else "no answer in time"
            if stopped():
                raise
            if deadline is not None:
                if error is not None and not transient(error):
                    raise
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what or 'a step'}: the Kafka cluster did not answer within "
                                       f"{patience:.0f}s: {said}") from exc
            log.warning("%s: %s; again in 1s", what or getattr(step, "__name__", "step"), said)
            time.sleep(1)
