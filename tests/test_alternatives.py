"""The tables of docs/benchmarks.md's "Against the alternatives" are what benchmarks.alternatives makes of the raw
results filed under benchmarks/results/runs: every table there, regenerated from its files, is in the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import alternatives, report

ROOT = Path(__file__).resolve().parent.parent
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


def test_the_c_plus_plus_matchers_table_is_the_run():
    rows = alternatives.matcher_rows(RUNS / "2026-11-28-peers-hem-bitmaps.json")
    ours = {(r["workload"], r["subscriptions"]): r["ms_per_event"] for r in rows if r["system"] == "fastpubsub"}
    assert all(r["ms_per_event"] > ours[(r["workload"], r["subscriptions"])] for r in rows if r["system"] != "fastpubsub")
    assert _table_in_page(alternatives.matcher_matrix(rows))


def test_the_pattern_and_spark_tables_are_the_runs():
    patterns = alternatives.pattern_rows([RUNS / "2026-11-28-pattern-peers-esper-siddhi.jsonl",
                                          RUNS / "2026-11-28-pattern-peers-esper-100k.jsonl"])
    assert all(r["same"] in ("—", "yes") for r in patterns)
    spark = alternatives.spark_rows([RUNS / "2026-11-28-spark-readers-1m.json",
                                     RUNS / "2026-11-28-spark-readers-10m.json"])
    assert all(r["equal"] == "yes" for r in spark)
    for table in alternatives.tables(patterns=patterns, spark=spark):
        assert _table_in_page(table)
