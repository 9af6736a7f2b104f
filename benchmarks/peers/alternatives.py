"""The tables and the plot of docs/benchmarks.md's "Against the alternatives", from the peers' raw results.

    python -m benchmarks.peers.alternatives \\
        --streams benchmarks/results/runs/2026-11-28-peers-streams.json \\
        --patterns benchmarks/results/runs/2026-11-28-pattern-peers-esper-siddhi.jsonl \\
                   benchmarks/results/runs/2026-11-28-pattern-peers-esper-100k.jsonl \\
        --matchers benchmarks/results/runs/2026-12-06-peers-hem-settings.json \\
        --spark benchmarks/results/runs/2026-11-28-spark-readers-1m.json benchmarks/results/runs/2026-11-28-spark-readers-10m.json \\
        --ruler benchmarks/results/runs/2026-12-07-peers-event-ruler.json \\
        --plot docs/img/alternatives.png

Each input is what one side-by-side run wrote (``benchmarks.peers.streams``, ``benchmarks.peers.patterns``,
``benchmarks.peers.hem``, ``benchmarks.pipeline.spark_readers``, ``benchmarks.peers.event_ruler``); this module only reads them, so a table always shows
figures of one run, and the ratio is computed from the same two numbers the table shows.  Every table names each
peer's settings: those its raw results record, and those its driver fixes (:data:`FIXED`); where a peer was run at
several settings, its ratio is taken against the fastest of them whose results are right.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.harness import report

#: The settings each peer's driver fixes, which its raw results do not record (the sources named say where).
FIXED = {
    # benchmarks/peers/kafka-streams/.../StreamsPeer.java; commit.interval.ms is Kafka Streams' default under it
    "streams": "processing.guarantee=exactly_once_v2, commit.interval.ms=100",
    # benchmarks/peers/esper/.../EsperDriver.java; the heap is pattern_peers --java-heap's default
    "esper": "locking off, internal timer off, object-array events, 1 thread, -Xmx8g",
    # benchmarks/peers/patterns.py (the Siddhi app's annotations)
    "siddhi": "@app:playback, no @Async, 1 thread, -Xmx8g",
    # benchmarks/peers/spark_connector.py: minPartitions from the split size
    "connector": "minPartitions = offsets / split size",
    # benchmarks/peers/event_ruler.py's Java driver: one machine per rule set, JSON text in, one thread
    "event_ruler": "GenericMachine per rule set, rulesForJSONEvent(String), 1 thread",
}

#: benchmarks/peers/event_ruler.py's --java-opts default, for a run file that does not record the options
RULER_JAVA_OPTS = "-Xms4g -Xmx4g"


def streams_settings(data: dict, system: str) -> str:
    """A Kafka Streams run's settings: the driver's fixed ones, and the threads, configs and JVM options it ran with."""
    if system == "fastpubsub":
        return "defaults"
    s = data.get("settings", {})
    extra = [*s.get("peer_config", []), *s.get("java_opts", [])] or ["JVM default heap"]
    return ", ".join([FIXED["streams"], f"num.stream.threads={s.get('threads', 1)}", *extra])


def ratio(a: float, b: float) -> str:
    """``a / b`` as the tables print it: one decimal under 10, whole numbers above."""
    r = a / b
    return f"{r:,.1f}×" if r < 10 else f"{r:,.0f}×"


def streams_rows(paths: list[Path]) -> list[dict]:
    """One row per size and system: the medians ``benchmarks.peers.streams`` wrote, and ours over each peer; a
    size in several files is taken from the first."""
    rows: list[dict] = []
    sizes = [(data, size) for path in paths for data in [json.loads(path.read_text())] for size in data["sizes"]]
    for data, size in sizes:
        if any(r["subscriptions"] == size["subscriptions"] for r in rows):
            continue
        summary = size.get("summary") or {}
        ours = (summary.get("fastpubsub") or {}).get("max_events_per_s")
        for system, s in summary.items():
            peer = s.get("max_events_per_s")
            rows.append({"subscriptions": size["subscriptions"], "system": system,
                         "settings": streams_settings(data, system), "max": peer,
                         "p99": s.get("latency_p99_ms"), "common": s.get("common_rate_p99_ms"),
                         "rss": s.get("peak_rss_mib"),
                         "exact": "yes" if s.get("exact") else "no",
                         "ratio": "—" if system == "fastpubsub" or not (ours and peer) else ratio(ours, peer)})
    return rows


def pattern_rows(paths: list[Path]) -> list[dict]:
    """One row per size and system of ``benchmarks.peers.patterns``' JSON lines (a header line, then one per run)."""
    rows = []
    for path in paths:
        ours = {}
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if "system" not in r or "error" in r:
                continue
            n = r["subscriptions"]
            if r["system"] == "fastpubsub":
                ours[n] = r["events_per_s"]
            rows.append({"subscriptions": n, "system": r["system"] + (f" ({r['mode']})" if "mode" in r else ""),
                         "settings": "defaults" if r["system"] == "fastpubsub" else FIXED.get(r["system"], "defaults"),
                         "events_per_s": r["events_per_s"], "per_cpu_s": r.get("events_per_cpu_s"),
                         "matches": r.get("outputs"), "build_s": r.get("build_s"),
                         "same": "—" if r["system"] == "fastpubsub" else ("yes" if r.get("same_matches") else "no"),
                         "ratio": "—" if r["system"] == "fastpubsub" or n not in ours
                         else ratio(ours[n], r["events_per_s"])})
    return rows


def spark_rows(paths: list[Path]) -> list[dict]:
    """One row per events count and reader of ``benchmarks.pipeline.spark_readers``: best and median of its rounds."""
    rows = []
    for path in paths:
        data = json.loads(path.read_text())
        best = {reader: s["best_records_per_s"] for reader, s in data["summary"].items()}
        for reader, s in data["summary"].items():
            other = [v for k, v in best.items() if k != reader]
            common = f"{data.get('master', 'local')}, {data.get('partitions')} Kafka partitions, split size {data.get('split_size'):,}"
            rows.append({"events": data["events"], "reader": reader,
                         "settings": common + (f", {FIXED['connector']}" if reader == "connector" else ""),
                         "best_s": s["best_seconds"],
                         "median_s": s["median_seconds"], "records_per_s": s["best_records_per_s"],
                         "vs_other": ratio(s["best_records_per_s"], other[0]) if other else "—",
                         "equal": "yes" if data.get("snapshots_equal") else "no",
                         "pyspark": data.get("pyspark"), "load": " ".join(f"{x:.2f}" for x in data["load_average"])})
    return rows


def ruler_rows(paths: Path | list[Path]) -> tuple[list[dict], list[dict]]:
    """The rows of ``benchmarks.peers.event_ruler``'s runs: one per kind (five rules, or a combination), then one per
    size of the exact-rule sweep; each with both sides' events/s and memory per rule, ours over theirs, and whether
    both found the planted count of every rule (a run stops otherwise).  A kind or size in several files is taken
    from the first."""
    seen: set[str] = set()
    rows = []
    for path in [paths] if isinstance(paths, Path) else paths:
        settings = f"{FIXED['event_ruler']}, {ruler_settings(path)}"
        for r in json.loads(path.read_text())["rows"]:
            if r["name"] not in seen:
                seen.add(r["name"])
                rows.append(dict(r, settings=settings))
    kinds, sizes = [], []
    for r in rows:
        er, ours = r["event_ruler"], r["fastpubsub"]
        size = r["name"].startswith("size-")
        same = r.get("same_counts", er["counts"] == ours["counts"] == r["planted"])
        row = {"kind": f"{r['rules']:,} exact" if size else r["name"], "rules": r["rules"], "settings": r["settings"],
               "theirs": er["events_per_s"], "ours": ours["events_per_s"],
               "ratio": ratio(ours["events_per_s"], er["events_per_s"]),
               "their_bytes": er["memory_bytes_per_rule"], "our_bytes": ours["memory_bytes_per_rule"],
               "same": "yes" if same else "no"}
        (sizes if size else kinds).append(row)
    return kinds, sizes


def ruler_settings(path: Path) -> str:
    """The JVM options an Event Ruler run used (recorded by newer runs; the harness's default otherwise)."""
    opts = json.loads(path.read_text()).get("java_opts")
    return " ".join(opts) if opts else RULER_JAVA_OPTS


def ruler_tables(kinds: list[dict], sizes: list[dict]) -> list[str]:
    """The per-kind and per-size tables of the Event Ruler comparison."""
    columns = [("rules", "rules"), ("settings", "settings"), ("theirs", "Event Ruler events/s"), ("ours", "fastpubsub events/s"),
               ("ratio", "fastpubsub over it"), ("their_bytes", "Event Ruler B/rule"),
               ("our_bytes", "fastpubsub B/rule"), ("same", "same counts")]
    out = []
    if kinds:
        out.append(report.markdown_table(kinds, [("kind", "kind"), *columns]))
    if sizes:
        out.append(report.markdown_table(sizes, [("kind", "rules drawn from the events"), *columns[1:]]))
    return out


def _their_runs(trial: dict) -> list[dict]:
    """The runs of their program in one trial (a file written before settings were tried holds one)."""
    theirs = trial["theirs"]
    return [theirs] if isinstance(theirs, dict) else theirs


def matcher_rows(path: Path) -> list[dict]:
    """One row per workload, size, system and setting of ``benchmarks.peers.hem``: the best of its rounds (ms per
    event, build seconds), its own memory count, matches per event averaged over the rounds, and its time over ours.
    ``fastest`` marks each algorithm's fastest setting among those whose matches agree with the expectation."""
    data = json.loads(path.read_text())
    rows = []
    for c in data["comparisons"]:
        if not c.get("supported"):
            continue
        runs: dict[str, list[dict]] = {"fastpubsub": [t["ours"] for t in c["trials"]]}
        algorithm = {"fastpubsub": "fastpubsub"}
        for t in c["trials"]:
            for run in _their_runs(t):
                for name, r in run.get("rows", {}).items():
                    settings = r.get("settings", {})
                    key = " ".join([name, *(f"{k}={v}" for k, v in settings.items())])
                    runs.setdefault(key, []).append(r)
                    algorithm[key] = name
        ours = min(r["ms_per_event"] for r in runs["fastpubsub"])
        case = []
        for system, rs in runs.items():
            best = min(r["ms_per_event"] for r in rs)
            memory = [r.get("memory_own_mb") or r.get("memory_bytes", 0) / 1e6 for r in rs]
            summary = c.get("systems", {}).get("fastpubsub-dynamic" if system == "fastpubsub" else f"hem:{system}", {})
            case.append({"workload": c["workload"], "subscriptions": c["size"], "system": system,
                         "algorithm": algorithm[system], "ms_per_event": best, "build_s": min(r["build_s"] for r in rs),
                         "memory_mb": round(max(memory)),
                         "matches_per_event": round(sum(r["matches_per_event"] for r in rs) / len(rs), 3),
                         "agrees": summary.get("agrees_with_expectation", True),
                         "ratio": "—" if system == "fastpubsub" else ratio(best, ours)})
        for r in case:
            rivals = [x["ms_per_event"] for x in case if x["algorithm"] == r["algorithm"] and x["agrees"]]
            r["fastest"] = r["agrees"] and r["ms_per_event"] == min(rivals)
        rows += case
    return rows


def fastest_rows(rows: list[dict]) -> list[dict]:
    """Each algorithm's fastest setting per workload and size (the ratio the page quotes), ours included."""
    return [r for r in rows if r["fastest"]]


def _settings(r: dict) -> str:
    """The settings part of a row's system name (``be=7 buks=1000``), empty for ours and for a single-setting run."""
    return r["system"][len(r["algorithm"]):].strip()


def matcher_matrix(rows: list[dict]) -> str:
    """One line per system at its fastest setting, one column per workload and size: best ms per event (its time
    over ours), then build seconds and memory MB (their own counts; ours ``stats()["memory_bytes"]``), matches per
    event, and the setting."""
    cases = list(dict.fromkeys((r["workload"], r["subscriptions"]) for r in rows))
    fastest = fastest_rows(rows)

    def cell(r: dict) -> str:
        return " · ".join(x for x in (f"{r['ms_per_event']:.3g} ({r['ratio']})", f"{r['build_s']:.3g} s",
                                      f"{r['memory_mb']:,} MB", f"{r['matches_per_event']:.3g}", _settings(r)) if x)

    out = [{"system": algorithm, **{f"{w} {n:,}": next(
        (cell(r) for r in fastest if r["algorithm"] == algorithm and (r["workload"], r["subscriptions"]) == (w, n)),
        "–") for w, n in cases}} for algorithm in dict.fromkeys(r["algorithm"] for r in rows)]
    return report.markdown_table(out, [("system", "at its fastest setting: ms per event (its time over ours) · build "
                                                  "· memory · matches per event · setting"),
                                       *((f"{w} {n:,}", f"{w}, {n:,}") for w, n in cases)])


def settings_matrix(rows: list[dict]) -> str:
    """Every setting tried: one line per algorithm and the settings it holds fixed, the ms per event of each value
    of the one it varies (the first of its name) per workload and size; the fastest in bold, a setting whose
    matches are wrong struck through."""
    cases = list(dict.fromkeys((r["workload"], r["subscriptions"]) for r in rows))
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        if r["system"] == "fastpubsub" or not _settings(r):
            continue
        varied, *fixed = _settings(r).split()
        groups.setdefault((r["algorithm"], varied.split("=")[0], " ".join(fixed)), []).append(r)

    def varied(r: dict) -> float:
        return float(_settings(r).split()[0].split("=")[1])

    def value(r: dict) -> str:
        text = f"{varied(r):g}: {r['ms_per_event']:.3g}"
        return f"~~{text}~~" if not r["agrees"] else f"**{text}**" if r["fastest"] else text

    order = list(dict.fromkeys(r["algorithm"] for r in rows))
    out = [{"system": f"{algorithm} {key}" + (f" ({fixed})" if fixed else ""), **{
        f"{w} {n:,}": " · ".join(value(r) for r in sorted(group, key=varied)
                                 if (r["workload"], r["subscriptions"]) == (w, n)) or "–"
        for w, n in cases}} for (algorithm, key, fixed), group in sorted(
            groups.items(), key=lambda g: (order.index(g[0][0]), g[0][2].split("=")[-1].zfill(12)))]
    return report.markdown_table(out, [("system", "setting varied (held)"),
                                       *((f"{w} {n:,}", f"{w}, {n:,}: ms per event") for w, n in cases)])


def _lines(ax, rows: list[dict], value: str, xlabel: str, ylabel: str, title: str) -> None:
    """One line per system of ``value`` against subscriptions, log-log."""
    for system in dict.fromkeys(r["system"] for r in rows):
        pts = sorted({r["subscriptions"]: r[value] for r in rows if r["system"] == system and r[value]}.items())
        ax.plot(*zip(*pts), marker="o", label=system)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)


def plot(path: Path, streams: list[dict], patterns: list[dict], matchers: list[dict], spark: list[dict]) -> None:
    """Up to four panels, one per comparison: throughput against subscriptions on log axes where sizes vary."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in (streams, patterns, matchers, spark) if p]
    rows = (len(panels) + 1) // 2
    fig, grid = plt.subplots(rows, 2 if len(panels) > 1 else 1, figsize=(12, 4.5 * rows), squeeze=False)
    for ax in grid.flat[len(panels):]:
        ax.set_visible(False)
    axes = iter(grid.flat)
    if streams:
        _lines(next(axes), streams, "max", "W0 subscriptions", "max events/s (end to end)", "Kafka Streams, same broker")
    if patterns:
        _lines(next(axes), patterns, "events_per_s", "pattern subscriptions (S1-S3)", "events/s",
               "Pattern subscriptions, in process")
    if matchers:
        matchers = fastest_rows(matchers)
        ax = next(axes)
        labels = [f"{r['workload']}\n{r['subscriptions'] // 1000:,}K" for r in matchers if r["system"] == "fastpubsub"]
        matchers = [{**r, "system": r["algorithm"]} for r in matchers]  # one bar per algorithm: its fastest setting
        systems = list(dict.fromkeys(r["system"] for r in matchers))
        width = 0.8 / len(systems)
        for i, system in enumerate(systems):
            ys = [next((r["ms_per_event"] for r in matchers if r["system"] == system and r["workload"] == w
                        and r["subscriptions"] == n), float("nan"))
                  for w, n in dict.fromkeys((r["workload"], r["subscriptions"]) for r in matchers)]
            ax.bar([j + i * width for j in range(len(ys))], ys, width, label=system)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(labels))], labels, fontsize=7)
        ax.set(yscale="log", ylabel="ms per event", title="C++ matchers (HEM repository), fastest setting of each")
        ax.legend(fontsize=7)
    if spark:
        ax = next(axes)
        readers = list(dict.fromkeys(r["reader"] for r in spark))
        sizes = list(dict.fromkeys(r["events"] for r in spark))
        for i, reader in enumerate(readers):
            ys = [next(r["records_per_s"] for r in spark if r["reader"] == reader and r["events"] == n) for n in sizes]
            ax.bar([j + i * 0.4 for j in range(len(sizes))], ys, 0.4, label=reader)
        ax.set_xticks([j + 0.2 for j in range(len(sizes))], [f"{n / 1e6:g}M events" for n in sizes])
        ax.set(ylabel="records/s (best round)", title="Statistics job: two Kafka readers")
        ax.legend(fontsize=8)
    report.save(fig, path)


def tables(streams: list[dict] = (), patterns: list[dict] = (), matchers: list[dict] = (),
           spark: list[dict] = (), ruler: tuple[list[dict], list[dict]] = ((), ())) -> list[str]:
    """The markdown tables of the comparisons given, in the page's order."""
    out = []
    if streams:
        common = [("common", "p99 ms at a common rate")] if any(r["common"] for r in streams) else []
        out.append(report.markdown_table(streams, [
            ("subscriptions", "W0 subscriptions"), ("system", "system"), ("settings", "settings"),
            ("max", "max events/s"),
            ("p99", "p99 ms at half its max"), *common, ("rss", "peak RSS MiB"), ("exact", "exact"),
            ("ratio", "fastpubsub's max over it")]))
    if matchers:
        out.append(matcher_matrix(matchers))
        if any(_settings(r) for r in matchers):
            out.append(settings_matrix(matchers))
    if patterns:
        out.append(report.markdown_table(patterns, [
            ("subscriptions", "subscriptions"), ("system", "system"), ("settings", "settings"),
            ("events_per_s", "events/s (wall)"),
            ("per_cpu_s", "events per CPU s"), ("matches", "matches (timed events)"), ("same", "same match set"),
            ("build_s", "build s"), ("ratio", "this engine over it")]))
    if spark:
        out.append(report.markdown_table(spark, [
            ("events", "events"), ("reader", "reader"), ("settings", "settings"), ("best_s", "best s"),
            ("median_s", "median s"),
            ("records_per_s", "records/s (best)"), ("vs_other", "over the other"), ("equal", "same snapshot"),
            ("pyspark", "PySpark"), ("load", "load average at the end")]))
    out += ruler_tables(*ruler)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=Path, nargs="*", default=[])
    ap.add_argument("--patterns", type=Path, nargs="*", default=[])
    ap.add_argument("--matchers", type=Path)
    ap.add_argument("--spark", type=Path, nargs="*", default=[])
    ap.add_argument("--ruler", type=Path, nargs="*", default=[],
                    help="benchmarks.peers.event_ruler runs (a kind or size from the first file that has it)")
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    streams = streams_rows(args.streams)
    patterns = pattern_rows(args.patterns)
    matchers = matcher_rows(args.matchers) if args.matchers else []
    spark = spark_rows(args.spark)
    ruler = ruler_rows(args.ruler) if args.ruler else ([], [])
    for table in tables(streams, patterns, matchers, spark, ruler):
        print(table, "\n")
    if args.plot:
        plot(args.plot, streams, patterns, matchers, spark)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
