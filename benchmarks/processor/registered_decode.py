"""Decoding events in a producer's registered schema against fastpubsub's own format, side by side in one run.

The decode stage alone (``wire.event_decoder.decode_events``, what the processor calls per batch), no broker, no
matching: the same events, 36 leaves each, as

* ``native``: fastpubsub's Avro attribute map (the batch kernel's path);
* ``registered-avro``: a producer's nested Avro record (3 levels, an array, a map, an enum, a timestamp), framed
  with a registered schema id and read with the schema under it (``wire.registered``; confluent-kafka's in-process
  ``mock://`` registry, looked up once), every path decoded (its compiled program, ``wire.avro_program``);
* ``registered-avro-referenced``: the same records, decoded for the ``--referenced`` paths only (what the
  processor does: the attributes its subscriptions name), the other leaves skipped unread;
* ``registered-avro-per-record``: the same records through the per-record reader (fastavro, then a flatten),
  what records the compiled program cannot read take;
* ``registered-json``: the same record as JSON Schema.

Prints one JSON line per format (events/s, the best of ``--repeat``) and the ratios to native.

    python -m benchmarks.processor.registered_decode
    python -m benchmarks.processor.registered_decode --events 20000 --batch 1000 --repeat 5
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import time

import fastavro

from fastpubsub.kafka.schema_registry import RegistryConfig, SchemaSource
from fastpubsub.wire import codecs
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.paths import flatten
from fastpubsub.wire.registered import RegisteredDecoders

#: The paths a typical subscription set names: a few leaves, one per nesting level, the array and a map entry.
REFERENCED = ("f0", "f4", "f11", "device.site.country", "status", "at", "tags", "labels.k")

LEAF_FIELDS = [{"name": f"f{i}", "type": "long" if i % 3 == 0 else "double" if i % 3 == 1 else "string"}
               for i in range(24)]
#: The nested part of a producer's record (a record in a record, an enum, a timestamp, an array, a map): 8 leaves,
#: also benchmarks.pipeline.e2e's registered events.
NESTED_FIELDS = [
        {"name": "device", "type": {"type": "record", "name": "Device", "fields": [
            {"name": "id", "type": "string"}, {"name": "model", "type": "string"},
            {"name": "site", "type": {"type": "record", "name": "Site", "fields": [
                {"name": "country", "type": "string"}, {"name": "zone", "type": "int"}]}}]}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["OK", "WARN", "FAIL"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "labels", "type": {"type": "map", "values": "string"}},
]
SCHEMA = {"type": "record", "name": "Reading", "namespace": "bench", "fields": [*LEAF_FIELDS, *NESTED_FIELDS]}


def nested_values(i: int) -> dict:
    """The values of :data:`NESTED_FIELDS` for record ``i``."""
    return {"device": {"id": f"d{i % 1000}", "model": "m7", "site": {"country": "FR", "zone": i % 8}},
            "status": "OK", "at": 1_700_000_000_000 + i, "tags": [f"t{i % 5}", "x"], "labels": {"k": "v", "j": "w"}}


def record(i: int) -> dict:
    leaves = {f["name"]: (i + j if f["type"] == "long" else (i + j) * 0.5 if f["type"] == "double" else f"v{(i + j) % 97}")
              for j, f in enumerate(LEAF_FIELDS)}
    return {**leaves, **nested_values(i)}


def values(n: int) -> tuple[dict[str, list[bytes]], RegisteredDecoders]:
    client = RegistryConfig("mock://bench").client()
    from confluent_kafka.schema_registry import Schema

    avro_id = client.register_schema("bench-avro", Schema(json.dumps(SCHEMA), "AVRO"))
    json_id = client.register_schema("bench-json", Schema(json.dumps({"type": "object"}), "JSON"))
    native_id = client.register_schema("fastpubsub.Event", Schema((codecs.SCHEMA_DIR / "event.avsc").read_text(), "AVRO"))
    parsed = fastavro.parse_schema(SCHEMA)
    out: dict[str, list[bytes]] = {"native": [], "registered-avro": [], "registered-json": []}
    for i in range(n):
        r = record(i)
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {**r, "at": r["at"]})
        out["registered-avro"].append(struct.pack(">bI", 0, avro_id) + buf.getvalue())
        out["registered-json"].append(struct.pack(">bI", 0, json_id) + json.dumps(r).encode())
        flat = dict(flatten({k: v for k, v in r.items() if k not in ("tags",)}))  # the native map holds no repeats
        flat["tags"] = r["tags"][0]
        out["native"].append(struct.pack(">bI", 0, native_id) + codecs.encode_event(flat)[5:])
    return out, RegisteredDecoders(SchemaSource(client, "mock://bench"), native_id)


def _per_record(registered: RegisteredDecoders) -> RegisteredDecoders:
    """The same decoders without compiled programs: every registered record through the per-record reader."""
    class PerRecord(RegisteredDecoders):
        def program(self, sid, wanted=None):
            return None

    return PerRecord(registered.lookup, registered.native_event_id)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--referenced", default=",".join(REFERENCED),
                    help="comma-separated paths the subscriptions name (registered-avro-referenced)")
    args = ap.parse_args()
    data, registered = values(args.events)
    wanted = frozenset(args.referenced.split(","))
    runs = [("native", data["native"], registered, None),
            ("registered-avro", data["registered-avro"], registered, None),
            ("registered-avro-referenced", data["registered-avro"], registered, wanted),
            ("registered-avro-per-record", data["registered-avro"], _per_record(registered), None),
            ("registered-json", data["registered-json"], registered, None)]
    rates = {}
    for name, vals, decoders, names in runs:
        batches = [vals[i:i + args.batch] for i in range(0, len(vals), args.batch)]
        decode_events(batches[0], decoders, names).event_batch()  # compile, look the schemas up
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            for b in batches:
                decoded = decode_events(b, decoders, names)
                assert not decoded.errors, next(iter(decoded.errors.values()))
                decoded.event_batch()
            best = min(best, time.perf_counter() - t)
        rates[name] = args.events / best
        print(json.dumps({"format": name, "events": args.events, "events_per_s": round(rates[name]),
                          "attributes": len(decoded.attributes) // max(len(decoded), 1)}))
    print(json.dumps({f"{k}/native": round(v / rates["native"], 3) for k, v in rates.items() if k != "native"}))


if __name__ == "__main__":
    main()
