"""The tables of docs/benchmarks.md's "Against the alternatives" are what benchmarks.peers.alternatives makes of the raw
results filed under benchmarks/results/runs: every table there, regenerated from its files, is in the page, and
names the settings each peer ran at; a peer run at several settings is compared at its fastest."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.harness import report
from benchmarks.peers import alternatives

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "benchmarks" / "results" / "runs"
PAGE = (ROOT / "docs" / "benchmarks.md").read_text()


def test_a_ratio_has_one_decimal_under_ten_and_none_above():
    assert alternatives.ratio(3, 2) == "1.5×"
    assert alternatives.ratio(2_136.3, 1) == "2,136×"


def _table_in_page(table: str) -> bool:
    return all(line in PAGE for line in table.splitlines())


def test_the_kafka_streams_table_is_the_quiet_runs():
    rows = alternatives.streams_rows([RUNS / "2026-11-28-peers-streams-1k.json",
                                      RUNS / "2026-11-28-peers-streams-common-rate.json"])
    assert {r["system"] for r in rows} == {"fastpubsub", "streams-indexed"}
    assert all(r["exact"] == "yes" for r in rows)
    (table,) = alternatives.tables(streams=rows)
    assert _table_in_page(table)


HEM_RUN = RUNS / "2026-12-06-peers-hem-settings.json"
#: the kinds and the sizes, each from a run of its own
RULER_RUNS = [RUNS / "2026-12-07-peers-event-ruler-kinds.json", RUNS / "2026-12-07-peers-event-ruler-sizes.json"]


def test_the_c_plus_plus_matchers_tables_are_the_run_at_every_setting():
    rows = alternatives.matcher_rows(HEM_RUN)
    assert {r["algorithm"] for r in rows} == {"fastpubsub", "rein", "hem5dd", "tama", "opindex"}
    ours = {(r["workload"], r["subscriptions"]): r["ms_per_event"] for r in rows if r["system"] == "fastpubsub"}
    assert all(r["ms_per_event"] > ours[(r["workload"], r["subscriptions"])] for r in rows if r["system"] != "fastpubsub")
    assert _table_in_page(alternatives.matcher_matrix(rows))
    assert _table_in_page(alternatives.settings_matrix(rows))


def test_hem5dd_is_tried_at_its_readme_and_its_code_bit_exponents_and_compared_at_its_fastest():
    rows = alternatives.matcher_rows(HEM_RUN)
    (line,) = [x for x in alternatives.matcher_matrix(rows).splitlines() if x.startswith("| hem5dd |")]
    for case in {(r["workload"], r["subscriptions"]) for r in rows}:
        hem5dd = [r for r in rows if r["algorithm"] == "hem5dd" and (r["workload"], r["subscriptions"]) == case]
        assert {"be=4", "be=7"} <= {word for r in hem5dd for word in r["system"].split()}
        (fastest,) = [r for r in hem5dd if r["fastest"]]
        assert fastest["ms_per_event"] == min(r["ms_per_event"] for r in hem5dd if r["agrees"])
        assert f"{fastest['ms_per_event']:.3g} ({fastest['ratio']})" in line
        assert fastest["system"].removeprefix("hem5dd ") in line


def test_every_table_names_the_settings_of_each_peer():
    """A peer's row says what it ran at: the HEM matchers in the row's name, the others in a settings column."""
    hem_rows = alternatives.matcher_rows(HEM_RUN)
    assert all("=" in r["system"] for r in hem_rows if r["system"] != "fastpubsub")
    for line in alternatives.matcher_matrix(hem_rows).splitlines()[3:]:  # their rows: every cell names a setting
        assert all("=" in cell for cell in line.strip("|").split("|")[1:]), line
    streams = alternatives.streams_rows([RUNS / "2026-11-28-peers-streams-1k.json",
                                         RUNS / "2026-11-28-peers-streams-common-rate.json"])
    patterns = alternatives.pattern_rows([RUNS / "2026-11-28-pattern-peers-esper-siddhi.jsonl",
                                          RUNS / "2026-11-28-pattern-peers-esper-100k.jsonl"])
    spark = alternatives.spark_rows([RUNS / "2026-11-28-spark-readers-1m.json",
                                     RUNS / "2026-11-28-spark-readers-10m.json"])
    for rows in (streams, patterns, spark):
        assert all(r["settings"] and r["settings"] != "defaults" for r in rows
                   if r.get("system", r.get("reader")) not in ("fastpubsub", "source"))
    assert "num.stream.threads=1" in streams[1]["settings"]
    ruler = alternatives.ruler_rows(RULER_RUNS)
    assert all("GenericMachine" in r["settings"] and "-Xmx4g" in r["settings"] for r in ruler[0] + ruler[1])
    tables = alternatives.tables(streams=streams, patterns=patterns, spark=spark, ruler=ruler)
    assert len(tables) == 5
    assert all(table.splitlines()[0].count("| settings |") == 1 for table in tables)


def _sections(text: str, heading: str) -> list[tuple[str, str]]:
    """(title, body) of each subsection (### or ####) of the ``## heading`` section of a markdown page."""
    part = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    chunks = part.split("\n###")[1:]
    return [(c.split("\n", 1)[0].strip("# "), c.split("\n", 1)[1]) for c in chunks]


def test_every_comparison_on_the_page_lists_the_settings_tried_and_those_not_tried():
    sections = _sections(PAGE, "Against the alternatives")
    assert len(sections) >= 6
    for title, body in sections:
        body = " ".join(body.split())
        assert "Settings tried:" in body, f"{title!r} does not list the settings tried"
        assert "Not tried" in body, f"{title!r} does not name the speed settings not tried"


def test_the_pattern_and_spark_tables_are_the_runs():
    patterns = alternatives.pattern_rows([RUNS / "2026-11-28-pattern-peers-esper-siddhi.jsonl",
                                          RUNS / "2026-11-28-pattern-peers-esper-100k.jsonl"])
    assert all(r["same"] in ("—", "yes") for r in patterns)
    spark = alternatives.spark_rows([RUNS / "2026-11-28-spark-readers-1m.json",
                                     RUNS / "2026-11-28-spark-readers-10m.json"])
    assert all(r["equal"] == "yes" for r in spark)
    for table in alternatives.tables(patterns=patterns, spark=spark):
        assert _table_in_page(table)


def test_the_plot_compares_each_algorithm_at_its_fastest_setting():
    rows = alternatives.fastest_rows(alternatives.matcher_rows(HEM_RUN))
    cases = {(r["workload"], r["subscriptions"]) for r in rows}
    assert len(rows) == 5 * len(cases)  # ours and each of their four, once per case



def test_the_event_ruler_tables_per_kind_and_per_size_are_the_run():
    kinds, sizes = alternatives.ruler_rows(RULER_RUNS)
    assert len(kinds) == 17 and [r["rules"] for r in sizes] == [1_000, 10_000, 100_000]
    assert all(r["same"] == "yes" for r in kinds + sizes)
    for table in alternatives.ruler_tables(kinds, sizes):
        assert _table_in_page(table)
    assert alternatives.tables(ruler=(kinds, sizes)) == alternatives.ruler_tables(kinds, sizes)
    assert all(alternatives.ruler_settings(run) == "-Xms4g -Xmx4g" for run in RULER_RUNS)


def test_the_event_ruler_run_is_small_and_its_counts_are_digests():
    import json

    rows = []
    for run in RULER_RUNS:
        assert run.stat().st_size < 100_000
        rows += json.loads(run.read_text())["rows"]
    for row in rows:
        digests = [row["planted"], row["event_ruler"]["counts"], row["fastpubsub"]["counts"]]
        assert all(set(d) == {"rules", "total", "sha256"} for d in digests), row["name"]
        assert digests[0] == digests[1] == digests[2] and row["same_counts"], row["name"]
