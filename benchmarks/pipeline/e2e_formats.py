"""End to end in each event format, side by side in one run: what reading a producer's own topic costs.

The same W0 events and subscriptions through the embedded broker and ``pubsub run`` (``benchmarks.pipeline.e2e``, its
maximum-throughput phase), the events written as

* ``native``: fastpubsub's Avro attribute map;
* ``registered-avro``: a producer's nested Avro record of 40 leaves, registered in the embedded Schema Registry
  (``e2e.PRODUCER_SCHEMA``): the processor decodes with the registered schema, the paths no subscription names
  skipped unread;
* ``nested-json``: the same record as JSON text.

Formats alternate within each round (a fresh broker each run), so a drift of the machine touches all of them.
Prints each run and the medians' ratios to native, and writes them as JSON (``--out``).

    python -m benchmarks.pipeline.e2e_formats --subscriptions 1000000 --rounds 3
    python -m benchmarks.pipeline.e2e_formats --subscriptions 10000 --backlog 20000 --rounds 1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.harness import report
from benchmarks.pipeline import e2e



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subscriptions", type=int, default=1_000_000)
    ap.add_argument("--backlog", type=int, default=500_000, help="events of each run's maximum-throughput phase")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--formats", default=",".join(e2e.EVENT_FORMATS))
    ap.add_argument("--out", type=Path, default=report.RESULTS / "e2e_formats.json")
    args = ap.parse_args()
    formats = args.formats.split(",")
    unknown = set(formats) - set(e2e.EVENT_FORMATS)
    if unknown:
        ap.error(f"unknown formats {sorted(unknown)}: choose among {', '.join(e2e.EVENT_FORMATS)}")
    plan = e2e.Plan(args.subscriptions, args.backlog, 2.0)
    runs: list[dict] = []
    for r in range(args.rounds):
        for fmt in formats:
            print(f"round {r + 1}/{args.rounds}: {fmt}", flush=True)
            row, _ = e2e.run(plan, lambda text: print(text, flush=True), options=e2e.Options(event_format=fmt,
                                                                                              offered_rate=1000.0))
            runs.append({"round": r + 1, "format": fmt, "max_events_per_s": row["max_events_per_s"],
                         "backlog_match_rate": row["backlog_match_rate"], "busy_s": row.get("busy_s"),
                         **{f"{s}_s": row.get(f"{s}_s") for s in e2e.STAGES},
                         "load_average": os.getloadavg()[0]})
            print(json.dumps(runs[-1]), flush=True)
    medians = {f: statistics.median(x["max_events_per_s"] for x in runs if x["format"] == f) for f in formats}
    summary = {f: {"median_events_per_s": round(m), **({"ratio_to_native": round(m / medians["native"], 3)}
                                                        if "native" in medians else {})}
               for f, m in medians.items()}
    print(json.dumps(summary))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": "python -m benchmarks.pipeline.e2e_formats " + " ".join(sys.argv[1:]),
                                    "date": time.strftime("%Y-%m-%d"), "runs": runs, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
