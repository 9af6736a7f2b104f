"""Wu & Yu, section 3 (figure 1): MKH, AMKH(0,-), AMKH(1,2) and value-range buckets side by side (engine/algorithms/amkh.py).

    python -m benchmarks.workloads.amkh                                  # N = 100K, M = 2N and 16N, x = 15, 35, .., 95
    python -m benchmarks.workloads.amkh --n 1000000 --slots 16 --repeat 5
    python -m benchmarks.workloads.amkh --configs "AMKH(0,-),AMKH(1,2)" --x 55
    python -m benchmarks.workloads.amkh --plot docs/img/amkh.png         # the figure in docs/benchmarks.md
    python -m benchmarks.workloads.amkh --workload W1,W2 --n 1000000 --configs "AMKH(0,-),auto,dynamic"   # Fabret's

The workload is :func:`workloads.intervals.wuyu_subscriptions` /
:func:`~workloads.intervals.wuyu_events`: 10 equality-only attributes, 10
general ones, subscriptions ``e0 = v and e_j = v' and g0 op v''`` (``op`` is
``=`` half of the time, else ``<`` or ``>``), predicate values uniform in
``[6, x]``, event values uniform in ``[6, 95]`` on all 20 attributes.

What the paper leaves out, chosen here:

* **N** (subscriptions): 100,000 by default (1,000,000 with ``--n``): the
  paper's metric per event grows linearly with N, the ratios between
  configurations do not.
* **M** (slots): ``--slots`` per subscription, 2 (load factor 1/2, the
  engine's default) and 16.  The metric counts every subscription on a
  probed chain, collisions included, so it depends on M: the more probes a
  configuration makes, the more collisions it examines (MKH most).
* **w_i**: odd 64-bit random multipliers (``seed`` 0): with them a sum of
  distinct coordinates rarely repeats a slot beyond what ``mod M`` does.
* **Clause IDs**: the engine's predicate ids (interned in (attribute,
  operator, value) order); ``fold`` takes their residue mod B.
* **Events**: 2,000 per point, the same for every configuration.

Configurations: ``MKH`` (every clause exact in the key), ``AMKH(0,-)``
(equality-only attributes), ``AMKH(1,1)`` (g0's ``=`` clauses exact, its
inequalities folded to one residue: Fabret's multi-attribute hashing),
``AMKH(1,2)``, ``RANGE2`` / ``RANGE4`` (g0's inequalities in 2 or 4 value
buckets per direction), ``auto`` (``general="auto"``: the index prices the
candidates on the first events), and ``dynamic`` for reference (events/s
only: it has no such counters).  Per point: unmatched subscriptions examined
per event (the paper's metric), coordinate probes per event (which it does
not count), events/s (best and worst of ``--repeat`` passes), load average.
Every configuration's matches are checked equal to the first one's.
``--workload W1,W2`` (any preset of workloads/fabret.py) runs Fabret's
workloads instead (no x; ``general="auto"`` may key their fixed ``<=`` /
``>=`` attributes).  It also fits ``ns/event = a + PROBE_NS * probes +
CHECK_NS * (examined + collisions)`` over the amkh rows: what the weights of
``general="auto"``'s price (``engine.algorithms.amkh.PROBE_NS``, ``CHECK_NS``, set by
hand) measure on this machine; on a shared machine the fit follows the load
more than the code (112-297 ns per probe and 19-574 ns per subscription in
the runs of docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.workloads.intervals import WuYuSpec, wuyu_events, wuyu_subscriptions
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions

from benchmarks.harness.report import load_numbers, write_json

CONFIGS = {
    "MKH": {"general": ("g0",), "bucketing": "exact"},
    "AMKH(0,-)": {"general": ()},
    "AMKH(1,1)": {"general": ("g0",), "bucketing": "fold", "buckets": 1},
    "AMKH(1,2)": {"general": ("g0",), "bucketing": "fold", "buckets": 2},
    "RANGE2": {"general": ("g0",), "bucketing": "range", "buckets": 2},
    "RANGE4": {"general": ("g0",), "bucketing": "range", "buckets": 4},
    "auto": {"general": "auto"},
    "dynamic": None,
}
DEFAULT = "MKH,AMKH(0,-),AMKH(1,1),AMKH(1,2),RANGE2,RANGE4,auto,dynamic"


def point(name: str, n: int, slots: int, subs, events, repeat: int) -> tuple[dict, object]:
    opts = CONFIGS[name]
    gc.collect()
    m = Matcher("dynamic") if opts is None else Matcher("amkh", table_size=slots * n, **opts)
    t = time.perf_counter()
    m.add_bulk(subs)
    load = time.perf_counter() - t
    m.match_encoded(events)  # compiled (or loaded from numba's cache); "auto" chooses on these events
    n_ev = len(events.offsets) - 1
    times, out = [], None
    for _ in range(repeat):
        if opts is not None:
            m.index.reset_counters()
        t = time.perf_counter()
        out = m.match_encoded(events)
        times.append(time.perf_counter() - t)
    row = {"config": name, "n": n, "slots_per_subscription": slots, "load_s": round(load, 2),
           "events_per_s_best": round(n_ev / min(times)), "events_per_s_worst": round(n_ev / max(times)),
           "ns_per_event_best": round(min(times) / n_ev * 1e9), "matches_per_event": round(len(out.ids) / n_ev, 3),
           "memory_bytes": m.stats()["memory_bytes"], "load_average": load_numbers()}
    if opts is not None:
        s = m.stats()
        a = s["amkh"]
        row.update(unmatched_examined=round(a["unmatched_examined_per_event"], 2),
                   chained_unmatched=round(a["chained_unmatched_per_event"], 2),
                   collisions=round(a["collisions"] / a["events"], 2),
                   examined=round(a["examined"] / a["events"], 2), probes=round(a["probes_per_event"], 2),
                   general=s["configuration"]["general"])
    return row, out


def fit(rows: list[dict]) -> dict:
    """Least squares ``ns/event = a + PROBE_NS * probes + CHECK_NS * (examined + collisions)`` over the amkh rows."""
    r = [x for x in rows if "probes" in x]
    if len(r) < 3:
        return {}
    a = np.array([[1.0, x["probes"], x["examined"] + x["collisions"]] for x in r])
    b = np.array([x["ns_per_event_best"] for x in r], dtype=np.float64)
    coef, *_ = np.linalg.lstsq(a, b, rcond=None)
    return {"ns_fixed": round(float(coef[0]), 1), "PROBE_NS": round(float(coef[1]), 1),
            "CHECK_NS": round(float(coef[2]), 1)}


def plot(rows: list[dict], path: str) -> None:
    """Per (N, M): the paper's metric with chained slots, the same with key sums compared, and probes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("x") is not None and "probes" in r]
    groups = sorted({(r["n"], r["slots_per_subscription"]) for r in rows})
    panels = (("chained_unmatched", "unmatched examined / event\n(chained slots, the paper's count)", "linear"),
              ("unmatched_examined", "unmatched examined / event\n(key sums compared)", "linear"),
              ("probes", "coordinate probes / event", "log"))
    fig, axes = plt.subplots(len(panels), len(groups), figsize=(5 * len(groups), 10), squeeze=False)
    for j, (n, s) in enumerate(groups):
        for name in CONFIGS:
            pts = sorted((r["x"], *(r[key] for key, _, _ in panels)) for r in rows
                         if r["config"] == name and r["n"] == n and r["slots_per_subscription"] == s)
            if not pts:
                continue
            cols = list(zip(*pts))
            for i in range(len(panels)):
                axes[i, j].plot(cols[0], cols[i + 1], marker="o", label=name,
                                linestyle="--" if name == "auto" else "-")
        axes[0, j].set_title(f"Wu & Yu section 3, N = {n:,}, M = {s}N")
        for i, (_, label, scale) in enumerate(panels):
            axes[i, j].set_ylabel(label)
            if scale == "log":
                axes[i, j].set_yscale("symlog", linthresh=0.1)
        axes[-1, j].set_xlabel("x (predicate values in [6, x])")
        axes[0, j].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="100000", help="comma-separated subscription counts")
    ap.add_argument("--slots", default="2,16", help="comma-separated slots per subscription (M / N)")
    ap.add_argument("--x", default="15,35,55,75,95", help="comma-separated upper ends of predicate values")
    ap.add_argument("--configs", default=DEFAULT)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/amkh.json")
    ap.add_argument("--plot", default=None, help="write the figure (PNG) here")
    ap.add_argument("--workload", default="wuyu", help="wuyu, or comma-separated presets of workloads/fabret.py")
    args = ap.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    # names contain commas: re-join "AMKH(0" "-)" style splits
    fixed, buf = [], ""
    for c in configs:
        buf = f"{buf},{c}" if buf else c
        if buf.count("(") == buf.count(")"):
            fixed.append(buf)
            buf = ""
    for c in fixed:
        if c not in CONFIGS:
            ap.error(f"unknown configuration {c!r}; expected one of {', '.join(CONFIGS)}")
    print(f"load average at start: {load_numbers()}", flush=True)
    rows = []
    points = []
    for n in [int(v) for v in args.n.split(",")]:
        if args.workload == "wuyu":
            points += [(n, x, None) for x in [int(v) for v in args.x.split(",")]]
        else:
            points += [(n, None, w) for w in args.workload.split(",")]
    for n, x, preset in points:
        if preset is None:
            spec = WuYuSpec(x=x)
            subs, events = wuyu_subscriptions(spec, n, args.seed), wuyu_events(spec, args.events, args.seed + 1)
        else:
            subs = generate_subscriptions(PRESETS[preset], n, seed=args.seed)
            events = generate_events(PRESETS[preset], args.events, seed=args.seed + 1)
        for slots in [int(v) for v in args.slots.split(",")]:
            ref = None
            for name in fixed:
                if name == "dynamic" and slots != int(args.slots.split(",")[0]):
                    continue  # dynamic has no M
                row, out = point(name, n, slots, subs, events, args.repeat)
                if ref is None:
                    ref = out
                else:
                    assert np.array_equal(out.offsets, ref.offsets) and np.array_equal(out.ids, ref.ids), name
                row["x"] = x
                if preset:
                    row["workload"] = preset
                rows.append(row)
                print(json.dumps(row), flush=True)
    constants = fit(rows)
    print(json.dumps({"fit": constants}), flush=True)
    print(f"load average at end: {load_numbers()}", flush=True)
    write_json({"rows": rows, "fit": constants}, args.out)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
