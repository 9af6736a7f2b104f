"""Taking the keys and values out of a rebuild's records: in a few passes of C calls vs a Python step per record.

    python -m benchmarks.change_columns --n 1000000 --repeat 3

The processor applies subscription records in bulk steps (``processor.app``,
``_on_changes``); before decoding, it takes each record's key and value and
checks its size.  This times that step on N in-memory records (W0-sized:
7-byte keys, 60-byte values), both ways, alternately.
"""

from __future__ import annotations

import argparse
import json
import time

from confluent_kafka import Message

from fastpubsub.processor.app import _plain_columns


def per_record(msgs: list[Message], limit: int) -> tuple[list, list, list]:
    """The record-by-record path of ``_on_changes`` (errors and oversized records aside)."""
    records, keys, values = [], [], []
    for msg in msgs:
        if msg.error() is not None:
            continue
        key, value = msg.key(), msg.value()
        if (len(key) if key else 0) + (len(value) if value else 0) <= limit:
            records.append(msg)
            keys.append(key)
            values.append(value)
    return records, keys, values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="records")
    ap.add_argument("--repeat", type=int, default=3, help="timings of each way")
    args = ap.parse_args()
    if args.n <= 0 or args.repeat <= 0:
        ap.error("--n and --repeat must be positive")
    msgs = [Message(topic="pubsub.subscriptions", partition=0, offset=i, key=str(1_000_000 + i).encode(),
                    value=b"x" * 60) for i in range(args.n)]
    limit, results = 1 << 20, {"columns": [], "per_record": []}
    for _ in range(args.repeat):
        began = time.perf_counter()
        _plain_columns(msgs, limit)
        results["columns"].append(round(time.perf_counter() - began, 3))
        began = time.perf_counter()
        per_record(msgs, limit)
        results["per_record"].append(round(time.perf_counter() - began, 3))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
