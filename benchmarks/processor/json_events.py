"""JSON events from bytes to the matcher's columns (``decode_events(...).event_batch()``), flat and nested: the
compiled scanner against the per-record path, side by side in one run.

The flat events carry 32 attributes (numbers, strings, booleans); the nested
ones the same 32 scalars arranged as a producer would: records in records, an
array of strings and an array of records (wire/paths.py's rule flattens them
to 32 pairs again).  Ways, per shape:

* ``kernel``: the decoder as it runs (``wire.json_kernel``'s scanner);
* ``orjson``: the per-record path every JSON record took before the scanner,
  which records the scanner cannot prove still take (orjson, then a Python
  flatten; the scanner switched off for the run);
* ``stdlib``: the same with Python's ``json`` (what that path falls back to
  for a text orjson refuses or a possible duplicate key);
* ``native``: the flat events as fastpubsub's own Avro (the Avro kernel), for scale.

Events/s, best of ``--repeat``; state the load average (printed) with any figure.

    python -m benchmarks.processor.json_events                  # 20,000 events per batch, each way
    python -m benchmarks.processor.json_events --events 5000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import numpy as np
import orjson

from fastpubsub.wire import codecs, event_decoder
from fastpubsub.wire.codecs import events as event_codecs
from fastpubsub.wire.avro_binary import empty_pairs
from fastpubsub.wire.event_decoder import decode_events


def flat_event(rng: random.Random, i: int) -> dict:
    e: dict = {"id": i}
    for k in range(12):
        e[f"n{k}"] = rng.randint(0, 1000)
    for k in range(8):
        e[f"x{k}"] = rng.random() * 100
    for k in range(8):
        e[f"s{k}"] = rng.choice(["red", "green", "blue", "odeon", "rex", "paris", "lyon"])
    for k in range(3):
        e[f"b{k}"] = rng.random() < 0.5
    return e


def nested_event(rng: random.Random, i: int) -> dict:
    """32 scalars, as records, maps and arrays."""
    return {
        "id": i,
        "customer": {"id": rng.randint(0, 10**6), "tier": rng.choice(["gold", "silver"]), "vip": rng.random() < 0.1,
                     "address": {"country": rng.choice(["FR", "DE", "IT"]), "city": rng.choice(["paris", "lyon"]),
                                 "zip": rng.randint(10000, 99999)}},
        "order": {"total": rng.random() * 500, "currency": "EUR", "paid": rng.random() < 0.5,
                  "lines": rng.randint(1, 3), "discount": rng.random() * 10},
        "tags": rng.sample(["new", "promo", "gift", "bulk", "fast"], 3),
        "items": [{"sku": f"S{rng.randint(0, 999)}", "qty": rng.randint(1, 5), "price": rng.random() * 100}
                  for _ in range(4)],
        "device": {"os": rng.choice(["ios", "android"]), "version": rng.randint(1, 20)},
        "ts": rng.randint(1_700_000_000_000, 1_800_000_000_000),
    }


class _NoOrjson:
    """Stands in for orjson in ``wire.codecs.events``: every text goes to the standard library's strict path."""

    JSONDecodeError = orjson.JSONDecodeError

    @staticmethod
    def loads(value):
        raise orjson.JSONDecodeError("benchmark: standard library only", "", 0)


def _no_kernel(buf, starts, ends, todo):
    """Stands in for ``wire.json_kernel.decode_json``: it proves no record, so every one takes the per-record path."""
    return np.zeros(len(starts), bool), empty_pairs(0), []


def rate(values: list[bytes], repeat: int, way: str) -> float:
    saved = event_codecs.orjson, event_decoder.decode_json
    event_codecs.orjson = _NoOrjson if way == "stdlib" else orjson
    if way in ("orjson", "stdlib"):
        event_decoder.decode_json = _no_kernel
    try:
        decode_events(values[:100]).event_batch()  # compiled outside the timing
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            batch = decode_events(values).event_batch()
            best = min(best, time.perf_counter() - t)
        assert len(batch) == len(values)
    finally:
        event_codecs.orjson, event_decoder.decode_json = saved
    return len(values) / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(1)
    flat = [flat_event(rng, i) for i in range(args.events)]
    shapes = {"flat": [json.dumps(e).encode() for e in flat],
              "nested": [json.dumps(nested_event(rng, i)).encode() for i in range(args.events)]}
    runs = [(shape, way, values) for shape, values in shapes.items() for way in ("kernel", "orjson", "stdlib")]
    runs.append(("flat", "native", [codecs.encode_event(e) for e in flat]))
    rows = []
    for shape, way, values in runs:
        r = rate(values, args.repeat, way)
        rows.append({"shape": shape, "way": way, "events_per_s": round(r),
                     "bytes_per_event": round(sum(map(len, values)) / len(values))})
        print(f"{shape:7} {way:7} {r:12,.0f} events/s  ({rows[-1]['bytes_per_event']} bytes/event)", flush=True)
    kernel = {row["shape"]: row["events_per_s"] for row in rows if row["way"] == "kernel"}
    per_record = {row["shape"]: row["events_per_s"] for row in rows if row["way"] == "orjson"}
    native = next(row["events_per_s"] for row in rows if row["way"] == "native")
    ratios = {**{f"{shape}_kernel_over_per_record": round(kernel[shape] / per_record[shape], 1) for shape in kernel},
              **{f"{shape}_kernel_over_native": round(kernel[shape] / native, 2) for shape in kernel}}
    print(json.dumps({"load_average": os.getloadavg(), "ratios": ratios, "rows": rows}))


if __name__ == "__main__":
    main()
