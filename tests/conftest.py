"""Fixtures for tests through a real broker with real confluent-kafka clients.

One embedded broker (Tansu, in memory) per test session on a free port; every
test that uses ``topics`` gets the four topics deleted and created afresh, and
its own consumer group id.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterator

import pytest
from kafka_helpers import RunningProcessor

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.wire import topics
from fastpubsub.processor.app import ProcessorConfig
from fastpubsub.kafka.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def bootstrap(broker: EmbeddedBroker) -> Iterator[str]:
    """Bootstrap servers of the session broker with the four topics empty and new."""
    client = ClientFactory(broker.bootstrap_servers).admin()
    existing = set(client.list_topics(timeout=10).topics)
    stale = [t for t in topics.ALL if t in existing]
    if stale:
        for future in client.delete_topics(stale, operation_timeout=10).values():
            future.result(10)
    deadline = time.monotonic() + 10
    while set(topics.ALL) & set(client.list_topics(timeout=10).topics) and time.monotonic() < deadline:
        time.sleep(0.1)
    admin.create_topics(broker.bootstrap_servers, partitions=4)
    yield broker.bootstrap_servers


@pytest.fixture
def group_id() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def start_processor(bootstrap: str, group_id: str):
    running: list[RunningProcessor] = []

    def start(**overrides: Any) -> RunningProcessor:
        config = ProcessorConfig(bootstrap, group_id=group_id, progress_interval=60, **overrides)
        p = RunningProcessor(config)
        running.append(p)
        return p

    yield start
    for p in running:
        if p._thread.is_alive():
            p.processor.stop()
            p._thread.join(60)
