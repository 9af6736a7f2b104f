"""Faults of a three-node Apache Kafka cluster under the three services at once, checked by one history checker.

One cluster (``EmbeddedBroker(nodes=3)``: replication factor 3, ``min.insync.replicas`` 2, failover in seconds)
serves the module, each node a host of its own in a network namespace (``tests/support/netns.py``; on loopback when
namespaces cannot be made, and the partition is then not run), the third node's log directory on a small tmpfs of
its own; each test gets the topics afresh.
The event processor (``pubsub run``), the pattern service (``pubsub patterns``) and the table service (``pubsub
tables``) run in child processes on one stream of events and one stream of table updates, each with its oracle.  The cluster is disturbed under that load; once it has recovered, the streams stop, every
service drains its input, and ``tests/support/history.py`` checks each service's notifications as a read_committed consumer
reads them, without de-duplication: none lost, none duplicated, none unexpected, no partition stuck.  How long each
service took to commit again after the cluster's recovery is printed.

In CI (``test_every_fault_in_turn_notifies_exactly_once``) one load meets every fault once, in turn, short, with one
seed, and one check at the end; ``make test-faults`` (``--long-faults``) also runs each fault alone on fresh topics
(``test_one_fault_under_load_notifies_exactly_once``), over several seeds, with longer loads and a one-minute outage
of the whole cluster.  ``PUBSUB_FAULTS_REPORT=file`` appends each run's figures to ``file`` as a JSON line.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from tests.conftest import fresh_topics
from tests.support.history import History, check
from tests.support.kafka_helpers import read_all, send, wait_processed
from tests.support.netns import Hosts
from tests.support.random_workload import expected_matches
from tests.faults.test_exactly_once import Service, Stream
from tests.pipeline import test_pattern_service as patterns_spec
from tests.pipeline import test_tables as tables_spec

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker, free_port
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Plan:
    """How long and how often: CI's short run, or ``--long-faults``."""

    seeds: tuple[int, ...]
    load: float  # seconds of load before the fault, and again after the recovery
    outage: float  # seconds the whole cluster is down
    node_kills: int  # nodes killed while the services are killed too
    partition: float  # seconds one node is cut off from the others


SHORT = Plan(seeds=(1,), load=1.5, outage=8.0, node_kills=1, partition=9.0)
LONG = Plan(seeds=(1, 2, 3), load=15.0, outage=60.0, node_kills=4, partition=30.0)

#: Broker settings that make a lost node cost seconds, not the defaults' half minute: a silent follower leaves the
#: ISR after 4 s (else ``acks=all`` writes wait 30 s for it), a silent broker is fenced by the controllers after
#: 4 s, and timed-out transactions are looked for every 2 s.
FAST_FAILOVER = {
    "replica.lag.time.max.ms": "4000",
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
}
SESSION_MS = 6000  # the services' consumer group sessions
TRANSACTION_MS = 10_000  # the services' transaction.timeout.ms (60 s by default)
SMALL_FS_NODE = 2  # the node whose log directory is on a small file system of its own
SMALL_FS_SIZE = "256m"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    long = metafunc.config.getoption("--long-faults")
    if "seed" in metafunc.fixturenames:
        metafunc.parametrize("seed", (LONG if long else SHORT).seeds)
    if "name" in metafunc.fixturenames:  # each fault alone: the long version only (skipped before any fixture)
        skip = () if long else (pytest.mark.skip(reason="the long version (--long-faults, make test-faults); CI runs "
                                                        "test_every_fault_in_turn_notifies_exactly_once"),)
        metafunc.parametrize("name", [pytest.param(n, marks=skip) for n in FAULTS])


@pytest.fixture(scope="module")
def plan(request) -> Plan:
    return LONG if request.config.getoption("--long-faults") else SHORT


# --- the cluster ------------------------------------------------------------------------------------------------


@dataclass
class SmallFs:
    """A tmpfs of :data:`SMALL_FS_SIZE` for one node's log directory, or why it could not be mounted."""

    path: Path
    error: str | None = None

    @classmethod
    def mount(cls) -> "SmallFs":
        path = Path(tempfile.mkdtemp(prefix="fastpubsub-smallfs-"))
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_FS_SIZE}", "tmpfs", str(path)],
                              capture_output=True, text=True)
        return cls(path, None if done.returncode == 0 else (done.stderr.strip() or f"mount exit {done.returncode}"))

    def fill(self) -> int:
        """Write a file until the file system is full; its size."""
        written = 0
        with contextlib.suppress(OSError), open(self.path / "filler", "wb") as f:
            block = b"\0" * (1 << 20)
            while True:
                f.write(block)
                f.flush()
                written += len(block)
        return written

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / "filler").unlink()

    def unmount(self) -> None:
        if self.error is None:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)


@pytest.fixture(scope="module")
def small_fs():
    fs = SmallFs.mount()
    yield fs
    fs.unmount()


@pytest.fixture(scope="module")
def hosts():
    """Each node a host of its own (``tests/support/netns.py``), or why namespaces could not be made (then on loopback)."""
    made = Hosts.make(3)
    yield made
    if isinstance(made, Hosts):
        made.remove()


@pytest.fixture(scope="module")
def cluster(small_fs, hosts):
    node_config = {} if small_fs.error else {SMALL_FS_NODE: {"log.dirs": str(small_fs.path / "data")}}
    placed = {} if isinstance(hosts, str) else {"hosts": hosts.addresses,
                                                 "namespaces": [hosts.node_namespace(i) for i in range(3)]}
    with EmbeddedBroker(nodes=3, config=FAST_FAILOVER, node_config=node_config, **placed) as b:
        yield b


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    """The index (node.id - 1) of the node leading a partition."""
    metadata = ClientFactory(bootstrap).admin().list_topics(topic, timeout=10).topics[topic]
    return metadata.partitions[partition].leader - 1


def java_hash(text: str) -> int:
    h = 0
    for c in text:
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_of(bootstrap: str, transactional_id: str) -> int:
    """The index of the node coordinating a transactional id: the leader of its ``__transaction_state``
    partition, ``Utils.abs(id.hashCode) % partitions`` as Kafka's ``TransactionStateManager.partitionFor``."""
    h = java_hash(transactional_id)
    partitions = admin.partitions_of(bootstrap, "__transaction_state")
    return leader_of(bootstrap, "__transaction_state", (0 if h == -(1 << 31) else abs(h)) % partitions)


def whole(cluster: EmbeddedBroker) -> bool:
    """Whether every node runs, is registered, and every partition's ISR holds all its replicas (one quick look)."""
    if not cluster.alive():
        return False
    try:
        metadata = ClientFactory(cluster.bootstrap_servers).admin().list_topics(timeout=2)
    except Exception:  # noqa: BLE001 - not yet
        return False
    return len(metadata.brokers) == 3 and all(len(pm.isrs) == len(pm.replicas) and pm.leader >= 0
                                              for m in metadata.topics.values() for pm in m.partitions.values())


def wait_whole(cluster: EmbeddedBroker, timeout: float = 120.0) -> None:
    """Until every node runs, serves, and every partition's ISR holds all three replicas again."""
    cluster.wait_ready(timeout)
    client = ClientFactory(cluster.bootstrap_servers).admin()
    deadline = time.monotonic() + timeout
    while True:
        metadata = client.list_topics(timeout=10)
        short = [(t, p) for t, m in metadata.topics.items() for p, pm in m.partitions.items()
                 if len(pm.isrs) < len(pm.replicas)]
        if not short:
            return
        assert time.monotonic() < deadline, f"ISRs still short: {short[:5]}"
        time.sleep(0.2)


# --- the workload: three services, two streams, three oracles ------------------------------------------------------


def plain_subscriptions(seed: int, n: int) -> list[tuple[int, Subscription]]:
    """Plain subscriptions over the pattern events' attributes (ids 5000 and up, apart from the others')."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        preds = [("name", "=", rng.choice(patterns_spec.SYMBOLS)),
                 ("price", rng.choice([">", "<="]), rng.randint(95, 105))]
        if i % 3 == 0:
            preds.append(("volume", ">=", rng.choice([100, 600, 1000])))
        out.append((5000 + i, Subscription(f"u{i % 7}", preds)))
    return out


class Progress:
    """Input records each group has committed, asked through one consumer per group (-1 while no answer)."""

    def __init__(self, bootstrap: str, groups: dict[str, tuple[str, str]]) -> None:
        self.parts = {name: [TopicPartition(topic, p) for p in range(admin.partitions_of(bootstrap, topic))]
                      for name, (_, topic) in groups.items()}
        self.consumers = {name: Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                          "enable.auto.commit": False}) for name, (group, _) in groups.items()}

    def __call__(self, name: str) -> int:
        try:
            return sum(max(tp.offset, 0) for tp in self.consumers[name].committed(self.parts[name], timeout=2))
        except Exception:  # noqa: BLE001 - a cluster away or a coordinator moving: asked again
            return -1

    def close(self) -> None:
        for c in self.consumers.values():
            c.close()


def ready(port: int) -> int:
    """The status /readyz answers (0: no answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@dataclass
class Role:
    """One service: how to launch it, its group and input topic (its progress), and its latest process."""

    name: str
    group: str
    input_topic: str
    launch: Callable[[], Service]
    port: int
    service: Service | None = None
    launched: list[Service] = field(default_factory=list)

    @property
    def launches(self) -> int:
        return len(self.launched)

    def start(self) -> Service:
        self.service = self.launch()
        self.launched.append(self.service)
        return self.service

    def save_logs(self, directory: Path) -> None:
        for i, s in enumerate(self.launched):
            (directory / f"{self.name}-{i + 1}.log").write_text("".join(s.log))


@dataclass
class Workload:
    """The three services on fresh topics, an event stream and an update stream, and the oracles' inputs."""

    bootstrap: str
    seed: int
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)  # more options of a role, by name
    roles: dict[str, Role] = field(default_factory=dict)
    streams: list[Stream] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds each phase took (printed with the figures)
    _clock: float = field(default_factory=time.monotonic)

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = round(now - self._clock, 1)
        self._clock = now

    def __post_init__(self) -> None:
        s, b = self.seed, self.bootstrap
        tag = f"f{s}-{random.Random().getrandbits(24):06x}"
        since = (int(time.time()) - 8 * 3600) * 1000  # within the events topic's retention
        self.events = [(ts - patterns_spec.BASE_TS + since, attrs) for ts, attrs in patterns_spec.events(80 + s, 60_000)]
        self.since = since
        self.plain = plain_subscriptions(81 + s, 30)
        self.patterns = patterns_spec.subscriptions(82 + s, 12)
        self.rows, self.updates = tables_spec.workload(83 + s, 60, 60_000)
        self.aggregates = tables_spec.subscriptions(84 + s, 60)
        common = ("-X", f"transaction.timeout.ms={TRANSACTION_MS}")

        def role(name: str, command: str, group: str, topic: str, options: tuple[str, ...], marker: str) -> None:
            port = free_port()
            opts = ("--group-id", group, "--metrics-port", str(port), *common, *options, *self.extra.get(name, ()))
            self.roles[name] = Role(name, group, topic, lambda: Service(command, b, opts, ready=marker), port)

        role("processor", "run", f"{tag}-events", topics.EVENTS,
             ("--output-format", "json", "--batch-size", "50", "--transactional-id", f"{tag}-events-tx",
              "--session-timeout-ms", str(SESSION_MS)), " INFO ready: ")
        role("patterns", "patterns", f"{tag}-patterns", topics.EVENTS,
             ("--batch-size", "50", "--session-timeout-ms", str(SESSION_MS)), "pattern subscriptions loaded")
        role("tables", "tables", f"{tag}-tables", tables_spec.STOCK_TOPIC,
             ("--table", tables_spec.STOCK, "--batch-size", "20"), "restored: ")

    @property
    def processor_tid(self) -> str:
        return f"{self.roles['processor'].group}-tx"

    def start(self) -> None:
        """The table's rows and every subscription first (the oracles' order), then the services, then the streams."""
        b = self.bootstrap
        tables = self.roles["tables"]
        tables.start()
        send(b, tables_spec.STOCK_TOPIC, tables_spec.row_records(self.rows))
        tables_spec.wait_committed(b, tables.group, tables_spec.STOCK_TOPIC, timeout=120)
        send(b, topics.SUBSCRIPTIONS, [(str(sid), codecs.encode_subscription(sub)) for sid, sub in self.plain])
        send(b, topics.SUBSCRIPTIONS, tables_spec.encode_subs(self.aggregates))
        patterns_spec.send_subscriptions(b, self.patterns, since=self.since)
        tables_spec.wait_committed(b, tables.group, topics.SUBSCRIPTIONS, timeout=120)
        for name in ("processor", "patterns"):
            self.roles[name].start()
        for r in self.roles.values():
            assert r.service.ready.wait(120), f"{r.name} not ready:\n{r.service.tail()}"
        self.streams = [Stream(self._produce_event, 4, 0.15, b, len(self.events)),
                        Stream(self._produce_update, 2, 0.15, b, len(self.updates))]
        self.lap("start")

    def _produce_event(self, p: Producer, i: int) -> None:
        ts, attrs = self.events[i]
        p.produce(topics.EVENTS, codecs.encode_event(attrs, "avro" if i % 2 else "json"), f"k{attrs['n']}",
                  partition=patterns_spec.partition_for(attrs["name"], patterns_spec.PARTITIONS), timestamp=ts)

    def _produce_update(self, p: Producer, i: int) -> None:
        key, value = tables_spec.row_records(self.updates[i:i + 1])[0]
        p.produce(tables_spec.STOCK_TOPIC, value, key)

    def resume_times(self, since: float, timeout: float = 90.0) -> dict[str, float | None]:
        """Seconds from ``since`` (the cluster's recovery) until each service commits input past where it was then."""
        progress = Progress(self.bootstrap, {name: (r.group, r.input_topic) for name, r in self.roles.items()})
        base: dict[str, int] = {}
        out: dict[str, float | None] = {}
        try:
            deadline = time.monotonic() + timeout
            while len(out) < len(self.roles) and time.monotonic() < deadline:
                for name in self.roles:
                    now = progress(name) if name not in out else -1
                    if now < 0:
                        continue
                    if name not in base:
                        base[name] = now
                    elif now > base[name]:
                        out[name] = round(time.monotonic() - since, 2)
                time.sleep(0.05)
        finally:
            progress.close()
        return {name: out.get(name) for name in self.roles}

    def assert_alive(self) -> None:
        for r in self.roles.values():
            assert r.service.alive(), f"{r.name} exited:\n{r.service.tail(40)}"

    def finish(self) -> tuple[int, int]:
        """Stop the streams, let every service drain its input, stop the services cleanly; (events, updates) sent."""
        sent = tuple(s.stop() for s in self.streams)
        self.lap("load and fault")
        self.assert_alive()
        b = self.bootstrap
        wait_processed(b, self.roles["processor"].group, timeout=180)
        wait_processed(b, self.roles["patterns"].group, timeout=180)
        tables_spec.wait_committed(b, self.roles["tables"].group, tables_spec.STOCK_TOPIC, timeout=180)
        for r in self.roles.values():
            r.service.stop()
        self.lap("drain")
        return sent

    def kill(self) -> None:
        for s in self.streams:
            s.abandon()
        for r in self.roles.values():
            if r.service is not None:
                r.service.kill()

    def histories(self, sent: tuple[int, int]) -> dict[str, History]:
        b = self.bootstrap
        read: dict[str, list] = {"processor": [], "patterns": [], "tables": []}
        for m in read_all(b, topics.NOTIFICATIONS, timeout=120):
            n = json.loads(m.value())
            if n.get("kind") == "pattern":
                read["patterns"].append(n["notification_id"])
            elif "update_id" in n or "/init/" in n["notification_id"]:
                read["tables"].append((n["subscription"], "init" if "/init/" in n["notification_id"]
                                       else n["update_id"]))
            else:
                read["processor"].append(n["notification_id"])
        stored = patterns_spec.stored_events(b)
        assert sum(len(v) for v in stored.values()) == sent[0], "events the broker holds are not those acknowledged"
        events = [attrs for evs in stored.values() for _, _, attrs in evs]
        plain = {f"k{n}/{sid}" for n, sids in expected_matches(self.plain, events).items() for sid in sids}
        patterns = set(patterns_spec.oracle(self.patterns, stored, since=self.since))
        tables = set(tables_spec.expected(self.rows, self.aggregates, self.updates[:sent[1]], len(self.rows)))
        g = {name: r.group for name, r in self.roles.items()}
        self.lap("read and oracles")
        return {
            "processor": check("event processor", sent[0], plain, read["processor"], b,
                               {g["processor"]: [topics.EVENTS]}, [topics.NOTIFICATIONS]),
            "patterns": check("pattern service", sent[0], patterns, read["patterns"], b,
                              {g["patterns"]: [topics.EVENTS]}, [topics.PATTERN_CHANGELOG]),
            "tables": check("table service", sent[1], tables, read["tables"], b,
                            {g["tables"]: [tables_spec.STOCK_TOPIC, topics.SUBSCRIPTIONS]},
                            [topics.changelog_topic("stock")]),
        }


@pytest.fixture
def workload(cluster, seed, tmp_path):
    """Fresh topics on the module's cluster (whole again after the test before), the services, the streams."""
    wait_whole(cluster)
    b = cluster.bootstrap_servers
    fresh_topics(b)
    admin_client = ClientFactory(b).admin()
    from confluent_kafka.admin import NewTopic
    for f in admin_client.create_topics([NewTopic(tables_spec.STOCK_TOPIC, 1)], operation_timeout=10).values():
        f.result(10)
    made: list[Workload] = []

    def start(**extra: tuple[str, ...]) -> Workload:
        w = Workload(b, seed, extra)
        made.append(w)
        w.start()
        return w

    yield start
    for w in made:
        w.kill()
        for r in w.roles.values():
            r.save_logs(tmp_path)
    print(f"\nthe services' logs: {tmp_path}")


def verdict(fault: str, w: Workload, faults: list[tuple[str, dict[str, float | None]]], sent: tuple[int, int]
            ) -> None:
    """Print the figures (one line per service, each fault's resume times) and assert exactly once, nothing stuck,
    every service resumed after every fault."""
    histories = w.histories(sent)
    w.lap("checks")
    print(f"\nFAULT {fault} (seed {w.seed}): {sent[0]} events, {sent[1]} table updates; phases (s): {w.phases}")
    for what, resumed in faults:
        print(f"  {what}: resumed after the recovery (s): {resumed}")
    for name, h in histories.items():
        print(f"  {h.report()} ({w.roles[name].launches} launch(es))")
    record = {"fault": fault, "seed": w.seed, "events": sent[0], "updates": sent[1], "faults": faults,
              "phases": w.phases,
              **{name: {"expected": len(h.expected), "read": len(h.read), "lost": len(h.lost),
                        "duplicated": len(h.duplicated), "unexpected": len(h.unexpected), "stuck": len(h.stuck),
                        "launches": w.roles[name].launches} for name, h in histories.items()}}
    if os.environ.get("PUBSUB_FAULTS_REPORT"):
        with open(os.environ["PUBSUB_FAULTS_REPORT"], "a") as f:
            f.write(json.dumps(record) + "\n")
    for r in w.roles.values():  # exactly once as Kafka defines it: never a silent fall back to at-least-once
        said = [line for s in r.launched for line in s.log if " delivery: " in line]
        assert said and all("delivery: transactional" in line for line in said), said
        assert any(" delivery: transactional" in line for line in r.service.log), r.service.tail()
    for h in histories.values():
        h.assert_exactly_once()
    for what, resumed in faults:
        assert all(v is not None for v in resumed.values()), f"{what}: a service did not resume: {resumed}"


# --- the faults: each disturbs the cluster under load, waits for its recovery, and says what it did ---------------------


@dataclass
class Disturbance:
    """What a fault needs: the cluster, the running workload, the plan, the small file system."""

    cluster: EmbeddedBroker
    w: Workload
    plan: Plan
    small_fs: SmallFs
    hosts: Hosts | str
    rng: random.Random


def killed_and_restarted(d: Disturbance, victim: int) -> None:
    """kill -9 of one node, the load going on for ``plan.load`` seconds without it, then the node back."""
    d.cluster.kill_node(victim)
    time.sleep(d.plan.load)
    d.cluster.start_node(victim)
    wait_whole(d.cluster)


def leader_kill(d: Disturbance) -> str:
    victim = leader_of(d.cluster.bootstrap_servers, topics.EVENTS, 0)
    killed_and_restarted(d, victim)
    return f"kill -9 of node {victim + 1} (leader of {topics.EVENTS}[0]) under load, restarted after {d.plan.load:.0f} s"


def coordinator_kill(d: Disturbance) -> str:
    """The processor commits every 500 ms (``--commit-interval-ms 500``, see :data:`PROCESSOR_OPTIONS`): the kill
    falls inside a transaction; its coordinator moves to another node, which ends it, and the processor replays."""
    victim = coordinator_of(d.cluster.bootstrap_servers, d.w.processor_tid)
    killed_and_restarted(d, victim)
    return f"kill -9 of node {victim + 1}, the transaction coordinator of the processor, mid-transaction"


def rolling_restart(d: Disturbance) -> str:
    steps = []
    for node in range(3):
        t = time.monotonic()
        d.cluster.kill_node(node, signal.SIGTERM)  # Kafka's controlled shutdown
        stopped = time.monotonic()
        d.cluster.start_node(node)
        wait_whole(d.cluster)
        steps.append(f"{stopped - t:.0f}+{time.monotonic() - stopped:.0f}")
    return f"a rolling restart (SIGTERM, start, ISRs full again) of the 3 nodes; seconds to stop+rejoin: {steps}"


def node_paused(d: Disturbance) -> str:
    """SIGSTOP of the processor's transaction coordinator for longer than the services' group sessions and
    transaction timeouts, then SIGCONT: no service may take a transaction timed out by the broker for fencing."""
    victim = coordinator_of(d.cluster.bootstrap_servers, d.w.processor_tid)
    pause = (max(SESSION_MS, TRANSACTION_MS) + 4000) / 1000
    d.cluster.kill_node(victim, signal.SIGSTOP)
    try:
        time.sleep(pause)
    finally:
        d.cluster.kill_node(victim, signal.SIGCONT)
    wait_whole(d.cluster)
    return f"node {victim + 1} (the processor's transaction coordinator) paused (SIGSTOP) {pause:.0f} s"


def cluster_down(d: Disturbance) -> str:
    """Every node killed for ``plan.outage`` seconds: the services wait, alive, /readyz 503."""
    for node in range(3):
        d.cluster.kill_node(node)
    down = time.monotonic()
    not_ready: dict[str, float] = {}  # service -> seconds into the outage when /readyz first said 503
    # at least the plan's outage, and until every service has said so (librdkafka calls every broker down only
    # once each has failed a connection attempt, seconds after the fact), 30 s at most
    while time.monotonic() - down < d.plan.outage or (len(not_ready) < len(d.w.roles) and time.monotonic() - down < 30):
        d.w.assert_alive()
        for name, r in d.w.roles.items():
            if name not in not_ready and ready(r.port) == 503:
                not_ready[name] = round(time.monotonic() - down, 1)
        time.sleep(0.5)
    assert set(not_ready) == set(d.w.roles), f"only {not_ready} said not ready while the cluster was down"
    outage = time.monotonic() - down
    for node in range(3):
        d.cluster.start_node(node)
    wait_whole(d.cluster)
    return (f"all 3 nodes kill -9, the cluster down {outage:.0f} s (every service's /readyz 503 meanwhile, from "
            f"{', '.join(f'{n} {t} s' for n, t in not_ready.items())} into it)")


def services_and_nodes_killed(d: Disturbance) -> str:
    """kill -9 of a random service every 0.5-1.5 s (relaunched at once) while nodes, one at a time, are killed and
    restarted 1-3 s later.  One loop on the test's thread does both: a child started from another thread would get
    SIGTERM when that thread ends (``PR_SET_PDEATHSIG`` follows the thread, not the process)."""
    rng, kills, nodes = d.rng, [], []
    next_kill, victim, restart_at, restarted = time.monotonic(), None, time.monotonic() + 1.0, False
    while len(nodes) < d.plan.node_kills or victim is not None:
        now = time.monotonic()
        if now >= next_kill:
            role = d.w.roles[rng.choice(sorted(d.w.roles))]
            role.service.kill()
            role.start()
            kills.append(role.name)
            next_kill = now + rng.uniform(0.5, 1.5)
        if victim is None and now >= restart_at:  # the next node down
            victim, restarted, restart_at = rng.randrange(3), False, now + rng.uniform(1.0, 3.0)
            nodes.append(victim + 1)
            d.cluster.kill_node(victim)
        elif victim is not None and not restarted and now >= restart_at:
            d.cluster.start_node(victim)
            restarted = True
        elif victim is not None and restarted and whole(d.cluster):
            victim, restart_at = None, now + 1.0
        time.sleep(0.1)
    wait_whole(d.cluster)
    for r in d.w.roles.values():
        assert r.service.ready.wait(120), f"{r.name} not ready after the kills:\n{r.service.tail()}"
    return (f"{len(kills)} kill -9 of the services ({', '.join(f'{n} {kills.count(n)}' for n in sorted(set(kills)))}) "
            f"while nodes {nodes} were killed and restarted, one at a time")


def disk_full(d: Disturbance) -> str:
    """The small file system under node :data:`SMALL_FS_NODE`'s log directory fills up: Kafka stops that node (its
    only log directory failed); the cluster and the services go on with the other two.  Then space is freed and
    the node restarted."""
    if d.small_fs.error:
        pytest.skip(f"no small file system to fill: mount -t tmpfs failed: {d.small_fs.error}")
    node = d.cluster.nodes[SMALL_FS_NODE]
    filled = d.small_fs.fill()
    deadline = time.monotonic() + 60
    while node.running:
        assert time.monotonic() < deadline, f"node {SMALL_FS_NODE + 1} still runs on a full file system"
        time.sleep(0.2)
    died = node.log_tail(1000)  # the cause comes before a stack trace of some 40 lines and Kafka's shutdown lines
    assert "No space left on device" in died or "offline" in died.lower(), died[-4000:]
    time.sleep(d.plan.load)  # the cluster goes on with two nodes
    d.w.assert_alive()
    d.small_fs.free()
    d.cluster.start_node(SMALL_FS_NODE)
    wait_whole(d.cluster)
    return (f"node {SMALL_FS_NODE + 1}'s log directory ({SMALL_FS_SIZE} tmpfs) filled ({filled >> 20} MB written): the "
            f"node stopped, {d.plan.load:.0f} s on two nodes, space freed, node restarted")


def network_partition(d: Disturbance) -> str:
    """The leader of an events partition cut off from the other two nodes (not from the services) for longer than
    the controllers' broker session and the ISR's lag limit: the controllers fence it and move its leaderships,
    its ``acks=all`` writes cannot reach ``min.insync.replicas``, and the services must follow the new leaders.
    Then the partition heals and the node catches up."""
    if isinstance(d.hosts, str):
        pytest.skip(f"no network namespaces: {d.hosts}")
    victim = leader_of(d.cluster.bootstrap_servers, topics.EVENTS, 0)
    progress = Progress(d.cluster.bootstrap_servers, {n: (r.group, r.input_topic) for n, r in d.w.roles.items()})
    before = {name: progress(name) for name in d.w.roles}
    latest = dict(before)  # the last answer of each group's coordinator (-1: none)
    d.hosts.partition(victim)
    try:
        deadline = time.monotonic() + d.plan.partition
        while time.monotonic() < deadline:
            d.w.assert_alive()
            latest.update({name: n for name in d.w.roles if (n := progress(name)) >= 0})
            time.sleep(0.5)
    finally:
        d.hosts.heal(victim)
        progress.close()
    wait_whole(d.cluster)
    during = ", ".join(f"{n} {latest[n] - before[n] if min(latest[n], before[n]) >= 0 else '?'}" for n in d.w.roles)
    return (f"node {victim + 1} (leader of {topics.EVENTS}[0]) cut off from the other two nodes for "
            f"{d.plan.partition:.0f} s (network namespaces), the services still reaching it; inputs committed "
            f"meanwhile: {during}")


FAULTS: dict[str, Callable[[Disturbance], str]] = {
    "leader kill -9": leader_kill,
    "coordinator kill -9": coordinator_kill,
    "rolling restart": rolling_restart,
    "node paused": node_paused,
    "cluster down": cluster_down,
    "services and nodes killed": services_and_nodes_killed,
    "network partition": network_partition,
    "disk full": disk_full,
}
#: The processor's transactions stay open half a second, so that a kill falls inside one.
PROCESSOR_OPTIONS = ("--commit-interval-ms", "500")


def disturb(d: Disturbance, name: str) -> tuple[str, dict[str, float | None]]:
    """One fault under load: its description and each service's resume time after the cluster's recovery."""
    time.sleep(d.plan.load)
    what = FAULTS[name](d)
    resumed = d.w.resume_times(time.monotonic())
    if name == "cluster down":
        assert all(ready(r.port) == 200 for r in d.w.roles.values()), "a service is not ready again"
        assert all(v <= 10 for v in resumed.values()), f"not resumed within 10 s of the cluster's return: {resumed}"
    return what, resumed


def test_one_fault_under_load_notifies_exactly_once(cluster, workload, small_fs, hosts, plan, seed, name):
    """The long version (``--long-faults``, ``make test-faults``): each fault alone, on fresh topics, per seed."""
    w = workload(processor=PROCESSOR_OPTIONS)
    try:
        faults = [disturb(Disturbance(cluster, w, plan, small_fs, hosts, random.Random(seed)), name)]
        time.sleep(plan.load)
        sent = w.finish()
    finally:
        w.kill()
    verdict(name, w, faults, sent)


def test_every_fault_in_turn_notifies_exactly_once(cluster, workload, small_fs, hosts, plan, seed):
    """CI's version: one load, every fault once in turn (those that may skip last), one check at the end."""
    w = workload(processor=PROCESSOR_OPTIONS)
    d = Disturbance(cluster, w, plan, small_fs, hosts, random.Random(seed))
    faults = []
    try:
        for name in FAULTS:
            if name == "disk full" and small_fs.error:
                print(f"\ndisk full: not run: mount -t tmpfs failed: {small_fs.error}")
                continue
            if name == "network partition" and isinstance(hosts, str):
                print(f"\nnetwork partition: not run: no network namespaces: {hosts}")
                continue
            started = time.monotonic()
            faults.append(disturb(d, name))
            print(f"\n{name}: {faults[-1][0]}; resumed {faults[-1][1]}; {time.monotonic() - started:.0f} s")
        sent = w.finish()
    finally:
        w.kill()
    verdict("every fault in turn", w, faults, sent)
