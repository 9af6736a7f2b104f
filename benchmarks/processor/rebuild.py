"""Rebuilding subscriptions from their records, in process (no broker): decoding and applying.

    python -m benchmarks.processor.rebuild                     # 1M W0 subscriptions, 3 repetitions
    python -m benchmarks.processor.rebuild --n 100000 --repeat 1

The records are what ``pubsub demo`` writes to pubsub.subscriptions (key: the
id in decimal, value: Avro with subscriber ``user<id % 1000>``).  Measured,
each as subscriptions/s:

* ``per record``: the per-record path the batch decoder falls back on
  (key parser + ``codecs.decode_subscription``), on a 100K sample;
* ``batch decode``: ``wire.subscription_decoder.decode_subscriptions`` over
  every record, in the rebuild's 100K-record steps;
* ``apply``: ``SubscriptionState.apply_columns`` in those steps, i.e. decode,
  the latest value per id, ``add_bulk`` into the ``dynamic`` matcher and the
  subscriber table: the rebuild without the broker.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.harness.options import positive
from fastpubsub.workloads import PRESETS, generate_subscriptions
from fastpubsub.services.events.subscriptions import SubscriptionState, parse_subscription_id
from fastpubsub.wire import codecs
from fastpubsub.wire.subscription_decoder import decode_subscriptions

CHUNK = 100_000  # processor.app.REBUILD_CHUNK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=positive, default=1_000_000, help="W0 subscriptions")
    ap.add_argument("--repeat", type=positive, default=3, help="repetitions of each measurement")
    ap.add_argument("--algorithm", default="dynamic")
    args = ap.parse_args()
    batch = generate_subscriptions(PRESETS["W0"], args.n, 1)
    keys = [str(sid).encode() for sid in batch.ids.tolist()]
    values = [codecs.encode_subscription(codecs.Subscription(f"user{sid % 1000}", preds))
              for sid, preds in batch.to_lists()]
    chunks = [(keys[i:i + CHUNK], values[i:i + CHUNK]) for i in range(0, args.n, CHUNK)]
    SubscriptionState(args.algorithm).apply_columns(keys[:100], values[:100])  # compiled or loaded from the cache
    results: dict = {"n": args.n, "algorithm": args.algorithm, "per_record": [], "batch_decode": [], "apply": []}
    sample = min(args.n, CHUNK)
    for _ in range(args.repeat):
        started = time.perf_counter()
        for k, v in zip(keys[:sample], values[:sample]):
            parse_subscription_id(k), codecs.decode_subscription(v)
        results["per_record"].append(round(sample / (time.perf_counter() - started)))
        started = time.perf_counter()
        for k, v in chunks:
            decoded = decode_subscriptions(k, v)
            assert decoded.slow == 0 and decoded.valid.all()
        results["batch_decode"].append(round(args.n / (time.perf_counter() - started)))
        state = SubscriptionState(args.algorithm)
        started = time.perf_counter()
        for k, v in chunks:
            state.apply_columns(k, v)
        results["apply"].append(round(args.n / (time.perf_counter() - started)))
        assert len(state) == args.n
        print(f"per record {results['per_record'][-1]:,}/s, batch decode {results['batch_decode'][-1]:,}/s, "
              f"apply (decode + add_bulk) {results['apply'][-1]:,}/s", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
