"""Each service's start and first batches without Kafka, in a process of its own: the numba kernels they compile.

    python tests/support/first_batches.py [--subscriptions N]

prints one JSON object, service -> names of the kernels numba compiled (not
loaded from its cache) while it ran.  tests/project/test_packaging.py runs it after
`pubsub warmup` filled an empty cache of a fresh installation: every list
must be empty.

The paths are the services' own, fed with records made here as the topics
would hold them: the event processor's rebuild (chunks of ``REBUILD_CHUNK``
records decoded, then bulk-loaded), its first event batches through the
decode, match and encode stages (Avro and JSON events, some kept as valid
events), changes after the start, its snapshot written and loaded; the
pattern service's engine on a partition's batches and its restore from the
changelog records; the table service's rows, aggregate subscriptions,
updates and restore.  The subscriptions are W0's, as `pubsub demo` writes them,
and enough of them that the bulk load takes the paths only a large one takes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import numpy as np
from confluent_kafka import TIMESTAMP_CREATE_TIME, Message

from fastpubsub.runtime.compiles import CompileWatch


def message(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, ms: int,
            headers: list | None = None) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, key=key, value=value, headers=headers,
                   timestamp=(TIMESTAMP_CREATE_TIME, ms))


def event_processor(n_subscriptions: int) -> None:
    from fastpubsub.language import parse
    from fastpubsub.runtime.counters import PipelineCounters
    from fastpubsub.services.events.decode import Decode
    from fastpubsub.services.events.encode import Encode
    from fastpubsub.services.events.match import Match
    from fastpubsub.services.events.processor import REBUILD_CHUNK
    from fastpubsub.services.events.state import ProcessorState
    from fastpubsub.wire import codecs
    from fastpubsub.wire.subscription_decoder import decode_subscriptions
    from fastpubsub.workloads import PRESETS, generate_events, generate_subscriptions

    spec = PRESETS["W0"]
    records = [message("pubsub.subscriptions", i % 4, i // 4, str(sid).encode(),
                       codecs.encode_subscription(codecs.Subscription(f"user{sid % 1000}", predicates), "avro"), 1_000)
               for i, (sid, predicates) in enumerate(generate_subscriptions(spec, n_subscriptions, 1).to_lists())]
    for j, text in enumerate(("a0 = 7", "a1 <= 3 and a2 >= 30", "a3 != 1 and a4 < 5", 'movie prefix "gr"')):
        records.append(message("pubsub.subscriptions", 0, n_subscriptions + j, str(n_subscriptions + j).encode(),
                               codecs.encode_subscription(codecs.Subscription("showcase", parse(text)), "json"), 1_000))
    held = ProcessorState("dynamic", snapshot_dir=tempfile.mkdtemp(prefix="first-batches-"))
    counters = PipelineCounters()
    decode, match, encode = Decode(counters), Match(held, counters), Encode("avro", "auto", counters)

    def apply(chunk: list[Message], decoded: bool) -> None:
        keys, values = [m.key() for m in chunk], [m.value() for m in chunk]
        applied = held.apply_columns(chunk, keys, values, [], decode_subscriptions(keys, values) if decoded else None)
        list(encode(match.stored(applied)))

    for start in range(0, len(records), REBUILD_CHUNK):  # the rebuild
        apply(records[start:start + REBUILD_CHUNK], decoded=True)
    events = generate_events(spec, 10_000, 2).to_dicts()
    for b in range(0, len(events), 1_000):  # the first batches: Avro, a JSON one, some valid events kept
        fmt = "json" if b == 3_000 else "avro"
        batch = [message("pubsub.events", i % 4, i, f"e{i}".encode(), codecs.encode_event(events[i], fmt), 2_000 + i,
                         [("valid_until", b"999999999")] if i % 97 == 0 else None) for i in range(b, b + 1_000)]
        list(encode(match.events(decode(batch))))
        if b == 5_000:  # changes while running: new subscriptions (matched against the kept events), removals
            apply([message("pubsub.subscriptions", 1, n_subscriptions + 10 + i, str(10**9 + i).encode(), r.value(), 3_000)
                   for i, r in enumerate(records[:200])], decoded=False)
            apply([message("pubsub.subscriptions", 2, n_subscriptions + 300 + i, r.key(), None, 3_000)
                   for i, r in enumerate(records[200:400])], decoded=False)
    held.write_snapshot(4)
    restarted = ProcessorState("dynamic", snapshot_dir=held.snapshot_dir)
    restarted.prefetch_snapshot()
    restarted.load_snapshot(4)
    assert len(restarted.subscriptions) == len(held.subscriptions)


def pattern_service() -> None:
    from fastpubsub.patterns import parse
    from fastpubsub.patterns.contents import BoundContents, split
    from fastpubsub.patterns.engine import PatternEngine, limits_from_bytes
    from fastpubsub.state import KeyedStore, from_records, to_records
    from fastpubsub.wire import codecs
    from fastpubsub.wire.event_decoder import decode_events

    from tests.patterns.test_pattern_engine import TEMPLATES  # S1-S5 and the index variants, as the engine's tests draw them

    rng = random.Random(3)
    names = ("IBM", "MSFT", "ORCL")
    subscriptions = [(sid, parse(template.format(s1=rng.choice(names), s2=rng.choice(names), c1=rng.randint(0, 12),
                                                 c2=rng.randint(0, 4), f=rng.choice(("1", "1.05")), v=5, d=3, w=30)),
                      0) for sid, template in enumerate(TEMPLATES * 3)]

    def engine():
        e = PatternEngine("dynamic", track_changes=True)
        e.limits = limits_from_bytes(1 << 30, 10_000, e.instance_bytes())
        e.subscribe_many(subscriptions)
        return e

    part, contents, changelog, ts = engine(), BoundContents(), [], 0
    prices = {n: 10.0 for n in names}
    for b in range(6):
        values, ids, times = [], [], []
        for i in range(300):
            ts += rng.choice((0, 1, 1, 2, 5))
            name = rng.choice(names)
            prices[name] = max(0.0, prices[name] + rng.choice((-1.5, -0.5, 0, 0.5, 2)))
            event = {"name": name, "price": prices[name], "volume": rng.choice((0, 5, 100, 200))}
            values.append(codecs.encode_event(event, "json" if b % 3 == 2 else "avro"))
            ids.append(b * 300 + i)
            times.append(ts)
        decoded = decode_events(values)
        contents.offer(ids, times, values)
        part.process(decoded.event_batch(), np.array(ids, np.int64), np.array(times, np.int64))
        contents.settle(part.bound_event_ids(), ids[-1])
        changelog += to_records(part.changes()) + to_records(contents.changes())
        if b == 3:
            part.unsubscribe(4)
            part.subscribe_many([(4, subscriptions[4][1], ts)])
    store = KeyedStore()
    store.apply(from_records(changelog), 1 << 40)
    engine_state, contents_state = split(store)
    restored = engine()
    restored.restore(engine_state)
    BoundContents().restore(contents_state)


def table_service() -> None:
    from fastpubsub.aggregates import AggregateService, TableSchema, parse_subscription
    from fastpubsub.aggregates.changelog import row_record
    from fastpubsub.state import from_records
    from fastpubsub.wire import codecs

    from tests.pipeline.test_tables import subscriptions, workload

    stock = TableSchema("stock", "symbol", {"risk": "number", "per": "number", "sector": "string"})
    rows, updates = workload(5, 300, 600)
    subs = [(sid, parse_subscription(text)) for sid, text in subscriptions(6, 60)]
    for notify in (True, False):  # S-UN and S-CN
        svc, changelog = AggregateService([stock], notify=notify), []
        for i, (symbol, row) in enumerate(rows + updates):
            if i == len(rows):
                svc.subscribe_many(subs)
            value = None if row is None else codecs.decode_event(codecs.encode_event(row, "json"))
            svc.apply("stock", symbol, value, f"pubsub.tables.stock:0:{i}", source=(0, i))
            changelog.append(row_record("stock", symbol, value, 0, i))
        restored = AggregateService([stock], notify=notify)
        restored.restore(from_records(changelog), {0: len(changelog)})
        restored.subscribe_many(subs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--subscriptions", type=int, default=150_000)
    args = ap.parse_args()
    compiled: dict[str, list[str]] = {}
    for name, run in (("pubsub run", lambda: event_processor(args.subscriptions)),
                      ("pubsub patterns", pattern_service), ("pubsub tables", table_service)):
        seen = compiled[name] = []
        with CompileWatch(lambda kernel, count: seen.append(kernel)):
            run()
    json.dump(compiled, sys.stdout)


if __name__ == "__main__":
    # the tests' workloads are imported from the checkout (``tests.…``); fastpubsub stays the installed one (src/ is
    # not on the path)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
