"""Compiling the numba kernels ahead of the first event: ``pubsub warmup``, and every processor start.

numba compiles a kernel on its first call for each signature and keeps the
machine code in its on-disk cache (``@njit(cache=True)``, in the directory
``fastpubsub.numba_cache_dir()`` chose).  Without that cache the first batch
of the first run after installation would spend a minute compiling while
``processed`` stays at 0.  So:

* ``pubsub warmup`` (run by ``make install`` and the Docker image) compiles
  every step below into the cache ahead, with a progress bar;
* the processor runs the steps a run needs (:data:`PROCESSOR_STEPS`) before
  its rebuild: from a warm cache that takes well under a second, from a cold
  one every kernel compiled is logged (``compiling numba kernels: step 3/5
  (matching), 12 compiled so far``) instead of a silent first batch.

Each step runs a small real workload through the code the processor runs
(W0 subscriptions encoded as on the topic, events encoded likewise), so the
signatures compiled are the ones a run uses, not guesses.  numba's compile
events (:class:`CompileWatch`) count the kernels compiled; cache hits fire none.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from numba.core import config as numba_config
from numba.core.caching import UserProvidedCacheLocator

from fastpubsub.engine import ALGORITHMS, ValidEventStore
from fastpubsub.workloads import PRESETS, generate_events, generate_subscriptions
from fastpubsub.wire import codecs
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.wire.subscription_decoder import decode_subscriptions

import fastpubsub

from fastpubsub.runtime.compiles import CompileWatch

from .events import snapshot
from .events.subscriptions import SubscriptionState

#: The steps a processor start runs; ``pubsub warmup`` runs :data:`STEPS`, these and what a run may need later.
PROCESSOR_STEPS = ("subscription decoder", "bulk load", "event decoder", "matching", "removal")
STEPS = (*PROCESSOR_STEPS, "valid-event store", "statistics adoption", "snapshot")


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


_RUN: dict[str, Callable[[_Workload], None]] = {
    "subscription decoder": _subscription_decoder, "bulk load": _bulk_load, "event decoder": _event_decoder,
    "matching": _matching, "removal": _removal, "valid-event store": _valid_event_store,
    "statistics adoption": _statistics, "snapshot": _snapshot,
}


@dataclass
class Report:
    """What :func:`warm_up` did: kernels compiled (0: all came from the cache) and how long it took."""

    compiled: int
    seconds: float
    steps: int


def warm_up(algorithms: tuple[str, ...] = ("dynamic",), steps: tuple[str, ...] = STEPS, runs: int | None = None,
            on_step: Callable[[int, int, str], None] | None = None,
            on_compile: Callable[[int, int, str, str, int], None] | None = None) -> Report:
    """Run ``steps`` for each algorithm; callbacks: ``on_step(done, total, name)`` after each step,
    ``on_compile(step, total, step name, kernel, compiled so far)`` as each kernel starts compiling."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"unknown algorithm(s) {', '.join(unknown)}; one of {', '.join(ALGORITHMS)}")
    bad = [s for s in steps if s not in _RUN]
    if bad:
        raise ValueError(f"unknown warm-up step(s) {', '.join(bad)}; one of {', '.join(STEPS)}")
    plan = [(a, s) for a in algorithms for s in steps]
    started = time.monotonic()
    current = [0, ""]
    watch = CompileWatch(lambda kernel, count: on_compile and on_compile(current[0], len(plan), current[1], kernel, count))
    with watch:
        workloads: dict[str, _Workload] = {}
        for i, (algorithm, step) in enumerate(plan, 1):
            current[:] = [i, step if len(algorithms) == 1 else f"{step}, {algorithm}"]
            w = workloads.get(algorithm) or workloads.setdefault(algorithm, _Workload(algorithm, runs))
            if w.state is None and step not in ("subscription decoder", "event decoder", "bulk load"):
                _bulk_load(w)
            if w.decoded is None and step in ("matching", "valid-event store", "statistics adoption"):
                _event_decoder(w)
            _RUN[step](w)
            if on_step is not None:
                on_step(i, len(plan), current[1])
    return Report(watch.compiled, time.monotonic() - started, len(plan))


def cache_directories() -> list[Path]:
    """Every directory that may hold compiled kernels of this installation: numba's cache directory for each
    package folder, and the ``__pycache__`` folders next to the sources (numba's default, used when the cache
    directory is not writable)."""
    package = Path(fastpubsub.__file__).resolve().parent
    folders = sorted({p.parent for p in package.rglob("*.py") if "__pycache__" not in p.parts})
    out = [f / "__pycache__" for f in folders]
    if numba_config.CACHE_DIR:
        out += [Path(numba_config.CACHE_DIR) / UserProvidedCacheLocator.get_suitable_cache_subpath(str(f / "x.py"))
                for f in folders]
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
