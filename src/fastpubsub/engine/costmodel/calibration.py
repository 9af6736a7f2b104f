"""Measure the cost model's constants on this machine (section 3.1's K_r, C_h, K_h, checking).

Each constant is timed on the engine's own data structures and kernels, at
sizes that do not fit in cache, the way the matcher meets them:

* ``K_c``: the cluster scan kernel (with prefetch) over a large cluster whose
  first column fails, i.e. the cost of one subscription check;
* ``K_r``: per configured schema, the test that the event carries its first
  field (the loop over the configuration every event pays);
* ``C_h``, ``K_h``: probes of a large conjunction table with 2 and 3 fields
  (the difference is ``K_h``, one more field to read and hash);
* ``K_run``, ``K_l``: the price of a list with a run index (engine/costmodel/runs.py).

``python -m fastpubsub.engine.costmodel.calibration`` prints the measured model; ``--save`` also
writes it where :func:`engine.costmodel.model.calibrated_model` finds it.  Best of
several repetitions, single thread.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numba import njit

from ..structures.hashtable import HashTable, ht_find3
from ..kernels.scan import LOOKAHEAD, PREFETCH_COLUMNS, UNFOLD, scan_dispatch
from .model import CostModel, save_model
from .runs import measure_run_costs, save_run_costs


@njit(cache=True)
def _retrieval_loop(sch_fields, eq_of_field, reps):
    hits = 0
    for _ in range(reps):
        for s in range(sch_fields.shape[0]):
            if eq_of_field[sch_fields[s, 0]] >= 0:
                hits += 1
    return hits


@njit(cache=True)
def _probe_loop(tkeys, tvals, queries, width, eq_of_field, fields):
    found = 0
    for i in range(queries.shape[0]):
        p0 = eq_of_field[fields[i, 0]]
        p1 = eq_of_field[fields[i, 1]]
        p2 = -1
        if width == 3:
            p2 = eq_of_field[fields[i, 2]]
        if ht_find3(tkeys, tvals, p0 + queries[i, 0], p1 + queries[i, 1], p2 + queries[i, 2]) >= 0:
            found += 1
    return found


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(repeat: int = 5, seed: int = 0) -> CostModel:
    rng = np.random.default_rng(seed)
    # K_c: one big cluster of 3 columns, 4M entries, references into a 100K-bit vector that is all zero
    n, k = 4_000_000, 3
    arena = rng.integers(0, 100_000, size=(k + 1) * n, dtype=np.int64).astype(np.int32)
    bits = np.zeros(100_000, dtype=np.uint8)
    out = np.empty(n, dtype=np.int64)
    scan_options = (PREFETCH_COLUMNS, UNFOLD, LOOKAHEAD)
    scan_dispatch(*scan_options, k, arena, bits, 0, n, 1000, out, 0)  # compile
    k_c = _best(lambda: scan_dispatch(*scan_options, k, arena, bits, 0, n, n, out, 0), repeat) / n

    # K_r: 4096 schemas whose first field the event lacks
    n_fields = 4096
    eq_of_field = np.full(n_fields, -1, dtype=np.int64)
    sch = np.full((4096, 3), -1, dtype=np.int64)
    sch[:, 0] = rng.permutation(n_fields)
    reps = 500
    _retrieval_loop(sch, eq_of_field, 1)
    k_r = _best(lambda: _retrieval_loop(sch, eq_of_field, reps), repeat) / (reps * len(sch))

    # K_h: one more field to read and hash, on a table that fits in cache (compute only);
    # C_h: the rest of a probe of a large table (2M keys: the cache miss the paper's C_h is about)
    eq_of_field[:] = 0
    q = 1_000_000
    fields = rng.integers(0, n_fields, size=(q, 3), dtype=np.int64)

    def probe_time(m: int, width: int) -> float:
        keys = rng.integers(0, 1 << 40, size=(m, 3), dtype=np.int64)
        if width == 2:
            keys[:, 2] = -1
        table = HashTable(width=3)
        table.insert(keys, np.arange(m, dtype=np.int64))
        queries = keys[rng.integers(0, m, size=q)].copy()
        queries[::2, 0] += 1  # half the probes miss
        if width == 2:
            queries[:, 2] = 0  # the loop supplies p2 = -1
        tk, tv = table.keys, table.vals
        _probe_loop(tk, tv, queries[:10], width, eq_of_field, fields)
        return _best(lambda: _probe_loop(tk, tv, queries, width, eq_of_field, fields), repeat) / q

    k_h = max(probe_time(256, 3) - probe_time(256, 2), 0.0)
    c_h = max(probe_time(2_000_000, 2) - 2 * k_h, 0.0)
    ns = 1e9
    return CostModel(K_r=k_r * ns, C_h=c_h * ns, K_h=k_h * ns, K_c=k_c * ns)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m fastpubsub.engine.costmodel.calibration", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="repetitions per measurement (best is kept)")
    ap.add_argument("--save", action="store_true", help="write the model where calibrated_model() looks first")
    args = ap.parse_args(argv)
    model = measure(args.repeat)
    runs = measure_run_costs(args.repeat)
    print(json.dumps({**model.as_dict(), **runs.as_dict()}, indent=2))
    if args.save:
        print(f"saved to {save_model(model)} and {save_run_costs(runs)}")


if __name__ == "__main__":
    main()
