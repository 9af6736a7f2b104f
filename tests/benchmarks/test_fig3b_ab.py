"""benchmarks.figures.fig3b_ab: configurations side by side on W1/W2 give the same matches, and its entry counts agree with
the matchers' results."""

from __future__ import annotations

from benchmarks.figures import fig3b_ab


def test_configurations_side_by_side_report_the_same_matches_and_both_clocks():
    rows = fig3b_ab.run_workload("W2", 4000, ["dynamic", "dynamic:runs=0"], 300, 2, progress=lambda _: None)
    assert [r["config"] for r in rows] == ["dynamic", "dynamic:runs=0"]
    assert rows[0]["matches_per_event"] == rows[1]["matches_per_event"]
    for r in rows:
        assert r["events_per_s_best"] >= r["events_per_s_worst"] > 0
        assert r["events_per_cpu_s_best"] >= r["events_per_cpu_s_worst"] > 0
    assert rows[1]["cpu_over_dynamic:runs=0"] == 1.0


def test_config_strings_name_an_algorithm_and_its_options():
    assert fig3b_ab.parse_config("dynamic:runs=0") == ("dynamic", {"runs": 0})
    assert fig3b_ab._split_configs("dynamic,dynamic:runs=0,x=1,static") == ["dynamic", "dynamic:runs=0,x=1", "static"]


def test_counted_entries_narrow_from_the_list_to_the_matches():
    """list >= first column >= bucketed >= matches, and the matches are those a matcher finds."""
    (row,) = fig3b_ab.counters("W1", 20000, 300, [2, 4])
    assert row["list"] >= row["first_column"] >= row["bucket2"] >= row["bucket4"] >= row["matches"] > 0
    assert 1 <= row["bucket2_probes"] <= 2 and row["bucket2_probes"] <= row["bucket4_probes"] <= 4
    (matched,) = fig3b_ab.run_workload("W1", 20000, ["dynamic"], 300, 1, progress=lambda _: None)
    assert matched["matches_per_event"] == round(row["matches"], 2)


def test_event_variants_make_parts_of_every_subscription_hold_never_or_always():
    rows = {r["events"]: r for r in fig3b_ab.run_variants("W2", 4000, ["dynamic"], 200, 1)}
    assert rows["free never"]["matches_per_event"] == rows["inequalities never"]["matches_per_event"] == 0
    assert rows["inequalities always"]["matches_per_event"] > rows["drawn"]["matches_per_event"]
