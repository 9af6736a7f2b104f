"""Pattern subscriptions on a stock-tick workload: throughput and memory, and the index ablations.

    python -m benchmarks.stateful.patterns                              # 1,000 / 10,000 / 100,000 subscriptions, dynamic index
    python -m benchmarks.stateful.patterns --subs 1000 10000 --modes none static dynamic --events 20000
    python -m benchmarks.stateful.patterns --check 2000                 # first: the engine equals the oracle on the workload

The workload is ours (the EDBT paper's experiments are not available, see
docs/patterns.md): ticks over ``--symbols`` symbols drawn from a Zipf law,
a multiplicative random walk of prices per symbol, log-normal volumes and
increasing millisecond timestamps (exponential gaps, mean ``--gap-ms``; ties
occur).  Subscriptions are drawn from the templates of Table 1 (S1-S5) with
random constants.  Deterministic by ``--seed``.  One thread.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import numpy as np

from fastpubsub.engine import KIND_NUMBER, KIND_STRING, EventBatch
from fastpubsub.patterns import parse
from fastpubsub.patterns.engine import Limits, PatternEngine


class Ticks:
    """A deterministic stock-tick stream (columnar)."""

    def __init__(self, n: int, symbols: int = 2000, seed: int = 0, zipf: float = 1.1, gap_ms: float = 10.0,
                 step_sd: float = 0.0005) -> None:
        rng = np.random.default_rng(seed)
        self.symbols = np.array([f"S{i:05d}" for i in range(symbols)])
        weights = 1.0 / np.arange(1, symbols + 1) ** zipf
        self.p = weights / weights.sum()
        self.sym = rng.choice(symbols, size=n, p=self.p)
        self.base = np.round(rng.uniform(5, 500, symbols), 2)
        steps = rng.normal(0, step_sd, n)  # 0.05 % per tick by default
        self.price = np.empty(n)
        level = self.base.copy()
        for i in range(n):  # a random walk per symbol (generation only, not timed)
            s = self.sym[i]
            level[s] = max(0.01, level[s] * (1 + steps[i]))
            self.price[i] = round(level[s], 2)
        self.volume = np.round(rng.lognormal(6, 1.5, n))
        self.ts = np.cumsum(np.floor(rng.exponential(gap_ms, n))).astype(np.int64)
        self.ids = np.arange(n, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.sym)

    def batch(self, a: int, b: int) -> tuple[EventBatch, np.ndarray, np.ndarray]:
        n = b - a
        nums = np.zeros(3 * n)
        nums[1::3] = self.price[a:b]
        nums[2::3] = self.volume[a:b]
        kinds = np.tile(np.array([KIND_STRING, KIND_NUMBER, KIND_NUMBER], np.int8), n)
        batch = EventBatch(("name", "price", "volume"), np.arange(0, 3 * n + 1, 3, dtype=np.int64),
                           np.tile(np.array([0, 1, 2], np.int32), n), kinds, nums, self.symbols[self.sym[a:b]].tolist())
        return batch, self.ids[a:b], self.ts[a:b]

    def events(self, a: int, b: int) -> list[tuple]:
        return [(int(self.ids[i]), int(self.ts[i]), {"name": str(self.symbols[self.sym[i]]), "price": float(self.price[i]),
                                                     "volume": float(self.volume[i])}) for i in range(a, b)]


def subscriptions(m: int, ticks: Ticks, seed: int = 1, symbols: str = "uniform",
                  time_scale: float = 1.0) -> list[tuple[int, str]]:
    """``m`` pattern texts from the S1-S5 templates (Table 1) with random constants.

    ``symbols``: how subscriptions pick their stock, "uniform" or "zipf" (the
    ticks' own law: the popular symbols then carry most subscriptions, and
    every tick of them touches thousands of instances).  ``time_scale``
    multiplies every window and duration (then written in ms): at 1/60 a soak
    on wall-clock timestamps reaches its steady population of instances in
    seconds, not in the longest window's ten minutes.
    """
    def span(n: int, unit: str) -> str:
        if time_scale == 1:
            return f"{n}{unit}"
        return f"{max(1, round(n * {'s': 1000, 'm': 60_000}[unit] * time_scale))}ms"

    rng = np.random.default_rng(seed)
    p = ticks.p if symbols == "zipf" else None
    sym = lambda: ticks.symbols[rng.choice(len(ticks.symbols), p=p)]  # noqa: E731
    vol_hi = float(np.quantile(ticks.volume, 0.999))
    out = []
    for sid in range(m):
        kind = sid % 5
        s1, s2 = sym(), sym()
        i1, i2 = np.flatnonzero(ticks.symbols == s1)[0], np.flatnonzero(ticks.symbols == s2)[0]
        c1 = round(ticks.base[i1] * rng.uniform(0.9, 1.1), 2)
        c2 = round(ticks.base[i2] * rng.uniform(0.9, 1.0), 2)
        w = int(rng.integers(1, 11))
        if kind == 0:
            c1 = round(ticks.base[i1] * rng.uniform(1.0, 1.1), 2)
            text = f'seq a: name = "{s1}" and price > {c1} within 1ms'
        elif kind == 1:
            text = f'seq a: name = "{s1}" and price > {c1} next b: name = "{s2}" where b.price < {c2} within {span(w, "m")}'
        elif kind == 2:
            f = round(rng.uniform(1.001, 1.01), 4)
            text = f'seq a: name = "{s1}" and price > {c1} next b: name = a.name where b.price > {f} * a.price within {span(w, "m")}'
        elif kind == 3:
            v = round(float(np.quantile(ticks.volume, rng.uniform(0.5, 0.95))))
            d = int(rng.integers(5, 60))
            text = (f'seq a: name = "{s1}" and volume > {v} fold r: name = a.name while r.price >= r.last.price '
                    f'agg n = count(), lo = min(price) until dur >= {span(d, "s")} within {span(w, "m")}')
        else:
            d = int(rng.integers(10, 120))  # the average over d seconds, then the next tick above it within 2 s
            text = (f'seq a: name = "{s1}" and volume > {vol_hi} fold r: name = "{s1}" agg avg = avg(price) '
                    f'until dur >= {span(d, "s")} next b: name = "{s1}" where b.price > r.avg within {span(d + 2, "s")}')
        out.append((sid, text))
    return out


def build(mode: str, subs: list[tuple[int, str]], limits: Limits, freeze: bool = True) -> tuple[PatternEngine, float]:
    """Load the subscriptions; ``freeze``: move them out of the cycle collector's sight (``gc.freeze``).

    Compiled patterns are long-lived Python objects (about 20 per subscription); without the
    freeze every collection that witness objects trigger walks them all.
    """
    t = time.perf_counter()
    engine = PatternEngine(mode, limits, capacity=1 << 14)
    engine.subscribe_many((sid, parse(text), 0) for sid, text in subs)
    gc.collect()
    if freeze:
        gc.freeze()
    return engine, time.perf_counter() - t


def run(engine: PatternEngine, ticks: Ticks, start: int, n: int, batch: int) -> dict:
    witnesses = 0
    t, cpu = time.perf_counter(), time.process_time()
    for a in range(start, start + n, batch):
        b = min(a + batch, start + n)
        witnesses += len(engine.process(*ticks.batch(a, b)))
    dt, cpu = time.perf_counter() - t, time.process_time() - cpu
    c = engine.counters
    # events per CPU second: what the thread did while it ran (the machine is shared; wall time includes waiting)
    return {"events": n, "seconds": round(dt, 3), "events_per_s": round(n / dt), "events_per_cpu_s": round(n / cpu),
            "witnesses": witnesses,
            "live": engine.live(), "affected_per_event": round(c["affected"] / max(1, c["affected"] and n), 2),
            "engine_mb": round(engine.memory_bytes() / 2**20, 1),
            "matcher_mb": round(engine.matcher.stats()["memory_bytes"] / 2**20, 1),
            "refused": c["refused"], "expired": c["expired"]}


def check(ticks: Ticks, subs: list[tuple[int, str]], n: int, limits: Limits) -> None:
    """The engine (each mode) equals the oracle on the first ``n`` events of the workload.

    The oracle is a test (tests/support/oracles/patterns.py): this needs the checkout's root as the working directory.
    """
    from tests.support.oracles.patterns import OraclePatterns

    oracle = OraclePatterns(limits)
    for sid, text in subs:
        oracle.subscribe(sid, parse(text))
    expected = sorted(w.notification_id for w in oracle.process(ticks.events(0, n)))
    for mode in ("none", "static", "dynamic"):
        engine, _ = build(mode, subs, limits)
        got = []
        for a in range(0, n, 500):
            got += [w.notification_id for w in engine.process(*ticks.batch(a, min(n, a + 500)))]
        assert sorted(got) == expected, mode
    print(f"check: {len(expected)} witnesses on {n} events, {len(subs)} subscriptions: engine == oracle in every mode")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--modes", nargs="+", default=["dynamic"], choices=["none", "static", "dynamic"])
    ap.add_argument("--events", type=int, default=100_000, help="timed events per run (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=20_000, help="events before timing (instances build up)")
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--symbols", type=int, default=2000)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--per-subscription", type=int, default=100)
    ap.add_argument("--max-bytes", type=int, default=2 << 30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sub-symbols", choices=["uniform", "zipf"], default="uniform",
                    help="how subscriptions pick their stock (ticks are always Zipf)")
    ap.add_argument("--check", type=int, default=0, help="first compare engine and oracle on this many events")
    ap.add_argument("--no-freeze", action="store_true", help="leave the loaded subscriptions to the cycle collector")
    args = ap.parse_args(argv)
    ticks = Ticks(max(args.warmup + args.events, args.check), args.symbols, args.seed, gap_ms=args.gap_ms)
    probe = PatternEngine()
    limits = Limits(args.per_subscription, max(1, args.max_bytes // probe.instance_bytes()))
    if args.check:
        check(ticks, subscriptions(min(args.subs), ticks, args.seed + 1, args.sub_symbols), args.check, limits)
    for m in args.subs:
        subs = subscriptions(m, ticks, args.seed + 1, args.sub_symbols)
        for mode in args.modes:
            engine, build_s = build(mode, subs, limits, not args.no_freeze)
            engine.process(*ticks.batch(0, min(1000, len(ticks))))  # compile / load the kernels
            run(engine, ticks, 1000, args.warmup - 1000, args.batch) if args.warmup > 1000 else None
            row = {"subscriptions": m, "sub_symbols": args.sub_symbols, "mode": mode, "build_s": round(build_s, 1)}
            row.update(run(engine, ticks, args.warmup, args.events, args.batch))
            print(json.dumps(row), flush=True)
            gc.unfreeze()
            del engine


if __name__ == "__main__":
    main()
