"""JSON events from bytes to the matcher's columns (``decode_events(...).event_batch()``): flat and nested, orjson
against the standard library.

The flat events carry 32 attributes (numbers, strings, booleans); the nested
ones the same 32 scalars arranged as a producer would: records in records, an
array of strings and an array of records (wire/paths.py's rule flattens them
to 32 pairs again).  ``stdlib`` parses with Python's ``json`` (what the decoder
falls back to for a text orjson refuses or a possible duplicate key), ``orjson``
is the decoder as it runs.  Events/s, best of ``--repeat``; state the load
average (printed) with any figure.

    python -m benchmarks.json_events                  # 20,000 events per batch, each way
    python -m benchmarks.json_events --events 5000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import orjson

from fastpubsub.wire import codecs
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
    """Stands in for orjson in ``wire.codecs``: every text goes to the standard library's strict path."""

    JSONDecodeError = orjson.JSONDecodeError

    @staticmethod
    def loads(value):
        raise orjson.JSONDecodeError("benchmark: standard library only", "", 0)


def rate(values: list[bytes], repeat: int, stdlib: bool) -> float:
    saved = codecs.orjson
    codecs.orjson = _NoOrjson if stdlib else orjson
    try:
        decode_events(values[:100]).event_batch()  # compiled outside the timing
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            batch = decode_events(values).event_batch()
            best = min(best, time.perf_counter() - t)
        assert len(batch) == len(values)
    finally:
        codecs.orjson = saved
    return len(values) / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(1)
    shapes = {"flat": [json.dumps(flat_event(rng, i)).encode() for i in range(args.events)],
              "nested": [json.dumps(nested_event(rng, i)).encode() for i in range(args.events)]}
    rows = []
    for shape, values in shapes.items():
        for parser in ("stdlib", "orjson"):
            r = rate(values, args.repeat, parser == "stdlib")
            rows.append({"shape": shape, "parser": parser, "events_per_s": round(r),
                         "bytes_per_event": round(sum(map(len, values)) / len(values))})
            print(f"{shape:7} {parser:7} {r:12,.0f} events/s  ({rows[-1]['bytes_per_event']} bytes/event)", flush=True)
    print(json.dumps({"load_average": os.getloadavg(), "rows": rows}))


if __name__ == "__main__":
    main()
