"""`python -m benchmarks.suite --quick` runs every figure at small sizes and leaves CSV, PNG and markdown behind.

The full sizes are the same code with larger plans (benchmarks/figures/fig3.py,
benchmarks/pipeline/e2e.py, benchmarks/suite.py); these tests keep that code from rotting.  No
timing is asserted, only that each figure measured something sensible.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.figures import fig3

PNG = b"\x89PNG\r\n\x1a\n"


def bench(out: Path, *figures: str, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "benchmarks.suite", *figures, "--quick", "--out", str(out),
                           *options],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    return done


def rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def assert_figure(out: Path, name: str) -> None:
    assert (out / f"{name}.png").read_bytes()[:8] == PNG, name


def test_fig3_quick_sweeps_every_algorithm_and_puts_the_papers_values_beside_ours(tmp_path):
    bench(tmp_path, "fig3a", "fig3b")
    a = rows(tmp_path / "fig3a.csv")
    assert {(r["algorithm"], int(r["n"])) for r in a} == {
        (alg, n) for alg in fig3.FIG3A_ALGORITHMS for n in fig3.QUICK.ns}
    assert all(float(r["encoded_events_per_s"]) > 0 and float(r["load_s"]) > 0 for r in a)
    b = rows(tmp_path / "fig3b.csv")
    assert {(r["workload"], r["algorithm"]) for r in b} == {(w, alg) for w in ("W1", "W2") for alg in fig3.FIG3B_ALGORITHMS}
    for name in ("fig3a", "fig3b", "fig3c", "fig3d"):
        assert_figure(tmp_path, name)
    md = (tmp_path / "fig3a.md").read_text()
    assert "| 6,000,000 | – | 602 |" in md  # dynamic at 6M in the paper; not measured at quick sizes
    assert "load average" in md
    report = (tmp_path / "report.md").read_text()
    assert "Figures 3(a), 3(c), 3(d)" in report and "Figure 3(b)" in report


def test_scaling_quick_sweeps_plain_and_runs_and_gives_each_relative_to_its_smallest_n(tmp_path):
    from benchmarks.engine import scaling

    bench(tmp_path, "scaling")
    got = rows(tmp_path / "scaling.csv")
    assert {(int(r["runs"]), int(r["n"])) for r in got} == {(runs, n) for runs in scaling.QUICK.runs for n in scaling.QUICK.ns}
    for runs in scaling.QUICK.runs:
        mine = sorted((r for r in got if int(r["runs"]) == runs), key=lambda r: int(r["n"]))
        assert float(mine[0]["encoded_vs_first"]) == 1.0 and float(mine[0]["dicts_vs_first"]) == 1.0
        for r in mine[1:]:
            assert float(r["encoded_vs_first"]) == pytest.approx(
                float(r["encoded_events_per_s"]) / float(mine[0]["encoded_events_per_s"]), abs=1e-3)
            assert float(r["dicts_vs_first"]) == pytest.approx(
                float(r["dict_events_per_s"]) / float(mine[0]["dict_events_per_s"]), abs=1e-3)
            assert 0 < float(r["encoded_vs_first_median"]) and 0 < float(r["dicts_vs_first_median"])
        assert float(mine[0]["encoded_vs_first_median"]) == 1.0 and float(mine[0]["dicts_vs_first_median"]) == 1.0
    for n in scaling.QUICK.ns:  # both cluster layouts found the same matches (best_passes checks dicts against encoded)
        assert len({r["matches_per_event"] for r in got if int(r["n"]) == n}) == 1
    for r in got:  # loaded in chunks of 7,000, every N's sample exact against the numpy evaluation
        assert int(r["chunks"] or 1) == -(-int(r["n"]) // scaling.QUICK.chunk)
        assert int(r["checked_events"]) == scaling.QUICK.check and float(r["rss_bytes_per_sub"]) != 0
    assert_figure(tmp_path, "scaling")
    md = (tmp_path / "scaling.md").read_text()
    assert "| plain clusters | 5,000 |" in md and "| runs from 256 | 20,000 |" in md
    assert "Scaling with N" in (tmp_path / "report.md").read_text()


def test_the_scaling_sample_check_fails_on_a_matcher_missing_a_chunk():
    from benchmarks.engine import scaling
    from fastpubsub.engine import Matcher
    from dataclasses import replace

    from fastpubsub.workloads.fabret import W0, generate_events

    dense = replace(W0, domain=(1, 3))  # about 12 matches per event at 3,000 subscriptions
    plan = scaling.Plan((3000,), (256,), 100, 1, chunk=1000, check=100)
    chunks = scaling.chunk_makers(dense, 3000, plan.chunk, seed=5)
    assert [len(c()) for c in chunks] == [1000, 1000, 1000]
    assert np.array_equal(np.concatenate([c().ids for c in chunks]), np.arange(3000))
    events = generate_events(dense, n=100, seed=6)
    full, partial = Matcher("dynamic"), Matcher("dynamic")
    for c in chunks:
        full.add_bulk(c())
    partial.add_bulk(chunks[0]())
    partial.add_bulk(chunks[2]())
    assert scaling.check_sample(full, chunks, events, plan, W0.n_attributes, seed=1)["checked_matches"] > 0
    with pytest.raises(AssertionError, match="differ from the oracle"):
        scaling.check_sample(partial, chunks, events, plan, W0.n_attributes, seed=1)


def test_an_algorithm_whose_pass_is_too_slow_is_not_run_at_larger_n():
    plan = fig3.Sweep((1000, 2000, 3000), events=20, repeat=1, stop_after_s=0.0)  # every pass is "too slow"
    out = fig3.sweep("W0", ("propagation",), plan, progress=lambda _: None)
    assert [r["stopped"] for r in out][0] == ""
    assert all(r["stopped"] == "one pass took > 0 s at N=1,000" for r in out[1:])
    assert "encoded_events_per_s" not in out[1]


@pytest.mark.broker
def test_e2e_quick_runs_through_the_broker_and_reports_latency_and_the_bound(tmp_path):
    done = bench(tmp_path, "e2e", options=("--also-at", "0.25", "--also-rate", "300", "--pin-broker",
                                           "--processor-x", "fetch.wait.max.ms=20",
                                           "--producer-linger-ms", "2", "--clock-fetch-wait-ms", "15"))
    (row,) = rows(tmp_path / "e2e.csv")
    # the client settings of the run are recorded with it, and reached the processor's command line
    assert (row["processor_config"], row["producer_linger_ms"], row["clock_fetch_wait_ms"]) == (
        "fetch.wait.max.ms=20", "2", "15")
    # each process's CPU while the events were offered, summed against cores x seconds, printed as it goes
    assert float(row["latency_phase_cpu_processor_s"]) > 0 and float(row["latency_phase_cpu_broker_s"]) > 0
    assert float(row["latency_phase_cpu_bench: load producer_s"]) > 0
    assert 0 < float(row["latency_phase_cpu_busy"]) <= 1.05
    assert done.stdout.count("CPU s over") == 3
    other, fixed = json.loads(row["other_rates"])  # the phases at a quarter of the maximum and at 300 events/s
    assert other["of_max"] == pytest.approx(0.25, abs=0.01) and other["notified"] > 0
    assert fixed["offered"] == 300 and fixed["notified"] > 0
    assert row["pin_broker"] == "True" and "alone on core 0" in (tmp_path / "e2e.md").read_text()
    assert 0 < other["p50_ms"] <= other["p99_ms"] and other["cpu"]["cpu"]["processor"] > 0
    assert int(row["processor_events"]) == int(row["backlog_events"])  # phase 1's processor saw the backlog alone
    assert float(row["max_events_per_s"]) > 0
    assert 0.05 < float(row["match_rate"]) < 0.5  # the demo's hand-written subscriptions match ~15% of events
    assert 0 < float(row["latency_p50_ms"]) <= float(row["latency_p99_ms"]) <= float(row["latency_max_ms"])
    assert all(float(row[f"{s}_s"]) > 0 for s in ("decode", "match", "produce", "commit"))
    assert_figure(tmp_path, "e2e")
    assert "Bound: **" in (tmp_path / "e2e.md").read_text()


def test_fig4_quick_runs_both_strategies_of_both_scenarios(tmp_path):
    bench(tmp_path, "fig4")
    for name, scenario in (("fig4a", "W3-W4"), ("fig4b", "W5-W6")):
        got = rows(tmp_path / f"{name}.csv")
        assert {r["strategy"] for r in got} == {"dynamic", "no-change", "dynamic at the shift"}
        assert {r["scenario"] for r in got} == {scenario}
        assert_figure(tmp_path, name)
    assert "| dynamic |" in (tmp_path / "fig4a.md").read_text() and "| 350 |" in (tmp_path / "fig4a.md").read_text()


def test_churn_bench_times_matching_on_a_churned_matcher():
    from benchmarks.engine.churn import churn

    row = churn("W3", 2_000, 8, runs=0, events=50)
    assert row["ticks"] == 8 and row["median_us_per_event"] > 0 and row["last_100"] > 0


def test_memory_bench_gathers_every_read():
    import numpy as np

    from benchmarks.engine.scattered_reads import gather, measure

    a = np.arange(1000, dtype=np.int32)
    idx = np.array([3, 999, 0, 3], dtype=np.int64)
    assert gather(a, idx, 0) == gather(a, idx, 2) == 3 + 999 + 0 + 3
    rows = measure(1, 1000, [0, 8])
    assert [r["distance"] for r in rows] == [0, 8] and all(r["ns_per_read"] > 0 for r in rows)


def test_probing_ab_runs_a_version_of_the_kernel_beside_the_current_one_and_refuses_other_matches(tmp_path):
    """``benchmarks.experiments.probing_ab``: a version of ``probing.py`` that agrees is timed beside the current one; one whose
    matches differ (every id one more) stops the run.  Both versions wrap the current kernel (no compilation)."""
    from benchmarks.experiments import probing_ab
    from fastpubsub.engine.kernels import probing

    same, shifted = tmp_path / "same.py", tmp_path / "shifted.py"
    same.write_text("from fastpubsub.engine.kernels.probing import *  # noqa: F403\n")
    shifted.write_text("from fastpubsub.engine.kernels.probing import *  # noqa: F403\n"
                       "from fastpubsub.engine.kernels import probing as _current\n\n\n"
                       "def clustered_events(*args):\n"
                       "    off, ids = _current.clustered_events(*args)\n"
                       "    return off, ids + 1\n")
    kernels = [("same", probing_ab.load_variant(0, str(same))), ("now", probing)]
    rate = probing_ab.run_workload("W1", 5_000, kernels, n_events=200, repeat=1)
    assert set(rate) == {"same", "now"} and min(rate.values()) > 0
    with pytest.raises(SystemExit, match="shifted: other matches"):
        probing_ab.run_workload("W1", 5_000, [("now", probing), ("shifted", probing_ab.load_variant(1, str(shifted)))],
                                n_events=200, repeat=1)


def test_registered_decode_bench_puts_every_format_beside_the_native_one():
    done = subprocess.run([sys.executable, "-m", "benchmarks.processor.registered_decode", "--events", "200", "--batch", "100",
                           "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    *runs, ratios = [json.loads(line) for line in done.stdout.splitlines()]
    by = {r["format"]: r for r in runs}
    assert set(by) == {"native", "registered-avro", "registered-avro-referenced", "registered-avro-per-record",
                       "registered-json"}
    assert all(r["events_per_s"] > 0 for r in runs) and set(ratios) == {f"{f}/native" for f in by if f != "native"}
    # the referenced paths only: 8 of the 34 leaves (the array's two elements count twice)
    assert by["registered-avro-referenced"]["attributes"] == 9 < by["registered-avro"]["attributes"] == 34
