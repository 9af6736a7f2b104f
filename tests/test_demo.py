"""`pubsub demo` in a small configuration runs to completion, twice on the same port."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from processor.broker import free_port, port_in_use

pytestmark = pytest.mark.broker


def test_demo_runs_to_completion_twice():
    port = free_port()
    for run in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "processor", "demo", "--subscriptions", "2000", "--events", "500", "--port", str(port)],
            capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, f"run {run}:\n{done.stdout}\n{done.stderr[-3000:]}"
        out = done.stdout
        assert f"listening on 127.0.0.1:{port}" in out
        assert re.search(r"^  subscriptions +2,003 +\(processor holds 2,003\)", out, re.M), out
        assert re.search(r"^  events +500 ", out, re.M), out
        notifications = int(re.search(r"^  notifications +([\d,]+)", out, re.M).group(1).replace(",", ""))
        assert notifications > 0, out
        assert re.search(r"e\.g\. e\d+/\d+ -> (alice|bob|carol)", out), out
        assert "processor and broker stopped" in out
        assert not port_in_use(port)
