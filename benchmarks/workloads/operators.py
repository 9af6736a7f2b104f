"""Operator workloads: ``in`` on an access attribute, and ``prefix`` over titles.

    python -m benchmarks.workloads.operators in --n 1000000 --algorithm dynamic --repeat 3
    python -m benchmarks.workloads.operators prefix --n 100000 --titles 100000 --events 20000 --repeat 3
    python -m benchmarks.workloads.operators prefix --lengths 3-6      # prefixes of 3-6 characters only
    python -m benchmarks.workloads.operators ruler --operator wildcard --n 100000 --events 20000

``in``: Fabret et al.'s W0 (workloads/fabret.py) and the same subscriptions
with their first fixed predicate ``a0 = v`` replaced by ``a0 in (v, v', v'')``
(two more distinct values of a0's domain), loaded in two matchers of one
algorithm; events/s on ``match_encoded`` of the same W0 events, best of
``--repeat`` rounds that alternate the two.  The ``in`` batch is built in
columnar form exactly as ``SubscriptionBatch.from_lists`` lowers it (checked
against it on a sample), since a million Python subscription objects would
only measure Python.

``prefix``: ``--titles`` distinct random strings (lowercase, 6-20
characters); ``--n`` subscriptions ``title prefix p`` with ``p`` the first
1-6 characters of a random title; events ``{"title": t}`` with ``t`` a random
title.  Reports events/s of ``match_encoded`` (derived pairs included; in
wall-clock time and in the process's CPU time, which other work on a shared
machine disturbs less) and of ``match_batch`` on dicts, and, as the floor, a Python ``str.startswith``
scan over the subscriptions on a sample of events (whose matches must agree).

``ruler``: one of Event Ruler's operators (``--operator``): ``equals ignore
case`` / ``prefix ignore case`` on a title in random case, ``wildcard``
``head*tail`` with the title's first 1-4 and last 1-3 characters, ``not
prefix`` (holds for nearly every event), ``cidr`` (random /16 to /28 networks
over IPv4 addresses drawn from 256 /16s), ``range`` (``> lo, <= lo + w`` on a
number; ``--array`` gives each event three numbers); the same figures as
``prefix``, the floor being ``engine.semantics.holds`` over every subscription.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time

import numpy as np

from fastpubsub.engine import Matcher, SubscriptionBatch
from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.frontend.encoding import batch_from_dicts
from fastpubsub.workloads.fabret import W0, generate_events, generate_subscriptions

from benchmarks.harness.timing import best_passes


def w0_with_in(plain: SubscriptionBatch, k: int = 3, seed: int = 7) -> SubscriptionBatch:
    """``plain`` (W0) with each ``a0 = v`` replaced by ``a0 in (v, v', ...)`` (k distinct values), lowered to rows."""
    rng = np.random.default_rng(seed)
    n = len(plain)
    width = int(plain.offsets[1] - plain.offsets[0])  # W0: every subscription has n_P predicates, a0's first
    lo, hi = W0.domain
    v = plain.numbers.reshape(n, width)[:, 0].astype(np.int64)
    size = hi - lo + 1
    offsets = np.zeros((n, k), dtype=np.int64)  # distinct shifts, 0 first: distinct values of the domain
    for j in range(1, k):
        col = rng.integers(1, size, size=n)
        while True:
            bad = np.flatnonzero((offsets[:, 1:j] == col[:, None]).any(axis=1))
            if not len(bad):
                break
            col[bad] = rng.integers(1, size, size=len(bad))
        offsets[:, j] = col
    values = lo + (v[:, None] - lo + offsets) % size
    numbers = np.repeat(plain.numbers.reshape(n, 1, width), k, axis=1).copy()
    numbers[:, :, 0] = values
    disjunct = np.zeros((n, k), dtype=np.int8)
    disjunct[:, 1:] = 1
    m = n * k * width
    return SubscriptionBatch(
        ids=np.repeat(plain.ids, k), attribute_names=plain.attribute_names,
        offsets=np.arange(0, m + 1, width, dtype=np.int64),
        attributes=np.tile(plain.attributes.reshape(n, width), (1, k)).ravel(),
        operators=np.tile(plain.operators.reshape(n, width), (1, k)).ravel(),
        kinds=np.tile(plain.kinds.reshape(n, width), (1, k)).ravel(),
        numbers=numbers.ravel(), disjunct=disjunct.ravel(),
    )


def check_in_batch(plain: SubscriptionBatch, lowered: SubscriptionBatch, k: int, sample: int = 50) -> None:
    """The columnar ``in`` batch equals what ``from_lists`` makes of the ``in`` subscriptions (first ``sample``)."""
    rows = lowered.to_lists()[:sample]
    subs = []
    for (sid, preds), (_, lowered_sub) in zip(plain.to_lists()[:sample], rows):
        values = [d[0][2] for d in lowered_sub.disjuncts]
        assert len(set(values)) == k, values
        subs.append((sid, [("a0", "in", values)] + preds[1:]))
    assert SubscriptionBatch.from_lists(subs).to_lists() == rows


def best_rounds(ms: list[Matcher], events, repeat: int) -> list[tuple[float, int]]:
    """Per matcher: its best ``match_encoded`` seconds and its matches, the matchers timed in turn each round."""
    return [(encoded, matches) for encoded, _, matches in best_passes(ms, events, None, repeat)]


def run_in(n: int, n_events: int, algorithm: str, repeat: int, k: int = 3) -> dict:
    plain = generate_subscriptions(W0, n=n, seed=1)
    lowered = w0_with_in(plain, k)
    check_in_batch(plain, lowered, k)
    events = generate_events(W0, n=n_events, seed=2)
    warm = Matcher(algorithm)
    warm.add_bulk(w0_with_in(generate_subscriptions(W0, n=2000, seed=9), k))
    warm.match_encoded(events)
    out = {"workload": "W0 a0-in", "algorithm": algorithm, "n": n, "values": k, "events": n_events}
    ms = []
    for name, batch in (("plain", plain), ("in", lowered)):
        m = Matcher(algorithm)
        t = time.perf_counter()
        m.add_bulk(batch)
        out[f"{name}_load_s"] = round(time.perf_counter() - t, 2)
        ms.append(m)
    (t_plain, m_plain), (t_in, m_in) = best_rounds(ms, events, repeat)
    out.update(plain_events_per_s=round(n_events / t_plain), in_events_per_s=round(n_events / t_in),
               ratio=round(t_plain / t_in, 3), plain_matches_per_event=round(m_plain / n_events, 2),
               in_matches_per_event=round(m_in / n_events, 2))
    return out


def timed_matching(m: Matcher, events, repeat: int, dicts: list[dict] | None = None):
    """(the last matches, best wall seconds and best CPU seconds of ``match_encoded``, best wall seconds of
    ``match_batch`` over ``dicts`` or None) over ``repeat`` passes, after one that compiles or loads the kernels."""
    m.match_encoded(events)
    best_enc = best_cpu = best_dict = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        res = m.match_encoded(events)
        best_enc = min(best_enc, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
        if dicts is not None:
            t = time.perf_counter()
            m.match_batch(dicts)
            best_dict = min(best_dict, time.perf_counter() - t)
    return res, best_enc, best_cpu, (best_dict if dicts is not None else None)


def titles(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    out: dict[str, None] = {}
    while len(out) < n:
        out["".join(rng.choices(letters, k=rng.randint(6, 20)))] = None
    return list(out)


def run_prefix(n: int, n_titles: int, n_events: int, algorithm: str, repeat: int, floor_events: int,
               lengths: tuple[int, int] = (1, 6)) -> dict:
    rng = random.Random(3)
    pool = titles(n_titles, seed=2)
    prefixes = [t[: rng.randint(*lengths)] for t in (rng.choice(pool) for _ in range(n))]
    dicts = [{"title": rng.choice(pool)} for _ in range(n_events)]
    events = batch_from_dicts(dicts)
    m = Matcher(algorithm)
    t = time.perf_counter()
    m.add_bulk(SubscriptionBatch.from_lists((i, [("title", "prefix", p)]) for i, p in enumerate(prefixes)))
    load = time.perf_counter() - t
    res, best_enc, best_cpu, best_dict = timed_matching(m, events, repeat, dicts)
    t = time.perf_counter()
    scan = [[i for i, p in enumerate(prefixes) if e["title"].startswith(p)] for e in dicts[:floor_events]]
    t_scan = time.perf_counter() - t
    got = res.split()[:floor_events]
    assert [g.tolist() for g in got] == scan, "prefix matches differ from the str.startswith scan"
    return {"workload": "prefix", "algorithm": algorithm, "n": n, "titles": n_titles, "events": n_events,
            "prefix_lengths": f"{lengths[0]}-{lengths[1]}",
            "load_s": round(load, 2), "encoded_events_per_s": round(n_events / best_enc),
            "encoded_cpu_events_per_s": round(n_events / max(best_cpu, 1e-9)),
            "dict_events_per_s": round(n_events / best_dict), "startswith_scan_events_per_s": round(floor_events / t_scan, 1),
            "matches_per_event": round(len(res.ids) / n_events, 2)}


RULER_OPERATORS = ("equals ignore case", "prefix ignore case", "wildcard", "not prefix", "cidr", "range")


def _ruler_workload(operator: str, n: int, n_titles: int, n_events: int, array: bool):
    rng = random.Random(5)
    pool = titles(n_titles, seed=2)
    ips = [f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}" for _ in range(n_titles)]

    def case(t: str) -> str:
        return "".join(c.upper() if rng.random() < 0.3 else c for c in t)

    subs = []
    for _ in range(n):
        t = rng.choice(pool)
        if operator == "equals ignore case":
            subs.append(("title", operator, case(t)))
        elif operator in ("prefix ignore case", "not prefix"):
            subs.append(("title", operator, case(t[: rng.randint(1, 6)]) if "case" in operator else t[:3]))
        elif operator == "wildcard":
            subs.append(("title", operator, t[: rng.randint(1, 4)] + "*" + t[-rng.randint(1, 3):]))
        elif operator == "cidr":
            subs.append(("ip", operator, f"{rng.choice(ips)}/{rng.randint(16, 28)}"))
        else:  # range
            lo = rng.uniform(0, 1000)
            subs.append(("x", operator, [">", round(lo, 3), "<=", round(lo + rng.uniform(0, 20), 3)]))
    dicts = []
    for _ in range(n_events):
        xs = [round(rng.uniform(0, 1000), 3) for _ in range(3 if array else 1)]
        dicts.append({"title": case(rng.choice(pool)), "ip": rng.choice(ips), "x": xs if array else xs[0]})
    return subs, dicts


def run_ruler(operator: str, n: int, n_titles: int, n_events: int, algorithm: str, repeat: int, floor_events: int,
              array: bool = False) -> dict:
    from fastpubsub.engine.semantics import holds

    subs, dicts = _ruler_workload(operator, n, n_titles, n_events, array)
    events = batch_from_dicts(dicts)
    m = Matcher(algorithm)
    t = time.perf_counter()
    m.add_bulk(SubscriptionBatch.from_lists((i, [p]) for i, p in enumerate(subs)))
    load = time.perf_counter() - t
    res, best_enc, best_cpu, _ = timed_matching(m, events, repeat)
    t = time.perf_counter()
    scan = [[i for i, p in enumerate(subs) if holds(p, e)] for e in dicts[:floor_events]]
    t_scan = time.perf_counter() - t
    assert [g.tolist() for g in res.split()[:floor_events]] == scan, f"{operator} matches differ from the scan"
    return {"workload": f"ruler {operator}" + (" array" if array else ""), "algorithm": algorithm, "n": n,
            "events": n_events, "load_s": round(load, 2), "encoded_events_per_s": round(n_events / best_enc),
            "encoded_cpu_events_per_s": round(n_events / max(best_cpu, 1e-9)),
            "holds_scan_events_per_s": round(floor_events / t_scan, 1),
            "matches_per_event": round(len(res.ids) / n_events, 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.workloads.operators", description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=["in", "prefix", "ruler"])
    ap.add_argument("--operator", choices=RULER_OPERATORS, default="wildcard", help="the ruler workload's operator")
    ap.add_argument("--array", action="store_true", help="ruler range: three numbers per event")
    ap.add_argument("--n", type=int, default=None, help="subscriptions (default: 1,000,000 for in, 100,000 for prefix)")
    ap.add_argument("--algorithm", default="dynamic")
    ap.add_argument("--events", type=int, default=None, help="events per pass (default: 1,000 for in, 20,000 for prefix)")
    ap.add_argument("--titles", type=int, default=100_000)
    ap.add_argument("--values", type=int, default=3, help="values of the in list")
    ap.add_argument("--floor-events", type=int, default=200, help="events the str.startswith scan is timed on")
    ap.add_argument("--lengths", default="1-6", help="prefix lengths, lo-hi characters")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if args.workload == "ruler":
        row = run_ruler(args.operator, args.n or 100_000, args.titles, args.events or 20_000, args.algorithm,
                        args.repeat, args.floor_events, args.array)
    elif args.workload == "in":
        row = run_in(args.n or 1_000_000, args.events or 1_000, args.algorithm, args.repeat, args.values)
    else:
        lo, hi = (int(x) for x in args.lengths.split("-"))
        row = run_prefix(args.n or 100_000, args.titles, args.events or 20_000, args.algorithm, args.repeat,
                         args.floor_events, (lo, hi))
    row.update(machine=f"{platform.machine()} {os.cpu_count()} cpus", load_average=os.getloadavg()[0])
    print(json.dumps(row))


if __name__ == "__main__":
    main()
