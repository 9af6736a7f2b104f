"""The embedded broker: Apache Kafka in KRaft mode on loopback, one node or a cluster of three on one machine.

What the demo, the tests and ``pubsub broker`` start.  Each node is one JVM running ``kafka.Kafka`` as broker and
controller at once (KRaft's combined mode: right for a machine of its own, not for production, where controllers
run apart), with a static quorum of all nodes as voters, so a restart on the same data directory resumes whatever
ports the clients use.  Three nodes give what a production cluster gives a topic: replication factor 3 and
``min.insync.replicas`` 2 by the cluster's defaults, so ``pubsub topics`` and every service that creates a topic get
them without being told, and any one node can die.

With ``security`` (``kafka.security.BrokerSecurity``, ``pubsub broker --security DIR``) each node's clients connect
through a ``SASL_SSL`` listener (SCRAM-SHA-512 over TLS) and the nodes to each other through authenticated ones: no
listener takes an unauthenticated connection, ``admin`` is the only super user, every other user may do only what
its ACLs allow (``kafka.acls``).

Each JVM is started with ``PR_SET_PDEATHSIG``: when the process that started it dies, even by ``kill -9``, the JVM
gets SIGTERM, so no test run or killed demo leaves a broker holding a port.  A temporary data directory carries the
starting process's pid; one whose process is gone is removed by the next start.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from . import distribution
from .clients import ClientFactory
from .distribution import Distribution
from .security import ADMIN, BrokerSecurity

HOST = "127.0.0.1"
DEFAULT_HEAP = "512m"
TEMP_PREFIX = "fastpubsub-kafka-"
#: :meth:`EmbeddedBroker.wait` restarts a cluster's dead node, unless it died more often than this within
#: ``RESTART_WINDOW`` seconds.
MAX_RESTARTS = 3
RESTART_WINDOW = 60.0

log = logging.getLogger(__name__)


class BrokerError(RuntimeError):
    """The broker could not start, or stopped while it should have run: the message says why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        return s.connect_ex((host, port)) == 0


def child_preexec() -> None:
    # Linux: the child gets SIGTERM if the process that started it dies, so
    # a killed demo or test run leaves no broker holding the port.
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()  # Ctrl-C in the terminal goes to us; we stop the broker last


CLONE_NEWNET = 0x40000000


def preexec_in_namespace(namespace: str | None) -> Callable[[], None]:
    """:func:`child_preexec`, then, given a namespace, into the network namespace ``ip netns add NAME`` made (its
    handle in ``/var/run/netns``): the node sees only that namespace's interfaces."""
    if namespace is None:
        return child_preexec
    handle = f"/var/run/netns/{namespace}"

    def preexec() -> None:
        import ctypes

        child_preexec()
        fd = os.open(handle, os.O_RDONLY)
        if ctypes.CDLL("libc.so.6", use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {handle}")
        os.close(fd)

    return preexec


def valid_node_count(nodes: int) -> int:
    """1, or 3 and more: two voters lose their quorum with either node, so a pair is no cluster."""
    if nodes == 1 or nodes >= 3:
        return nodes
    raise ValueError(f"--nodes {nodes}: a KRaft quorum needs 1 node, or 3 and more (with 2, losing either stops both)")


@dataclass
class Layout:
    """The ports of every node, kept in ``cluster.json`` so a restart on the same data directory finds its quorum."""

    cluster_id: str
    ports: list[int]
    controller_ports: list[int]
    internal_ports: list[int] = field(default_factory=list)  # a secured cluster's inter-broker listeners

    @property
    def nodes(self) -> int:
        return len(self.ports)

    def all_ports(self) -> list[int]:
        return self.ports + self.controller_ports + self.internal_ports

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"cluster_id": self.cluster_id, "ports": self.ports,
                                    "controller_ports": self.controller_ports,
                                    "internal_ports": self.internal_ports}, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> "Layout":
        data = json.loads(path.read_text())
        return cls(data["cluster_id"], list(data["ports"]), list(data["controller_ports"]),
                   list(data.get("internal_ports", [])))


def server_properties(layout: Layout, node: int, log_dir: Path,
                      security: BrokerSecurity | None = None, hosts: Sequence[str] | None = None) -> dict[str, str]:
    """One node's ``server.properties``: combined broker and controller on loopback (or each node on its address of
    ``hosts``), sized for one machine; with ``security``, its listeners authenticated and its authorizer on
    (``BrokerSecurity.server_properties``)."""
    n = layout.nodes
    hosts = list(hosts) if hosts is not None else [HOST] * n
    host = hosts[node]
    replicas = min(n, 3)
    min_isr = 2 if replicas >= 3 else 1
    voters = ",".join(f"{i + 1}@{hosts[i]}:{p}" for i, p in enumerate(layout.controller_ports))
    secured = {} if security is None else security.server_properties(
        layout.ports[node], layout.internal_ports[node], layout.controller_ports[node])
    return {
        "process.roles": "broker,controller",
        "node.id": str(node + 1),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{host}:{layout.ports[node]},CONTROLLER://{host}:{layout.controller_ports[node]}",
        "advertised.listeners": f"PLAINTEXT://{host}:{layout.ports[node]}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        # What a production cluster of this size would set: topics survive the loss of any one node.
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min_isr),
        # Sized for one machine: fewer internal partitions to create and load, groups that form at once.
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.num.partitions": "10",
        "group.initial.rebalance.delay.ms": "0",
        "num.partitions": "1",
        # Topics are created with their configuration (wire.topics), never by a client that names a missing one.
        "auto.create.topics.enable": "false",
        # The cleaner looks for dirty compacted logs every second instead of every 15 s.
        "log.cleaner.backoff.ms": "1000",
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.retention.check.interval.ms": "10000",
        **secured,
    }


LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka.Kafka
logger.kafka.level = INFO
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
"""


class Node:
    """One JVM of the cluster: its directory, its process, and what it logged."""

    def __init__(self, index: int, root: Path, log_dir: str | Path | None = None) -> None:
        self.index = index
        self.dir = root / f"node-{index + 1}"
        self.log_dir = Path(log_dir) if log_dir is not None else self.dir / "data"
        self.proc: subprocess.Popen | None = None

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"

    @property
    def stdout_file(self) -> Path:
        """What the JVM printed outside its log: a crash before logging starts, a fatal JVM error."""
        return self.dir / "stdout.log"

    @property
    def formatted(self) -> bool:
        return (self.log_dir / "meta.properties").is_file()

    @property
    def format_arguments(self) -> Path:
        """The private file that hands ``kafka-storage format`` its arguments while it runs (they hold passwords)."""
        return self.dir / "format.args"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        sources = [self.log_file, self.stdout_file]
        text = []
        for path in sources:
            with contextlib.suppress(OSError):
                text += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(text[-lines:])

    def locked(self) -> bool:
        """Whether a running broker holds this node's log directory (Kafka locks ``.lock`` with fcntl)."""
        lock = self.log_dir / ".lock"
        if not lock.exists():
            return False
        with open(lock, "a") as f:
            try:
                fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.lockf(f, fcntl.LOCK_UN)
        return False


class EmbeddedBroker:
    """Apache Kafka on 127.0.0.1: ``nodes`` JVMs in KRaft mode, ready when clients can use transactions.

    ``data_dir`` None: a temporary directory, removed by :meth:`stop`.  A given directory is kept, and starting on
    it again resumes the cluster it holds (topics, offsets, transactions).  ``security``: clients must connect
    through SASL_SSL as one of its users (:meth:`clients`); its users are created when the cluster is formatted.

    ``config``: broker settings over :func:`server_properties` on every node; ``node_config``: on one node (by
    index), e.g. its ``log.dirs`` on a file system of its own.  The fault tests shorten timeouts with them.

    ``hosts`` and ``namespaces``: the address each node listens on and the network namespace its JVM runs in (by
    index; default 127.0.0.1 in this process's namespace).  The partition test gives each node a namespace of its
    own, joined to the others by veth pairs, so that it can cut one node off (``tests/support/netns.py``).
    """

    def __init__(self, port: int | None = None, *, nodes: int = 1,
                 data_dir: str | Path | None = None, heap: str = DEFAULT_HEAP,
                 kafka_home: str | Path | None = None, security: BrokerSecurity | None = None,
                 config: Mapping[str, str] | None = None,
                 node_config: Mapping[int, Mapping[str, str]] | None = None,
                 hosts: Sequence[str] | None = None, namespaces: Sequence[str | None] | None = None) -> None:
        self.security = security
        self.port = port
        self.config = dict(config or {})
        self.node_config = {i: dict(c) for i, c in (node_config or {}).items()}
        self.nodes_count = valid_node_count(nodes)
        self.hosts = list(hosts) if hosts is not None else [HOST] * self.nodes_count
        self.namespaces = list(namespaces) if namespaces is not None else [None] * self.nodes_count
        if len(self.hosts) != self.nodes_count or len(self.namespaces) != self.nodes_count:
            raise ValueError(f"{self.nodes_count} node(s): give as many hosts and namespaces, not "
                             f"{len(self.hosts)} and {len(self.namespaces)}")
        if security is not None and set(self.hosts) != {HOST}:
            raise ValueError(f"a secured cluster's certificate names {HOST} only: it cannot listen on {self.hosts}")
        self._given_dir = Path(data_dir).expanduser().resolve() if data_dir is not None else None
        self.heap = heap
        self.kafka_home = kafka_home
        self.root: Path | None = None
        self.layout: Layout | None = None
        self.nodes: list[Node] = []
        self.dist: Distribution | None = None
        self._interrupted = False

    # -- addresses -----------------------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        assert self.layout is not None, "the broker has not started"
        return ",".join(f"{h}:{p}" for h, p in zip(self.hosts, self.layout.ports))

    def node_bootstrap(self, index: int) -> str:
        assert self.layout is not None
        return f"{self.hosts[index]}:{self.layout.ports[index]}"

    def clients(self, user: str = ADMIN, password: str | None = None) -> ClientFactory:
        """A client factory of this broker: as ``user`` (with its password, or ``password``) when it is secured."""
        settings = {} if self.security is None else self.security.settings(user, password)
        return ClientFactory(self.bootstrap_servers, settings)

    # -- start ---------------------------------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> "EmbeddedBroker":
        try:
            self.dist = distribution.resolve(self.kafka_home)
            self._prepare()
            self._format()
            for node in self.nodes:
                self._launch(node)
            self.wait_ready(timeout)
        except BaseException:
            self.stop(graceful=False)
            raise
        return self

    def _prepare(self) -> None:
        if self._given_dir is None:
            sweep_stale_temporary_dirs()
            self.root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
            (self.root / "owner.pid").write_text(f"{os.getpid()}\n")
        else:
            self.root = self._given_dir
            if self.root.exists() and not self.root.is_dir():
                raise BrokerError(f"--data-dir {self.root} exists and is not a directory")
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                probe = self.root / ".write-test"
                probe.write_text("")
                probe.unlink()
            except OSError as exc:
                raise BrokerError(f"--data-dir {self.root} is not a writable directory: {exc}") from None
        layout_file = self.root / "cluster.json"
        self.nodes = [Node(i, self.root, self.node_config.get(i, {}).get("log.dirs")) for i in range(self.nodes_count)]
        if layout_file.is_file():
            layout = Layout.load(layout_file)
            if layout.nodes != self.nodes_count:
                raise BrokerError(f"--data-dir {self.root} holds a cluster of {layout.nodes} node(s), not "
                                  f"{self.nodes_count}: start it with --nodes {layout.nodes}, or give another directory")
            if self.port:
                layout.ports = [self.port + i for i in range(self.nodes_count)]
            for node in self.nodes:
                if node.locked():
                    raise BrokerError(f"--data-dir {self.root} is in use by a running broker ({node.log_dir} is locked)")
        else:
            first = self.port
            ports = [first + i for i in range(self.nodes_count)] if first else [free_port() for _ in self.nodes]
            layout = Layout(_cluster_id(), ports, [free_port() for _ in self.nodes])
        if self.security is not None and len(layout.internal_ports) != self.nodes_count:
            layout.internal_ports = [free_port() for _ in self.nodes]
        taken = [p for p in layout.all_ports() if port_in_use(p)]
        if taken:
            what = "port" if len(taken) == 1 else "ports"
            raise BrokerError(f"{what} {', '.join(map(str, taken))} on {HOST} already in use; choose another with --port")
        if len(set(layout.all_ports())) != len(layout.all_ports()):
            raise BrokerError(f"the ports of the nodes collide: {layout.all_ports()}")
        self.layout = layout
        self.port = layout.ports[0]
        layout.save(layout_file)
        for node in self.nodes:
            node.dir.mkdir(exist_ok=True)
            props = {**server_properties(layout, node.index, node.log_dir, self.security, self.hosts), **self.config,
                     **self.node_config.get(node.index, {})}
            config = node.dir / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            config.chmod(0o600)  # a secured node's holds the admin password
            (node.dir / "log4j2.properties").write_text(LOG4J2.format(path=node.log_file))

    def _format(self) -> None:
        """``kafka-storage format`` for every node that has never run (one JVM each, side by side).

        A secured cluster's users are created here (``--add-scram``, which the tool takes on its command line only),
        so their passwords go to the tool through a file only its owner reads, never on a command line that every
        local user can read in ``/proc``; the file is removed once the tool has ended.
        """
        assert self.dist is not None and self.layout is not None
        todo = [node for node in self.nodes if not node.formatted]
        procs = []
        try:
            for node in todo:
                users = [] if self.security is None else self.security.scram_arguments()
                cmd = self.dist.java("kafka.tools.StorageTool", "format", f"--cluster-id={self.layout.cluster_id}",
                                     "-c", str(node.dir / "server.properties"), "--ignore-formatted", *users,
                                     heap="256m", argfile=node.format_arguments if users else None,
                                     properties={"log4j2.configurationFile": str(node.dir / "log4j2.properties")})
                procs.append((node, subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                     stderr=subprocess.STDOUT, text=True, preexec_fn=child_preexec)))
            for node, proc in procs:
                out, _ = proc.communicate(120)
                if proc.returncode != 0:
                    raise BrokerError(f"formatting {node.log_dir} failed (exit {proc.returncode}): "
                                      f"{out.strip()[-1500:]}")
        finally:
            for node in todo:
                node.format_arguments.unlink(missing_ok=True)

    def _launch(self, node: Node) -> None:
        assert self.dist is not None
        cmd = self.dist.java("kafka.Kafka", str(node.dir / "server.properties"), heap=self.heap,
                             properties={"log4j2.configurationFile": str(node.dir / "log4j2.properties"),
                                         "java.awt.headless": "true"})
        cmd[1:1] = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError"]
        out = open(node.stdout_file, "ab")
        try:
            node.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=preexec_in_namespace(self.namespaces[node.index]), cwd=node.dir)
        finally:
            out.close()

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until every node answers metadata requests, every partition has a leader, and a producer's
        ``init_transactions`` succeeds.

        A node listening is not yet a node that serves: the controller quorum elects a leader, brokers register,
        and the transaction coordinator loads its partitions first.  Waiting for exactly what the services do first
        (metadata, then a transactional producer) is what "ready" means to them.
        """
        from confluent_kafka import KafkaError, KafkaException

        deadline = time.monotonic() + timeout
        assert self.layout is not None
        while not all(port_in_use(p, h) for h, p in zip(self.hosts, self.layout.ports)):  # no client before the listeners: no refusals logged
            self._check_alive("while starting")
            if time.monotonic() > deadline:
                raise BrokerError(f"Apache Kafka did not listen on {self.bootstrap_servers} within {timeout:.0f}s; "
                                  f"its log:\n{self.log_tail()}")
            time.sleep(0.1)
        clients = self.clients()
        admin = clients.admin()
        while True:
            self._check_alive("while starting")
            try:
                metadata = admin.list_topics(timeout=2)
                leaderless = [t for t, m in metadata.topics.items()
                              if m.error is not None or any(p.leader < 0 for p in m.partitions.values())]
                # a restarted cluster lists its topics before it has loaded them: ready once every one is led
                if len(metadata.brokers) >= self.nodes_count and not leaderless:
                    break
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"Apache Kafka on {self.bootstrap_servers} did not answer metadata requests within "
                                  f"{timeout:.0f}s; its log:\n{self.log_tail()}")
            time.sleep(0.2)
        producer = clients.producer(**{"transactional.id": f"fastpubsub-ready-{uuid.uuid4().hex[:12]}"})
        while True:
            self._check_alive("while starting")
            try:
                producer.init_transactions(max(1.0, min(10.0, deadline - time.monotonic())))
                break
            except KafkaException as exc:
                if not exc.args[0].retriable() and exc.args[0].code() not in (KafkaError._TIMED_OUT,
                                                                              KafkaError.REQUEST_TIMED_OUT):
                    raise BrokerError(f"Apache Kafka refused init_transactions: {exc}") from None
            if time.monotonic() > deadline:
                raise BrokerError(f"the transaction coordinator on {self.bootstrap_servers} did not accept "
                                  f"init_transactions within {timeout:.0f}s; its log:\n{self.log_tail()}")
        producer.flush(1)

    def _check_alive(self, when: str) -> None:
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is not None:
                raise BrokerError(f"Apache Kafka node {node.index + 1} exited with status {node.proc.returncode} "
                                  f"{when}; its log:\n{node.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(f"[node {n.index + 1}] {n.log_tail(lines)}" for n in self.nodes)

    # -- running ---------------------------------------------------------------------------------------------------
    def wait(self) -> int:
        """Until the broker stops; the exit status of the node that ended it (after :meth:`interrupt`: the first
        node's).

        One node's exit ends a single-node broker.  In a cluster the others go on serving (a topic has three
        replicas, so any one node may die), as under a supervisor: the dead node's exit and the end of its log are
        logged, and it is started again on its data.  A node that dies more than :data:`MAX_RESTARTS` times within
        :data:`RESTART_WINDOW` seconds ends the wait, as something other than a crash keeps it down.
        """
        deaths: dict[int, list[float]] = {}
        while not self._interrupted:
            for node in self.nodes:
                code = None if node.proc is None else node.proc.poll()
                if code is None or self._interrupted:
                    continue
                if self.nodes_count == 1:
                    return code
                now = time.monotonic()
                deaths[node.index] = [t for t in deaths.get(node.index, []) if now - t < RESTART_WINDOW] + [now]
                if len(deaths[node.index]) > MAX_RESTARTS:
                    log.error("Apache Kafka node %d exited with status %d, %d times within %.0f s: something keeps it "
                              "from running, so it is not started again and the cluster stops. Its log (%s, %s) "
                              "ends:\n%s", node.index + 1, code, len(deaths[node.index]), RESTART_WINDOW,
                              node.log_file, node.stdout_file, node.log_tail())
                    return code
                log.warning("Apache Kafka node %d exited with status %d; the other nodes go on serving, and it is "
                            "started again on its data. Its log (%s, %s) ends:\n%s", node.index + 1, code,
                            node.log_file, node.stdout_file, node.log_tail())
                self._launch(node)
            time.sleep(0.2)
        codes = [node.proc.wait() for node in self.nodes if node.proc is not None]
        return codes[0] if codes else 0

    def alive(self) -> bool:
        return all(node.running for node in self.nodes)

    def pids(self) -> list[int]:
        return [node.proc.pid for node in self.nodes if node.proc is not None]

    def kill_node(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Kill (or signal) one node: what the fault tests do to a cluster."""
        node = self.nodes[index]
        assert node.proc is not None
        node.proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            node.proc.wait(60)

    def start_node(self, index: int) -> None:
        """Start one stopped node again on its data (the cluster's other nodes still run)."""
        node = self.nodes[index]
        if node.running:
            raise BrokerError(f"node {index + 1} is running")
        self._launch(node)

    # -- stop ------------------------------------------------------------------------------------------------------
    def interrupt(self) -> None:
        """Ask every node to exit, without waiting (safe in a signal handler): SIGTERM, Kafka's clean shutdown."""
        self._interrupted = True
        for node in self.nodes:
            if node.running:
                with contextlib.suppress(ProcessLookupError):
                    node.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 60.0, graceful: bool | None = None) -> None:
        """Stop every node; remove a temporary data directory.

        A kept data directory gets Kafka's clean shutdown (SIGTERM: logs flushed, no recovery at the next start);
        a temporary one is thrown away, so its nodes are killed at once.
        """
        if graceful is None:
            graceful = self._given_dir is not None
        if graceful:
            self.interrupt()
        else:
            for node in self.nodes:
                if node.running:
                    with contextlib.suppress(ProcessLookupError):
                        node.proc.kill()
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if node.proc is None:
                continue
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
        if self._given_dir is None and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (what ``kafka-storage random-uuid`` prints).

    Like Kafka's own ``Uuid.randomUuid``, never one that starts with ``-``: a command line would read it as an option.
    """
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def sweep_stale_temporary_dirs() -> None:
    """Remove temporary data directories whose starting process is gone (it was killed before it could)."""
    for path in Path(tempfile.gettempdir()).glob(TEMP_PREFIX + "*"):
        with contextlib.suppress(OSError, ValueError):
            pid = int((path / "owner.pid").read_text())
            if not _pid_alive(pid):
                shutil.rmtree(path, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
