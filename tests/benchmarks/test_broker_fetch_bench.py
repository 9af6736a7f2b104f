"""`python -m benchmarks.pipeline.broker_fetch` measures the embedded broker's CPU per fetch (no timing asserted)."""

from __future__ import annotations

import pytest

from benchmarks.pipeline import broker_fetch


@pytest.mark.broker
def test_broker_fetch_fills_a_partition_and_follows_a_trickle(capsys):
    broker_fetch.main(["--levels", "0", "300", "--seconds", "1", "--rate", "20", "--per-batch", "1"])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [("0", "1"), ("300", "1")]
    for row in rows:
        received, sent = (int(x.replace(",", "")) for x in row[6].split("/"))
        assert sent >= 10 and received == sent  # the follower saw every record of the trickle
    held = [float(r[2].replace(",", "")) for r in rows]
    assert held[1] - held[0] >= 300  # one batch per record filled, plus the trickle's
