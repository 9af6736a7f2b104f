"""Range-min subscriptions, server side (Chandramouli et al. §5, Table 1; the stand-in for their real trace).

    python -m benchmarks.stateful.aggregates                       # both sweeps + real stand-in, ~3 minutes
    python -m benchmarks.stateful.aggregates --updates 20000 --quick
    python -m benchmarks.stateful.aggregates --plot docs/img/aggregates.png

Per configuration (times: best of 3 passes over the same updates, the reformulation passes
interleaved round robin across configurations so that they share the machine's load):
reformulation time per update (``ExtremumReformulator.apply``: table row
change in, messages out, Python + numba, one thread), messages per update and the
ignorable/good/bad split, S-UN matching time per update (``ExtremumGroup.apply``: 2-D index +
answer coalescing), affected subscriptions per update, and records and bytes per update for S-UN
(one notification per affected subscription) against S-CN (one record per message).  Byte sizes
are the JSON encodings of ``Notification`` / ``ReformulatedRecord``, averaged over the first
2,000 updates' records.

Choices the paper leaves open (documented in docs/aggregates.md):
* rows: X uniform in [0, 10000], initial Y uniform in [0, 10000];
* a row to update is drawn uniformly; its step is N(0, 0.05·y + 10) (depends on the current
  value), reflected into [0, 10000], so each row is a finite-state-like bounded chain;
* a spike (0.5 % of events) sets Y to U(0, 0.1)·Y, and the next event puts the old value back;
* the "X moves too" row also moves each updated row along X by N(0, 10), reflected: every update
  is then a delete at the old range value and an insert at a new one;
* range length N(1000, 1000) redrawn until positive; midpoint N(5000, 1500); the range is
  [mid - len/2, mid + len/2];
* real-data stand-in: 3,053 keys, RECO on a 1/80 grid in [1, 5] (321 columns; the grid is the
  knob that sets the non-ignorable share, chosen to land near the paper's 11.7 %), EPS
  log-normal and positive, price a log-normal random walk (2 % per half day), PER = price / EPS,
  two updates per key per day for 60 days with 7.6 % of them dropped at random (≈ 338,400
  events), 500,000 subscriptions with RECO midpoint U(1, 5) and length N(0.5, 0.5) > 0.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import numpy as np

from fastpubsub.aggregates.reformulator import BAD, GOOD, IGNORABLE, ExtremumReformulator
from fastpubsub.aggregates.service import Notification, ReformulatedRecord
from fastpubsub.aggregates.stateless import ExtremumGroup
from fastpubsub.aggregates.table import Table


def synthetic_rows(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    return rng.uniform(0, 10000, n), rng.uniform(0, 10000, n)


def synthetic_updates(ys: np.ndarray, n_updates: int, rng, spike: float = 0.005, step: float = 0.05):
    """(key index, new y) pairs: reflected random walks with spikes that bounce back."""
    y = ys.copy()
    keys = rng.integers(0, len(y), n_updates)
    out_k = np.empty(n_updates, np.int64)
    out_y = np.empty(n_updates)
    pending = -1
    old = 0.0
    for i in range(n_updates):
        if pending >= 0:  # the spike bounces back
            k, v = pending, old
            pending = -1
        else:
            k = int(keys[i])
            if rng.random() < spike:
                old, v, pending = y[k], y[k] * rng.uniform(0, 0.1), k
            else:
                v = abs(y[k] + rng.normal(0, step * y[k] + 10)) % 20000  # reflect into [0, 10000]
                if v > 10000:
                    v = 20000 - v
        y[k] = v
        out_k[i], out_y[i] = k, v
    return out_k, out_y


def ranges_around(mid: np.ndarray, rng, mean: float, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of ranges centred on ``mid`` whose lengths are normal (``mean``, ``sd``), drawn again until
    positive."""
    length = rng.normal(mean, sd, len(mid))
    bad = length <= 0
    while bad.any():
        length[bad] = rng.normal(mean, sd, bad.sum())
        bad = length <= 0
    return mid - length / 2, mid + length / 2


def synthetic_subs(m: int, rng) -> tuple[np.ndarray, np.ndarray]:
    return ranges_around(rng.normal(5000, 1500, m), rng, 1000, 1000)


def real_standin(rng, keys: int = 3053, days: int = 60, grid: float = 0.0125, drop: float = 0.076):
    reco = np.round(rng.uniform(1, 5, keys) / grid) * grid
    eps = rng.lognormal(0.5, 0.8, keys)
    price = rng.lognormal(3.5, 0.8, keys)
    per0 = price / eps
    k_list, y_list = [], []
    for _ in range(days * 2):
        price = price * np.exp(rng.normal(0, 0.02, keys))
        keep = rng.random(keys) >= drop
        order = rng.permutation(np.flatnonzero(keep))
        k_list.append(order)
        y_list.append((price / eps)[order])
    return reco, per0, np.concatenate(k_list), np.concatenate(y_list)


def real_subs(m: int, rng):
    return ranges_around(rng.uniform(1, 5, m), rng, 0.5, 0.5)


def x_moves(xs: np.ndarray, keys: np.ndarray, rng, step: float = 10.0) -> np.ndarray:
    """New range values for the updated rows: a reflected random walk N(0, step) in [0, 10000]."""
    x = xs.copy()
    out = np.empty(len(keys))
    steps = rng.normal(0, step, len(keys))
    for i, k in enumerate(keys):
        v = abs(x[k] + steps[i])
        x[k] = out[i] = 20000 - v if v > 10000 else v
    return out


def prepare(xs, ys0, upd_k, upd_y, upd_x=None) -> dict:
    """The initial rows and the table changes of one configuration (the table state supplies old rows)."""
    table = Table("t", "k")
    rows = [(int(i), {"x": float(x), "y": float(y)}) for i, (x, y) in enumerate(zip(xs, ys0))]
    for k, r in rows:
        table.apply(k, r)
    new_x = xs[upd_k] if upd_x is None else upd_x
    changes = [table.apply(int(k), {"x": float(x), "y": float(v)}) for k, x, v in zip(upd_k, new_x, upd_y)]
    return {"rows": rows, "changes": changes}


def time_reformulation(preps: list[dict], repeat: int = 3) -> list[tuple[float, list]]:
    """Best-of-``repeat`` reformulation time of each configuration, the passes interleaved across
    configurations (round robin) so that they share the machine's load; each pass starts from a
    freshly loaded reformulator.  Returns (seconds, results of a pass) per configuration."""
    warm = ExtremumReformulator("x", "y")
    warm.load(preps[0]["rows"][:100])
    for c in preps[0]["changes"][:50]:
        if c.key < 100:
            warm.apply(c)
    best = [np.inf] * len(preps)
    results: list = [None] * len(preps)
    for _ in range(repeat):
        for i, p in enumerate(preps):
            fresh = ExtremumReformulator("x", "y", capacity=2 * len(p["rows"]))
            fresh.load(p["rows"])
            results[i] = None
            gc.collect()
            gc.disable()  # a collection's cost grows with everything else alive in the process
            t0 = time.perf_counter()
            res = [fresh.apply(c) for c in p["changes"]]
            best[i] = min(best[i], time.perf_counter() - t0)
            gc.enable()
            results[i] = res
    return list(zip(best, results))


def build_group(prep: dict, lows, highs) -> ExtremumGroup:
    """The S-UN stage of one configuration, with every subscription's initial answer."""
    ref = ExtremumReformulator("x", "y", capacity=2 * len(prep["rows"]))
    ref.load(prep["rows"])
    group = ExtremumGroup("min")
    group.add_bulk(lows, highs, ref.answers(lows, highs))
    return group


def time_matching(groups: list[ExtremumGroup], results: list[list], repeat: int = 3) -> list[tuple[float, np.ndarray]]:
    """Best-of-``repeat`` S-UN matching time per configuration, passes interleaved round robin;
    every pass starts from the initial answers.  Returns (seconds, affected per update)."""
    initial = [g.answer.copy() for g in groups]
    best = [np.inf] * len(groups)
    affected: list = [None] * len(groups)
    for _ in range(repeat):
        for i, (g, res) in enumerate(zip(groups, results)):
            g.answer[:] = initial[i]
            gc.collect()
            gc.disable()
            t0 = time.perf_counter()
            aff = np.array([len(g.apply(r.messages)[0]) for r in res])
            best[i] = min(best[i], time.perf_counter() - t0)
            gc.enable()
            affected[i] = aff
    return list(zip(best, affected))


def run(prep: dict, t_ref: float, results: list, t_match: float, affected: np.ndarray, n_subs: int,
        label: str) -> dict:
    """Counts and sizes of one configuration, given its timed passes."""
    rows, changes = prep["rows"], prep["changes"]
    kinds = np.bincount([r.kind for r in results], minlength=3)
    n_msgs = np.array([len(r.messages) for r in results])
    # byte sizes of one S-UN notification and one S-CN record, over the first 2,000 updates
    un_b, cn_b = [], []
    for i, r in enumerate(results[:2000]):
        for j, m in enumerate(r.messages):
            cn_b.append(len(ReformulatedRecord('["t","min","y","x",[]]', f"u{i}", j, tuple(m)).to_bytes()))
        for s in range(int(affected[i])):
            un_b.append(len(Notification(f"sub{s:07d}/u{i}/0", f"sub{s:07d}", float(r.messages[0, 0]), f"u{i}",
                                         "t", i).to_bytes()))
    un_avg = float(np.mean(un_b)) if un_b else 0.0
    cn_avg = float(np.mean(cn_b)) if cn_b else 0.0
    u = len(changes)
    return {
        "workload": label, "rows": len(rows), "subs": n_subs, "updates": u,
        "reformulate_us": 1e6 * t_ref / u, "match_us": 1e6 * t_match / u,
        "ignorable": kinds[IGNORABLE] / u, "good": kinds[GOOD] / u, "bad": kinds[BAD] / u,
        "msgs_per_update": n_msgs.mean(), "msgs_per_nonignorable": n_msgs[n_msgs > 0].mean() if (n_msgs > 0).any() else 0,
        "affected_per_update": affected.mean(), "affected_per_nonignorable": affected[n_msgs > 0].mean() if (n_msgs > 0).any() else 0,
        "s_un_records": affected.mean(), "s_un_bytes": affected.mean() * un_avg,
        "s_cn_records": n_msgs.mean(), "s_cn_bytes": n_msgs.mean() * cn_avg,
        "s_cn_saving": 1 - n_msgs.sum() / max(affected.sum(), 1),
    }


def index_comparison(m: int = 1000000, n_rows: int = 10000, n_updates: int = 5000, seed: int = 7,
                     blocks=(32, 128, 512), repeat: int = 3) -> list[dict]:
    """The 2-D index against a vectorised full scan, on the rectangles of real reformulated
    messages; rounds alternate between the variants, best of ``repeat``."""
    rng = np.random.default_rng(seed)
    xs, ys = synthetic_rows(n_rows, rng)
    k, y = synthetic_updates(ys, n_updates, rng)
    lo, hi = synthetic_subs(m, rng)
    table, ref = Table("t", "k"), ExtremumReformulator("x", "y")
    rows = [(int(i), {"x": float(a), "y": float(b)}) for i, (a, b) in enumerate(zip(xs, ys))]
    for key, r in rows:
        table.apply(key, r)
    ref.load(rows)
    msgs = np.concatenate([ref.apply(table.apply(int(key), {"x": float(xs[key]), "y": float(v)})).messages
                           for key, v in zip(k, y)])
    from fastpubsub.aggregates.points import PointIndex
    idx = {}
    for b in blocks:
        idx[b] = PointIndex(block=b)
        idx[b].add_bulk(np.arange(m), lo, hi)
    scan_msgs = msgs[:200]  # the scan is slow: a sample of the messages

    def scan():
        n = 0
        for mm in scan_msgs:
            n += int(np.count_nonzero((lo > mm[3]) & (lo <= mm[1]) & (hi >= mm[2]) & (hi < mm[4])))
        return n

    best = {b: np.inf for b in blocks} | {"scan": np.inf}
    answers = {}
    for _ in range(repeat):
        for b in blocks:
            idx[b].query_many(msgs[:10])
            t0 = time.perf_counter()
            ids, _ = idx[b].query_many(msgs)
            best[b] = min(best[b], (time.perf_counter() - t0) / len(msgs))
            answers[b] = len(ids) / len(msgs)
        t0 = time.perf_counter()
        answers["scan"] = scan() / len(scan_msgs)
        best["scan"] = min(best["scan"], (time.perf_counter() - t0) / len(scan_msgs))
    return [{"variant": f"PointIndex block={b}" if b != "scan" else "numpy full scan (200 msgs)",
             "us_per_message": 1e6 * best[b], "answers_per_message": answers[b]} for b in list(blocks) + ["scan"]]


def service_modes(m: int, n_rows: int = 10000, n_updates: int = 20000, seed: int = 7) -> list[dict]:
    """``AggregateService.apply`` per update, S-CN (records only) against S-UN (records and
    notifications), each output encoded to bytes as a producer would; same updates, fresh services."""
    from fastpubsub.aggregates.service import AggregateService, TableSchema
    from fastpubsub.aggregates.spec import AggregateSpec
    rng = np.random.default_rng(seed)
    xs, ys = synthetic_rows(n_rows, rng)
    k, y = synthetic_updates(ys, n_updates, rng)
    lo, hi = synthetic_subs(m, rng)
    specs = [(i, AggregateSpec("stock", "min", "per", "risk", a, b)) for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist()))]
    out = []
    for notify in (False, True):
        svc = AggregateService([TableSchema("stock", "symbol")], notify=notify)
        for i, (a, b) in enumerate(zip(xs, ys)):
            svc.apply("stock", i, {"risk": float(a), "per": float(b)}, f"i{i}")
        svc.subscribe_many(specs)
        upd = [(int(key), {"risk": float(xs[key]), "per": float(v)}) for key, v in zip(k, y)]
        recs = nbytes = 0
        t0 = time.perf_counter()
        for i, (key, row) in enumerate(upd):
            o = svc.apply("stock", key, row, f"u{i}")
            for r in o.notifications if notify else o.records:
                nbytes += len(r.to_bytes())
                recs += 1
        dt = time.perf_counter() - t0
        out.append({"mode": "S-UN" if notify else "S-CN", "subs": m, "rows": n_rows, "updates_per_s": len(upd) / dt,
                    "us_per_update": 1e6 * dt / len(upd), "records_per_update": recs / len(upd),
                    "bytes_per_update": nbytes / len(upd)})
    return out


def fmt(r: dict) -> str:
    return (f"| {r['workload']} | {r['rows']:,} | {r['subs']:,} | {r['reformulate_us']:.1f} | {r['match_us']:.1f} | "
            f"{100 * r['ignorable']:.1f}/{100 * r['good']:.1f}/{100 * r['bad']:.1f} | {r['msgs_per_update']:.2f} | "
            f"{r['affected_per_update']:.0f} | {r['s_un_records']:.0f} / {r['s_un_bytes'] / 1000:.1f} kB | "
            f"{r['s_cn_records']:.2f} / {r['s_cn_bytes']:.0f} B | {100 * r['s_cn_saving']:.2f} % |")


HEADER = ("| workload | rows | subs | reformulate µs/upd | S-UN match µs/upd | ign/good/bad % | msgs/upd | "
          "affected/upd | S-UN records / bytes per upd | S-CN records / bytes per upd | S-CN saves |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--updates", type=int, default=50000)
    ap.add_argument("--quick", action="store_true", help="small sweeps")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--step", type=float, default=0.05, help="random-walk step, as a fraction of the value")
    ap.add_argument("--plot", default=None, help="write a PNG of the sweeps here")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    ap.add_argument("--only", choices=["sweeps", "index", "service"], default=None)
    a = ap.parse_args(argv)
    if a.only in (None, "index"):
        print("| 2-D index variant (1M subscriptions) | µs per message | subscriptions per message |\n|---|---|---|")
        for r in index_comparison(m=1000000 if not a.quick else 100000):
            print(f"| {r['variant']} | {r['us_per_message']:.1f} | {r['answers_per_message']:.0f} |", flush=True)
    if a.only in (None, "service"):
        print("| mode | rows | subs | µs per update | updates/s | records per update | bytes per update |\n"
              "|---|---|---|---|---|---|---|")
        for m in ([200000, 1000000] if not a.quick else [100000]):
            for r in service_modes(m, n_updates=20000 if not a.quick else 5000):
                print(f"| {r['mode']} | {r['rows']:,} | {r['subs']:,} | {r['us_per_update']:.1f} | "
                      f"{r['updates_per_s']:,.0f} | {r['records_per_update']:.2f} | {r['bytes_per_update']:,.0f} |",
                      flush=True)
    if a.only not in (None, "sweeps"):
        return
    rows_sweep = [10000, 20000, 50000, 100000] if not a.quick else [10000, 100000]
    subs_sweep = [100000, 200000, 500000, 1000000] if not a.quick else [100000, 500000]
    big = 500000 if not a.quick else 100000
    configs = []  # (label, prepared rows and changes, subscription generator)
    for n in rows_sweep:  # paper: 500K subscriptions while the table grows
        rng = np.random.default_rng(a.seed)
        xs, ys = synthetic_rows(n, rng)
        k, y = synthetic_updates(ys, a.updates, rng, step=a.step)
        configs.append(("synthetic, rows sweep", prepare(xs, ys, k, y), (synthetic_subs, big, a.seed + n)))
    rng = np.random.default_rng(a.seed)
    xs, ys = synthetic_rows(10000, rng)
    k, y = synthetic_updates(ys, a.updates, rng, step=a.step)
    prep10k = prepare(xs, ys, k, y)  # paper: 10K rows while subscriptions grow
    for m in subs_sweep:
        configs.append(("synthetic, subs sweep", prep10k, (synthetic_subs, m, a.seed + 1)))
    n = 100000 if not a.quick else 10000  # every update also moves the row along X
    rng = np.random.default_rng(a.seed)
    xs, ys = synthetic_rows(n, rng)
    k, y = synthetic_updates(ys, a.updates, rng, step=a.step)
    configs.append(("synthetic, X moves too", prepare(xs, ys, k, y, x_moves(xs, k, rng)), (synthetic_subs, big, a.seed + 2)))
    rng = np.random.default_rng(a.seed)
    reco, per0, k, y = real_standin(rng)
    if a.quick:
        k, y = k[:a.updates], y[:a.updates]
    configs.append(("real-data stand-in", prepare(reco, per0, k, y), (real_subs, big, a.seed + 3)))
    # one reformulation timing per distinct prepared workload, interleaved across them
    preps = list({id(c[1]): c[1] for c in configs}.values())
    timed = dict(zip((id(p) for p in preps), time_reformulation(preps)))
    groups = [build_group(prep, *gen(m, np.random.default_rng(seed))) for _, prep, (gen, m, seed) in configs]
    matched = time_matching(groups, [timed[id(c[1])][1] for c in configs])
    del groups
    out = []
    print(HEADER, flush=True)
    for (label, prep, (_, m, _)), (t_match, affected) in zip(configs, matched):
        t_ref, results = timed[id(prep)]
        out.append(run(prep, t_ref, results, t_match, affected, m, label))
        print(fmt(out[-1]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{k2: (float(v) if isinstance(v, (np.floating, float)) else v) for k2, v in r.items()} for r in out], f, indent=1)
    if a.plot:
        plot(out, a.plot)


def plot(out: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    rs = [r for r in out if r["workload"] == "synthetic, rows sweep"]
    ss = [r for r in out if r["workload"] == "synthetic, subs sweep"]
    ax[0].plot([r["rows"] / 1000 for r in rs], [r["reformulate_us"] for r in rs], "o-", label="reformulate (S-CN)")
    ax[0].plot([r["rows"] / 1000 for r in rs], [r["reformulate_us"] + r["match_us"] for r in rs], "s-",
               label="reformulate + S-UN match")
    ax[0].set(xlabel="rows (thousands), 500K subscriptions", ylabel="µs per update", ylim=(0, None))
    ax[0].legend(fontsize=8)
    ax[1].plot([r["subs"] / 1000 for r in ss], [r["reformulate_us"] for r in ss], "o-", label="reformulate (S-CN)")
    ax[1].plot([r["subs"] / 1000 for r in ss], [r["reformulate_us"] + r["match_us"] for r in ss], "s-",
               label="reformulate + S-UN match")
    ax[1].set(xlabel="subscriptions (thousands), 10K rows", ylabel="µs per update", ylim=(0, None))
    ax[1].legend(fontsize=8)
    ax[2].plot([r["subs"] / 1000 for r in ss], [r["s_un_records"] for r in ss], "s-", label="S-UN records/update")
    ax[2].plot([r["subs"] / 1000 for r in ss], [r["s_cn_records"] for r in ss], "o-", label="S-CN records/update")
    ax[2].set(xlabel="subscriptions (thousands), 10K rows", ylabel="records per update", yscale="log")
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
