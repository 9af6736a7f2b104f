"""Memory of one processor shard: the subscription state a ``pubsub run --shard I/K`` holds, per million subscriptions.

    python -m benchmarks.processor.shard_memory                                   # W0, 1M subscriptions, K = 1, 2, 4
    python -m benchmarks.processor.shard_memory --workload W2 --n 1000000 --shards 1 2

Each (workload, K) runs in a fresh process: N subscriptions of the workload
(``workloads.fabret``), Avro-encoded as records of ``pubsub.subscriptions``
(key: the decimal id; subscriber ``user<id mod 10000>``), are applied to the
``SubscriptionState`` of shard 0 of K in chunks of 10,000 (``inputs.CHANGES_PER_POLL``),
as a rebuild does; then a snapshot of that shard is written.  Reported: RSS
growth caused by the state (after the kernels are compiled; records are
generated chunk by chunk and freed), the peak above the same baseline
(rebuild and snapshot write), the subscriptions the shard holds, MB per
million held, the rebuild's seconds (record generation excluded) and the snapshot's bytes.  What the state
holds beside the engine: the subscriber of each id (a Python dict), a columnar
copy of the subscriptions for snapshots, and the validity bounds of those that
have them (none here).  The valid-event store is bounded separately
(``--max-valid-event-bytes``) and held whole by every shard.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time

from fastpubsub.workloads.fabret import PRESETS, generate_subscriptions

from benchmarks.harness.memory import rss_bytes

CHUNK = 10_000


def records(workload: str, n: int, first: int, count: int):
    """Records ``first .. first + count`` of the stream, as (key, value) bytes."""
    from fastpubsub.wire.codecs import Subscription, encode_subscription

    batch = generate_subscriptions(PRESETS[workload], count, seed=first, first_id=first)
    return [(str(sid).encode(), encode_subscription(Subscription(f"user{sid % 10_000}", preds), "avro"))
            for sid, preds in batch.to_lists()]


def one(workload: str, n: int, count: int) -> dict:
    """Shard 0 of ``count`` over the N-subscription stream, in this process."""
    from fastpubsub.engine.validity.event_store import ValidEventStore
    from fastpubsub.services.events import snapshot
    from fastpubsub.services.events.shard import Shard
    from fastpubsub.services.events.subscriptions import SubscriptionState

    warm = SubscriptionState()  # compile (or load from numba's cache) what the load uses, outside the measure
    warm.apply_many(records(workload, n, 10**12, 2000))
    del warm
    before = rss_bytes()
    state = SubscriptionState(shard=Shard(0, count))
    seconds = 0.0
    for first in range(0, n, CHUNK):
        chunk = records(workload, n, first, min(CHUNK, n - first))
        started = time.perf_counter()
        state.apply_records(chunk)
        seconds += time.perf_counter() - started
    del chunk
    grown = rss_bytes() - before
    with tempfile.TemporaryDirectory() as tmp:
        meta = snapshot.write(tmp, state, ValidEventStore(), {}, 4, Shard(0, count))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before  # the rebuild or the snapshot write
    held = len(state)
    return {"workload": workload, "n": n, "shards": count, "held": held, "rss_mb": round(grown / 1e6, 1),
            "peak_mb": round(peak / 1e6, 1),
            "mb_per_million_held": round(grown / 1e6 / (held / 1e6), 1), "rebuild_s": round(seconds, 1),
            "snapshot_mb": round(meta["bytes"] / 1e6, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="W0", choices=sorted(PRESETS))
    ap.add_argument("--n", type=int, default=1_000_000, help="subscriptions in the topic (all shards together)")
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4], help="shard counts K to measure")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # the child: this K, one JSON line
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one(args.workload, args.n, args.one)))
        return
    print("| workload | N | K | held by shard 0 | RSS growth (MB) | MB per million held | peak (MB) | rebuild (s) "
          "| snapshot (MB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in args.shards:
        out = subprocess.run([sys.executable, "-m", "benchmarks.processor.shard_memory", "--workload", args.workload,
                              "--n", str(args.n), "--one", str(k)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {r['workload']} | {r['n']:,} | {k} | {r['held']:,} | {r['rss_mb']:,} | {r['mb_per_million_held']:,} "
              f"| {r['peak_mb']:,} | {r['rebuild_s']} | {r['snapshot_mb']:,} |", flush=True)


if __name__ == "__main__":
    main()
