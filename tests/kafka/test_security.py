"""Through a secured broker: clients connect with SASL_SSL (SCRAM-SHA-512 over TLS) only, ACLs are enforced, and each
service is a principal of its own holding only its ACLs (``kafka.acls``); what a misconfigured client is told.

One broker for the module (``kafka.security`` makes its CA, certificate and users); the services and the commands
run as the user does run them: ``pubsub ...`` processes with ``--client-config USER.properties`` and ``-X``.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from tests.support.kafka_helpers import notifications as read_notifications, wait_committed
from tests.support.random_workload import by_event, expected_matches, random_events, random_subscriptions, send_events, send_subscriptions

from fastpubsub.kafka import acls, admin, distribution
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec, free_port
from fastpubsub.kafka.security import BrokerSecurity
from fastpubsub.wire.topics import DEAD_LETTER, NOTIFICATIONS, SUBSCRIPTIONS, EVENTS, TopicNames

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]
GROUPS = {"processor": "secure-processor", "patterns": "secure-patterns", "tables": "secure-tables",
          "revoked": "secure-revoked"}
TABLES = {"stock": "pubsub.tables.stock"}
TABLE_OPTION = "stock:pubsub.tables.stock:symbol:risk=number,per=number"


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> EmbeddedBroker:
    """The broker, its topics (made by admin, as an operator would), and every user's ACLs."""
    security = BrokerSecurity.create(tmp_path_factory.mktemp("security"),
                                     [*GROUPS, "client", "no-dead-letters", "statistics"])
    with EmbeddedBroker(security=security) as broker:
        operator = broker.clients()
        done = pubsub("topics", *as_user(broker, "admin"))
        assert done.returncode == 0, done.stderr[-2000:]
        client = operator.admin()
        for future in client.create_topics([NewTopic(t, 1, -1, config={"cleanup.policy": "compact"})
                                            for t in TABLES.values()]).values():
            future.result(30)
        acls.grant(operator, "User:processor", acls.processor(GROUPS["processor"]))
        acls.grant(operator, "User:patterns", acls.patterns(GROUPS["patterns"]))
        acls.grant(operator, "User:tables", acls.tables(TABLES, GROUPS["tables"]))
        acls.grant(operator, "User:client", acls.client())
        acls.grant(operator, "User:statistics", acls.statistics())
        whole = acls.processor("secure-partial")
        acls.grant(operator, "User:no-dead-letters",
                   acls.Access(whole.reads, tuple(t for t in whole.writes if t != DEAD_LETTER), whole.groups,
                               whole.transactional_ids))
        yield broker


def pubsub(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH"))
                                                         if p)}
    return subprocess.run([sys.executable, "-m", "fastpubsub", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=child_preexec)


def as_user(broker: EmbeddedBroker, user: str) -> list[str]:
    return ["-b", broker.bootstrap_servers, "--client-config", str(broker.security.properties_file(user))]


class Service:
    """``pubsub <command>`` as ``user``, its output in files, ready when its /readyz says so."""

    def __init__(self, broker: EmbeddedBroker, command: str, user: str, *args: str, directory: Path) -> None:
        self.port, self.out, self.err = free_port(), directory / f"{user}.out", directory / f"{user}.err"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"),
                                                                        os.environ.get("PYTHONPATH")) if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fastpubsub", command, *as_user(broker, user), "-X", f"client.id=secure-{user}",
             "--group-id", GROUPS[user], "--metrics-port", str(self.port), "--progress-interval", "60", *args],
            stdout=self.out.open("w"), stderr=self.err.open("w"), env=env, preexec_fn=child_preexec)

    def ready(self) -> bool:
        return self.readiness()[0] == 200

    def readiness(self) -> tuple[int | None, str]:
        """/readyz's status and body (None: not serving yet)."""
        assert self.proc.poll() is None, self.err.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except (urllib.error.URLError, ConnectionError):
            return None, ""

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as answer:
            return answer.read().decode()

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode, self.out.read_text() + self.err.read_text()


def notifications(broker: EmbeddedBroker, count: int, timeout: float = 120) -> list[dict]:
    """``pubsub tail --from-beginning`` as the client user, until ``count`` notifications (and a moment more)."""
    deadline, seen = time.monotonic() + timeout, []
    while len(seen) < count and time.monotonic() < deadline:
        done = pubsub("tail", *as_user(broker, "client"), "--from-beginning", "--timeout", "3")
        assert done.returncode == 0, done.stderr[-2000:]
        seen = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return seen


def command_lines(stop: threading.Event, seen: list[str]) -> None:
    """Every process's command line, as any local user reads it in /proc, until ``stop``."""
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    seen.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
                except OSError:
                    pass  # ended meanwhile
        time.sleep(0.01)


def test_formatting_a_secured_cluster_puts_no_password_on_a_command_line(tmp_path):
    """The users' SCRAM credentials are created by ``kafka-storage format``, whose JVM runs for seconds."""
    security = BrokerSecurity.create(tmp_path / "security", ["processor"])
    broker = EmbeddedBroker(security=security, data_dir=tmp_path / "data")
    broker.dist = distribution.resolve()
    broker._prepare()
    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=command_lines, args=(stop, seen), daemon=True)
    watcher.start()
    try:
        broker._format()
    finally:
        stop.set()
        watcher.join()
    assert all(node.formatted for node in broker.nodes)
    assert any(str(broker.nodes[0].dir) in line and "java" in line for line in seen)  # the tool's JVM was watched
    assert not [line for line in set(seen) if any(p in line for p in security.passwords.values())]
    assert not list(broker.root.rglob("format.args"))  # the file that held them is gone


def test_the_services_and_the_commands_work_through_sasl_ssl_each_with_only_its_acls(secured, tmp_path):
    services = [Service(secured, "run", "processor", directory=tmp_path),
                Service(secured, "patterns", "patterns", directory=tmp_path),
                Service(secured, "tables", "tables", "--table", TABLE_OPTION, directory=tmp_path)]
    try:
        deadline = time.monotonic() + 240  # a loaded machine: three services start at once
        while not all(s.ready() for s in services):
            assert time.monotonic() < deadline, "the services were not ready in time"
            time.sleep(0.5)
        client = as_user(secured, "client")
        for args in (["subscribe", *client, "--id", "1", "--subscriber", "alice", 'movie = "groundhog day" and price <= 10'],
                     ["subscribe", *client, "--id", "3", "--subscriber", "carol",
                      "seq a: price > 0 next b: name = a.name where b.price > 1.05 * a.price within 1d"],
                     ["subscribe", *client, "-X", "client.id=cli", "--id", "4", "--subscriber", "dave",
                      "min(per) over stock where risk between 20 and 60"],
                     ["publish", *client, "--key", "e1", '{"movie": "groundhog day", "price": 8}'],
                     ["publish", *client, "--partition-by", "name", '{"name": "IBM", "price": 100}'],
                     ["publish", *client, "--partition-by", "name", '{"name": "IBM", "price": 110}']):
            done = pubsub(*args)
            assert done.returncode == 0, (args, done.stdout, done.stderr[-2000:])
            if args[0] == "publish" and "IBM" in args[-1]:
                time.sleep(1.1)  # the second event later in event time: "next" needs a later one
        first = notifications(secured, 3)
        assert len(first) == 3, first  # alice's, carol's, and dave's first answer (no row yet)
        operator_producer = secured.clients().producer()
        operator_producer.produce(TABLES["stock"], b'{"symbol": "IBM", "risk": 42, "per": 17.5}', b"IBM")
        assert operator_producer.flush(30) == 0
        seen = notifications(secured, 4)
        by = {name: [n for n in seen if n["subscriber"] == name] for name in ("alice", "carol", "dave")}
        assert [n["notification_id"] for n in by["alice"]] == ["e1/1"]
        assert [[e["event"]["price"] for e in n["events"]] for n in by["carol"]] == [[100, 110]]
        assert [n["value"] for n in by["dave"]] == [None, 17.5]
        assert len(seen) == 4
        done = pubsub("unsubscribe", *client, "--id", "1")
        assert done.returncode == 0, done.stderr[-2000:]
        shown = [s.metrics() for s in services]
    finally:
        stopped = [s.stop() for s in services]
    assert [code for code, _ in stopped] == [0, 0, 0], [text[-2000:] for _, text in stopped]
    emitted = "\n".join([*shown, *(text for _, text in stopped)])
    assert not [u for u, password in secured.security.passwords.items() if password in emitted]


def until(condition, timeout: float, what: str):
    """``condition()``'s first true value, asked every half second for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f}s"
        time.sleep(0.5)
    return value


def test_an_acl_revoked_while_the_service_runs_makes_it_wait_not_ready_until_it_is_granted_again(secured, tmp_path):
    """The processor's WRITE on the notifications topic is revoked while events arrive: /readyz says what is
    refused, the log says it once per back-off (no busy retry), and once the ACL is granted again every event is
    notified exactly once (read_committed, no de-duplication), as the oracle says."""
    names, operator, user = TopicNames.build("acl."), secured.clients(), "User:revoked"
    group = names.group(GROUPS["revoked"])  # as the service joins it, after the prefix
    admin.create_topics(operator, partitions=2, topics=names)
    acls.grant(operator, user, acls.processor(group, names))
    subs = [(1000 + sid, sub) for sid, sub in random_subscriptions(60, seed=51)]
    batches = [[{**e, "n": e["n"] + 200 * i} for e in random_events(200, seed=52 + i)] for i in range(3)]
    send_subscriptions(operator, subs, topic=names.subscriptions)
    send_events(operator, batches[0], topic=names.events[0])
    service = Service(secured, "run", "revoked", "--topic-prefix", "acl.", directory=tmp_path)
    write = acls.Access(writes=(names.notifications,), describe_configs=False)
    try:
        until(service.ready, 240, "ready")
        wait_committed(operator, group, names.events[0])
        acls.revoke(operator, user, write)
        send_events(operator, batches[1], topic=names.events[0])
        status, reason = until(lambda: "authorizer" in (r := service.readiness())[1] and r, 60, "refused")
        assert status == 503 and f"not authorized to WRITE topic {names.notifications}" in reason, reason
        before = service.err.read_text().count("not authorized")
        time.sleep(20)  # refused all along: asked again after 1, 2, 4, 8 ... seconds, not in a loop
        attempts = service.err.read_text().count("not authorized") - before
        assert 2 <= attempts <= 6, service.err.read_text()[-3000:]
        assert service.readiness()[0] == 503
        acls.grant(operator, user, write)
        until(service.ready, 60, "ready again")
        send_events(operator, batches[2], topic=names.events[0])
        wait_committed(operator, group, names.events[0])
        notes = read_notifications(operator, names.notifications)
    finally:
        code, text = service.stop()
    assert code == 0, text[-3000:]
    expected = {n: s for n, s in expected_matches(subs, sum(batches, [])).items() if s}
    assert by_event(notes) == expected
    counts = collections.Counter((n["event"]["n"], n["subscription_id"]) for n in notes)
    assert max(counts.values()) == 1, [k for k, c in counts.items() if c > 1][:5]


def test_a_wrong_password_stops_the_start_with_a_clear_error_and_consumes_nothing(secured):
    started = time.monotonic()
    done = pubsub("run", *as_user(secured, "processor"), "-X", "sasl.password=wrong", "--group-id",
                  GROUPS["processor"] + "-wrong")
    assert done.returncode == 1 and time.monotonic() - started < 30
    assert "authentication failed" in done.stderr and "SCRAM-SHA-512 as processor" in done.stderr
    listed = secured.clients().admin().list_consumer_groups().result(30)
    assert GROUPS["processor"] + "-wrong" not in {g.group_id for g in listed.valid}


def test_a_missing_acl_names_the_topic_and_the_operation_at_start(secured):
    done = pubsub("run", *as_user(secured, "no-dead-letters"), "--group-id", "secure-partial")
    assert done.returncode == 1
    assert f"User:no-dead-letters is not authorized to WRITE topic {DEAD_LETTER}" in done.stderr


def test_a_plaintext_client_at_the_tls_port_is_told_so_at_once(secured):
    for command in (["run", "--group-id", "secure-plain"], ["tail", "--timeout", "1"]):
        started = time.monotonic()
        done = pubsub(*command, "-b", secured.bootstrap_servers)
        assert done.returncode != 0 and time.monotonic() - started < 30, command
        assert "the broker speaks TLS there; set security.protocol=SSL or SASL_SSL" in done.stderr, command


def test_no_user_but_admin_may_do_more_than_its_acls(secured):
    """The processor's principal may not read the notifications, nor write the subscriptions."""
    processor = secured.clients("processor")
    with pytest.raises(RuntimeError, match=f"not authorized to READ topic {NOTIFICATIONS}"):
        admin.check_access(processor, (NOTIFICATIONS,), ())
    with pytest.raises(RuntimeError, match=f"WRITE topic {SUBSCRIPTIONS}"):
        admin.check_access(processor, (EVENTS,), (SUBSCRIPTIONS,))
    admin.check_access(processor, (EVENTS, SUBSCRIPTIONS), (NOTIFICATIONS, DEAD_LETTER))


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_statistics_job_reads_and_publishes_through_sasl_ssl(secured, spark, tmp_path):
    pytest.importorskip("pyspark")
    from fastpubsub.kafka.statistics_topic import latest_snapshot
    from fastpubsub.stats_job.statistics_job import run_statistics_job

    producer = secured.clients("client").producer()
    for price in range(20):
        producer.produce(EVENTS, json.dumps({"name": f"s{price % 3}", "price": price}).encode())
    assert producer.flush(30) == 0
    job = run_statistics_job(secured.bootstrap_servers, output=None, spark=spark,
                             kafka_config=secured.security.settings("statistics"))
    assert job.statistics is not None and job.statistics.event_count >= 20
    published = latest_snapshot(secured.clients("statistics"), EVENTS)
    assert published is not None and published.event_count == job.statistics.event_count
