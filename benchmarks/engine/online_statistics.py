"""What the dynamic algorithm's online statistics cost: the collector's memory, a snapshot and an adoption check.

    python -m benchmarks.engine.online_statistics                       # 20,000 attributes (sparse opindex preset)
    python -m benchmarks.engine.online_statistics --events 40000 --subscriptions 50000 --repeat 5

The collector observes ``--events`` events of the sparse ``opindex`` preset
(20,000 attributes, 40 per event, values 0..49) in batches of 256, all
sampled, as ``DynamicIndex`` feeds it.  Then, ``--repeat`` times, best taken:
``collector.snapshot()`` alone and ``EventProbabilities.adopt_online`` (a
snapshot and nu of every live equality predicate of ``--subscriptions``
sparse subscriptions, the check each maintenance round makes).  Reported:
those seconds (no tracemalloc running), then from a second collector under
tracemalloc the bytes and allocated blocks (``sys.getallocatedblocks``) it
holds and the peak of one adoption check, and the blocks a snapshot holds
once every attribute's statistics are asked for (``to_record`` does that).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc

import numpy as np

from fastpubsub.engine import EventStatistics, Matcher
from fastpubsub.engine.columnar import take_events
from fastpubsub.engine.costmodel.statistics import StatisticsCollector
from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions


def observed(batches: list) -> tuple[StatisticsCollector, float]:
    collector = StatisticsCollector()
    t0 = time.perf_counter()
    for b in batches:
        collector.observe(b)
    collector.snapshot()  # pending rows merged
    return collector, time.perf_counter() - t0


def run(n_events: int, n_subscriptions: int, repeat: int) -> dict:
    spec = SPARSE_PRESETS["opindex"]
    events = generate_sparse_events(spec, n_events, seed=3)
    batches = [take_events(events, np.arange(i, min(i + 256, n_events))) for i in range(0, n_events, 256)]
    matcher = Matcher("static")
    matcher.add_bulk(generate_sparse_subscriptions(spec, n_subscriptions, seed=1))
    probabilities = matcher.probabilities
    # times, without tracemalloc
    collector, observe_s = observed(batches)
    snapshot_s, adopt_s = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        collector.snapshot()
        snapshot_s.append(time.perf_counter() - t0)
        probabilities.statistics = EventStatistics.uniform()
        t0 = time.perf_counter()
        adopted = probabilities.adopt_online(collector)
        adopt_s.append(time.perf_counter() - t0)
    del collector
    probabilities.statistics = EventStatistics.uniform()
    # memory: what the collector holds, the peak of one adoption check
    gc.collect()
    blocks, _ = sys.getallocatedblocks(), tracemalloc.start()
    collector, _ = observed(batches)
    gc.collect()
    held_bytes, held_blocks = tracemalloc.get_traced_memory()[0], sys.getallocatedblocks() - blocks
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    probabilities.adopt_online(collector)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    gc.collect()
    blocks = sys.getallocatedblocks()
    snapshot = collector.snapshot()
    every = sum(st.distinct for st in snapshot.attributes.values())
    materialised_blocks = sys.getallocatedblocks() - blocks
    return {"events": n_events, "subscriptions": n_subscriptions, "attributes": len(snapshot.attributes),
            "values": every, "observe_s": round(observe_s, 3), "snapshot_s": round(min(snapshot_s), 4),
            "adopt_online_s": round(min(adopt_s), 4), "adopted": bool(adopted), "collector_bytes": held_bytes,
            "collector_blocks": held_blocks, "adopt_peak_bytes": peak,
            "all_attributes_built_blocks": materialised_blocks, "loadavg": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--subscriptions", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(json.dumps(run(args.events, args.subscriptions, args.repeat)))


if __name__ == "__main__":
    main()
