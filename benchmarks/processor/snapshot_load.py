"""Loading a snapshot in process (no broker): with the matcher's built index vs bulk-loading its columns.

    python -m benchmarks.processor.snapshot_load                  # 1M W0 subscriptions, 3 repetitions
    python -m benchmarks.processor.snapshot_load --n 100000 --repeat 1

Builds the subscription state as a rebuild does (``SubscriptionState.apply_columns``
in 100K-record steps, ``dynamic``), writes a snapshot, then times
``processor.snapshot.read`` (file, checksum, arrays, state) alternately with the
index (``engine.structure``) and without it (the index ignored, as for a
snapshot of another engine version: one ``add_bulk`` of the columns), so
that both see the same machine load.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from benchmarks.harness.options import positive
from fastpubsub.engine import ValidEventStore
from fastpubsub.workloads import PRESETS, generate_subscriptions
from fastpubsub import engine
from fastpubsub.services.events import snapshot
from fastpubsub.services.events.subscriptions import SubscriptionState
from fastpubsub.wire import codecs

CHUNK = 100_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=positive, default=1_000_000, help="W0 subscriptions")
    ap.add_argument("--repeat", type=positive, default=3, help="loads of each kind")
    args = ap.parse_args()
    batch = generate_subscriptions(PRESETS["W0"], args.n, 1)
    keys = [str(sid).encode() for sid in batch.ids.tolist()]
    values = [codecs.encode_subscription(codecs.Subscription(f"user{sid % 1000}", p)) for sid, p in batch.to_lists()]
    state = SubscriptionState("dynamic")
    for i in range(0, args.n, CHUNK):
        state.apply_columns(keys[i:i + CHUNK], values[i:i + CHUNK])
    results: dict = {"n": args.n, "index": [], "bulk_load": []}
    with tempfile.TemporaryDirectory(prefix="pubsub-snapshot-load-") as directory:
        meta = snapshot.write(directory, state, ValidEventStore(), {0: 0}, partitions=4)
        results["write_seconds"], results["bytes"] = meta["seconds"], meta["bytes"]
        results["index_bytes"] = meta["index"]["bytes"]
        own = engine.index_fingerprint
        for _ in range(args.repeat):
            for kind in ("index", "bulk_load"):
                engine.index_fingerprint = own if kind == "index" else (lambda: "another engine")
                try:
                    started = time.perf_counter()
                    loaded = snapshot.read(directory, 4, "dynamic", ValidEventStore()).state
                    took = time.perf_counter() - started
                finally:
                    engine.index_fingerprint = own
                assert loaded.index_loaded == (kind == "index") and len(loaded) == len(state)
                results[kind].append(round(took, 2))
                print(f"{kind}: {took:.2f}s", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
