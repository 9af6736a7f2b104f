"""The `pubsub` subcommands against the embedded broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner
from tests.support.kafka_helpers import read_all, send, wait_processed

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.wire import codecs, topics
from fastpubsub.kafka.broker import EmbeddedBroker, free_port, port_in_use
from fastpubsub.cli import main

pytestmark = pytest.mark.broker


def invoke(*args: str, input: str | None = None) -> str:
    result = CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_subscribe_publish_tail(bootstrap, group_id, start_processor):
    b = ["--bootstrap-servers", bootstrap]
    out = invoke("topics", *b)
    assert "pubsub.subscriptions" in out and "exists" in out and "cleanup.policy=compact" in out
    out = invoke("subscribe", *b, "--id", "42", "--subscriber", "alice", 'movie = "groundhog day" and price <= 10')
    assert out.strip() == 'subscription 42 (alice): movie = "groundhog day" and price <= 10'
    invoke("subscribe", *b, "--id", "43", "--subscriber", "bob", "--format", "json", "price > 100")
    invoke("subscribe", *b, "--id", "44", "--subscriber", "eve", "price < 100")
    invoke("unsubscribe", *b, "--id", "44")
    out = invoke("subscribe", *b, "--id", "45", "--subscriber", "dave",
                 '(movie in ("rex", "odeon") and price between 5 and 10) or theater prefix "od"')
    assert out.strip() == ('subscription 45 (dave): (movie in ("rex", "odeon") and price between 5 and 10) '
                           'or theater prefix "od"')
    out = invoke("subscribe", *b, "--id", "46", "--subscriber", "carol",
                 '{"theater": [{"prefix": {"equals-ignore-case": "OD"}}], "price": [{"numeric": [">", 5, "<=", 8]}]}')
    assert out.strip() == 'subscription 46 (carol): theater prefix ignore case "OD" and price range (> 5, <= 8)'
    [record] = [m for m in read_all(bootstrap, topics.SUBSCRIPTIONS, quiet=0.3) if m.key() == b"43"]
    assert record.value().startswith(b"{")

    p = start_processor(output_format="json")
    assert sorted(p.state.subscribers) == [42, 43, 45, 46]
    invoke("publish", *b, "--key", "e17", '{"movie": "groundhog day", "price": 8, "theater": "odeon"}')
    invoke("publish", *b, "--format", "avro", "-", input='{"price": 200}\n{"price": 5}\n')
    wait_processed(bootstrap, group_id)
    p.stop()

    lines = invoke("tail", *b, "--from-beginning", "--max", "4", "--timeout", "10").splitlines()
    notes = sorted((json.loads(line) for line in lines), key=lambda n: n["subscriber"])
    assert [(n["subscriber"], n["subscription_id"]) for n in notes] == [("alice", 42), ("bob", 43), ("carol", 46),
                                                                         ("dave", 45)]
    assert notes[2]["event_id"] == "e17"  # an Event Ruler rule
    del notes[2]
    assert notes[2]["event_id"] == "e17"  # through its second disjunct (theater prefix "od")
    source = notes[0].pop("source")  # the record's partition is the producer's choice
    assert source["topic"] == topics.EVENTS and "original" not in notes[0]
    assert notes[0] == {"notification_id": "e17/42", "subscription_id": 42, "subscriber": "alice", "event_id": "e17",
                        "event": {"movie": "groundhog day", "price": 8, "theater": "odeon"}}
    assert notes[1]["event"] == {"price": 200} and notes[1]["event_id"].startswith("pubsub.events:")


def test_bad_input_is_refused_with_a_reason(bootstrap):
    b = ["--bootstrap-servers", bootstrap]
    result = CliRunner().invoke(main, ["subscribe", *b, "--subscriber", "a", "price <> 3"])
    assert result.exit_code == 2 and "column 8: expected a value" in result.output
    result = CliRunner().invoke(main, ["subscribe", *b, "--subscriber", "a", "color in ('red', 1)"])
    assert result.exit_code == 2 and "values of more than one kind" in result.output
    result = CliRunner().invoke(main, ["subscribe", *b, "--subscriber", "a", '{"price": [{"numeric": ["~", 3]}]}'])
    assert result.exit_code == 2 and "price: 'numeric' compares with one of" in result.output
    result = CliRunner().invoke(main, ["subscribe", *b, "--subscriber", "a", '{"price": [1}'])
    assert result.exit_code == 2 and "the rule is not JSON" in result.output
    result = CliRunner().invoke(main, ["publish", *b, '{"price": 1, "price": 2}'])
    assert result.exit_code == 2 and "duplicate JSON key 'price'" in result.output
    # (a null is no longer refused: the attribute is absent, by the path rule: tests/wire/test_paths.py)


def test_tail_dead_letters(bootstrap, start_processor, group_id):
    p = start_processor()
    send(bootstrap, topics.EVENTS, [("bad", b"\x01\x02")])
    wait_processed(bootstrap, group_id)
    p.stop()
    [line] = invoke("tail", "-b", bootstrap, "--dead-letters", "--from-beginning", "--max", "1", "--timeout", "10").splitlines()
    dl = json.loads(line)
    assert dl["source_topic"] == topics.EVENTS and dl["key"] == "bad" and "neither JSON" in dl["reason"]


@pytest.mark.parametrize("command", ["broker", "topics", "run", "patterns", "tables", "subscribe", "unsubscribe", "publish", "tail", "demo"])
def test_every_subcommand_has_help(command):
    out = invoke(command, "--help")
    assert f" {command} [OPTIONS]" in out
    if command not in ("broker", "demo"):
        assert "--bootstrap-servers" in out and "PUBSUB_BOOTSTRAP_SERVERS" in out


def test_broker_prints_its_address_and_stops_on_sigterm():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fastpubsub", "broker", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == f"127.0.0.1:{port}"
        assert [s.name for s in admin.create_topics(f"127.0.0.1:{port}")] == list(topics.ALL)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.stderr.read()
    assert not port_in_use(port)


def test_broker_refuses_a_busy_port(broker):
    result = CliRunner().invoke(main, ["broker", "--port", str(broker.port)])
    assert result.exit_code == 1 and "already in use" in result.output


def test_run_refuses_matcher_options_that_do_not_go_together():
    result = CliRunner().invoke(main, ["run", "-b", "127.0.0.1:1", "--algorithm", "propagation", "--runs", "256"])
    assert result.exit_code == 2 and "option of static and dynamic" in result.output
    result = CliRunner().invoke(main, ["run", "-b", "127.0.0.1:1", "--runs", "-1"])
    assert result.exit_code == 2 and "--runs" in result.output


@pytest.mark.parametrize("shard, message", [
    ("3/2", "shard index must be below the shard count"), ("0/0", "shard count must be between 1 and"),
    ("-1/2", "shard index must be 0 or more"), ("half", "shard must be I/K"),
])
def test_run_refuses_a_bad_shard(shard, message):
    result = CliRunner().invoke(main, ["run", "-b", "127.0.0.1:1", "--shard", shard])
    assert result.exit_code == 2 and "Invalid value for '--shard'" in result.output and message in result.output


@pytest.mark.parametrize("args, message", [
    (["--group-id", "g", "--start-from-group", "g"], "--start-from-group g is this instance's own consumer group"),
    (["--group-id", "g", "--shard", "1/2", "--start-from-group", "g.shard-1-of-2"],
     "--start-from-group g.shard-1-of-2 is this instance's own consumer group"),
    (["--start-from-group", ""], "--start-from-group needs a consumer group name"),
])
def test_run_refuses_a_bad_start_from_group(args, message):
    result = CliRunner().invoke(main, ["run", "-b", "127.0.0.1:1", *args])
    assert result.exit_code == 2 and message in result.output


def test_run_refuses_to_start_without_the_topics():
    with EmbeddedBroker() as empty:  # a broker of its own: the session one has the topics
        done = subprocess.run([sys.executable, "-m", "fastpubsub", "run", "-b", empty.bootstrap_servers],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1
        assert "topic pubsub.subscriptions does not exist" in done.stderr and "run `pubsub topics` first" in done.stderr
        assert topics.ALL[0] not in ClientFactory(empty.bootstrap_servers).admin().list_topics(timeout=10).topics


def test_tail_drops_redelivered_notifications(bootstrap):
    b = ["--bootstrap-servers", bootstrap]
    note = lambda eid, sid: codecs.encode_notification(sid, "alice", eid, codecs.encode_attributes({"p": 1}, "json"), "json")  # noqa: E731
    records = [(b"alice", note("e1", 1)), (b"alice", note("e1", 2)), (b"alice", note("e1", 1)),  # a replayed batch
               (b"alice", note("e2", 1)), (b"alice", note("e1", 2))]
    send(bootstrap, topics.NOTIFICATIONS, [(k, v) for k, v in records])
    result = CliRunner().invoke(main, ["tail", *b, "--from-beginning", "--timeout", "3"], catch_exceptions=False)
    assert sorted(json.loads(line)["notification_id"] for line in result.stdout.splitlines()) == ["e1/1", "e1/2", "e2/1"]
    assert "2 duplicate notification(s) dropped (of 5)" in result.stderr
    raw = invoke("tail", *b, "--from-beginning", "--timeout", "3", "--no-dedup").splitlines()
    assert len(raw) == 5


