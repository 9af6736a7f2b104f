"""Single adds and removes through the public API, and the quality of a matcher built by them.

    python -m benchmarks.engine.single_changes                       # 300K W0 present, 100K single adds then removes
    python -m benchmarks.engine.single_changes --present 300000 --changes 100000 --twin 300000
    python -m benchmarks.engine.single_changes --present 0 --changes 1000000 --twin 1000000   # from empty to 1M

Three measurements, as a library user meets them (``Matcher("dynamic")``):

1. with ``--present`` W0 subscriptions loaded by ``add_bulk`` (none with
   ``--present 0``: a matcher grown from empty), ``--changes`` more added one
   ``add`` at a time, then removed one ``remove`` at a time; each figure is
   the wall clock of the whole loop and the final ``flush``, so it holds
   every step of getting them filed (or gone): the buffered changes applied
   in bulk, the dynamic maintenance's rounds (re-planning, tables created,
   moved or dropped), the structures' growth;
2. a matcher built by ``--twin`` single adds and its twin built by one
   ``add_bulk`` of the same subscriptions: events/s of each on
   ``match_encoded`` (best of ``--repeat``, alternated), the ratio, whether
   the matches are identical, and where the subscriptions are filed
   (multi-attribute tables, single-field lists).

The machine is shared: figures are best-of and still noisy; compare runs of
one session only.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions


def single_changes(present: int, changes: int, seed: int = 1) -> dict:
    m = Matcher("dynamic")
    if present:
        m.add_bulk(generate_subscriptions(PRESETS["W0"], n=present, seed=seed))
    new = generate_subscriptions(PRESETS["W0"], n=changes, seed=seed + 1, first_id=present).to_lists()
    warm = Matcher("dynamic")  # compile / load the kernels of adds, removes and matching outside the timings
    for sid, preds in new[:20_000]:
        warm.add(sid, preds)
    warm.match_encoded(generate_events(PRESETS["W0"], 10, seed=seed))
    for sid, _ in new[:20_000]:
        warm.remove(sid)
    warm.flush()
    del warm
    m.match_encoded(generate_events(PRESETS["W0"], 10, seed=seed))  # settle
    t, c = time.perf_counter(), time.process_time()
    for sid, preds in new:
        m.add(sid, preds)
    m.flush()
    add_s, add_cpu = time.perf_counter() - t, time.process_time() - c
    assert len(m) == present + changes
    t, c = time.perf_counter(), time.process_time()
    for sid, _ in new:
        m.remove(sid)
    m.flush()
    remove_s, remove_cpu = time.perf_counter() - t, time.process_time() - c
    assert len(m) == present
    # CPU time beside wall clock: on a shared machine other processes' share of the cores drops out
    return {"present": present, "changes": changes, "adds_per_s": round(changes / add_s),
            "removes_per_s": round(changes / remove_s), "add_us": round(add_s / changes * 1e6, 2),
            "remove_us": round(remove_s / changes * 1e6, 2), "adds_per_cpu_s": round(changes / add_cpu),
            "removes_per_cpu_s": round(changes / remove_cpu)}


def filing(m: Matcher) -> dict:
    h = m.stats()["hash_tables"]
    return {"tables": [t["fields"] for t in h["schemas"]], "in_tables": sum(t["subscriptions"] for t in h["schemas"]),
            "single_field": h["single_field_subscriptions"], "catch_all": h["catch_all_subscriptions"]}


def unsorted(m: Matcher) -> int:
    """Entries still waiting in unsorted tails (checked one by one) when the timing ends."""
    s = m.stats()
    return int(s["subscriptions"] - s.get("sorted_entries", s["subscriptions"]))


def twin(n: int, repeat: int, n_events: int = 2000, seed: int = 3) -> dict:
    subs = generate_subscriptions(PRESETS["W0"], n=n, seed=seed)
    events = generate_events(PRESETS["W0"], n_events, seed=seed + 1)
    single = Matcher("dynamic")
    t = time.perf_counter()
    for sid, preds in subs.to_lists():
        single.add(sid, preds)
    single.flush()
    single_s = time.perf_counter() - t
    bulk = Matcher("dynamic")
    t = time.perf_counter()
    bulk.add_bulk(subs)
    bulk_s = time.perf_counter() - t
    a, b = single.match_encoded(events), bulk.match_encoded(events)
    identical = bool(np.array_equal(a.offsets, b.offsets) and np.array_equal(a.ids, b.ids))
    best = {"single": float("inf"), "bulk": float("inf")}
    for _ in range(repeat):
        for name, m in (("single", single), ("bulk", bulk)):
            t = time.perf_counter()
            m.match_encoded(events)
            best[name] = min(best[name], time.perf_counter() - t)
    return {"n": n, "load_single_s": round(single_s, 2), "load_bulk_s": round(bulk_s, 2),
            "single_events_per_s": round(n_events / best["single"]), "bulk_events_per_s": round(n_events / best["bulk"]),
            "ratio": round(best["bulk"] / best["single"], 3), "identical_matches": identical,
            "unsorted_single": unsorted(single), "unsorted_bulk": unsorted(bulk),
            "filed_single": filing(single), "filed_bulk": filing(bulk)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine.single_changes", description=__doc__.splitlines()[0])
    ap.add_argument("--present", type=int, default=300_000, help="W0 subscriptions loaded before the single changes")
    ap.add_argument("--changes", type=int, default=100_000, help="single adds, then as many single removes")
    ap.add_argument("--twin", type=int, default=300_000, help="subscriptions of the single-add matcher and its twin")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    r = single_changes(args.present, args.changes)
    print(json.dumps(r), flush=True)
    print(f"| {r['present']:,} present | {r['changes']:,} single adds: {r['adds_per_s']:,}/s ({r['add_us']} µs) "
          f"| single removes: {r['removes_per_s']:,}/s ({r['remove_us']} µs) |", flush=True)
    if args.twin:
        t = twin(args.twin, args.repeat)
        print(json.dumps(t), flush=True)
        print(f"| {t['n']:,} by single adds: {t['single_events_per_s']:,} events/s | by add_bulk: "
              f"{t['bulk_events_per_s']:,} | ratio {t['ratio']} | identical matches: {t['identical_matches']} |")


if __name__ == "__main__":
    main()
