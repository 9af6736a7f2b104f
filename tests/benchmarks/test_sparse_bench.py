"""`python -m benchmarks.workloads.sparse` at a small size: every named algorithm measured, unknown names skipped, sweeps expand."""

from __future__ import annotations

import json

from benchmarks.workloads import sparse


def test_sparse_bench_compares_algorithms_by_name_and_sweeps_table_3(tmp_path, capsys):
    out = tmp_path / "rows.json"
    sparse.main(["--n", "1500", "--attributes", "400", "--gamma", "4,8", "--events", "200", "--batch", "100",
                 "--repeat", "1", "--statistics-sample", "300", "--algorithms", "dynamic,dynamic:presence=off,propagation-wp,no-such-algorithm",
                 "--json", str(out)])
    rows = json.loads(out.read_text())
    assert [(r["algorithm"], r["gamma_max"]) for r in rows] == [
        (a, g) for g in (4, 8) for a in ("dynamic", "dynamic:presence=off", "propagation-wp")]
    assert "no-such-algorithm: not registered here" in capsys.readouterr().out
    for g in (4, 8):
        same = [r for r in rows if r["gamma_max"] == g]
        assert len({r["matches_per_event"] for r in same}) == 1 and same[0]["matches_per_event"] > 0
        on, off = same[0], same[1]
        assert on["catch_all_subscriptions"] == 0 and on["presence_subscriptions"] > 0
        assert off["presence_subscriptions"] == 0 and off["catch_all_subscriptions"] == on["presence_subscriptions"]
    assert all(r["first_match_s"] >= 0 for r in rows)
    assert {r["lists"] for r in rows if r["algorithm"].startswith("dynamic")} == {"clusters"}  # 1,200 fields
    assert sparse.parse_algorithm("dynamic:lists=packed") == ("dynamic", {"lists": "packed"})
    assert sparse.parse_algorithm("static:presence=off+runs=256") == ("static", {"presence": False, "runs": 256})


def test_alternate_lists_measures_packed_and_clusters_in_one_matcher(capsys):
    sparse.main(["--n", "800", "--attributes", "300", "--events", "100", "--batch", "50", "--repeat", "1",
                 "--statistics-sample", "200", "--algorithms", "dynamic", "--alternate-lists"])
    row = json.loads(next(line for line in capsys.readouterr().out.splitlines() if line.startswith("{")))
    assert row["algorithm"] == "dynamic" and row["packed"]["cpu_events_per_s"] > 0
    assert row["clusters"]["cpu_us_per_event"] > 0
