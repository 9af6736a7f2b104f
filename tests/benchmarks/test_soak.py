"""Memory under subscription churn: a running service's RSS holds still and what its engine holds follows the live
subscriptions (benchmarks/pipeline/soak.py, through Apache Kafka with `pubsub run`, `pubsub patterns` and `pubsub tables`).

The churn runs are in the long lane (``make test-faults``: ten minutes do not fit in ``make test``'s budget) and last
``PUBSUB_SOAK_MINUTES`` (default 10).  The processor's: 2,000 events/s and 50 subscription changes/s (a quarter
tombstones, a quarter additions, half replacements, of ids among twice as many, so the population holds: soak.Churn)
over 50,000 sparse subscriptions.  After the first tenth, RSS grows by
less than 2% (a least-squares line through the samples) and the engine's bytes per live subscription stay within
a band.  ``PUBSUB_SOAK_SOURCE=<checkout>`` runs the services of another checkout under the same test (a commit
before the churn fixes fails it).
"""

from __future__ import annotations

import json
import os

import pytest

from benchmarks.pipeline import soak

MINUTES = float(os.environ.get("PUBSUB_SOAK_MINUTES", "10"))
SOURCE = os.environ.get("PUBSUB_SOAK_SOURCE") or None


def test_summary_fits_a_line_through_rss_after_the_warm_up():
    flat = [{"t": t, "rss": 100 << 20, "threads": 18, "subscriptions": 1000, "engine_bytes": 800_000,
             "changes_sent": 5 * t}
            for t in range(0, 600, 10)]
    assert soak.summarise(flat)["rss_growth"] == 0.0
    rising = [dict(s, rss=(100 << 20) + 1000 * s["t"] + (1 << 20) * (s["t"] % 20 == 0)) for s in flat]
    s = soak.summarise(rising)
    assert 0.004 < s["rss_growth"] < 0.006  # 540 s x 1,000 B/s over ~100 MiB, whatever the noise of the samples
    assert s["rss_bytes_per_change"] == pytest.approx(200, rel=0.2)
    assert s["bytes_per_live"]["max"] == s["bytes_per_live"]["min"] == 800
    assert 0.004 < s["rss_floor_growth"] < 0.006  # each minute's lowest sample rises as the line does
    # a transient that holds two copies for a moment lifts single samples, late in the run: not the floor
    spiky = [dict(s, rss=(100 << 20) + (30 << 20) * (s["t"] % 60 == 30 and s["t"] > 300)) for s in flat]
    assert soak.summarise(spiky)["rss_growth"] > 0.02 and soak.summarise(spiky)["rss_floor_growth"] == 0.0


def test_the_churn_holds_the_live_population_and_brings_removed_ids_back():
    n = 100
    churn, live = soak.Churn(n, [b"v%d" % i for i in range(n)], seed=3), set(range(n))
    kinds = {"tombstone": 0, "addition": 0, "replacement": 0}
    for k in range(4000):
        sid, value = churn.next(k)
        assert 0 <= sid < soak.ID_SPACE * n
        kind = "tombstone" if value is None else "replacement" if sid in live else "addition"
        assert (kind == "tombstone") == (sid in live and value is None)  # a tombstone always removes a live id
        kinds[kind] += 1
        (live.discard if value is None else live.add)(sid)
        assert n - 1 <= len(live) <= n
    assert kinds == {"tombstone": 1000, "addition": 1000, "replacement": 2000}
    assert len(live - set(range(n))) > 0 and len(set(range(n)) - live) > 0  # ids leave and others come back


def _held_under_churn(run, n):
    """The changes were made at their rate and the live population held around the first load's size."""
    minutes, rate = run["config"]["minutes"], run["config"]["changes_per_second"]
    assert run["samples"][-1]["changes_sent"] >= 0.9 * rate * 60 * minutes
    live = [x["subscriptions"] for x in run["samples"] if x.get("subscriptions")]
    assert 0.8 * n <= min(live[1:]) and max(live) <= 1.2 * n, live


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.skipif(MINUTES <= 0, reason="PUBSUB_SOAK_MINUTES=0")
def test_memory_stays_flat_under_subscription_churn(bootstrap):
    run = soak.soak(bootstrap, MINUTES, events_per_second=2000, changes_per_second=50, subscriptions=50_000,
                    sample_seconds=10, echo=False, source=SOURCE)
    s = run["summary"]
    print(f"soak summary: {s}")  # (shown with -s: the figures of a passing run too)
    _held_under_churn(run, 50_000)
    assert s["rss_growth"] < 0.02, s
    per_live = s["bytes_per_live"]
    assert per_live["max"] <= 1.5 * per_live["min"], s  # the engine's memory follows the live subscriptions


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.skipif(MINUTES <= 0, reason="PUBSUB_SOAK_MINUTES=0")
@pytest.mark.parametrize("service, held", [("patterns", "rows"), ("tables", "groups")])
def test_the_pattern_and_table_services_stay_flat_under_their_own_churn(bootstrap, service, held):
    """Each under its default soak (benchmarks/pipeline/soak.py WORKLOADS) for as long as the processor's: RSS grows by
    less than 2% after the first tenth, and what the engine holds (pattern rows, aggregate groups) per live
    subscription does not grow with the changes."""
    _, subscriptions, rate = soak.WORKLOADS[service]
    run = soak.soak(bootstrap, MINUTES, events_per_second=rate, changes_per_second=50,
                    subscriptions=subscriptions, sample_seconds=10, echo=False, service=service, source=SOURCE)
    s = run["summary"]
    print(f"soak summary ({service}): {s}")
    _held_under_churn(run, subscriptions)
    assert s["rss_growth"] < 0.02, s
    # what the engine holds per live subscription, after the warm-up: within the 2x its compaction allows (pattern
    # rows are compacted once the dead pass an eighth of the live ones; a group goes with its last subscription)
    per_live = [x["held"][held] / x["subscriptions"] for x in run["samples"]
                if x["t"] >= 0.1 * s["seconds"] and x.get("held", {}).get(held) and x.get("subscriptions")]
    assert len(per_live) >= 5 and max(per_live) <= 2.2 * min(per_live), (per_live, s)


def _result(path, changes, rss_step):
    samples = [{"t": t, "rss": (100 << 20) + rss_step * t, "threads": 18, "subscriptions": 1000,
                "engine_bytes": 800_000, "changes_sent": changes * t} for t in range(0, 60, 10)]
    run = {"config": {"changes_per_second": changes, "events_per_second": 2000, "subscriptions": 1000},
           "samples": samples, "summary": soak.summarise(samples)}
    path.write_text(json.dumps({"load_average": [0, 0, 0], "runs": [run]}))
    return path


def test_plot_from_draws_the_runs_of_several_result_files_in_one_plot(tmp_path):
    a = _result(tmp_path / "quiet.json", 0, 0)
    b = _result(tmp_path / "churn.json", 50, 1000)
    runs = soak.runs_from([a, b])
    assert [r["file"] for r in runs] == ["quiet", "churn"]  # one line per run, named by its file
    out = tmp_path / "both.png"
    soak.main(["--plot-from", str(a), str(b), "--plot", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):
        soak.main(["--plot-from", str(tmp_path / "absent.json"), "--plot", str(out)])
