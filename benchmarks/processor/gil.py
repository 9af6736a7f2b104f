"""Which of the event path's numba kernels hold the GIL, and how long a thread waits for it meanwhile.

    python -m benchmarks.processor.gil                          # 1,003 subscriptions, batches of 1,000 events
    python -m benchmarks.processor.gil --subscriptions 1000000 --batches 50

With ``--overlap-commits`` the commit runs on a thread of its own while the loop decodes, matches and encodes the
next batch (``runtime.checkpoint.InFlight``); the commit waits for the broker with the GIL released, but each of
its steps needs the GIL back.  A numba kernel compiled without ``nogil=True`` keeps the GIL for its whole call
(the interpreter's switch interval cannot interrupt machine code), so such a step waits until the kernel returns.

In process, without Kafka: the processor's own stages (``services.events``: ``Decode``, ``Match``, ``Encode``)
run batches of W0 events (Avro, as on the topic) against N W0 subscriptions and the demo's three hand-written ones,
as ``pubsub run`` does, while

* every numba kernel the stages call from Python is timed, with how far a pure-Python thread counted meanwhile
  against how far it counts alone: ``other_thread`` near 0 means the kernel held the GIL throughout, near 1 (a
  core of its own for the other thread) that it let it go;
* in a second pass a thread sleeps 1 ms at a time, as the commit thread waits for the broker, and the time it
  took beyond that to run again (its wait for the GIL) is reported: median, p99, maximum.

Also what a batch costs with no other thread (``alone``).  All as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from confluent_kafka import Message
from numba import _dispatcher
from numba.core.registry import CPUDispatcher

from fastpubsub.cli.demo import SHOWCASE
from fastpubsub.language import parse
from fastpubsub.runtime import PipelineCounters
from fastpubsub.services.events.decode import Decode, ReferencedAttributes
from fastpubsub.services.events.encode import Encode
from fastpubsub.services.events.match import Match
from fastpubsub.services.events.state import ProcessorState
from fastpubsub.wire import codecs
from fastpubsub.workloads import PRESETS, generate_events, generate_subscriptions

from benchmarks.harness import report


def workload(n: int, events: int, batch: int, seed: int = 1) -> tuple[ProcessorState, list[list[Message]]]:
    """N W0 subscriptions and SHOWCASE's, applied as the processor applies records; the events in batches of
    records, Avro as ``benchmarks.pipeline.e2e`` writes them."""
    state = ProcessorState("dynamic")
    subs = generate_subscriptions(PRESETS["W0"], n, seed).to_lists()
    records = [(str(sid).encode(), codecs.encode_subscription(codecs.Subscription(f"user{sid % 1000}", preds), "avro"))
               for sid, preds in subs]
    records += [(str(n + k).encode(), codecs.encode_subscription(codecs.Subscription(who, parse(text)), "avro"))
                for k, (who, text) in enumerate(SHOWCASE)]
    state.subscriptions.apply_records(records, [0] * len(records))
    now = int(time.time() * 1000)
    values = [codecs.encode_event(e, "avro") for e in generate_events(PRESETS["W0"], events, seed + 1).to_dicts()]
    msgs = [Message(topic="pubsub.events", partition=i % 4, offset=i, key=f"e{i}".encode(), value=v,
                    timestamp=(1, now)) for i, v in enumerate(values)]
    return state, [msgs[i:i + batch] for i in range(0, len(msgs), batch)]


class Stages:
    """decode -> match -> encode, the processor's objects (``services.events.processor.EventsTask``)."""

    def __init__(self, state: ProcessorState) -> None:
        self.counters = PipelineCounters()
        self.decode = Decode(self.counters, True, tuple, None, ReferencedAttributes(lambda: state.subscriptions.matcher))
        self.match = Match(state, self.counters)
        self.encode = Encode("avro", "auto", self.counters)

    def __call__(self, msgs: list[Message]) -> int:
        return sum(1 for _ in self.encode(self.match.events(self.decode(msgs))))


class Counter(threading.Thread):
    """A pure-Python thread that counts as fast as it can: it advances only while it holds the GIL."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.n, self.stop = 0, False

    def run(self) -> None:
        while not self.stop:
            self.n += 1


@dataclass
class KernelTimes:
    calls: int = 0
    seconds: float = 0.0
    counted: int = 0  # what the Counter thread counted during the calls
    nogil: bool = False


@dataclass
class Kernels:
    """Every call of a numba kernel from Python timed, with what the :class:`Counter` counted meanwhile, while
    installed (the dispatchers' call replaced; :meth:`restore`).  Calls from compiled code do not pass through it,
    so each time is that of an outermost kernel, its callees included."""

    counter: Counter
    times: dict[str, KernelTimes] = field(default_factory=dict)

    def install(self) -> None:
        call, counter, times = _dispatcher.Dispatcher.__call__, self.counter, self.times

        def timed(kernel, *args, **kwargs):
            c, t = counter.n, time.perf_counter()
            try:
                return call(kernel, *args, **kwargs)
            finally:
                took, counted = time.perf_counter() - t, counter.n - c
                name = f"{kernel.py_func.__module__}.{kernel.py_func.__qualname__}"
                entry = times.get(name)
                if entry is None:
                    entry = times[name] = KernelTimes(nogil=bool(kernel.targetoptions.get("nogil")))
                entry.seconds += took
                entry.counted += counted
                entry.calls += 1

        CPUDispatcher.__call__ = timed

    def restore(self) -> None:
        del CPUDispatcher.__call__


def counting_rate(counter: Counter, seconds: float = 0.3) -> float:
    """What the Counter counts per second with the GIL to itself (the main thread asleep)."""
    c, t = counter.n, time.perf_counter()
    time.sleep(seconds)
    return (counter.n - c) / (time.perf_counter() - t)


def per_kernel(stages: Stages, batches: list[list[Message]]) -> dict:
    counter = Counter()
    counter.start()
    kernels = Kernels(counter)
    kernels.install()
    try:
        free_rate = counting_rate(counter)
        t = time.perf_counter()
        for msgs in batches:
            stages(msgs)
        wall = time.perf_counter() - t
    finally:
        kernels.restore()
        counter.stop = True
        counter.join()
    out = {}
    for name, k in sorted(kernels.times.items(), key=lambda kv: -kv[1].seconds):
        if not k.calls:
            continue
        out[name] = {"calls": k.calls, "ms_per_batch": round(1000 * k.seconds / len(batches), 3),
                     "nogil": k.nogil, "other_thread": round(k.counted / (free_rate * k.seconds), 2) if k.seconds else None}
    return {"wall_ms_per_batch": round(1000 * wall / len(batches), 2), "kernels": out}


def gil_waits(stages: Stages, batches: list[list[Message]], repeat: int) -> dict:
    """A thread sleeping 1 ms at a time while the stages run: how much longer than 1 ms each sleep took."""
    late: list[float] = []
    running = threading.Event()
    running.set()

    def sleeper() -> None:
        while running.is_set():
            t = time.perf_counter()
            time.sleep(0.001)
            late.append(time.perf_counter() - t - 0.001)

    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    t = time.perf_counter()
    for _ in range(repeat):
        for msgs in batches:
            stages(msgs)
    wall = time.perf_counter() - t
    running.clear()
    thread.join()
    a = 1000 * np.array(late)
    return {"wall_ms_per_batch": round(1000 * wall / (repeat * len(batches)), 2), "wakeups": len(a),
            "late_ms": {"p50": round(float(np.percentile(a, 50)), 3), "p99": round(float(np.percentile(a, 99)), 3),
                        "max": round(float(a.max()), 3)}}


def alone(stages: Stages, batches: list[list[Message]], repeat: int) -> dict:
    """The stages with no other thread: what a batch costs (the GIL released and taken back at each kernel call
    included)."""
    took = []
    for _ in range(repeat):
        t = time.perf_counter()
        for msgs in batches:
            stages(msgs)
        took.append((time.perf_counter() - t) / len(batches))
    return {"ms_per_batch": {"min": round(1000 * min(took), 3), "median": round(1000 * float(np.median(took)), 3)}}


def measure(n: int, batch: int, batches: int, repeat: int) -> dict:
    state, groups = workload(n, batch * batches, batch)
    stages = Stages(state)
    for msgs in groups:  # compiled (or loaded from the cache) before any wrapper is in place
        stages(msgs)
    return {"subscriptions": n + len(SHOWCASE), "batch": batch, "batches": batches,
            "alone": alone(stages, groups, repeat), "per_kernel": per_kernel(stages, groups),
            "sleeping_thread": gil_waits(stages, groups, repeat)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subscriptions", type=int, default=1000, help="W0 subscriptions (and SHOWCASE's three)")
    ap.add_argument("--batch", type=int, default=1000, help="events per batch (--batch-size)")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5, help="passes over the batches with the sleeping thread")
    a = ap.parse_args(argv)
    result = {"benchmark": "gil", "command": "python -m benchmarks.processor.gil " + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": report.machine(), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "load_at_start": report.load_average(), **measure(a.subscriptions, a.batch, a.batches, a.repeat)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
