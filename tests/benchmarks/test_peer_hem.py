"""The HEM peer (benchmarks/peers/hem.py) reads their result lines and expects the matches both generators make.

Their program and ours draw different data, so the driver checks matches per event against ``n * p ** k``;
these tests check that expectation against both generators' integer draws, counted exhaustively for theirs
(generator.cpp) and by brute force over our generator's batches, and the parsing of a line their ``run_HEM5``
wrote.  The slow test runs their program (``FASTPUBSUB_HEM_RUN``: a build of it, benchmarks/peers/README.md) and
ours on the interval workload and checks that every system's matches per event agree.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.peers import hem
from fastpubsub.engine.semantics import OP_CODE

#: A line their run_HEM5 wrote to HEM5.txt (subs = 100000, the interval workload).
HEM5_LINE = (
    "1 bits= 4 memory= 24 MB AvgMatchNum= 0.533000 AvgInsertTime= 0.000705 ms InitTime= 25.340308 ms "
    "AvgConstructionTime= 0.000959 ms AvgDeleteTime= -nan ms AvgMatchTime= 0.099257 ms AvgMatchInst= 0.000000 "
    "AvgCmpTime= 0.000000 ms AvgMarkTime= 0.000000 ms OrTime= 0.000000 ms AvgBitTime= 0.000000 ms avx= 64 "
    "numBuk= 1000 numSub= 100000 subSize= 10 numPub= 1000 pubSize= 20 attTypes= 20 attGroup= 1 attNumType= 0 "
    "valDom= 1000000.000000")
#: The line their run_rein wrote to Rein.txt in the same run.
REIN_LINE = (
    "1 memory= 16 MB AvgMatchNum= 0.533000 AvgInsertTime= 0.000665 ms AvgDeleteTime= -nan ms AvgMatchTime= "
    "3.323010 ms AvgCmpTime= 0.000000 ms AvgMarkTime= 0.000000 ms AvgBitTime= 0.000000 ms pD= 1 avx= 64 "
    "numBuk= 1000 numSub= 100000 subSize= 10 numPub= 1000 pubSize= 20 attTypes= 20 attGroup= 1 attNumType= 0 "
    "attDis= 0 valDis= 0 width= 0.300000 alpha= 0.000000 subp= 0.000000 mean= 0.200000 stddev= 5.000000 "
    "valDom= 1000000.000000")


def test_a_result_line_gives_its_numeric_fields():
    fields = hem.parse_result_line(HEM5_LINE)
    assert fields["expID"] == 1 and fields["memory"] == 24 and fields["numSub"] == 100000
    assert fields["AvgMatchTime"] == pytest.approx(0.099257) and fields["AvgMatchNum"] == pytest.approx(0.533)
    assert "AvgDeleteTime" not in fields  # -nan: no deletions were timed
    assert "MB" not in fields and "ms" not in fields


def test_build_time_counts_the_construction_after_the_inserts():
    """HEM5DD and OpIndex spread a one-off InitTime over the inserts (AvgConstructionTime); REIN and TAMA have none."""
    assert hem.their_figures(hem.parse_result_line(HEM5_LINE)) == {
        "n": 100000, "build_s": pytest.approx(0.0959), "ms_per_event": pytest.approx(0.099257),
        "matches_per_event": pytest.approx(0.533), "memory_own_mb": 24}
    assert hem.their_figures(hem.parse_result_line(REIN_LINE)) == {
        "n": 100000, "build_s": pytest.approx(0.0665), "ms_per_event": pytest.approx(3.32301),
        "matches_per_event": pytest.approx(0.533), "memory_own_mb": 16}


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 60), st.floats(0.0, 0.95))
def test_the_predicate_probability_is_exact_for_their_generator(val_dom, width):
    """generator.cpp: lo = random(int(valDom * (1 - width))), hi = lo + int(valDom * width); values random(valDom)."""
    w = int(val_dom * width)
    lows = np.arange(int(val_dom * (1.0 - width)))
    if len(lows) == 0:
        return
    values = np.arange(val_dom)
    inside = (values[None, :] >= lows[:, None]) & (values[None, :] <= lows[:, None] + w)
    assert inside.mean() == pytest.approx(hem.predicate_probability(w, val_dom))


def _brute_force_matches(subs, events) -> np.ndarray:
    """Matches per event of conjunctions of >=, <= and = on numbers, every event carrying every attribute."""
    k = int(subs.offsets[1])
    n = len(subs.offsets) - 1
    attrs = subs.attributes.reshape(n, k)
    ops = subs.operators.reshape(n, k)
    vals = subs.numbers.reshape(n, k)
    width = int(events.offsets[1])
    ev = events.numbers.reshape(-1, width)[:, attrs]  # events x subs x k
    ok = np.where(ops == OP_CODE[">="], ev >= vals, np.where(ops == OP_CODE["<="], ev <= vals, ev == vals))
    return ok.all(axis=2).sum(axis=1)


@pytest.mark.parametrize("workload", [hem.Workload("interval", atts=4, cons=2, width=0.3, val_dom=1000),
                                      hem.Workload("w0", atts=6, cons=2, width=0.0, val_dom=7)])
def test_our_generator_makes_the_expected_matches(workload):
    subs, events, expected = workload.ours(4000, 300, seed=3)
    counts = _brute_force_matches(subs, events)
    assert hem.agrees(counts.mean(), expected, counts.std(), 300, z=5)
    assert not hem.agrees(counts.mean() * 1.3, expected, counts.std(), 300, z=5)


def test_their_expectation_at_their_interval_defaults():
    """20 attributes, 10 ranges of 30 %, values 0..999,999: p = 300,001 / 1,000,000."""
    w = hem.WORKLOADS["interval"]
    assert w.their_args() == ["1", "20", "10", "20", "0", "0.3", "4", "1", "1000000", "1"]
    assert w.their_expected(100_000) == pytest.approx(100_000 * (300_001 / 1_000_000) ** 10)


def test_the_sparse_workload_is_reported_unsupported_with_its_reason():
    c = hem.compare(100_000, hem.WORKLOADS["sparse"], [(Path("/nonexistent"), tuple(hem.HEM_ALGORITHMS))], rounds=1,
                    z=5, log=print)
    assert c["supported"] is False and "attNumType" in c["reason"]


def test_their_settings_line_names_every_setting_of_every_algorithm():
    settings = hem.parse_settings("settings: subs= 100000 pubs= 1000 buks= 1000 be= 7 level= 13 segments= 32 "
                                  "signatures= 61\n")
    assert settings == {"subs": 100000, "pubs": 1000, "buks": 1000, "be": 7, "level": 13, "segments": 32,
                        "signatures": 61}
    assert all(key in settings for keys in hem.SETTING_KEYS.values() for key in keys)
    assert hem.label("hem5dd", settings) == "hem5dd be=7 buks=1000"
    assert hem.label("tama", settings) == "tama level=13"


def test_a_build_names_its_size_program_and_algorithms():
    assert hem._build("100000=/tmp/hem/run") == (100000, Path("/tmp/hem/run"), tuple(hem.HEM_ALGORITHMS))
    assert hem._build("1048576=/tmp/hem/run-l15:tama") == (1048576, Path("/tmp/hem/run-l15"), ("tama",))
    for bad in ("/tmp/hem/run", "100000=", "100000=/tmp/run:betree"):
        with pytest.raises(Exception):
            hem._build(bad)
    assert hem._bes("4,7") == (4, 7)
    with pytest.raises(Exception):
        hem._bes("4,-1")


def test_hem5dd_runs_alone_at_each_further_bit_exponent():
    a, b = Path("/a"), Path("/b")
    plan = hem.their_plan([(a, ("rein", "hem5dd")), (b, ("tama",))], (4, 6, 7))
    assert plan == [(a, 4, ("rein", "hem5dd")), (a, 6, ("hem5dd",)), (a, 7, ("hem5dd",)), (b, 4, ("tama",))]


def _run(rows: dict[str, tuple[float, float]], **settings) -> dict:
    """A run of their program: per algorithm (ms per event, matches per event) at ``settings``."""
    return {"settings": settings, "process_peak_rss_mb": 100.0, "rows": {
        name: {"n": 1000, "build_s": 0.1, "ms_per_event": ms, "matches_per_event": matches, "memory_own_mb": 1,
               "settings": {k: settings[k] for k in hem.SETTING_KEYS[name] if k in settings}}
        for name, (ms, matches) in rows.items()}}


def test_each_algorithm_is_summarised_per_setting_and_its_fastest_agreeing_setting_named():
    w = hem.Workload("interval", atts=4, cons=1, width=0.5, val_dom=1000)
    expected = w.their_expected(1000)
    ours = {"n": 1000, "build_s": 0.01, "ms_per_event": 0.01, "cpu_ms_per_event": 0.01, "matches_per_event": expected,
            "matches_sd": 15.0, "expected_matches_per_event": expected, "memory_bytes": 2**20,
            "rss_at_start_mb": 1, "rss_after_build_mb": 2, "process_peak_rss_mb": 3}
    base = dict(buks=1000, level=13, segments=32, signatures=61)
    trial = {"ours": ours, "theirs": [
        _run({"rein": (2.0, expected), "hem5dd": (0.5, expected)}, be=4, **base),
        _run({"hem5dd": (0.3, expected)}, be=6, **base),
        _run({"hem5dd": (0.1, expected * 2)}, be=7, **base),  # fast, but wrong
        {"be": 8, "algorithms": ["hem5dd"], "error": "exited with -11"}]}
    c = hem.summarise(1000, w, [trial], z=5)
    assert set(c["systems"]) == {"fastpubsub-dynamic", "hem:rein buks=1000", "hem:hem5dd be=4 buks=1000",
                                 "hem:hem5dd be=6 buks=1000", "hem:hem5dd be=7 buks=1000"}
    assert c["fastest_setting"] == {"rein": "hem:rein buks=1000", "hem5dd": "hem:hem5dd be=6 buks=1000"}
    assert c["systems"]["hem:hem5dd be=6 buks=1000"]["time_ratio_to_ours"] == pytest.approx(30)
    assert c["systems"]["hem:hem5dd be=6 buks=1000"]["settings"] == {"be": 6, "buks": 1000}
    assert c["errors"] == [{"be": 8, "algorithms": ["hem5dd"], "error": "exited with -11"}]
    assert not c["all_agree"]


@pytest.mark.slow
def test_their_matchers_and_ours_agree_on_the_interval_workload():
    binary = os.environ.get("FASTPUBSUB_HEM_RUN")
    if not binary:
        pytest.skip("FASTPUBSUB_HEM_RUN (their program, with the parameters benchmarks/peers/README.md gives) is not set")
    workload = hem.WORKLOADS["interval"]
    theirs = hem.run_theirs(Path(binary), workload)
    rows = theirs["rows"]
    assert set(rows) == set(hem.HEM_ALGORITHMS)
    assert len({r["matches_per_event"] for r in rows.values()}) == 1
    n = rows["rein"]["n"]
    ours = hem.run_ours(workload, n, hem.HEM_EVENTS, seed=1)
    assert hem.agrees(ours["matches_per_event"], ours["expected_matches_per_event"], ours["matches_sd"],
                      hem.HEM_EVENTS, z=5)
    assert hem.agrees(rows["rein"]["matches_per_event"], workload.their_expected(n), ours["matches_sd"],
                      hem.HEM_EVENTS, z=5)
