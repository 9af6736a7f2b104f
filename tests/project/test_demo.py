"""`pubsub demo` in a small configuration runs to completion, twice on the same port.

The first run includes the Spark statistics step (the job over the demo's
events, the processor adopting its snapshot) and the registered topic (the
embedded Schema Registry, a producer's nested Avro orders matched on nested
fields); the second skips both.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastpubsub.kafka.broker import free_port, port_in_use

pytestmark = pytest.mark.broker


def test_demo_runs_to_completion_twice():
    port = free_port()
    for run in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "fastpubsub", "demo", "--subscriptions", "2000", "--events", "500", "--port", str(port)]
            + (["--no-stats", "--no-registry"] if run else []),
            capture_output=True, text=True, timeout=400,
        )
        assert done.returncode == 0, f"run {run}:\n{done.stdout}\n{done.stderr[-3000:]}"
        out = done.stdout
        assert f"ready on 127.0.0.1:{port}" in out
        subs = "2,004" if run == 0 else "2,003"  # with the registry, dave's subscription on nested fields
        assert re.search(rf"^  subscriptions +{subs} +\(processor holds {subs}\)", out, re.M), out
        assert re.search(r"^  events +500 ", out, re.M), out
        notifications = int(re.search(r"^  notifications +([\d,]+)", out, re.M).group(1).replace(",", ""))
        assert notifications > 0, out
        assert re.search(r"e\.g\. e\d+/\d+ -> (alice|bob|carol)", out), out
        if run == 0:
            assert re.search(r"^  500 events, 0 bad, 32 attributes, \d+ frequent attribute sets", out, re.M), out
            orders = re.search(r"^  (\d+) orders, (\d+) matched dave's .* \(expected (\d+)\)", out, re.M)
            assert orders and int(orders.group(2)) == int(orders.group(3)) > 0, out
            assert re.search(r"^  statistics +500 +events in the adopted snapshot", out, re.M), out
            assert re.search(r"^  hash tables before .+\n  hash tables after .+\n  change ", out, re.M), out
        else:
            assert "Spark job" not in out and "hash tables" not in out and "orders" not in out
        assert "processor and broker stopped" in out
        assert not port_in_use(port)


def test_a_broker_that_dies_during_the_demo_is_reported_and_the_demo_exits_non_zero():
    """The demo streams events while its broker is killed: it says so, stops the processor, exits 1, leaves no JVM."""
    import signal
    import time

    demo = subprocess.Popen([sys.executable, "-m", "fastpubsub", "demo", "--subscriptions", "2000", "--events",
                             "300000", "--no-stats"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        for line in demo.stdout:  # until events are streaming
            lines.append(line)
            if "events sent" in line:
                break
        jvms = subprocess.run(["pgrep", "-P", str(demo.pid), "java"], capture_output=True, text=True).stdout.split()
        kafka = [p for p in jvms if "kafka.Kafka" in Path(f"/proc/{p}/cmdline").read_text()]
        assert len(kafka) == 1, "".join(lines)  # beside it, the Schema Registry's JVM when Apicurio is installed
        subprocess.run(["kill", "-9", kafka[0]], check=True)
        out, _ = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGKILL)
            demo.wait()
    out = "".join(lines) + out
    assert demo.returncode == 1, out[-3000:]
    assert "demo stopped: Apache Kafka stopped" in out, out[-3000:]
    deadline = time.monotonic() + 30
    while subprocess.run(["pgrep", "-P", str(demo.pid)], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "a child of the demo outlived it"
        time.sleep(0.2)
