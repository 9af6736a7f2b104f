"""`pubsub demo` in a small configuration runs to completion, twice on the same port.

The first run includes the Spark statistics step (the job over the demo's
events, the processor adopting its snapshot); the second skips it.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from fastpubsub.kafka.broker import free_port, port_in_use

pytestmark = pytest.mark.broker


def test_demo_runs_to_completion_twice():
    port = free_port()
    for run in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "fastpubsub", "demo", "--subscriptions", "2000", "--events", "500", "--port", str(port)]
            + (["--no-stats"] if run else []),
            capture_output=True, text=True, timeout=400,
        )
        assert done.returncode == 0, f"run {run}:\n{done.stdout}\n{done.stderr[-3000:]}"
        out = done.stdout
        assert f"ready on 127.0.0.1:{port}" in out
        assert re.search(r"^  subscriptions +2,003 +\(processor holds 2,003\)", out, re.M), out
        assert re.search(r"^  events +500 ", out, re.M), out
        notifications = int(re.search(r"^  notifications +([\d,]+)", out, re.M).group(1).replace(",", ""))
        assert notifications > 0, out
        assert re.search(r"e\.g\. e\d+/\d+ -> (alice|bob|carol)", out), out
        if run == 0:
            assert re.search(r"^  500 events, 0 bad, 32 attributes, \d+ frequent attribute sets", out, re.M), out
            assert re.search(r"^  statistics +500 +events in the adopted snapshot", out, re.M), out
            assert re.search(r"^  hash tables before .+\n  hash tables after .+\n  change ", out, re.M), out
        else:
            assert "Spark job" not in out and "hash tables" not in out
        assert "processor and broker stopped" in out
        assert not port_in_use(port)
