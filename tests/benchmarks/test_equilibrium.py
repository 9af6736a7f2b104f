"""The equilibrium experiment (Fabret et al. section 6.2.2, benchmarks/figures/equilibrium.py) and the no-change strategy."""

import csv

import numpy as np
import pytest

from benchmarks.figures import equilibrium as eq
from fastpubsub.engine import Matcher
from fastpubsub.engine.costmodel.maintenance import Thresholds
from fastpubsub.workloads.fabret import PRESETS, generate_subscriptions

# cheap tables: at a few thousand subscriptions the default thresholds create none; the paper's plain clusters
# (with runs the model finds W3's and W4's indexed lists as good as pair tables at these sizes)
EAGER = Thresholds(create_factor=0.05, delete_factor=0.02, refresh_changes=2000)


def test_quick_mode_writes_rows_and_plots_and_its_matches_agree_with_the_oracle(tmp_path):
    eq.main(["--quick", "--n", "10000", "--out", str(tmp_path)])
    with open(tmp_path / "equilibrium.csv") as f:
        rows = list(csv.DictReader(f))
    assert set(rows[0]) == set(eq.FIELDS)
    for scenario in eq.SCENARIOS:
        assert (tmp_path / eq.image_name(scenario)).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        for strategy in eq.STRATEGIES:
            rs = [r for r in rows if r["scenario"] == scenario and r["strategy"] == strategy]
            ticks = [int(r["tick"]) for r in rs]
            turned = [float(r["turned_over"]) for r in rs]
            assert ticks == sorted(set(ticks)) and turned == sorted(turned) and turned[-1] == 1.0
            assert [r["phase"] for r in rs][0] == "before" and rs[-1]["phase"] == "after"
            assert all(float(r["events_per_s"]) > 0 and int(r["events"]) > 0 for r in rs)
            # the oracle checked matches of both strategies during the run (a mismatch raises)
            assert sum(int(r["verified_events"]) for r in rs) >= 10


def test_no_change_keeps_its_configuration_while_dynamic_adapts_to_the_shift():
    setup = eq.Setup(per_tick=400, events_per_tick=20, before=5, lifetime=40, after=5, window=5,
                     verify_every=10, thresholds=EAGER)
    rows = eq.simulate("W3-W4", eq.STRATEGIES, 16_000, setup, cluster_runs=0)
    dyn = [r for r in rows if r["strategy"] == "dynamic"]
    frozen = [r for r in rows if r["strategy"] == "no-change"]
    assert frozen[0]["tables"] > 0  # W3 gave it multi-attribute tables to keep
    assert {(r["tables"], r["tables_created"], r["tables_dropped"]) for r in frozen} == {
        (frozen[0]["tables"], frozen[0]["tables_created"], frozen[0]["tables_dropped"])}
    assert all(r["moved"] == 0 and r["maintenance_seconds"] == 0 for r in frozen)
    # dynamic creates W4 tables and drops the W3 ones as the population turns over
    assert dyn[-1]["tables_created"] > dyn[0]["tables_created"]
    assert dyn[-1]["tables_dropped"] > dyn[0]["tables_dropped"]
    assert sum(r["moved"] for r in dyn) > 0


def test_dynamics_twin_is_frozen_at_the_shift_and_timed_in_the_same_ticks_after_the_turnover():
    setup = eq.Setup(per_tick=400, events_per_tick=20, before=5, lifetime=40, after=5, window=5, thresholds=EAGER)
    rows = eq.simulate("W3-W4", eq.STRATEGIES, 16_000, setup, cluster_runs=0)
    dyn = {r["tick"]: r for r in rows if r["strategy"] == "dynamic"}
    twin = [r for r in rows if r["strategy"] == eq.AT_SHIFT]
    assert [(r["phase"], r["tick"]) for r in twin] == [("before", 5), ("after", 50)]  # nothing in between
    shift, end = twin
    same = ("tables", "tables_created", "tables_dropped", "moved", "events")
    assert {k: shift[k] for k in same} == {k: dyn[5][k] for k in same}  # the same ticks as dynamic up to the shift
    assert (end["tables"], end["tables_created"], end["tables_dropped"]) == (
        shift["tables"], shift["tables_created"], shift["tables_dropped"])  # then frozen
    assert end["moved"] == 0 and end["update_seconds"] == 0 and end["events"] == dyn[50]["events"]
    assert dyn[50]["tables_created"] > shift["tables_created"]  # while dynamic went on adapting
    ratio = eq.summarize(rows)["W3-W4"]["dynamic"]["end_over_shift_state"]
    assert ratio == pytest.approx(end["match_us_per_event"] / dyn[50]["match_us_per_event"])
    assert not [r for r in eq.simulate("W3-W4", ["no-change"], 16_000, setup, cluster_runs=0)
                if r["strategy"] == eq.AT_SHIFT]


def test_freeze_clustering_stops_the_maintenance_until_thawed():
    m = Matcher("dynamic", thresholds=EAGER, runs=0)
    m.add_bulk(generate_subscriptions(PRESETS["W3"], 4000, seed=1))
    m.freeze_clustering()
    schemas, moved = m.index.schemas.copy(), m.stats()["subscriptions_moved"]
    m.add_bulk(generate_subscriptions(PRESETS["W4"], 8000, seed=2, first_id=4000))
    for sid in range(4000):
        m.remove(sid)
    assert np.array_equal(m.index.schemas, schemas) and m.stats()["maintenance"]["frozen"]
    # new subscriptions still go to the best configured schema; nothing else moved
    assert m.stats()["subscriptions_moved"] == moved
    m.freeze_clustering(False)
    m.add_bulk(generate_subscriptions(PRESETS["W4"], 2000, seed=3, first_id=20_000))
    assert not np.array_equal(m.index.schemas, schemas)
    with pytest.raises(ValueError, match="dynamic"):
        Matcher("static").freeze_clustering()


def test_unknown_scenario_or_strategy_is_refused():
    with pytest.raises(ValueError, match="scenario"):
        eq.run("W0-W1", "dynamic", 10_000, quick=True)
    with pytest.raises(ValueError, match="strategy"):
        eq.run("W3-W4", "static", 10_000, quick=True)


def test_the_summary_checks_dynamic_against_both_no_changes_at_every_window_after_the_turnover():
    def row(strategy, tick, phase, eps, us=1.0):
        return {"scenario": "W3-W4", "strategy": strategy, "tick": tick, "phase": phase, "events_per_s": eps,
                "match_us_per_event": us, "tables": 0, "tables_created": 0, "tables_dropped": 0}

    rows = [row("dynamic", 1, "before", 100.0), row("no-change", 1, "before", 100.0),
            row(eq.PLAIN, 1, "before", 100.0),
            row("dynamic", 9, "after", 90.0), row("no-change", 9, "after", 100.0), row(eq.PLAIN, 9, "after", 50.0),
            row("dynamic", 10, "after", 130.0), row("no-change", 10, "after", 100.0), row(eq.PLAIN, 10, "after", 50.0)]
    s = eq.summarize(rows)["W3-W4"]
    assert s["min_ratio_after"] == pytest.approx(0.9) and s["end_ratio"] == pytest.approx(1.1)
    assert s["end_ratio_plain"] == pytest.approx(2.2) and not s["target_met"]  # one window under no-change
    assert s["min_match_ratio_after"] == pytest.approx(1.0)  # the same matching time: the window lost to maintenance
    rows[3]["events_per_s"] = 100.0
    assert eq.summarize(rows)["W3-W4"]["target_met"]


def test_extra_timing_passes_keep_the_best_and_do_not_bring_the_maintenance_rounds_forward():
    m = Matcher("dynamic", thresholds=Thresholds(refresh_events=250, refresh_changes=10**9))
    m.add_bulk(generate_subscriptions(PRESETS["W5"], 3000, seed=1))
    run = eq._Run("dynamic", m)
    events = eq.generate_events(PRESETS["W5"], 100, seed=2)
    run.match_only(events)
    first = run.per_event[-1]
    rounds = m.maintenance.refreshes
    for _ in range(5):  # 500 more events, yet no round: only the tick's first match counts
        run.time_again(events)
    assert m.maintenance.refreshes == rounds and m.maintenance.events == 100
    assert len(run.per_event) == 1 and 0 < run.per_event[-1] <= first
    run.match_only(events)
    run.match_only(events)
    assert m.maintenance.refreshes == rounds + 1  # the 250th real event brings the round


def test_the_static_rebuilt_at_the_turnover_matches_after_it_in_the_same_ticks_and_is_summarized():
    setup = eq.Setup(per_tick=400, events_per_tick=20, before=5, lifetime=40, after=10, window=5, passes=2)
    rows = eq.simulate("W5-W6", ["dynamic", "no-change"], 16_000, setup)
    rebuilt = [r for r in rows if r["strategy"] == eq.REBUILT]
    dyn = {r["tick"]: r for r in rows if r["strategy"] == "dynamic"}
    assert [(r["phase"], r["tick"]) for r in rebuilt] == [("after", 50), ("after", 55)]
    assert all(r["events"] == dyn[r["tick"]]["events"] and r["update_seconds"] == 0 and r["moved"] == 0
               and r["match_events_per_s"] > 0 for r in rebuilt)
    d = eq.summarize(rows)["W5-W6"]["dynamic"]
    us = {s: [r["match_us_per_event"] for r in rows if r["strategy"] == s and r["phase"] == "after"]
          for s in ("dynamic", eq.AT_SHIFT, eq.REBUILT)}
    assert d["end_over_rebuilt"] == pytest.approx(np.mean(us[eq.REBUILT]) / np.mean(us["dynamic"]))
    assert d["rebuilt_over_shift_state"] == pytest.approx(np.mean(us[eq.AT_SHIFT]) / np.mean(us[eq.REBUILT]))
    assert not [r for r in eq.simulate("W5-W6", ["dynamic"], 16_000, setup, rebuilt=False) if r["strategy"] == eq.REBUILT]
