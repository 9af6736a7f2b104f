"""AWS Event Ruler beside fastpubsub on Event Ruler's own benchmark, from JSON text, one thread each.

    python -m benchmarks.peers.event_ruler [--events 213068] [--sizes 1000,10000,100000] [--kinds exact,combo]
        [--out benchmarks/results/runs/<date>-peers-event-ruler.json]

The events are citylots2-like GeoJSON lines of ours with CL2Benchmark's match counts planted
(benchmarks/peers/citylots.py, which names the event-ruler commit whose rules are restated).  Per kind (five rules,
or a combination) and per size of the sweep (N exact rules drawn from the events' own values):

* Event Ruler (``event-ruler/``, the newest release on Maven Central, built by Maven when missing): one machine per
  rule set, ``rulesForJSONEvent(String)`` on every line, a warm-up pass first, then one timed pass; memory per
  rule is the heap in use after a GC with the rules loaded minus without, over the rules.
* fastpubsub: the same rules as subscriptions (``wire.eventruler.rule_to_subscription``) in ``Matcher("dynamic")``;
  the same lines decoded from text as the processor decodes them (``wire.event_decoder.decode_events`` on batches
  of ``--batch`` records, the processor's default, keeping only the attributes some subscription tests), then
  ``match_encoded``; a warm-up pass first (the kernels compiled or loaded, the dynamic clustering's first
  maintenance round run), then one timed pass, which counts any round the maintenance runs in it, as the
  processor would.  Memory per rule
  is the matcher's own count of its structures (``Matcher.memory_bytes``) with the rules minus without, over the
  rules.

Both sides count the matches per rule; the run stops if either differs from the planted counts.  A table per kind
and per size is printed with the load average; ``--out`` writes the raw figures as JSON, each side's per-rule counts
as a digest (:func:`digest`: rules, total matches, a hash of the counts) and whether both sides' equal the planted
ones, so that a file stays small at a million rules.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from benchmarks.harness import report
from benchmarks.peers import citylots, maven

PROJECT = Path(__file__).resolve().parent / "event-ruler"
JAR = PROJECT / "target" / "fastpubsub-event-ruler-peer.jar"


class CountMismatch(RuntimeError):
    """A side's match counts differ from the planted ones."""


def build_jar(progress: Callable[[str], None] = print) -> Path:
    """The peer's jar, built by Maven when missing or older than its sources."""
    return maven.build(PROJECT, JAR, progress=progress)


def run_event_ruler(events_file: Path, rule_files: list[Path], warmup: int = 1, java_opts: tuple[str, ...] = (),
                    progress: Callable[[str], None] = print) -> list[dict]:
    """Event Ruler on every rule file in one JVM: one result (``EventRulerDriver``'s JSON line) per file, in order."""
    cmd = ["java", *java_opts, "-jar", str(JAR), str(events_file), str(warmup), *map(str, rule_files)]
    out = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            result = json.loads(line)
            out.append(result)
            progress(f"  event ruler {Path(result['rules']).stem}: {result['events_per_s']:,.0f} events/s")
    if proc.returncode != 0:
        raise RuntimeError(f"the Event Ruler peer failed (exit {proc.returncode}): {' '.join(cmd)}")
    return out


def run_fastpubsub(lines: list[bytes], patterns: list[dict], batch: int = 1000, warmup: int = 1) -> dict:
    """fastpubsub on the same lines and rules: events/s of the timed pass, matches per rule, engine bytes per rule."""
    from fastpubsub.engine import Matcher
    from fastpubsub.services.events.decode import ReferencedAttributes
    from fastpubsub.wire.event_decoder import decode_events
    from fastpubsub.wire.eventruler import rule_to_subscription

    empty = Matcher("dynamic").memory_bytes()  # what a matcher holds before any rule (Event Ruler's side: a delta too)
    matcher = Matcher("dynamic")
    t0 = time.perf_counter()
    for i, pattern in enumerate(patterns):
        matcher.add(i, rule_to_subscription(pattern))
    matcher.flush()
    build_s = time.perf_counter() - t0
    memory = matcher.memory_bytes() - empty
    wanted = ReferencedAttributes(lambda: matcher)
    batches = [lines[i:i + batch] for i in range(0, len(lines), batch)]

    def one_pass() -> np.ndarray:
        counts = np.zeros(len(patterns), np.int64)
        for values in batches:
            decoded = decode_events(values, None, wanted())
            if decoded.errors:
                raise ValueError(f"events refused by the decoder: {dict(list(decoded.errors.items())[:3])}")
            matches = matcher.match_encoded(decoded.event_batch())
            counts += np.bincount(matches.ids, minlength=len(patterns))
        return counts

    for _ in range(warmup):
        one_pass()
    t = time.perf_counter()
    counts = one_pass()
    seconds = time.perf_counter() - t
    return {"events": len(lines), "build_s": build_s, "seconds": seconds, "events_per_s": len(lines) / seconds,
            "memory_bytes_per_rule": memory / max(1, len(patterns)), "counts": counts.tolist()}


def check(side: str, name: str, got: list[int], planted: list[int]) -> None:
    """Stop the run when a side's counts are not the planted ones, naming the first rules that differ."""
    if list(got) != list(planted):
        diff = [(i, g, p) for i, (g, p) in enumerate(zip(got, planted)) if g != p][:5]
        raise CountMismatch(f"{side} on {name}: counts differ from the planted ones (rule, got, planted): {diff}"
                            + ("" if len(got) == len(planted) else f"; {len(got)} counts for {len(planted)} rules"))


def digest(counts) -> dict:
    """Per-rule match counts in a few fields: how many rules, the total of their matches, and the first 16 hex digits
    of the SHA-256 of the counts as little-endian int64 (equal digests: equal counts, rule by rule)."""
    a = np.asarray(counts, dtype="<i8")
    return {"rules": int(a.size), "total": int(a.sum()), "sha256": hashlib.sha256(a.tobytes()).hexdigest()[:16]}


def compare(events: int, kinds: list[str], sizes: list[int], *, sweep_events: int | None = None, seed: int = 0,
            batch: int = 1000, warmup: int = 1, java_opts: tuple[str, ...] = (), workdir: Path | None = None,
            progress: Callable[[str], None] = print) -> dict:
    """Both sides on every kind and size; the results with every count checked against the planted ones."""
    build_jar(progress)
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="event-ruler-"))
    work.mkdir(parents=True, exist_ok=True)
    progress(f"generating {events:,} events (seed {seed})")
    workload = citylots.generate(events, seed)
    (work / "events.jsonl").write_bytes(b"\n".join(workload.lines) + b"\n")
    sets: list[tuple[str, list[dict], list[int]]] = []
    for kind in kinds:
        sets.append((kind, [r.pattern for r in citylots.kind_rules(kind)], citylots.planted_counts(kind, events)))
    sweep = workload
    if sizes and sweep_events and sweep_events != events:
        progress(f"generating {sweep_events:,} events for the sizes")
        sweep = citylots.generate(sweep_events, seed + 1)
        (work / "sweep-events.jsonl").write_bytes(b"\n".join(sweep.lines) + b"\n")
    for n in sizes:
        patterns, planted = citylots.size_rules(sweep, n, seed)
        sets.append((f"size-{n}", patterns, planted))
    files = {}
    for name, patterns, _ in sets:
        files[name] = work / f"{name}.jsonl"
        files[name].write_text("\n".join(citylots.rule_lines(patterns)) + "\n")
    kind_names = [s[0] for s in sets if not s[0].startswith("size-")]
    size_names = [s[0] for s in sets if s[0].startswith("size-")]
    progress(f"Event Ruler: {len(sets)} rule sets ({report.load_average()})")
    ruler = {}
    if kind_names:
        ruler.update(zip(kind_names, run_event_ruler(work / "events.jsonl", [files[k] for k in kind_names], warmup,
                                                     java_opts, progress)))
    if size_names:
        sweep_file = work / ("sweep-events.jsonl" if sweep is not workload else "events.jsonl")
        ruler.update(zip(size_names, run_event_ruler(sweep_file, [files[k] for k in size_names], warmup, java_opts,
                                                     progress)))
    rows = []
    for name, patterns, planted in sets:
        check("Event Ruler", name, ruler[name]["counts"], planted)
        lines = sweep.lines if name.startswith("size-") else workload.lines
        ours = run_fastpubsub(lines, patterns, batch, warmup)
        check("fastpubsub", name, ours["counts"], planted)
        progress(f"  fastpubsub {name}: {ours['events_per_s']:,.0f} events/s ({report.load_average()})")
        same = list(ruler[name]["counts"]) == list(ours["counts"]) == list(planted)
        rows.append({"name": name, "rules": len(patterns), "events": len(lines), "planted": digest(planted),
                     "event_ruler": {**ruler[name], "counts": digest(ruler[name]["counts"])},
                     "fastpubsub": {**ours, "counts": digest(ours["counts"])}, "same_counts": same,
                     "ratio": ours["events_per_s"] / ruler[name]["events_per_s"]})
    return {"benchmark": "peers-event-ruler", "event_ruler_commit": citylots.EVENT_RULER_COMMIT,
            "event_ruler_version": _version(), "events": events, "sweep_events": len(sweep.lines), "seed": seed,
            "batch": batch, "warmup_passes": warmup, "java_opts": list(java_opts), "load_average": os.getloadavg(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "rows": rows}


def _version() -> str:
    for jar in (PROJECT / "target" / "lib").glob("event-ruler-*.jar"):
        return jar.stem.removeprefix("event-ruler-")
    return "?"


def table(results: dict) -> str:
    """The side-by-side table: events/s and memory per rule of each side, the ratio (fastpubsub over Event Ruler)."""
    head = (f"Event Ruler {results['event_ruler_version']} (rules of event-ruler@{results['event_ruler_commit'][:10]})"
            f" and fastpubsub, one thread each, from JSON text; {results['events']:,} events"
            f" ({results['sweep_events']:,} for the sizes); {'load average %.2f, %.2f, %.2f' % tuple(results['load_average'])}")
    lines = [head, f"{'rules':<26}{'n':>8}{'Event Ruler ev/s':>18}{'fastpubsub ev/s':>17}{'ratio':>7}"
                   f"{'ER B/rule':>11}{'fps B/rule':>12}"]
    for row in results["rows"]:
        er, ours = row["event_ruler"], row["fastpubsub"]
        lines.append(f"{row['name']:<26}{row['rules']:>8,}{er['events_per_s']:>18,.0f}{ours['events_per_s']:>17,.0f}"
                     f"{row['ratio']:>7.2f}{er['memory_bytes_per_rule']:>11,.0f}{ours['memory_bytes_per_rule']:>12,.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=citylots.CITYLOTS2_LINES,
                    help="events of the kinds (default: as many as citylots2's lines)")
    ap.add_argument("--sizes", default="1000,10000,100000", help="sizes of the rule sweep (comma-separated; '' none)")
    ap.add_argument("--sweep-events", type=int, default=None, help="events of the sweep (default: --events)")
    ap.add_argument("--kinds", default=",".join(citylots.ALL_KINDS),
                    help=f"kinds and combinations (default: all: {','.join(citylots.ALL_KINDS)}; '' none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1000, help="records per decoded batch (the processor's default)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed passes before the timed one, on both sides")
    ap.add_argument("--java-opts", default="-Xms4g -Xmx4g", help="the JVM's options (one string)")
    ap.add_argument("--workdir", type=Path, default=None, help="where the event and rule files go (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=None, help="write the raw results as JSON here")
    args = ap.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    for k in kinds:
        citylots.kind_rules(k)  # an unknown kind refused before anything runs
    sizes = [int(s) for s in args.sizes.split(",") if s]
    try:
        results = compare(args.events, kinds, sizes, sweep_events=args.sweep_events or args.events, seed=args.seed,
                          batch=args.batch, warmup=args.warmup, java_opts=tuple(args.java_opts.split()),
                          workdir=args.workdir, progress=lambda s: print(s, file=sys.stderr, flush=True))
    except CountMismatch as exc:
        print(f"stopped: {exc}", file=sys.stderr)
        return 1
    print(table(results))
    if args.out:
        report.write_json(results, args.out)
        print(f"results: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
