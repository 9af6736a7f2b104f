"""``pubsub broker``: Apache Kafka on loopback, started, stopped and refused as a user would see it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource

from fastpubsub.cli import main
from fastpubsub.kafka import ClientFactory, admin, distribution
from fastpubsub.kafka.broker import MAX_RESTARTS, RESTART_WINDOW, TEMP_PREFIX, EmbeddedBroker, free_port, port_in_use
from fastpubsub.wire import topics

pytestmark = pytest.mark.broker


def java_pids_of(pids: list[int]) -> list[int]:
    return [p for p in pids if Path(f"/proc/{p}").exists() and "java" in Path(f"/proc/{p}/cmdline").read_text()]


def children_java(parent: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(parent), "java"], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def start_cli(*args: str, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "fastpubsub", "broker", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline().strip()
    return proc, line


def test_a_killed_broker_command_leaves_no_jvm_behind():
    port = free_port()
    proc, line = start_cli("--port", str(port))
    try:
        assert line == f"127.0.0.1:{port}", proc.stderr.read()
        jvms = children_java(proc.pid)
        assert len(jvms) == 1
    finally:
        proc.kill()  # kill -9: no handler runs in the broker command
        proc.wait()
    deadline = time.monotonic() + 60
    while java_pids_of(jvms) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not java_pids_of(jvms), "the JVM outlived the process that started it"
    assert not port_in_use(port)


def test_a_kept_data_dir_resumes_its_topics_and_records(tmp_path):
    data = tmp_path / "kafka"
    with EmbeddedBroker(data_dir=data) as b:
        admin.create_topics(b.bootstrap_servers, partitions=2)
        producer = ClientFactory(b.bootstrap_servers).producer()
        producer.produce(topics.EVENTS, b"kept")
        assert producer.flush(30) == 0
    assert (data / "cluster.json").is_file() and (data / "node-1" / "data" / "meta.properties").is_file()
    with EmbeddedBroker(data_dir=data) as again:  # same directory: same cluster, same topics
        listed = ClientFactory(again.bootstrap_servers).admin().list_topics(timeout=10).topics
        assert set(topics.ALL) <= set(listed)
        from tests.support.kafka_helpers import read_all
        assert [m.value() for m in read_all(again.bootstrap_servers, topics.EVENTS)] == [b"kept"]


def test_a_temporary_data_dir_is_removed_on_stop():
    b = EmbeddedBroker().start()
    root = b.root
    assert root.name.startswith(TEMP_PREFIX) and root.is_dir()
    b.stop()
    assert not root.exists()


def node_jvm(parent: int, node: int) -> int | None:
    """The pid of node ``node``'s JVM among ``parent``'s children (its command line names its directory)."""
    for pid in children_java(parent):
        with contextlib.suppress(OSError):
            if f"/node-{node}/server.properties" in Path(f"/proc/{pid}/cmdline").read_text():
                return pid
    return None


def test_three_nodes_give_replication_factor_3_and_a_dead_node_is_restarted_while_the_others_serve(tmp_path):
    """`pubsub broker --nodes 3`: topics get three replicas and min.insync.replicas 2; when one node is killed the
    other two go on serving (a transactional write commits and is read back), the death is logged with where the
    node's log is, and the node is started again on its data and rejoins (it answers on its own port and lists all
    three brokers); Ctrl-C then stops the whole cluster cleanly."""
    data = tmp_path / "kafka"
    proc, bootstrap = start_cli("--nodes", "3", "--port", str(free_port()), "--data-dir", str(data))
    try:
        assert len(bootstrap.split(",")) == 3, proc.stderr.read()
        result = CliRunner().invoke(main, ["topics", "-b", bootstrap])
        assert result.exit_code == 0, result.output
        assert "replicas=3" in result.output and "replicas=1" not in result.output
        client = ClientFactory(bootstrap).admin()
        for name in topics.ALL:
            metadata = client.list_topics(name, timeout=10).topics[name]
            assert all(len(p.replicas) == 3 for p in metadata.partitions.values())
        config = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topics.EVENTS)])
        entry = next(iter(config.values())).result(10)["min.insync.replicas"]
        assert entry.value == "2"
        killed = node_jvm(proc.pid, 3)
        assert killed is not None and len(children_java(proc.pid)) == 3
        os.kill(killed, signal.SIGKILL)
        producer = ClientFactory(bootstrap).producer(**{"transactional.id": "rf3-test"})
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce(topics.EVENTS, b"x")
        producer.commit_transaction(60)
        producer.close()
        from tests.support.kafka_helpers import read_all
        # the producer retried until the partitions the dead node led had new leaders; a reader asking for offsets
        # may still meet the dead node's handle in its metadata for a moment, and asks again as a client does
        deadline = time.monotonic() + 60
        while True:
            try:
                values = [m.value() for m in read_all(bootstrap, topics.EVENTS)]
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        assert values == [b"x"]
        third = bootstrap.split(",")[2]
        deadline = time.monotonic() + 120
        while not rejoined(third):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the killed node was not started again, or did not rejoin"
            time.sleep(0.5)
        assert node_jvm(proc.pid, 3) not in (None, killed)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        err = proc.stderr.read()
        assert "node 3 exited with status -9" in err and "started again on its data" in err, err
        assert str(data / "node-3" / "server.log") in err, err  # where to look
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def rejoined(node_address: str) -> bool:
    """Whether the node at ``node_address`` answers metadata requests itself and lists all three brokers (a fenced
    or still starting node is not listed, nor does it answer)."""
    if not port_in_use(int(node_address.rsplit(":", 1)[1])):
        return False
    own = ClientFactory(node_address).admin()
    try:
        return len(own.list_topics(timeout=5).brokers) == 3
    except KafkaException:
        return False


def test_a_node_that_dies_at_once_every_time_stops_the_cluster_and_says_so(tmp_path):
    """A node whose every start fails (here its configuration broken behind the cluster's back) is not restarted
    forever: after more than MAX_RESTARTS deaths within RESTART_WINDOW the command says so, names the node's log,
    stops the other nodes and exits non-zero."""
    data = tmp_path / "kafka"
    proc, bootstrap = start_cli("--nodes", "3", "--port", str(free_port()), "--data-dir", str(data))
    try:
        assert len(bootstrap.split(",")) == 3, proc.stderr.read()
        jvms = children_java(proc.pid)
        config = data / "node-2" / "server.properties"
        config.write_text(config.read_text().replace("node.id=2", "node.id=two"))
        os.kill(node_jvm(proc.pid, 2), signal.SIGKILL)
        assert proc.wait(180) == 1
        err = proc.stderr.read()
        assert f"node 2 exited with status 1, {MAX_RESTARTS + 1} times within {RESTART_WINDOW:.0f} s" in err, err
        assert "not started again" in err and str(data / "node-2" / "server.log") in err, err
        assert err.count("node 2 exited with status") == MAX_RESTARTS + 1, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 60
    while java_pids_of(jvms) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not java_pids_of(jvms), "the other nodes outlived the command"


def test_two_nodes_are_refused():
    result = CliRunner().invoke(main, ["broker", "--nodes", "2"])
    assert result.exit_code == 2 and "3 and more" in result.output


def test_a_taken_port_is_a_clear_error_and_leaves_no_jvm(broker):
    before = set(subprocess.run(["pgrep", "java"], capture_output=True, text=True).stdout.split())
    result = CliRunner().invoke(main, ["broker", "--port", str(broker.port)])
    assert result.exit_code == 1 and "already in use" in result.output
    after = set(subprocess.run(["pgrep", "java"], capture_output=True, text=True).stdout.split())
    assert after <= before


def test_a_data_dir_in_use_is_refused(tmp_path):
    data = tmp_path / "kafka"
    with EmbeddedBroker(data_dir=data):
        result = CliRunner().invoke(main, ["broker", "--port", "0", "--data-dir", str(data)])
        assert result.exit_code == 1 and "in use by a running broker" in result.output


def test_a_data_dir_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "file"
    path.write_text("")
    result = CliRunner().invoke(main, ["broker", "--port", "0", "--data-dir", str(path)])
    assert result.exit_code != 0 and str(path) in result.output


def test_a_broker_that_exits_while_starting_says_why():
    # a heap too small for the JVM: it exits at once, and the error carries its own words
    result = CliRunner().invoke(main, ["broker", "--port", "0", "--heap", "1m"])
    assert result.exit_code == 1 and "exited with status" in result.output and "heap" in result.output.lower()


def test_kafka_home_runs_an_unpacked_distribution(tmp_path):
    cached = distribution.resolve()
    home = tmp_path / f"kafka_2.13-{cached.version}"
    home.mkdir()
    (home / "libs").symlink_to(cached.libs, target_is_directory=True)
    with EmbeddedBroker(kafka_home=home) as b:
        assert b.dist.libs == home / "libs" and b.dist.version == cached.version
        assert ClientFactory(b.bootstrap_servers).admin().list_topics(timeout=10).brokers
    result = CliRunner().invoke(main, ["broker", "--kafka-home", str(tmp_path)])
    assert result.exit_code == 1 and "not an unpacked Apache Kafka distribution" in result.output


def test_missing_java_and_maven_are_named(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    os.symlink(sys.executable, bare / "python")
    env = {**os.environ, "PATH": str(bare), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("JAVA_HOME", None)
    done = subprocess.run([sys.executable, "-m", "fastpubsub", "broker", "--fetch-only"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 1 and "apt-get install maven" in done.stderr
    fake = tmp_path / "mvnonly"
    fake.mkdir()
    os.symlink(shutil.which("mvn"), fake / "mvn")
    env["PATH"] = f"{fake}:{bare}"
    done = subprocess.run([sys.executable, "-m", "fastpubsub", "broker", "--port", "0"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 1 and "`java` is not on the PATH" in done.stderr


def test_kafka_opts_go_on_every_jvm_command_line(monkeypatch):
    monkeypatch.setenv("KAFKA_OPTS", "-XX:TieredStopAtLevel=1 -Dwith.space='a b'")
    cmd = distribution.resolve().java("kafka.Kafka", "server.properties", heap="256m")
    assert cmd[1:5] == ["-Xms256m", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dwith.space=a b"]
    assert cmd[-2:] == ["kafka.Kafka", "server.properties"]


def test_cluster_ids_never_start_with_a_dash():
    """A cluster id starting with '-' was read as an option by kafka-storage format (one start in 64 failed)."""
    from fastpubsub.kafka.broker import _cluster_id

    ids = [_cluster_id() for _ in range(5000)]
    assert not any(i.startswith("-") for i in ids) and all(len(i) == 22 for i in ids)
