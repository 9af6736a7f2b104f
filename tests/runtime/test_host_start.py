"""A service's start asks the cluster a few questions (access, topics, record limits): "not now" is asked again.

A node down while a service starts (a rolling restart, a crash) can leave an admin request unanswered for seconds;
the start must wait for the answer, not exit with an empty error (found by the cluster fault tests: a pattern
service relaunched during node kills stopped on a ``concurrent.futures.TimeoutError``).  A refusal is no "not now":
it is raised at once.
"""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from fastpubsub.runtime import host as host_module
from fastpubsub.runtime.host import Host, HostConfig


@pytest.fixture
def host(monkeypatch):
    monkeypatch.setattr(host_module.time, "sleep", lambda seconds: None)
    return Host(SimpleNamespace(name="test"), HostConfig("127.0.0.1:1", "g"))


def failing(*errors: BaseException):
    """A step that raises ``errors`` in turn, then answers; its calls are counted."""
    calls = []

    def step() -> None:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]

    return step, calls


def test_timeouts_and_retriable_errors_at_start_are_asked_again_until_answered(host, caplog):
    step, calls = failing(FutureTimeout(), KafkaException(KafkaError(KafkaError._TIMED_OUT)),
                          KafkaException(KafkaError(KafkaError.NOT_CONTROLLER)))
    host._while_away(step, 60.0, "the record limits")
    assert len(calls) == 4
    said = [r.getMessage() for r in caplog.records]
    assert "the record limits: no answer in time; again in 1s" in said


def test_a_refusal_at_start_is_raised_at_once(host):
    step, calls = failing(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    with pytest.raises(KafkaException):
        host._while_away(step, 60.0, "the access check")
    assert len(calls) == 1


def test_a_cluster_silent_past_the_patience_is_a_clear_error(host):
    step, calls = failing(*[FutureTimeout()] * 5)
    with pytest.raises(RuntimeError, match="the topics' check: the Kafka cluster did not answer within 0s: "
                                           "no answer in time"):
        host._while_away(step, 0.0, "the topics' check")
    assert len(calls) == 1


def test_without_patience_every_kafka_error_is_asked_again_as_while_the_cluster_is_away(host):
    step, calls = failing(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)), FutureTimeout())
    host._while_away(step)
    assert len(calls) == 3
