"""How outputs and input offsets are committed together.

``transactional``: notifications, dead letters and the consumed event offsets
go in one Kafka transaction (``send_offsets_to_transaction``); on Apache Kafka
read_committed consumers see each notification once.

``at-least-once``: for brokers without transactions.  Outputs are produced
with an idempotent producer, then flushed until every one is acknowledged,
and only then are the input offsets committed.  A crash in between replays
what was not committed; the replayed notifications carry the same ``notification_id``.

Either way nothing is lost: offsets never move past unacknowledged output.

Fencing: a second producer with the same ``transactional.id`` (a restarted
instance, or one started while this one was paused) calls ``init_transactions``,
which aborts this one's open transaction and fences it: none of its later
writes can commit.  That is raised as :class:`Fenced`, not as a
:class:`DeliveryError`: recovering would start a new producer with the same id,
which would fence the instance that took over in its turn.  The coordinator
also bumps the epoch when it aborts a transaction that outlived
``transaction.timeout.ms`` (its node was paused, a commit waited on a slow
group coordinator), and librdkafka reports that as fencing too: a fencing error
of a transaction open that long is a :class:`DeliveryError`, replayed with a
new producer, since no other instance needs to have taken over
(tests/faults/test_cluster_faults.py).

Recovery: outputs or a commit that fail (broker gone, producer fenced or
desynchronised, e.g. by a broker that restarted and forgot its producer ids)
raise :class:`DeliveryError`; :meth:`Delivery.recover` then replaces the
producer and rewinds the consumer to its committed offsets, so what was not
committed (the batches since the last commit, ``processor.app``) is matched
and delivered again: nothing lost, duplicates only of those batches.

Back-pressure: the producer's queue is bounded (``kafka.queues``); when it
is full, :meth:`Delivery.produce` waits for acknowledgements and retries, never
drops, and counts the waits (``queue_full_waits``, a metric).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any, Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .clients import ClientFactory
from .queues import QueueBounds

log = logging.getLogger(__name__)

MODES = ("auto", "transactional", "at-least-once")

#: How long ``send_offsets_to_transaction`` may take before the producer is given up.  It normally answers in
#: milliseconds; librdkafka can wait on a group coordinator that vanished with a restarted broker for good, past
#: the timeout it was given (confluentinc/librdkafka#5456, #5511), so the call runs under a watchdog of our own.
SEND_OFFSETS_TIMEOUT = 15.0


#: Errors about one record, not about the broker: produced again they fail again (librdkafka's
#: local size check and the broker's verdicts on a record or its batch).
RECORD_ERRORS = frozenset({
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD,
    KafkaError.INVALID_MSG, KafkaError.INVALID_MSG_SIZE,
})

#: How long a start waits for the transaction coordinator to answer ``init_transactions``.
START_WAIT = 120.0

#: Errors that say the cluster did not answer, not what it answered.
UNANSWERED = frozenset({
    KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
    KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
})


def unanswered(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (err.code() in UNANSWERED or (err.retriable() and not err.fatal()))


#: The broker's authorizer said no: an ACL the principal needs is missing (revoked while it runs, say).  Asking
#: again at once is refused again: the host waits for the ACL, not ready, and asks with a back-off
#: (``runtime.presence``).
AUTHORIZATION = frozenset({
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
})


def denied(err: object) -> bool:
    """Whether ``err`` (a ``KafkaError``, or anything else) is the authorizer's refusal (:data:`AUTHORIZATION`)."""
    return isinstance(err, KafkaError) and err.code() in AUTHORIZATION


#: An input record: (topic, partition, offset).
Source = tuple[str, int, int]


class DeliveryError(RuntimeError):
    """Output the broker did not acknowledge; offsets were not committed.

    ``refused`` maps the input records whose outputs failed with a record
    error (:data:`RECORD_ERRORS`) to the reason: replaying them would fail
    again, so the processor dead-letters them on the replay instead.
    ``denied`` is set when the broker's authorizer refused (:data:`AUTHORIZATION`): replaying at once would be
    refused again.
    """

    def __init__(self, message: str, refused: dict[Source, str] | None = None, denied: bool = False) -> None:
        super().__init__(message)
        self.refused = refused or {}
        self.denied = denied


#: The broker's word that a newer producer with this transactional.id exists: librdkafka's fatal ``_FENCED``, or
#: the broker's error on a request (``PRODUCER_FENCED``) or on a record (``INVALID_PRODUCER_EPOCH``).
FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})


class Fenced(RuntimeError):
    """Another instance with the same ``transactional.id`` took over: this one must stop, not recover.

    Told from the error code (:data:`FENCED`) of a transactional producer's
    failure; its open transaction was aborted by the one that took over.
    """


class RecordRefused(ValueError):
    """``produce`` refused one record for what it is (too large, invalid): the batch can go on without it."""


class Delivery:
    def __init__(self, clients: ClientFactory, mode: str = "auto", transactional_id: str = "pubsub", init_timeout: float = 15.0,
                 bounds: QueueBounds = QueueBounds(), record_config: dict[str, Any] | None = None) -> None:
        """``record_config``: the record size settings of ``kafka.record_limits`` (they win over ``-X``)."""
        if mode not in MODES:
            raise ValueError(f"unknown delivery mode {mode!r}; expected one of {', '.join(MODES)}")
        # message.timeout.ms under the 60 s commit timeout: a record the broker never takes fails the batch
        # (which is then replayed, see recover) instead of a commit waiting on it
        # only failed records call back into Python: a callback per acknowledged record costs about a
        # microsecond of the loop's thread each, and only failures are acted on
        # transaction.timeout.ms: how long the coordinator lets a transaction of a silent producer stay open before
        # it aborts it; a default (-X may lower it), twice the longest --commit-interval-ms.  librdkafka refuses a
        # message.timeout.ms above it: a lower transaction timeout lowers the message timeout's default with it.
        # retry.backoff.ms (librdkafka: 100): the coordinator answers a transaction's first request right after the
        # previous commit with CONCURRENT_TRANSACTIONS until it has written that commit's markers, and librdkafka
        # waits the whole backoff before asking again: a 100 ms step in the p99 of back-to-back transactions (Java's
        # producer retries that case after 20 ms).  10 ms: p99 108-120 -> 21-25 ms (benchmarks.pipeline.commit_path
        # --retry-backoff-ms); retries still back off exponentially up to retry.backoff.max.ms.
        transaction_ms = int(clients.settings.get("transaction.timeout.ms", 60_000))
        defaults = {"linger.ms": 5, "retry.backoff.ms": 10, "message.timeout.ms": min(30_000, transaction_ms),
                    "delivery.report.only.error": True, "transaction.timeout.ms": transaction_ms, **bounds.producer()}
        sizes = record_config or {}
        self._transactional = clients.producer_config(defaults, **{**sizes, "acks": "all",
                                                                   "transactional.id": transactional_id})
        self._idempotent = clients.producer_config(defaults, **{**sizes, "acks": "all", "enable.idempotence": True})
        self._clients = clients
        self._init_timeout = init_timeout
        self.transactional_id = transactional_id
        self.mode = "at-least-once"
        if mode in ("auto", "transactional"):
            try:
                self.producer, self.mode = self._first_producer(), "transactional"
            except KafkaException as exc:
                # a producer the settings make impossible, or a cluster that never answered, is a mistake to show,
                # not a broker without transactions
                if mode == "transactional" or exc.args[0].code() == KafkaError._INVALID_ARG or unanswered(exc):
                    raise
                log.warning("broker does not support transactions (%s); falling back to at-least-once", exc.args[0])
        if self.mode == "at-least-once":
            self.producer = self._new_producer("at-least-once")
        self.recoveries = 0  # producers replaced after a failed batch
        #: producers left blocked in a call that never returned: kept referenced, as freeing one that a thread
        #: is still inside would crash the process (one per stuck call, which is rare)
        self._abandoned: list[Producer] = []
        self._in_transaction = False
        self._began: float | None = None  # when the open (or failed) transaction began; None once it has ended
        self._transaction_ms = transaction_ms
        self._failures: list[str] = []
        self._denied = False  # a failure reported so far was the authorizer's refusal
        self._fenced: KafkaError | None = None  # a delivery report said the producer was fenced, or fatal
        #: set once this producer is known to be fenced: for good, it is never replaced (see :meth:`recover`)
        self.fenced: Fenced | None = None
        self._refused: dict[Source, str] = {}
        self.bound = bounds.producer_messages
        self.queue_full_waits = 0  # produce() found the queue full and waited: back-pressure at work
        #: where commits spend their time, waiting on the broker mostly: ``flush`` (outputs acknowledged; for a
        #: transaction only the reports already in are served, commit_transaction waits for the rest),
        #: ``offsets`` (send_offsets_to_transaction, or at-least-once the offset commit), ``transaction``
        #: (commit_transaction)
        self.commit_seconds = {"flush": 0.0, "offsets": 0.0, "transaction": 0.0}

    def _first_producer(self) -> Producer:
        """The transactional producer, ``init_transactions`` tried again while the cluster does not answer (a node
        restarting, the coordinator moving) for up to :data:`START_WAIT` seconds: a timeout says nothing of whether
        the broker has transactions."""
        deadline = time.monotonic() + START_WAIT
        while True:
            try:
                return self._new_producer("transactional")
            except KafkaException as exc:
                if not unanswered(exc) or time.monotonic() > deadline:
                    raise
                log.warning("init_transactions: %s; again in 1s", exc.args[0])
                time.sleep(1)

    def _new_producer(self, mode: str) -> Producer:
        if mode == "at-least-once":
            return self._clients.producer(**self._idempotent)  # already merged: nothing may override it again
        producer = self._clients.producer(**self._transactional)
        producer.init_transactions(self._init_timeout)  # also ends a transaction a predecessor left open
        return producer

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            denied = err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and msg is not None
            self._failures.append(f"not authorized to WRITE topic {msg.topic()} ({err.str()})" if denied else str(err))
            self._denied = self._denied or denied
            if self._fenced is None and (err.code() in FENCED or err.code() == KafkaError._FATAL):
                self._fenced = err

    def _on_delivery_of(self, source: Source, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self._on_delivery(err, _msg)
            if err.code() in RECORD_ERRORS:
                self._refused[source] = f"output refused by the broker: {err.str()}"

    def produce(self, topic: str, key: bytes | str | None, value: bytes | None, source: Source | None = None,
                headers: list[tuple[str, bytes]] | None = None, partition: int | None = None,
                timestamp: int | None = None) -> None:
        """Queue one output record; ``source`` is the input record it comes from, named if the broker refuses it.
        ``value`` None is a tombstone (changelogs); ``headers`` go with the record; ``partition`` overrides the
        key's (a changelog partition belongs to its input partition); ``timestamp`` (ms) keeps an input's event time
        (a repartition topic)."""
        callback = self._on_delivery if source is None else functools.partial(self._on_delivery_of, source)
        self._produce_all(topic, ((key, value, headers),), partition, callback, timestamp)

    def produce_many(self, topic: str, records: list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]],
                     partition: int) -> None:
        """:meth:`produce` of many ``(key, value or None, headers)`` records to one partition (a changelog's
        changes): one call per batch instead of one per record."""
        if records:
            self._produce_all(topic, records, partition, self._on_delivery)

    def _produce_all(self, topic: str, records, partition: int | None, callback, timestamp: int | None = None) -> None:
        value = None
        try:
            if self.mode == "transactional" and not self._in_transaction:
                self._begin()
            produce = self.producer.produce
            for key, value, headers in records:
                extra: dict[str, Any] = {"headers": headers} if headers else {}
                if partition is not None:
                    extra["partition"] = partition
                if timestamp is not None:
                    extra["timestamp"] = timestamp
                while True:
                    try:
                        produce(topic, value, key, on_delivery=callback, **extra)
                        break
                    except BufferError:  # local queue full: serve acknowledgements until there is room, never drop
                        self.queue_full_waits += 1
                        self.producer.poll(0.05)
        except KafkaException as exc:
            if isinstance(exc.args[0], KafkaError) and exc.args[0].code() in RECORD_ERRORS:
                raise RecordRefused(f"output refused: {exc.args[0].str()} ({len(value or b'')} bytes to {topic})") from None
            raise self._failed("produce failed", exc) from None
        except SystemError as exc:  # a producer in a fatal or abortable state (see _flush)
            raise self._failed("produce failed", exc) from None

    def _begin(self) -> None:
        self.producer.begin_transaction()
        self._in_transaction = True
        self._began = time.monotonic()

    def _outlived(self) -> float | None:
        """Seconds the transaction not yet ended has been open, if past ``transaction.timeout.ms``: the coordinator
        may have aborted it and bumped the producer's epoch, which librdkafka reports as fencing."""
        if self._began is None:
            return None
        age = time.monotonic() - self._began
        return age if age * 1000 >= self._transaction_ms else None

    def pending(self) -> bool:
        return self._in_transaction or len(self.producer) > 0

    def commit(self, consumer: Consumer | None = None, offsets: list[TopicPartition] | None = None, timeout: float = 60.0,
               group_metadata: object | None = None) -> None:
        """Make the outputs durable, then (atomically, if transactional) commit ``offsets`` of ``consumer``.

        ``group_metadata``: ``consumer.consumer_group_metadata()`` taken by the caller (None: asked for here).  A
        commit on another thread than the consumer's takes it on the consumer's thread first: asked for while that
        thread is in ``consume()``, it waits for that call to return (docs/processor.md, "Batches and commits")."""
        if self.mode == "transactional":
            if offsets and not self._in_transaction:
                # Nothing produced since the last commit: no output to be atomic with, so the consumer commits
                # the offsets itself (fenced by the group generation), without a transaction's round trips to
                # the coordinator and its markers (tests/pipeline/test_quiet_batches.py).
                self._raise_failures()
                t = time.perf_counter()
                try:
                    consumer.commit(offsets=offsets, asynchronous=False)
                except KafkaException as exc:
                    raise self._failed("offset commit failed", exc) from None
                self._lap("offsets", t)
                return
            if offsets:
                # No flush before the offsets: commit_transaction flushes the outputs itself, and waiting for their
                # acknowledgements first added a round trip to every commit (benchmarks.pipeline.commit_path).  The
                # failures reported so far are served and raised first (a record refused, a producer fenced);
                # a send_offsets_to_transaction that hangs on a coordinator gone with a restarted broker is cut
                # by its watchdog (_watched).
                t = time.perf_counter()
                if self._in_transaction:
                    self._poll()
                t = self._lap("flush", t)
                self._raise_failures()
                try:
                    if not self._in_transaction:
                        self._begin()
                    metadata = consumer.consumer_group_metadata() if group_metadata is None else group_metadata
                    self._watched("send_offsets_to_transaction", SEND_OFFSETS_TIMEOUT,
                                  lambda: self.producer.send_offsets_to_transaction(offsets, metadata,
                                                                                    SEND_OFFSETS_TIMEOUT))
                except KafkaException as exc:
                    raise self._failed("sending offsets to the transaction failed", exc) from None
                self._lap("offsets", t)
            if self._in_transaction:
                t = time.perf_counter()
                try:
                    self.producer.commit_transaction(timeout)
                    self._began = None
                except KafkaException as exc:
                    error = self._failed("transaction commit failed", exc)
                    if not isinstance(error, Fenced):
                        self._denied = self._denied or error.denied
                        self._raise_failures()  # the records at fault, served while the commit flushed, if any
                    raise error from None
                finally:
                    self._in_transaction = False
                    self._lap("transaction", t)
            self._raise_failures()
            return
        t = time.perf_counter()
        remaining = self._flush(timeout)
        t = self._lap("flush", t)
        if remaining:
            raise DeliveryError(f"{remaining} records not acknowledged within {timeout:.0f}s")
        self._raise_failures()
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                raise DeliveryError(f"offset commit failed: {exc.args[0]}", denied=denied(exc.args[0])) from None
            self._lap("offsets", t)

    def _watched(self, what: str, timeout: float, call: Callable[[], None]) -> None:
        """``call()`` on a thread, given ``timeout`` plus a grace second; past that the producer is abandoned and
        the batch fails (:class:`DeliveryError`), so :meth:`recover` replaces the producer and replays the batch."""
        outcome: list[BaseException] = []

        def run() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                outcome.append(exc)

        worker = threading.Thread(target=run, name=f"delivery-{what}", daemon=True)
        worker.start()
        worker.join(timeout + 1.0)
        if worker.is_alive():
            self._abandoned.append(self.producer)
            raise DeliveryError(f"{what} did not return within {timeout:.0f}s (the group coordinator is gone); "
                                "replacing the producer")
        if outcome:
            raise outcome[0]

    def _failed(self, what: str, exc: KafkaException | SystemError) -> Exception:
        """The exception to raise for a client call that failed: :class:`Fenced` if the error code says so.

        A ``SystemError`` ("... returned a result with an exception set", see
        :meth:`_flush`) carries the producer's ``KafkaException`` as its cause:
        a fenced producer's flush failed that way (tests/faults/test_exactly_once.py).
        """
        cause = exc.__cause__ if isinstance(exc, SystemError) else exc
        err = cause.args[0] if isinstance(cause, KafkaException) and cause.args else None
        reason = self._reason(err) if isinstance(err, KafkaError) else None
        if reason is not None and self.mode == "transactional" and reason.code() in FENCED:
            return self._fenced_error(f"{what}: {reason.str()}")
        return DeliveryError(f"{what}: {err if err is not None else exc}", denied=denied(reason))

    def _fencing(self, err: KafkaError) -> KafkaError | None:
        """The error that says this transactional producer was fenced, if ``err`` is or hides one."""
        if self.mode != "transactional":
            return None
        err = self._reason(err)
        return err if err.code() in FENCED else None

    def _reason(self, err: KafkaError) -> KafkaError:
        """``err``, or the error it hides: a call on a transactional producer that is already fatal fails with
        ``_FATAL`` and no reason, which the transactional API names (:meth:`_fatal_error`)."""
        if self.mode == "transactional" and err.code() == KafkaError._FATAL:
            return self._fatal_error() or err
        return err

    def _fatal_error(self) -> KafkaError | None:
        """The error that made the producer fatal, from an abort it refuses (None if it is not fatal)."""
        try:
            self.producer.abort_transaction(1)
        except KafkaException as exc:
            return exc.args[0] if exc.args[0].fatal() else None
        self._in_transaction, self._began = False, None  # not fatal, its transaction aborted: replayed as any failure
        return None

    def _fenced_error(self, reason: str) -> Fenced | DeliveryError:
        """:class:`Fenced`, unless the transaction outlived its timeout: then the broker aborted it and bumped the
        epoch itself (a node paused, a coordinator slow to answer), no other instance took over, and a new producer
        with the same id goes on (:class:`DeliveryError`, replayed)."""
        age = self._outlived() if self.fenced is None else None
        if age is not None:
            return DeliveryError(f"the transaction was open {age:.0f}s, past transaction.timeout.ms "
                                 f"({self._transaction_ms} ms): the broker aborted it ({reason})")
        if self.fenced is None:
            self.fenced = Fenced(f"fenced: another instance with transactional.id {self.transactional_id} took over "
                                 f"({reason})")
        return self.fenced

    def _lap(self, part: str, since: float) -> float:
        now = time.perf_counter()
        self.commit_seconds[part] += now - since
        return now

    def recover(self, consumer: Consumer | None, should_stop: Callable[[], bool] = lambda: False,
                on_wait: Callable[[], None] = lambda: None) -> bool:
        """After a :class:`DeliveryError`: a new producer, and ``consumer`` back at its committed offsets.

        :class:`Fenced` instead if the producer turns out to be fenced (its abort says so), or was found to be.

        The failed batch's outputs are abandoned (aborted, or left to the
        broker: they may show up as duplicates, never as losses) and its events
        are fetched again.  Retries every second until the broker answers
        (``on_wait`` is called meanwhile) or ``should_stop``; False if stopped.
        """
        if self.fenced is not None:  # a new producer with its id would fence the instance that took over
            raise self.fenced
        old, in_transaction, self._in_transaction = self.producer, self._in_transaction, False
        stuck = any(p is old for p in self._abandoned)  # a thread is inside it: no further call on it
        try:
            if in_transaction and not stuck:
                old.abort_transaction(5)
        except KafkaException as exc:  # fatal: the next init_transactions with the same id ends it
            fencing = self._fencing(exc.args[0])
            if fencing is not None and self._outlived() is None:  # e.g. a zombie's offset commit failed first
                raise self._fenced_error(f"abort failed: {fencing.str()}") from None
            log.debug("abort before recovery: %s", exc.args[0])
        try:
            if not stuck:
                old.purge()  # nothing of the failed batch is waited for
                old.flush(0)
        except (KafkaException, RuntimeError, SystemError) as exc:
            log.debug("discarding the old producer: %s", exc)
        self._failures.clear()  # including the old producer's "purged" reports
        self._fenced, self._denied = None, False
        self._refused.clear()
        while not should_stop():
            try:
                # The new producer before the rewind: its init_transactions ends a transaction the failed one left
                # open (a commit_transaction that failed after send_offsets_to_transaction), whose offsets a
                # read_committed consumer's committed() otherwise waits for until the transaction times out.
                if self.producer is old:
                    self.producer = self._new_producer(self.mode)
                if consumer is not None:
                    rewind(consumer)
                self._began = None
                self.recoveries += 1
                return True
            except KafkaException as exc:
                if denied(exc.args[0]):  # asked again at once, refused again: the caller waits for the ACL
                    raise DeliveryError(f"recovery: {exc.args[0].str()}", denied=True) from None
                log.warning("recovery: %s; retrying in 1s", exc.args[0])
                on_wait()
                time.sleep(1)
        return False

    def _flush(self, timeout: float) -> int:
        """``producer.flush``; a producer that turned fatal meanwhile is a :class:`DeliveryError`.

        After a broker that lost its state comes back, the idempotent producer
        can fail with "out of order sequence number" while serving delivery
        reports; confluent-kafka then raises ``SystemError`` ("returned a
        result with an exception set") from the call that served them, which
        must replace the producer, not stop the processor.
        """
        try:
            return self.producer.flush(timeout)
        except (KafkaException, SystemError) as exc:
            raise self._failed("flush failed", exc) from None

    def _poll(self) -> None:
        """Serve the delivery reports already in (no wait); a producer that turned fatal is a :class:`DeliveryError`
        (see :meth:`_flush`)."""
        try:
            self.producer.poll(0)
        except (KafkaException, SystemError) as exc:
            raise self._failed("poll failed", exc) from None

    def _raise_failures(self) -> None:
        reported, self._fenced = self._fenced, None
        fencing = self._fencing(reported) if reported is not None else None
        if fencing is not None:
            self._failures.clear()
            self._refused.clear()
            raise self._fenced_error(f"a record failed: {fencing.str()}")
        if self._failures:
            first, n, refused, refusal = self._failures[0], len(self._failures), dict(self._refused), self._denied
            self._failures.clear()
            self._refused.clear()
            self._denied = False
            raise DeliveryError(f"{n} records failed delivery, first: {first}", refused, refusal)

    def close(self) -> None:
        """Abort an open transaction, wait up to 10 s for what is queued, then close the producer.

        Closing ends the producer's threads and connections now: freeing the producer would end them only once
        nothing refers to it, and a stopped service's objects refer to each other in cycles that the collector
        never frees once the service has frozen them as long-lived (``runtime.gcwatch``), so a process that runs
        services one after another (an embedding application, the test suite) would keep every producer running.
        """
        aborted = True
        if self.mode == "transactional" and self._in_transaction:
            self._in_transaction = False
            try:
                self.producer.abort_transaction(10)
            except KafkaException as exc:  # a failed producer: its transaction ends with it
                log.warning("abort on close: %s", exc.args[0])
                aborted = False
        try:
            self.producer.flush(10)
        except (KafkaException, SystemError) as exc:  # a fatal (e.g. fenced) producer: not the reason to report
            log.warning("flush on close: %s", exc)
        if aborted:  # Producer.close aborts an open transaction itself, with no time limit
            self._close_producer()

    def _close_producer(self) -> None:
        """``Producer.close`` once nothing is queued: it flushes without a time limit, so what could not be delivered
        is purged first.  A producer a thread is still inside (:attr:`_abandoned`) is left alone."""
        producer = self.producer
        if any(p is producer for p in self._abandoned):
            return
        try:
            producer.purge()
            producer.flush(0)  # the purged records' reports
            if len(producer) == 0:
                producer.close()
        except (KafkaException, RuntimeError, SystemError) as exc:  # a fatal producer: freed when unreferenced
            log.debug("close: %s", exc)


def rewind(consumer: Consumer, timeout: float = 10.0) -> None:
    """Seek every assigned partition back to its committed offset (the log's start if none: auto.offset.reset)."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=timeout):
        if tp.offset < 0:  # nothing committed: the log's start (an explicit offset; seeking to a logical one stalled)
            tp.offset = consumer.get_watermark_offsets(tp, timeout=timeout)[0]
        log.info("rewinding %s [%d] to offset %d", tp.topic, tp.partition, tp.offset)
        consumer.seek(tp)
