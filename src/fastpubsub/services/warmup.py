"""Compiling the numba kernels ahead of the first event: ``pubsub warmup``, and every processor start.

numba compiles a kernel on its first call for each signature and keeps the
machine code in its on-disk cache (``@njit(cache=True)``, in the directory
``fastpubsub.numba_cache_dir()`` chose).  Without that cache the first batch
of the first run after installation would spend a minute compiling while
``processed`` stays at 0.  So:

* ``pubsub warmup`` (run by ``make install`` and the Docker image) compiles
  every step below into the cache ahead, with a progress bar, in two
  processes where there are two cores (numba compiles on one);
* the processor runs the steps a run needs (:data:`PROCESSOR_STEPS`) before
  its rebuild, on a thread while its clients connect to the brokers
  (``runtime.compiles.WarmUp``): from a warm cache that takes well under a second, from a cold
  one every kernel compiled is logged (``compiling numba kernels: step 3/5
  (matching), 12 compiled so far``) instead of a silent first batch.

Each step runs a small real workload through the code the services run
(W0 subscriptions encoded as on the topic, events encoded likewise), so the
signatures compiled are the ones a run uses, not guesses.  Code paths that
only a large state takes (a maintenance round that creates a table, the
arena's compaction) get a step of their own, and so do the pattern and table
services' engines.  numba's compile events (:class:`CompileWatch`) count the
kernels compiled; cache hits fire none.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from numba.core import config as numba_config

from fastpubsub.engine import ALGORITHMS, Matcher, ValidEventStore
from fastpubsub.workloads import PRESETS, generate_events, generate_subscriptions
from fastpubsub.wire import codecs
from fastpubsub.wire.attribute_map import attribute_maps
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.subscription_decoder import decode_subscriptions

import fastpubsub

from fastpubsub.kernel_cache import package_subpath
from fastpubsub.runtime import CompileWatch

from .events import snapshot
from .events.subscriptions import SubscriptionState

#: The steps a processor start runs; ``pubsub warmup`` runs :data:`STEPS`, these and what a run may need later
#: (the pattern service, ``pubsub patterns``, and the table service, ``pubsub tables``, included).
PROCESSOR_STEPS = ("subscription decoder", "bulk load", "event decoder", "matching", "removal")
STEPS = (*PROCESSOR_STEPS, "valid-event store", "statistics adoption", "snapshot", "maintenance", "pattern service",
         "table service")


@dataclass
class _Workload:
    """What the steps share: a small W0 sample, encoded as on the topics, and the state built from it."""

    algorithm: str
    runs: int | None
    records: list[tuple[bytes, bytes]] = field(default_factory=list)
    events: list[bytes] = field(default_factory=list)
    state: SubscriptionState | None = None
    decoded: object = None

    def __post_init__(self) -> None:
        spec = PRESETS["W0"]
        subs = generate_subscriptions(spec, 3_000, seed=7).to_lists()
        self.records = [(str(sid).encode(), codecs.encode_subscription(codecs.Subscription(f"user{sid % 10}", preds)))
                        for sid, preds in subs]
        self.records.append((b"3000", codecs.encode_subscription(codecs.Subscription("json", [("a0", "=", 1)]), "json")))
        self.records.append((b"3001", codecs.encode_subscription(
            codecs.Subscription("strings", [("a0", "=", "x"), ("a1", "!=", True), ("a2", "<", 2.5)], valid_until=2**40))))
        # no equality: the presence-key and catch-all kernels run for these (as for the demo's hand-written ones)
        self.records.append((b"3002", codecs.encode_subscription(codecs.Subscription("ranges", [("a1", "<=", 3), ("a2", ">=", 30)]))))
        self.records.append((b"3003", codecs.encode_subscription(codecs.Subscription("ranges", [("a3", "!=", 1), ("a4", "<", 5)]))))
        # one prefix predicate alone: the prefix groups' kernels (filing, walk and fill, and removal: 3006 goes)
        for key, p in ((b"3004", "gr"), (b"3005", "g"), (b"3006", "groundhog")):
            self.records.append((key, codecs.encode_subscription(codecs.Subscription("prefix", [("movie", "prefix", p)]))))
        self.events = [codecs.encode_event(e) for e in generate_events(spec, 500, seed=8).to_dicts()]
        self.events.append(b'{"a0": 1, "a1": "x", "a2": true}')
        self.events.append(b'{"a0": 2, "movie": "groundhog day"}')
        # nested, an array, a number read by strtod: the JSON kernel (wire.json_kernel)
        self.events.append(b'{"a0": 3, "c": {"tags": ["x", "y"], "items": [{"p": 0.30000000000000004}]}, "n": null}')


def _subscription_decoder(w: _Workload) -> None:
    decode_subscriptions([k for k, _ in w.records[:50]] + [None, b"1"], [v for _, v in w.records[:50]] + [b"", None])


def _bulk_load(w: _Workload) -> None:
    w.state = SubscriptionState(w.algorithm, w.runs)
    w.state.apply_records(w.records[:2_000], [0] * 2_000)
    w.state.apply_records(w.records[2_000:], [0] * (len(w.records) - 2_000))


def _event_decoder(w: _Workload) -> None:
    w.decoded = decode_events(w.events)
    # a batch of Avro values only keeps its read-only input buffer (JSON or other values append to a copy):
    # the kernels that read it are compiled for that type too
    decode_events([v for v in w.events if v[:1] == b"\x00"]).event_batch()
    attribute_maps([v for v in w.events if v[:1] == b"{"])  # the notifications' event parts of JSON events
    _registered_avro()


#: A producer's registered Avro schema, small but with every kind of node the compiled program walks.
_REGISTERED = {"type": "record", "name": "Warm", "fields": [
    {"name": "n", "type": "long"}, {"name": "x", "type": ["null", "double"]}, {"name": "s", "type": "string"},
    {"name": "on", "type": "boolean"}, {"name": "f", "type": "float"},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "r", "type": {"type": "record", "name": "R", "fields": [{"name": "c", "type": "string"}]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "m", "type": {"type": "map", "values": "long"}}]}


def _registered_avro() -> None:
    """The kernel of registered Avro records (``wire.avro_program``), all paths and some."""
    import io
    import json
    import struct

    import fastavro

    from fastpubsub.wire.registered import RegisteredDecoders, RegisteredSchema

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(_REGISTERED), {
        "n": 1, "x": 0.5, "s": "a", "on": True, "f": 1.5, "e": "B", "at": 0, "r": {"c": "FR"}, "tags": ["t"],
        "m": {"k": 1}})
    value = struct.pack(">bI", 0, 100) + out.getvalue()
    decoders = RegisteredDecoders(lambda sid: RegisteredSchema("AVRO", json.dumps(_REGISTERED)), native_event_id=2)
    decode_events([value, value], decoders).event_batch()
    decode_events([value], decoders, frozenset({"r.c", "m.k"})).event_batch()
    attribute_maps([value, b'{"a": [1, "x"]}'], decoders)  # their notifications' event parts


def _matching(w: _Workload) -> None:
    w.state.expire(0)
    matches = w.state.matcher.match_encoded(w.decoded.event_batch())
    w.state.valid_mask(matches.ids, np.zeros(len(matches.ids), np.int64))


def _removal(w: _Workload) -> None:
    w.state.apply_records([(k, None) for k, _ in w.records[::3]])


def _valid_event_store(w: _Workload) -> None:
    store = ValidEventStore(1_000, 1 << 20)
    batch = w.decoded.event_batch()
    n = len(w.decoded)
    store.add(batch, [f"e{i}" for i in range(n)], np.full(n, 10_000, np.int64), np.zeros(n, np.int64),
              payloads=w.events[:n])
    store.match_bulk(w.state.apply_records(w.records[::3], [1] * len(w.records[::3])).added)


def _statistics(w: _Workload) -> None:
    w.state.matcher.match_encoded(w.decoded.event_batch())
    w.state.matcher.set_statistics(w.state.matcher.statistics)


def _snapshot(w: _Workload) -> None:
    with tempfile.TemporaryDirectory(prefix="pubsub-warmup-") as directory:
        snapshot.write(directory, w.state, ValidEventStore(10, 1 << 20), {0: len(w.records)}, 1)
        snapshot.read(directory, 1, w.algorithm, ValidEventStore(10, 1 << 20), w.runs)


def _maintenance(w: _Workload) -> None:
    """What only a large state reaches: a maintenance round that creates a table and re-files the subscriptions
    it had marked (section 4; a rebuild of tens of thousands of W0 subscriptions does), and the compaction of the
    clusters' arena (``ClusterStore.trim``, past a million entries).  The thresholds are lowered so that the
    sample's lists count as hot and any benefit creates a table."""
    state = SubscriptionState(w.algorithm, w.runs)
    maintenance = state.matcher.maintenance
    if maintenance is not None:
        maintenance.t = dataclasses.replace(maintenance.t, bm_max_factor=0.0, create_factor=1e-6, refresh_changes=500)
    state.apply_records(w.records, [0] * len(w.records))
    store = getattr(state.matcher.index, "store", None)
    if store is not None:
        store.compact(slack=1)
    if w.algorithm in ("static", "dynamic"):
        # the second level inside the runs (engine/structures/sorted_runs.py), which the cost model gives long
        # runs: W0 on 3 values makes runs of a few entries, given one from two entries on
        spec = dataclasses.replace(PRESETS["W0"], domain=(1, 3))
        level2 = Matcher(w.algorithm, runs=2, level2=2)
        level2.add_bulk(generate_subscriptions(spec, 3_000, seed=9))
        level2.match_encoded(generate_events(spec, 200, seed=10))
        level2.remove_bulk(np.arange(0, 3_000, 3, dtype=np.int64))
        for sid in range(1, 400, 3):
            level2.remove(sid)
        level2.match_encoded(generate_events(spec, 200, seed=11))


#: One pattern of each shape the pattern kernel runs (docs/patterns.md): a static one, a correlation through the
#: dynamic index, an iteration with aggregates, an iteration followed by a step that reads its aggregate.
_PATTERNS = (
    'seq a: name = "A" and price > 3 within 20ms',
    "seq a: price > 2 next b: name = a.name where b.price > 1.05 * a.price within 20ms",
    "seq a: volume > 5 fold r: name = a.name while r.price >= r.last.price agg n = count(), lo = min(price) "
    "until dur >= 4ms within 30ms",
    'seq a: name = "B" and volume > 0 fold r: name = "B" agg m = avg(price), s = sum(volume), hi = max(price) '
    'until dur >= 3ms next b: name = "B" where b.price > r.m within 30ms',
    'seq a: volume >= 5 next b: name = a.name where b.price < 9 and b.name >= "B" within 20ms',
)


def _pattern_service(w: _Workload) -> None:
    """What ``pubsub patterns`` runs (``services.patterns``), through the pattern engine's public calls: batches of
    JSON and of Avro events, the changelog's changes, an unsubscription, and a restore from the changelog records."""
    # the other services' engines, imported here: a processor's start (PROCESSOR_STEPS) does not load them
    from fastpubsub.patterns import parse as parse_pattern
    from fastpubsub.patterns.contents import split as split_contents
    from fastpubsub.patterns.engine import PatternEngine
    from fastpubsub.state import KeyedStore, from_records, to_records

    subscriptions = [(sid, parse_pattern(text), 0) for sid, text in enumerate(_PATTERNS)]
    engine = PatternEngine("dynamic", track_changes=True)
    engine.subscribe_many(subscriptions)
    rng, ts = random.Random(1), 0
    for b, fmt in enumerate(("json", "avro", "json", "avro")):
        values, ts_list = [], []
        for _ in range(200):
            ts += rng.choice((0, 1, 2))
            ts_list.append(ts)
            values.append(codecs.encode_event({"name": rng.choice("ABC"), "price": rng.choice((1.0, 5.5, 10.0)),
                                               "volume": rng.choice((0, 5, 100))}, fmt))
        decoded = decode_events(values)
        engine.process(decoded.event_batch(), np.arange(b * 200, b * 200 + 200, dtype=np.int64),
                       np.array(ts_list, np.int64))
        engine.bound_event_ids()
    engine.unsubscribe(1)
    store = KeyedStore()
    store.apply(from_records(to_records(engine.changes())), 1 << 40)
    restored = PatternEngine("dynamic", track_changes=True)
    restored.subscribe_many(subscriptions)
    restored.restore(split_contents(store)[0])


#: Every aggregate function over a range, with and without a row filter, and a join (docs/aggregates.md).
_AGGREGATES = (
    "min(per) over stock where risk between 10 and 60", "max(per) over stock where risk between 0 and 90",
    'min(per) over stock where risk between 20 and 80 and sector = "tech"', "count(*) over stock where risk between 5 and 50",
    "sum(per) over stock where risk between 0 and 100", "avg(per) over stock where risk between 30 and 70",
    "distinct(sector) over stock where risk between 10 and 90",
    'join stock s, orders o on s.symbol = o.symbol where s.risk > 10 and o.amount > 5',
)


def _table_service(w: _Workload) -> None:
    """What ``pubsub tables`` runs (``services.tables``) in both modes: rows, subscriptions registered in bulk,
    updates and deletes, an unsubscription, and a restore from the changelog."""
    from fastpubsub.aggregates import AggregateService, TableSchema, parse_subscription  # (see _pattern_service)
    from fastpubsub.state import from_records, to_records

    tables = [TableSchema("stock", "symbol", {"symbol": "string", "risk": "number", "per": "number", "sector": "string"}),
              TableSchema("orders", "order_id", {"order_id": "number", "symbol": "string", "amount": "number"})]
    specs = [(1000 + i, parse_subscription(text)) for i, text in enumerate(_AGGREGATES)]
    rng = random.Random(2)
    for notify in (True, False):
        svc = AggregateService(tables, notify=notify)
        changes = []
        for i in range(400):
            key = f"S{rng.randint(0, 150)}"
            row = None if i % 11 == 10 else {"symbol": key, "risk": rng.randint(0, 100), "per": rng.random() * 50,
                                              "sector": rng.choice(("tech", "oil"))}
            changes.append(svc.apply("stock", key, row, f"t:0:{i}", source=(0, i)).state)
            if i == 200:
                for n in svc.subscribe_many(specs[:-1]):
                    svc.client_state(n.subscription)
                svc.subscribe(*specs[-1])
            if i % 40 == 0:
                svc.apply("orders", i, {"order_id": i, "symbol": key, "amount": i % 10}, f"o:0:{i}", source=(0, i))
        svc.unsubscribe(specs[0][0])
        restored = AggregateService(tables, notify=notify)
        restored.restore(from_records(r for c in changes for r in to_records(c)), {0: 1 << 40})
        restored.subscribe_many(specs[:-1])


_RUN: dict[str, Callable[[_Workload], None]] = {
    "subscription decoder": _subscription_decoder, "bulk load": _bulk_load, "event decoder": _event_decoder,
    "matching": _matching, "removal": _removal, "valid-event store": _valid_event_store,
    "statistics adoption": _statistics, "snapshot": _snapshot, "maintenance": _maintenance,
    "pattern service": _pattern_service, "table service": _table_service,
}

#: Steps that need neither the workload's state nor its decoded events.
_STANDALONE = ("subscription decoder", "event decoder", "bulk load", "maintenance", "pattern service", "table service")


@dataclass
class Report:
    """What :func:`warm_up` did: kernels compiled (0: all came from the cache) and how long it took."""

    compiled: int
    seconds: float
    steps: int


def warm_up(algorithms: tuple[str, ...] = ("dynamic",), steps: tuple[str, ...] = STEPS, runs: int | None = None,
            on_step: Callable[[int, int, str], None] | None = None,
            on_compile: Callable[[int, int, str, str, int], None] | None = None, processes: int = 1) -> Report:
    """Run ``steps`` for each algorithm; callbacks: ``on_step(done, total, name)`` after each step,
    ``on_compile(step, total, step name, kernel, compiled so far)`` as each kernel starts compiling.

    ``processes=2`` runs the steps of :data:`SECOND_PROCESS` in a child process beside the others: numba
    compiles on one core.  The pattern engine uses the matcher's kernels, so the two processes compile some of
    them both (each writes the same machine code to the cache, atomically); the run still ends sooner."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"unknown algorithm(s) {', '.join(unknown)}; one of {', '.join(ALGORITHMS)}")
    bad = [s for s in steps if s not in _RUN]
    if bad:
        raise ValueError(f"unknown warm-up step(s) {', '.join(bad)}; one of {', '.join(STEPS)}")
    here = tuple(s for s in steps if s not in SECOND_PROCESS)
    there = tuple(s for s in SECOND_PROCESS if s in steps)
    if processes > 1 and here and there:
        return _two_processes(algorithms, here, there, runs, on_step, on_compile)
    return _warm_up(algorithms, steps, runs, on_step, on_compile)


def _warm_up(algorithms: tuple[str, ...], steps: tuple[str, ...], runs: int | None,
             on_step: Callable[[int, int, str], None] | None,
             on_compile: Callable[[int, int, str, str, int], None] | None) -> Report:
    plan = [(a, s) for a in algorithms for s in steps]
    started = time.monotonic()
    current = [0, ""]
    watch = CompileWatch(lambda kernel, count: on_compile and on_compile(current[0], len(plan), current[1], kernel, count))
    with watch:
        workloads: dict[str, _Workload] = {}
        for i, (algorithm, step) in enumerate(plan, 1):
            current[:] = [i, step if len(algorithms) == 1 else f"{step}, {algorithm}"]
            w = workloads.get(algorithm) or workloads.setdefault(algorithm, _Workload(algorithm, runs))
            if w.state is None and step not in _STANDALONE:
                _bulk_load(w)
            if w.decoded is None and step in ("matching", "valid-event store", "statistics adoption"):
                _event_decoder(w)
            _RUN[step](w)
            if on_step is not None:
                on_step(i, len(plan), current[1])
    return Report(watch.compiled, time.monotonic() - started, len(plan))


#: The steps ``processes=2`` gives the child, in this order: the other services' engines first (their own kernels,
#: and the matcher's, which the first process may be compiling at the same time), then the steps that need the
#: processor's state, whose kernels the first process has by then put in the cache.  The two halves take about as
#: long to compile.
SECOND_PROCESS = ("pattern service", "table service", "maintenance", "valid-event store", "statistics adoption")


def _child(algorithms: str, steps: str, runs: str) -> None:
    """The second process (``python -c``): its steps, each step and each compilation a JSON line on stdout."""
    def tell(kind: str, value: object) -> None:
        sys.stdout.write(json.dumps([kind, value]) + "\n")
        sys.stdout.flush()

    report = _warm_up(tuple(json.loads(algorithms)), tuple(json.loads(steps)), json.loads(runs),
                      lambda i, n, name: tell("step", name),
                      lambda i, n, name, kernel, count: tell("compile", [name, kernel]))
    tell("done", report.compiled)


def _two_processes(algorithms: tuple[str, ...], here: tuple[str, ...], there: tuple[str, ...], runs: int | None,
                   on_step: Callable[[int, int, str], None] | None,
                   on_compile: Callable[[int, int, str, str, int], None] | None) -> Report:
    """``here`` in this process, ``there`` in a child (a new interpreter, not a fork: numba's and the clients'
    threads do not survive one); the callbacks see both, counted as one run."""
    total = len(algorithms) * (len(here) + len(there))
    lock, done, compiled = threading.Lock(), [0], [0]
    started = time.monotonic()

    def stepped(name: str) -> None:
        with lock:
            done[0] += 1
            if on_step is not None:
                on_step(done[0], total, name)

    def compiling(name: str, kernel: str) -> None:
        with lock:
            compiled[0] += 1
            if on_compile is not None:
                on_compile(done[0] + 1, total, name, kernel, compiled[0])

    code = "import sys; from fastpubsub.services.warmup import _child; _child(*sys.argv[1:])"
    errors = tempfile.TemporaryFile("w+")  # read once it ends (a pipe nobody reads meanwhile could fill)
    child = subprocess.Popen([sys.executable, "-c", code, json.dumps(algorithms), json.dumps(there), json.dumps(runs)],
                             stdout=subprocess.PIPE, stderr=errors, text=True)
    outcome: list[int] = []

    def listen() -> None:
        for line in child.stdout:  # type: ignore[union-attr]
            kind, value = json.loads(line)
            if kind == "step":
                stepped(value)
            elif kind == "compile":
                compiling(*value)
            else:
                outcome.append(int(value))

    listener = threading.Thread(target=listen, name="pubsub-warmup-listener", daemon=True)
    listener.start()
    try:
        mine = _warm_up(algorithms, here, runs, lambda i, n, name: stepped(name),
                        lambda i, n, name, kernel, count: compiling(name, kernel))
    except BaseException:
        child.kill()
        raise
    finally:
        listener.join()
        child.wait()
        errors.seek(0)
        said = errors.read().strip()
        errors.close()
    if child.returncode != 0 or not outcome:
        last = said.splitlines()[-1] if said else f"exit code {child.returncode}"
        raise RuntimeError(f"warm-up: the second process failed: {last}")
    return Report(mine.compiled + outcome[0], time.monotonic() - started, total)


def cache_directories() -> list[Path]:
    """Every directory that may hold compiled kernels of this installation: numba's cache directory for each
    package folder, and the ``__pycache__`` folders next to the sources (numba's default, used when the cache
    directory is not writable)."""
    package = Path(fastpubsub.__file__).resolve().parent
    folders = sorted({p.parent for p in package.rglob("*.py") if "__pycache__" not in p.parts})
    out = [f / "__pycache__" for f in folders]
    if numba_config.CACHE_DIR:
        out += [Path(numba_config.CACHE_DIR) / package_subpath(str(f / "x.py")) for f in folders]
    return out


def clear_cache() -> int:
    """Delete this installation's compiled kernels (``*.nbi`` index, ``*.nbc`` code); returns how many files."""
    removed = 0
    for directory in cache_directories():
        if directory.is_dir():
            for f in [*directory.glob("*.nbi"), *directory.glob("*.nbc")]:
                os.unlink(f)
                removed += 1
    return removed
