"""Offsets never move past unacknowledged output (with fake clients, to force failures)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from fastpubsub.kafka import clients
from fastpubsub.kafka.delivery import Delivery, DeliveryError, Fenced


class FakeProducer:
    """Records calls; deliveries succeed unless ``fail`` is set; no transactions unless ``transactions``."""

    transactions = False
    fail = False
    error = KafkaError._MSG_TIMED_OUT  # what a failed delivery reports

    def __init__(self, config: dict) -> None:
        self.config, self.calls, self._queue = config, [], []

    def init_transactions(self, timeout: float) -> None:
        if not self.transactions:
            raise KafkaException(KafkaError(KafkaError._UNSUPPORTED_FEATURE))
        self.calls.append("init_transactions")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, topic, value, key, on_delivery) -> None:
        self._queue.append((on_delivery, topic))
        self.calls.append(("produce", topic))

    def poll(self, timeout: float) -> int:
        """Serve the reports in: here every record produced so far has its answer already."""
        return self._serve()

    def flush(self, timeout: float) -> int:
        self._serve()
        self.calls.append("flush")
        return 0

    def _serve(self) -> int:
        served = len(self._queue)
        for callback, topic in self._queue:
            callback(KafkaError(self.error) if self.fail else None, Message(topic=topic))
        self._queue.clear()
        return served

    def send_offsets_to_transaction(self, offsets, metadata, timeout) -> None:
        self.calls.append("send_offsets")

    def commit_transaction(self, timeout) -> None:
        self.flush(timeout)
        self.calls.append("commit_transaction")

    def __len__(self) -> int:
        return len(self._queue)


class FakeConsumer:
    def __init__(self) -> None:
        self.committed: list = []

    def commit(self, offsets, asynchronous) -> None:
        assert asynchronous is False
        self.committed.extend(offsets)

    def consumer_group_metadata(self) -> str:
        return "metadata"


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(clients, "Producer", FakeProducer)  # the factory builds every producer
    FakeProducer.transactions = FakeProducer.fail = False
    FakeProducer.error = KafkaError._MSG_TIMED_OUT
    return FakeProducer


OFFSETS = [TopicPartition("pubsub.events", 0, 10)]
CLIENTS = clients.ClientFactory("127.0.0.1:1")


def test_auto_falls_back_to_at_least_once_without_transactions(fake):
    d = Delivery(CLIENTS, "auto")
    assert d.mode == "at-least-once" and d.producer.config["enable.idempotence"] is True
    with pytest.raises(KafkaException):
        Delivery(CLIENTS, "transactional")


def test_settings_tune_the_producer_but_cannot_switch_off_what_delivery_needs(fake):
    clients_ = clients.ClientFactory("127.0.0.1:1", {"linger.ms": "20", "acks": "1", "enable.idempotence": "false"})
    config = Delivery(clients_, "at-least-once").producer.config
    assert config["linger.ms"] == "20" and config["acks"] == "all" and config["enable.idempotence"] is True
    FakeProducer.transactions = True
    config = Delivery(clients_, "transactional", transactional_id="t-1").producer.config
    assert config["acks"] == "all" and config["transactional.id"] == "t-1" and config["bootstrap.servers"] == "127.0.0.1:1"


def test_a_transaction_right_after_a_commit_is_retried_after_10_ms_not_librdkafkas_100(fake):
    """The coordinator answers CONCURRENT_TRANSACTIONS until the last commit's markers are written; librdkafka
    waits retry.backoff.ms before asking again (100 ms by default: the p99 of back-to-back transactions)."""
    FakeProducer.transactions = True
    assert Delivery(CLIENTS, "transactional", transactional_id="t-1").producer.config["retry.backoff.ms"] == 10
    tuned = clients.ClientFactory("127.0.0.1:1", {"retry.backoff.ms": "50"})
    assert Delivery(tuned, "transactional", transactional_id="t-1").producer.config["retry.backoff.ms"] == "50"


def test_a_lower_transaction_timeout_lowers_the_message_timeout_under_it(fake):
    """librdkafka refuses a transactional producer whose message.timeout.ms exceeds its transaction.timeout.ms."""
    FakeProducer.transactions = True
    config = Delivery(clients.ClientFactory("127.0.0.1:1", {"transaction.timeout.ms": "10000"}), "auto").producer.config
    assert int(config["transaction.timeout.ms"]) == 10_000 and config["message.timeout.ms"] == 10_000
    config = Delivery(CLIENTS, "auto").producer.config
    assert config["transaction.timeout.ms"] == 60_000 and config["message.timeout.ms"] == 30_000


class SlowCoordinator(FakeProducer):
    """init_transactions times out ``timeouts`` times (the cluster restarting), then succeeds."""

    transactions = True
    timeouts = 2

    def init_transactions(self, timeout: float) -> None:
        if SlowCoordinator.timeouts > 0:
            SlowCoordinator.timeouts -= 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        super().init_transactions(timeout)


@pytest.mark.parametrize("timeouts", [2, 10**6])
def test_a_coordinator_that_does_not_answer_yet_is_waited_for_never_a_reason_to_fall_back(monkeypatch, timeouts):
    """A timeout says nothing of transactions: ``auto`` waits for an answer, and without one raises rather than
    deliver at-least-once."""
    monkeypatch.setattr(clients, "Producer", SlowCoordinator)
    monkeypatch.setattr(SlowCoordinator, "timeouts", timeouts)
    monkeypatch.setattr("fastpubsub.kafka.delivery.time.sleep", lambda s: None)
    monkeypatch.setattr("fastpubsub.kafka.delivery.START_WAIT", 0.05)
    if timeouts == 2:
        assert Delivery(CLIENTS, "auto").mode == "transactional"
    else:
        with pytest.raises(KafkaException, match="_TIMED_OUT"):
            Delivery(CLIENTS, "auto")


def test_settings_that_make_the_transactional_producer_impossible_are_an_error_not_a_fallback():
    """``auto`` falls back to at-least-once for a broker without transactions, never for settings librdkafka
    refuses: exactly once would be lost without a word but a warning (real librdkafka, no broker needed)."""
    impossible = clients.ClientFactory("127.0.0.1:1", {"transaction.timeout.ms": "10000", "message.timeout.ms": "30000"})
    with pytest.raises(KafkaException, match="transaction.timeout.ms"):
        Delivery(impossible, "auto")


def test_at_least_once_commits_offsets_only_after_every_ack(fake):
    d, consumer = Delivery(CLIENTS, "auto"), FakeConsumer()
    d.produce("pubsub.notifications", b"alice", b"n")
    d.commit(consumer, OFFSETS)
    assert d.producer.calls == [("produce", "pubsub.notifications"), "flush"] and consumer.committed == OFFSETS


def test_a_failed_delivery_leaves_the_offsets_uncommitted(fake):
    d, consumer = Delivery(CLIENTS, "at-least-once"), FakeConsumer()
    fake.fail = True
    d.produce("pubsub.notifications", b"alice", b"n")
    with pytest.raises(DeliveryError, match="1 records failed delivery"):
        d.commit(consumer, OFFSETS)
    assert consumer.committed == []


def test_a_write_the_cluster_does_not_authorize_names_its_topic_and_operation(fake):
    d, consumer = Delivery(CLIENTS, "at-least-once"), FakeConsumer()
    fake.fail, fake.error = True, KafkaError.TOPIC_AUTHORIZATION_FAILED
    d.produce("pubsub.dead-letter", b"k", b"v")
    with pytest.raises(DeliveryError, match="not authorized to WRITE topic pubsub.dead-letter"):
        d.commit(consumer, OFFSETS)


def test_transactional_puts_outputs_and_offsets_in_one_transaction(fake):
    fake.transactions = True
    d, consumer = Delivery(CLIENTS, "auto", transactional_id="g-host-0"), FakeConsumer()
    assert d.mode == "transactional" and d.producer.config["transactional.id"] == "g-host-0"
    d.produce("pubsub.notifications", b"alice", b"n")
    d.commit(consumer, OFFSETS)
    # the offsets go without waiting for the outputs' acknowledgements: commit_transaction flushes them
    assert d.producer.calls == ["init_transactions", "begin", ("produce", "pubsub.notifications"),
                                "send_offsets", "flush", "commit_transaction"]
    assert consumer.committed == [] and not d.pending()


class MetadataSent(FakeProducer):
    transactions = True
    sent: list = []

    def send_offsets_to_transaction(self, offsets, metadata, timeout) -> None:
        MetadataSent.sent.append(metadata)


class ConsumingElsewhere(FakeConsumer):
    """The consumer's own thread is in ``consume()``: asking it for the group's metadata would wait for that call."""

    def consumer_group_metadata(self) -> str:
        raise AssertionError("asked the consumer for the group's metadata from the commit thread")


def test_a_commit_given_the_groups_metadata_sends_it_without_asking_the_consumer(monkeypatch):
    """An overlapped commit (``runtime.commit``) takes the metadata on the consumer's thread and hands it over."""
    monkeypatch.setattr(clients, "Producer", MetadataSent)
    monkeypatch.setattr(MetadataSent, "sent", [])
    d = Delivery(CLIENTS, "transactional", transactional_id="g-host-0")
    d.produce("pubsub.notifications", b"alice", b"n")
    d.commit(ConsumingElsewhere(), OFFSETS, group_metadata="taken on the loop's thread")
    d.produce("pubsub.notifications", b"alice", b"n")
    d.commit(FakeConsumer(), OFFSETS)  # none given: asked for
    assert MetadataSent.sent == ["taken on the loop's thread", "metadata"] and not d.pending()


class EpochBumped(FakeProducer):
    """The coordinator bumped the epoch: every transactional call fails as librdkafka reports fencing (fatal)."""

    transactions = True

    def commit_transaction(self, timeout) -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))

    abort_transaction = commit_transaction

    def purge(self) -> None:
        self._queue.clear()


@pytest.mark.parametrize("open_for, outcome", [(5.0, "fenced"), (11.0, "replayed")])
def test_fencing_of_a_transaction_past_its_timeout_is_replayed_not_the_end(monkeypatch, open_for, outcome):
    """Another instance's init_transactions and the coordinator's abort of a transaction that outlived
    transaction.timeout.ms both bump the epoch, and librdkafka calls both fencing.  Only a transaction open that long
    can have been aborted by the broker: that one is replayed with a new producer, any other stops the service."""
    monkeypatch.setattr(clients, "Producer", EpochBumped)
    now = [1000.0]
    monkeypatch.setattr("fastpubsub.kafka.delivery.time.monotonic", lambda: now[0])
    d = Delivery(clients.ClientFactory("127.0.0.1:1", {"transaction.timeout.ms": "10000"}), "auto",
                 transactional_id="t-1")
    d.produce("pubsub.notifications", b"alice", b"n")
    now[0] += open_for
    if outcome == "fenced":
        with pytest.raises(Fenced, match="another instance with transactional.id t-1 took over"):
            d.commit(FakeConsumer(), OFFSETS)
    else:
        with pytest.raises(DeliveryError, match="open 11s, past transaction.timeout.ms .10000 ms.: the broker aborted"):
            d.commit(FakeConsumer(), OFFSETS)
        assert d.recover(None) and d.fenced is None and d.recoveries == 1


def test_a_failed_transaction_never_reaches_send_offsets(fake):
    """After a broker restart a failed transaction made send_offsets_to_transaction hang: failures already reported
    surface first."""
    fake.transactions = True
    d, consumer = Delivery(CLIENTS, "transactional"), FakeConsumer()
    fake.fail = True
    d.produce("pubsub.notifications", b"alice", b"n")
    with pytest.raises(DeliveryError, match="1 records failed delivery"):
        d.commit(consumer, OFFSETS)
    assert "send_offsets" not in d.producer.calls and consumer.committed == []
