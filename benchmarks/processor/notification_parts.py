"""The ``event`` part of Avro notifications: the per-record path against the batch kernel, per event.

What the encode stage pays once per matched event to write the event's attribute map (``services.events.encode``),
for benchmarks.pipeline.e2e's producer records (W0's 32 attributes beside nested fields: a record in a record, an enum, a
timestamp, an array, a map) as a registered Avro record and as nested JSON:

* ``per-record``: ``notification_attributes``, decode in Python then fastavro's map writer;
* ``kernel``: ``wire.attribute_map.attribute_maps`` over batches of ``--batch`` events (what ``Encode`` calls).

Prints one JSON line per format and path (µs per event, the best of ``--repeat``), then the speed-ups; checks that
the bytes are the same.

    python -m benchmarks.processor.notification_parts
    python -m benchmarks.processor.notification_parts --events 20000 --batch 1000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.pipeline.e2e import PRODUCER_SCHEMA, _encoded_events
from fastpubsub.services.events.encode import notification_attributes
from fastpubsub.wire.attribute_map import attribute_maps
from fastpubsub.wire.registered import RegisteredDecoders, RegisteredSchema

SCHEMA_ID = 7


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    registered = RegisteredDecoders(lambda sid: RegisteredSchema("AVRO", json.dumps(PRODUCER_SCHEMA)),
                                    native_event_id=2)
    speedups = {}
    for fmt in ("registered-avro", "nested-json"):
        values = _encoded_events(args.events, 1, fmt, SCHEMA_ID)
        batches = [values[i:i + args.batch] for i in range(0, len(values), args.batch)]
        want = [notification_attributes(v, "avro", registered) for v in values]
        got = [p for b in batches for p in attribute_maps(b, registered)]  # compiles, looks the schema up
        assert got == want, "the kernel's bytes differ from the per-record path's"
        times = {}
        for path, run in (("per-record", lambda: [notification_attributes(v, "avro", registered) for v in values]),
                          ("kernel", lambda: [attribute_maps(b, registered) for b in batches])):
            best = float("inf")
            for _ in range(args.repeat):
                t = time.perf_counter()
                run()
                best = min(best, time.perf_counter() - t)
            times[path] = best / len(values) * 1e6
            print(json.dumps({"format": fmt, "path": path, "events": len(values), "batch": args.batch,
                              "us_per_event": round(times[path], 2)}))
        speedups[fmt] = round(times["per-record"] / times["kernel"], 1)
    print(json.dumps({"per-record/kernel": speedups}))


if __name__ == "__main__":
    main()
