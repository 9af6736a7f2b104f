"""Event Ruler beside fastpubsub on its own benchmark (benchmarks/peers/event_ruler.py): the events' planted counts
are what the rules mean, and both sides find exactly those counts.

The run through both sides needs the peer's jar, which Maven builds from Event Ruler's artifact on Maven Central;
it skips, with the reason, where Maven is missing or the artifact is neither in the local Maven cache nor built.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.oracles.eventruler import rule_matches

from benchmarks.peers import citylots, event_ruler

_ARTIFACT = Path.home() / ".m2" / "repository" / "software" / "amazon" / "event" / "ruler" / "event-ruler"


def _naive_counts(patterns: list[dict], lines: list[bytes]) -> list[int]:
    events = [json.loads(line) for line in lines]
    return [sum(rule_matches(p, e) for e in events) for p in patterns]


def test_at_citylots2s_size_the_planted_counts_are_the_benchmarks_expected_ones():
    for kind, expected in citylots.EXPECTED_CL2.items():
        assert citylots.planted_counts(kind, citylots.CITYLOTS2_LINES) == expected, kind
    assert len(citylots.kind_rules("combo")) == 45 and len(citylots.kind_rules("partial-combo")) == 40


@settings(max_examples=2, deadline=None)
@given(events=st.integers(1000, 1300), seed=st.integers(0, 2**16))
def test_the_planted_counts_are_what_event_rulers_semantics_give_on_the_generated_events(events, seed):
    workload = citylots.generate(events, seed)
    assert len(workload.lines) == events
    for kind in citylots.KINDS:
        rules = [r.pattern for r in citylots.kind_rules(kind)]
        assert _naive_counts(rules, workload.lines) == citylots.planted_counts(kind, events), kind
    patterns, counts = citylots.size_rules(workload, 60, seed)
    assert _naive_counts(patterns, workload.lines) == counts
    assert min(counts) >= 1  # drawn from the events' own values


def test_events_are_shaped_like_citylots2_lines():
    workload = citylots.generate(1000, 3)
    sizes = [len(line) for line in workload.lines]
    assert 800 <= sum(sizes) / len(sizes) <= 1000
    event = json.loads(workload.lines[0])
    assert event["type"] == "Feature" and event["geometry"]["firstCoordinates"] == event["geometry"]["coordinates"][0]
    assert {"MAPBLKLOT", "BLKLOT", "BLOCK_NUM", "LOT_NUM", "FROM_ST", "STREET", "ST_TYPE", "ODD_EVEN"} <= \
        event["properties"].keys()
    assert citylots.generate(1000, 3).lines == workload.lines  # the seed is the draw


def test_a_side_whose_counts_differ_from_the_planted_ones_stops_the_run():
    event_ruler.check("fastpubsub", "exact", [1, 2], [1, 2])
    with pytest.raises(event_ruler.CountMismatch, match=r"fastpubsub on exact: .*\(1, 3, 2\)"):
        event_ruler.check("fastpubsub", "exact", [1, 3], [1, 2])
    with pytest.raises(event_ruler.CountMismatch, match="unknown kind|3 counts for 2 rules"):
        event_ruler.check("Event Ruler", "exact", [1, 2, 0], [1, 2])


def test_the_counts_digest_tells_counts_apart_rule_by_rule():
    d = event_ruler.digest([3, 0, 2])
    assert d["rules"] == 3 and d["total"] == 5 and len(d["sha256"]) == 16
    assert event_ruler.digest(np.array([3, 0, 2])) == d
    assert event_ruler.digest([2, 0, 3])["sha256"] != d["sha256"]  # same total, other rules


def test_an_unknown_kind_is_refused_with_the_kinds():
    with pytest.raises(ValueError, match="unknown kind 'exakt'; the kinds: exact, wildcard"):
        citylots.kind_rules("exakt")


def test_both_sides_find_the_planted_counts_on_every_kind_and_a_size(tmp_path):
    if shutil.which("mvn") is None and not event_ruler.JAR.exists():
        pytest.skip("Maven (mvn) builds the Event Ruler peer; it is not on PATH")
    if not event_ruler.JAR.exists() and not any(_ARTIFACT.glob("*/event-ruler-*.jar")):
        pytest.skip(f"Event Ruler's artifact is not in the local Maven cache ({_ARTIFACT}); CI does not download it")
    results = event_ruler.compare(1000, list(citylots.ALL_KINDS), [200], seed=5, warmup=0, java_opts=("-Xmx512m",),
                                  workdir=tmp_path, progress=lambda s: None)
    assert [row["name"] for row in results["rows"]] == [*citylots.ALL_KINDS, "size-200"]
    for row in results["rows"]:  # compare() stops on a difference; the counts' digests are in the results as found
        assert row["event_ruler"]["counts"] == row["fastpubsub"]["counts"] == row["planted"], row["name"]
        assert row["same_counts"] and row["planted"]["rules"] == row["rules"], row["name"]
        assert row["event_ruler"]["events_per_s"] > 0 and row["fastpubsub"]["events_per_s"] > 0
    assert "ratio" in event_ruler.table(results).splitlines()[1]
