"""Clients nobody here wrote, end to end through Apache Kafka: Debian's kcat and Kafka's own console tools.

Each writes JSON subscriptions (some replaced, some deleted by a tombstone) and JSON events as a user would from the
README alone, one record per line; a processor matches; the same tool reads the notifications ``read_committed``.
The notifications must be the oracle's, each once, with no de-duplication on the reading side.
(kafka-python, a third such client, is in tests/kafka/test_kafka_python.py.)
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from tests.support.kafka_helpers import wait_processed
from tests.support.random_workload import expected_matches, random_events, random_subscriptions

from fastpubsub.kafka import distribution
from fastpubsub.wire import codecs, topics

pytestmark = pytest.mark.broker


def subscription_json(sub: codecs.Subscription) -> str:
    return json.dumps({"subscriber": sub.subscriber, "predicates": [list(p) for p in sub.predicates]})


def the_records(seed: int) -> tuple[list[tuple[str, str | None]], dict[int, codecs.Subscription], list[dict]]:
    """Subscription lines (key, JSON or None for a tombstone), what they leave standing, and the events."""
    subs = random_subscriptions(200, seed=seed)
    replacements = dict(random_subscriptions(200, seed=seed + 1)[:30])  # ids 0..29 get other predicates
    deleted = set(range(30, 50))
    lines: list[tuple[str, str | None]] = [(str(sid), subscription_json(s)) for sid, s in subs]
    lines += [(str(sid), subscription_json(s)) for sid, s in replacements.items()]
    lines += [(str(sid), None) for sid in sorted(deleted)]
    standing = {sid: replacements.get(sid, s) for sid, s in subs if sid not in deleted}
    return lines, standing, random_events(300, seed=seed + 2)


def expected_ids(standing: dict[int, codecs.Subscription], events: list[dict]) -> list[str]:
    matches = expected_matches(sorted(standing.items()), events)
    return sorted(f"k{n}/{sid}" for n, sids in matches.items() for sid in sids)


def run_through(bootstrap: str, start_processor, produce, consume, seed: int) -> None:
    lines, standing, events = the_records(seed)
    produce(topics.SUBSCRIPTIONS, lines)
    p = start_processor(output_format="json")
    p.wait_for(lambda: len(p.state) == len(standing), timeout=60, what="the standing subscriptions")
    produce(topics.EVENTS, [(f"k{e['n']}", json.dumps(e)) for e in events])
    wait_processed(bootstrap, p.processor.config.group_id, timeout=90)
    notes = [json.loads(v) for v in consume(topics.NOTIFICATIONS)]
    stats = p.stop()
    assert stats["dead_letters"] == {}
    assert sorted(n["notification_id"] for n in notes) == expected_ids(standing, events)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat; make tools)")
def test_kcat_end_to_end(bootstrap, start_processor):
    def produce(topic, lines):
        text = "".join(f"{k}\t{v if v is not None else ''}\n" for k, v in lines)
        # -K: key and value split at the tab; -Z: an empty value is a NULL (a tombstone)
        subprocess.run(["kcat", "-P", "-q", "-b", bootstrap, "-t", topic, "-K", "\t", "-Z", "-X", "acks=all"],
                       input=text, text=True, check=True, timeout=60)

    def consume(topic):
        done = subprocess.run(["kcat", "-C", "-q", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-f", "%s\n",
                               "-X", "isolation.level=read_committed"], capture_output=True, text=True, check=True,
                              timeout=60)
        return [line for line in done.stdout.splitlines() if line]

    run_through(bootstrap, start_processor, produce, consume, seed=81)


def test_kafka_console_producer_and_consumer_end_to_end(bootstrap, start_processor):
    dist = distribution.resolve()

    def produce(topic, lines):
        text = "".join(f"{k}\t{v if v is not None else 'NULL'}\n" for k, v in lines)
        cmd = dist.java("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap, "--topic", topic,
                        "--reader-property", "parse.key=true", "--reader-property", "key.separator=\t",
                        "--reader-property", "null.marker=NULL", "--command-property", "acks=all", heap="256m")
        subprocess.run(cmd, input=text, text=True, check=True, timeout=120, capture_output=True)

    def consume(topic):
        cmd = dist.java("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bootstrap, "--topic",
                        topic, "--from-beginning", "--isolation-level", "read_committed", "--timeout-ms", "4000",
                        heap="256m")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return [line for line in done.stdout.splitlines() if line.startswith("{")]

    run_through(bootstrap, start_processor, produce, consume, seed=91)
