"""The statistics job on a Spark standalone cluster loses a worker in the middle of a run.

A master and two one-core workers started from PySpark's own jars (``bin/spark-class``), every listener of
theirs, of the executors and of the driver on 127.0.0.1 only; the job is submitted to it as its command line
(``python -m fastpubsub.stats_job --master spark://...``) over one window of the session broker's events, with one
worker and its executor killed -9 while a task of the first pass runs on it.  Spark runs the lost tasks again on
the remaining worker; the run must exit 0 and publish the same snapshot (everything but the window's
``computed_at_ms``, the wall-clock time of the run) as an undisturbed run of the job over the same window.
"""

from __future__ import annotations

import json
import os
import re
import ipaddress
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from fastpubsub.engine.costmodel.statistics import EventStatistics
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec, free_port
from fastpubsub.kafka.statistics_topic import latest_snapshot
from fastpubsub.stats_job.statistics_job import run_statistics_job
from fastpubsub.wire.codecs import encode_event

pytestmark = [pytest.mark.broker, pytest.mark.timeout(900)]

SRC = Path(__file__).resolve().parents[2] / "src"
PARTITIONS = 8
EVENTS_PER_PARTITION = 20_000
SPLIT_SIZE = 10_000  # 16 first-pass tasks: several on each worker


def get_json(url: str) -> dict | list | None:
    """The JSON at ``url``, or None while nothing answers there yet."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None


def wait_for(what: str, check: Callable[[], object], timeout: float = 90, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (result := check()):
            return result
        time.sleep(every)
    raise AssertionError(f"no {what} within {timeout:.0f}s")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def listening_addresses(pgids: set[int]) -> set[str]:
    """The addresses the processes of these process groups listen on (TCP, from /proc)."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or os.getpgid(int(proc.name)) not in pgids:
                continue
            sockets = {os.readlink(fd)[8:-1] for fd in (proc / "fd").iterdir()
                       if os.readlink(fd).startswith("socket:[")}
            for table in ("tcp", "tcp6"):  # the process's own network namespace
                for line in (proc / "net" / table).read_text().splitlines()[1:]:
                    fields = line.split()
                    if fields[3] == "0A" and fields[9] in sockets:  # LISTEN, one of its sockets
                        word = bytes.fromhex(fields[1].split(":")[0])  # 32-bit words in host (little-endian) order
                        address = ipaddress.ip_address(b"".join(word[i:i + 4][::-1] for i in range(0, len(word), 4)))
                        found.add(str(getattr(address, "ipv4_mapped", None) or address))
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
    return found


class StandaloneCluster:
    """A Spark standalone master and one-core workers on loopback, from PySpark's distribution.

    Each daemon is a process group of its own (``spark-class`` execs the JVM; a worker's executors and their
    Python workers are its children): killing a group kills a worker with everything it started.
    """

    def __init__(self, directory: Path, workers: int = 2) -> None:
        pyspark = pytest.importorskip("pyspark")
        self.home = Path(pyspark.__file__).parent
        self.dir = directory
        self.port, self.ui_port = free_port(), free_port()
        self.worker_ui_ports = [free_port() for _ in range(workers)]
        self.procs: dict[str, subprocess.Popen] = {}
        conf = directory / "conf"
        conf.mkdir(parents=True)
        # read by the driver's spark-submit; every address the driver binds or advertises is loopback
        (conf / "spark-defaults.conf").write_text("\n".join([
            "spark.driver.host 127.0.0.1", "spark.driver.bindAddress 127.0.0.1",
            "spark.port.maxRetries 0",  # the web UI on the port given, or no run
            "spark.executor.memory 512m", "spark.cores.max 2", ""]))
        self.env = {
            **os.environ, "SPARK_HOME": str(self.home), "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": "127.0.0.1",  # web UIs bind it instead of 0.0.0.0
            "SPARK_MASTER_HOST": "127.0.0.1", "SPARK_DAEMON_MEMORY": "512m",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",  # no submission server on a fixed port
            "SPARK_LOG_DIR": str(directory / "logs"), "SPARK_WORKER_DIR": str(directory / "work"),
            "SPARK_LOCAL_DIRS": str(directory / "local"),
            "PYSPARK_PYTHON": sys.executable,  # the executors' Python workers run this venv
            "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p),
        }
        for d in ("logs", "work", "local"):
            (directory / d).mkdir()

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i, ui in enumerate(self.worker_ui_ports):
            self._daemon(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master_url,
                         "--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(ui),
                         "--cores", "1", "--memory", "1g", "--work-dir", str(self.dir / "work" / str(i)))
        wait_for("two registered workers", lambda: self.alive_workers() == len(self.worker_ui_ports), timeout=180)

    def _daemon(self, name: str, cls: str, *args: str) -> None:
        with open(self.dir / "logs" / f"{name}.out", "wb") as log:
            self.procs[name] = subprocess.Popen([str(self.home / "bin" / "spark-class"), cls, *args], env=self.env,
                                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                preexec_fn=child_preexec)  # its own process group

    def master_state(self) -> dict:
        return get_json(f"http://127.0.0.1:{self.ui_port}/json/") or {}

    def alive_workers(self) -> int:
        state = self.master_state()
        return sum(w["state"] == "ALIVE" for w in state.get("workers", ()))

    def executors_of_worker(self, index: int) -> set[str]:
        """Ids of the executors worker ``index`` runs (as the driver names them)."""
        state = get_json(f"http://127.0.0.1:{self.worker_ui_ports[index]}/json/") or {}
        return {str(e["id"]) for e in state.get("executors", ())}

    def kill(self, name: str) -> None:
        """SIGKILL to the process group: a daemon's JVM, its executors and their Python workers at once."""
        proc = self.procs[name]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(30)
        wait_for(f"the end of every process of {name}", lambda: not group_alive(proc.pid), timeout=30, every=0.05)

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name)


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(tmp_path / "spark")
    request.addfinalizer(c.close)  # every JVM goes, also when start() or the test fails
    c.start()
    yield c


def event(i: int) -> dict:
    """Numbers, strings and booleans, some attributes missing: every kind of count the job makes."""
    e = {"price": (i * 7) % 97 + (0.5 if i % 2 else 0), "movie": MOVIES[i % len(MOVIES)], "qty": i % 13}
    if i % 3:
        e["vip"] = i % 3 == 1
    return e


MOVIES = ("groundhog day", "heat", "amélie", "up", "ran")


def fill_events(bootstrap: str) -> tuple[str, int]:
    """A topic of ``PARTITIONS`` x ``EVENTS_PER_PARTITION`` events (a pool of distinct ones, repeated)."""
    topic = f"test-events-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    pool = [encode_event(event(i)) for i in range(1_000)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 1 << 20})
    errors: list = []
    for p in range(PARTITIONS):
        for i in range(EVENTS_PER_PARTITION):
            producer.produce(topic, pool[(i * 7 + p) % len(pool)], partition=p,
                             on_delivery=lambda err, _: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors
    return topic, PARTITIONS * EVENTS_PER_PARTITION


@dataclass
class Run:
    proc: subprocess.Popen
    statistics: str  # the topic of its snapshot
    ui_port: int  # the driver's web UI and REST API


def start_job(cluster: StandaloneCluster, bootstrap: str, topic: str, out: Path) -> Run:
    """The job's command line against the cluster; its snapshot on a statistics topic of its own."""
    statistics, ui_port = f"test-statistics-{uuid.uuid4().hex[:8]}", free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastpubsub.stats_job", "--master", cluster.master_url, "-b", bootstrap,
         "--topic", topic, "--statistics-topic", statistics, "--output", str(out),
         "--split-size", str(SPLIT_SIZE)],
        env={**cluster.env, "PYSPARK_SUBMIT_ARGS": f"--conf spark.ui.port={ui_port} pyspark-shell"},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=child_preexec)  # its own process group: the driver's JVM goes with it in close()
    cluster.procs[f"driver-{len(cluster.procs)}"] = proc
    return Run(proc, statistics, ui_port)


def finish(proc: subprocess.Popen, timeout: float = 480) -> str:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    assert proc.returncode == 0, err[-4000:]
    return err


def without_run_time(record: dict) -> dict:
    """A snapshot's record without the one field that differs between equal runs: when it was computed."""
    window = dict(record["window"])
    del window["computed_at_ms"]
    return {**record, "window": window}


def mid_run_on(cluster: StandaloneCluster, run: Run, worker: int) -> bool:
    """The driver's REST API says an executor of ``worker`` has finished tasks (their cached counts are on it) and
    runs another."""
    api = f"http://127.0.0.1:{run.ui_port}/api/v1/applications"
    apps = get_json(api)
    if not apps:
        return False
    executors = get_json(f"{api}/{apps[0]['id']}/executors") or []
    mine = cluster.executors_of_worker(worker)
    return any(e["id"] in mine and e["completedTasks"] >= 2 and e["activeTasks"] > 0 for e in executors)


def test_a_worker_killed_mid_run_changes_nothing_in_the_snapshot(broker: EmbeddedBroker, cluster: StandaloneCluster,
                                                               spark, tmp_path: Path):
    """The undisturbed run is the same job on the spark lane's local Spark (one JVM started instead of a driver and
    two executors more); the disturbed one is the command line's, on the standalone cluster."""
    bs = broker.bootstrap_servers
    t0 = time.monotonic()
    topic, count = fill_events(bs)
    t_filled = time.monotonic()

    statistics = f"test-statistics-{uuid.uuid4().hex[:8]}"
    run_statistics_job(bs, topic, output=None, statistics_topic=statistics, spark=spark, split_size=SPLIT_SIZE)
    undisturbed = latest_snapshot(bs, topic, statistics)
    assert undisturbed is not None and undisturbed.event_count == count and undisturbed.bad_records == 0
    t_undisturbed = time.monotonic()

    run = start_job(cluster, bs, topic, tmp_path / "disturbed.json")
    wait_for("worker 0 in the middle of the first pass",
             lambda: run.proc.poll() is not None or mid_run_on(cluster, run, 0), timeout=300, every=0.05)
    assert run.proc.poll() is None, "the run ended before worker 0 was in the middle of it"
    # the master, the workers, the executors, their Python workers and the driver
    assert listening_addresses({p.pid for p in cluster.procs.values()}) == {"127.0.0.1"}
    killed = time.monotonic()
    cluster.kill("worker-0")
    err = finish(run.proc)
    t_disturbed = time.monotonic()
    assert cluster.alive_workers() == 1

    (tmp_path / "disturbed.log").write_text(err)
    assert re.search(r"Lost executor \d+ on 127\.0\.0\.1", err), err[-4000:]  # the driver saw it go, mid-run
    lost_blocks = len(re.findall(r"No more replicas available for rdd_", err))  # cached partial counts, computed again
    disturbed = latest_snapshot(bs, topic, run.statistics)
    assert disturbed is not None
    assert without_run_time(disturbed.to_record()) == without_run_time(undisturbed.to_record())
    assert EventStatistics.from_record(json.loads((tmp_path / "disturbed.json").read_text())).to_record() == disturbed.to_record()
    print(f"\n{count} events in {PARTITIONS} partitions filled in {t_filled - t0:.1f}s; undisturbed run "
          f"{t_undisturbed - t_filled:.1f}s; disturbed run {t_disturbed - t_undisturbed:.1f}s, worker 0 killed "
          f"{killed - t_undisturbed:.1f}s into it, {lost_blocks} cached partitions lost with it")
