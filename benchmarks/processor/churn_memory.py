"""Memory under churn with fresh ids, in process (no broker): does what a service holds follow the live subscriptions?

    python -m benchmarks.processor.churn_memory --service events --changes 50000     # the processor's subscription state
    python -m benchmarks.processor.churn_memory --service patterns --changes 20000   # one pattern engine
    python -m benchmarks.processor.churn_memory --service tables --changes 20000     # the aggregate service

Subscriptions are created and deleted as users do: every tick deletes ``--per-tick / 2`` random live ones and adds as
many under ids never used before, so the population holds while the ids seen grow without bound; events (or table
updates) are processed between ticks. Every tenth of the run it prints the live count, the process's RSS, its
allocated blocks (``sys.getallocatedblocks``: Python objects) and what the service's own structures hold (events:
``Matcher.memory_by_structure`` and the handles ever handed out; patterns: the engine's arrays and its rows of atoms,
captures and aggregates; tables: the groups and row filters). Faster than ``benchmarks.pipeline.soak`` (no Kafka, no rate
limit), so a structure that grows with the ids ever seen shows in a minute.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any, Callable

import numpy as np

from fastpubsub.engine.columnar import take_events

from benchmarks.harness.memory import status_kb


def rss_mib() -> float:
    return status_kb("VmRSS") / 1024


def events_service(n: int, rng: random.Random) -> tuple[Callable, Callable, Callable, Callable]:
    """(add fresh ids, delete ids, process a batch, describe): the processor's SubscriptionState, sparse workload."""
    from fastpubsub.services.events.subscriptions import SubscriptionState
    from fastpubsub.wire.codecs import Subscription, encode_subscription
    from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions

    spec = SPARSE_PRESETS["opindex"]
    values = [encode_subscription(Subscription(f"user{sid % 97}", p), "json")
              for sid, p in generate_sparse_subscriptions(spec, n, seed=1).to_lists()]
    events = generate_sparse_events(spec, 2000, seed=3)
    batches = [take_events(events, np.arange(i * 200, (i + 1) * 200)) for i in range(10)]
    state = SubscriptionState("dynamic")

    def add(ids: list[int]) -> None:
        state.apply_records([(str(i).encode(), values[rng.randrange(n)]) for i in ids])

    def delete(ids: list[int]) -> None:
        state.apply_records([(str(i).encode(), None) for i in ids])

    def process(tick: int) -> None:
        state.matcher.match_encoded(batches[tick % len(batches)])

    def describe() -> dict[str, Any]:
        m = state.matcher
        return {"live": len(state), "engine_bytes": m.memory_bytes(), "handles_ever": m.handles.high,
                "logged_rows": state._logged, "structures": m.memory_by_structure()}
    return add, delete, process, describe


def patterns_service(n: int, rng: random.Random) -> tuple[Callable, Callable, Callable, Callable]:
    """One PatternEngine (a partition's), patterns over three symbols, a batch of 200 events a tick."""
    from fastpubsub.patterns import parse
    from fastpubsub.patterns.engine import PatternEngine

    templates = ['seq a: name = "{s}" and price > {c} next b: name = "{s}" where b.price < a.price within 50ms',
                 "seq a: price > {c} next b: name = a.name where b.price > a.price within 50ms",
                 "seq a: volume > 5 fold r: name = a.name agg n = count() until dur >= 5ms within 50ms"]
    engine = PatternEngine("dynamic")
    clock = [0]

    def pattern() -> Any:
        return parse(rng.choice(templates).format(s=rng.choice("ABC"), c=rng.randrange(5, 15)))

    def add(ids: list[int]) -> None:
        engine.subscribe_many([(i, pattern(), clock[0]) for i in ids])

    def delete(ids: list[int]) -> None:
        for i in ids:
            engine.unsubscribe(i)

    def process(tick: int) -> None:
        batch = [(clock[0] + i, clock[0] + i, {"name": rng.choice("ABC"), "price": float(rng.randrange(5, 15)),
                                              "volume": rng.choice([0, 10])}) for i in range(200)]
        clock[0] += 200
        engine.process_events(batch)

    def describe() -> dict[str, Any]:
        return {"live": len(engine.sid_slot), "engine_bytes": engine.memory_bytes(),
                "matcher_bytes": engine.matcher.memory_bytes(),
                "rows": engine.rows()}
    return add, delete, process, describe


def tables_service(n: int, rng: random.Random) -> tuple[Callable, Callable, Callable, Callable]:
    """The AggregateService over one table of 200 rows, aggregate subscriptions with filters of 500 values."""
    from fastpubsub.aggregates import AggregateSpec
    from fastpubsub.aggregates.service import AggregateService, TableSchema

    svc = AggregateService([TableSchema("stock", "k")])
    updates = [0]

    def row() -> dict[str, Any]:
        return {"x": float(rng.randrange(100)), "y": float(rng.randrange(50)), "sector": f"s{rng.randrange(500)}"}
    for k in range(200):
        svc.apply("stock", k, row(), f"load{k}")

    def add(ids: list[int]) -> None:
        for i in ids:
            low = rng.randrange(90)
            svc.subscribe(i, AggregateSpec("stock", rng.choice(["min", "sum", "distinct"]), "y", "x", low, low + 10,
                                           (("sector", "=", f"s{rng.randrange(500)}"),)))

    def delete(ids: list[int]) -> None:
        for i in ids:
            svc.unsubscribe(i)

    def process(tick: int) -> None:
        for _ in range(20):
            updates[0] += 1
            svc.apply("stock", rng.randrange(200), row(), f"u{updates[0]}")

    def describe() -> dict[str, Any]:
        held = svc.stats()
        return {"live": held["subscriptions"], "groups": held["groups"], "row_filters": held["row_filters"]}
    return add, delete, process, describe


SERVICES = {"events": events_service, "patterns": patterns_service, "tables": tables_service}


def churn_memory(service: str, subscriptions: int, changes: int, per_tick: int = 50, seed: int = 5,
                 echo: bool = True) -> list[dict[str, Any]]:
    """Run the churn; the samples (one per tenth of the run, and the start)."""
    rng = random.Random(seed)
    add, delete, process, describe = SERVICES[service](subscriptions, rng)
    live = list(range(subscriptions))
    add(live)
    process(0)
    fresh, ticks = subscriptions, max(1, changes // per_tick)
    samples: list[dict[str, Any]] = []
    began = time.perf_counter()
    for tick in range(ticks + 1):
        if tick % max(1, ticks // 10) == 0 or tick == ticks:
            sample = {"changes": tick * per_tick, "rss_mib": round(rss_mib(), 1), "blocks": sys.getallocatedblocks(),
                      "seconds": round(time.perf_counter() - began, 1), **describe()}
            samples.append(sample)
            if echo:
                print(sample, flush=True)
        if tick == ticks:
            break
        gone = [live.pop(rng.randrange(len(live))) for _ in range(per_tick // 2)]
        delete(gone)
        new = list(range(fresh, fresh + per_tick - per_tick // 2))
        fresh += len(new)
        add(new)
        live += new
        process(tick)
    return samples


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--service", default="events", choices=sorted(SERVICES))
    ap.add_argument("--subscriptions", type=int, default=None, help="live population (events 20,000, else 2,000)")
    ap.add_argument("--changes", type=int, default=50_000)
    ap.add_argument("--per-tick", type=int, default=50, help="changes between two batches (half deletes)")
    args = ap.parse_args(argv)
    n = args.subscriptions or (20_000 if args.service == "events" else 2_000)
    if n < args.per_tick or args.changes <= 0 or args.per_tick < 2:
        ap.error("--subscriptions must hold a tick's deletes, --changes and --per-tick be positive")
    churn_memory(args.service, n, args.changes, args.per_tick)


if __name__ == "__main__":
    main()
