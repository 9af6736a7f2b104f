"""Where `dynamic`'s time per event goes as N grows on W0: counters per event and the time of each stage.

The flatness target compares `dynamic` at 10M with its own 1M.  This
benchmark says what grows between the two:

* **counters per event**, counted by replaying the kernel's own stages
  (:mod:`engine.kernels.probing`) over the events: lists reached, run index lookups,
  runs found, entries of those runs read (second column), the cache lines
  those entries span, entries passing the second column (checked from the
  third column on, one scattered read each), entries of unsorted tails and
  other clusters scanned, matches;
* **a maintenance round** (`dynamic`): its CPU time, and what it adds per
  event amortized over the events between two rounds (best passes leave the
  round out);
* **time of the stages**, CPU time per event of the kernel cut after stage 4
  (phase 1, probes, list heads, first rows), after the run index lookups and
  the runs' bounds (their entry lines prefetched, not read), then with the
  first entry of each run read (what waiting for the lines costs), then with
  every entry read and OR-ed without a branch (what reading them costs),
  after stage 5 (the runs' second columns, ``stage_runs`` but its later
  columns) and whole (the later columns, the scans and the result
  writing), each the best of ``--repeat`` passes, the cuts alternating; the
  difference of two cuts is what the stage between them costs.

    python -m benchmarks.engine.flatness --n 1000000 --ahead 8,16
    python -m benchmarks.engine.flatness --n 10000000 --ahead 8,16 --repeat 7    # 2-3 GB: one such process at a time

``--ahead`` times the whole kernel with ``stage_runs``' prefetching
pipeline at other depths too (run bounds read that many runs ahead, starts
twice that), side by side in one process.

W0 only (the dense stage 1).  The counters and cuts read the matcher's arrays and change nothing;
the rounds timed at the end are the matcher's own (``tests/engine/test_kernels.py`` checks the counters
against ``tests/support/naive.py``).
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import numpy as np
from numba import njit

from fastpubsub.engine import Matcher
from fastpubsub.engine.kernels.probing import (GROUP, ProbeScratch, scan_group, stage_heads, stage_keys, stage_lookup,
                                               stage_prefetch_rows)
from fastpubsub.engine.kernels.run_lookups import (RUN_AHEAD, STAGED, run_bounds_ahead, runs_entries, runs_found,
                                                   runs_index_rows, runs_later_columns)
from fastpubsub.engine.costmodel.constants import MAX_SCHEMA
from fastpubsub.workloads.fabret import W0, generate_events, generate_subscriptions

#: Counters per event, in this order (columns of ``counts``).
COUNTERS = ("lists", "index_lookups", "runs_found", "run_entries", "run_lines", "passing_second", "tail_entries",
            "other_entries")


@njit(cache=True)
def count_stages(ev, preds, store, runs, access, scratch, counts):
    """Replays stages 1-5 of ``clustered_events`` and adds each event's counters (``COUNTERS``) to ``counts[e]``."""
    n_ev = ev.offsets.shape[0] - 1
    conj_flat = access.conj_keys.ravel()
    sat = np.empty(max(preds.bits.shape[0], 1), dtype=np.int64)
    gsat = np.empty(1024, dtype=np.int64)
    gs_off = np.zeros(GROUP + 1, dtype=np.int64)
    gp_off = np.zeros(GROUP + 1, dtype=np.int64)
    probe = scratch.probe
    hit = np.empty((256, 5), dtype=np.int64)
    sv = np.empty((256, 2), dtype=np.int64)
    sv_off = np.zeros(GROUP + 1, dtype=np.int64)
    for g0 in range(0, n_ev, GROUP):
        g1 = min(n_ev, g0 + GROUP)
        n_grp = g1 - g0
        gsat, probe, n_probe = stage_keys(ev, g0, g1, preds, access, conj_flat, scratch.eq_of_field, store.key_head,
                                          sat, gsat, gs_off, np.zeros(GROUP, dtype=np.int64), gp_off, probe)
        stage_lookup(probe, n_probe, access, store.key_head)
        stage_heads(probe, n_probe, store, runs)
        runs_index_rows(n_grp, gs_off, gp_off, gsat, probe, scratch.gmask, store, runs)
        hit, nh = runs_found(n_grp, gs_off, gs_off[1:], gp_off, gsat, probe, store, hit)
        sv = runs_entries(n_grp, gs_off, gsat, hit, nh, scratch.gmask, store, runs, sv, sv_off)
        for i in range(n_grp):
            for s in range(gs_off[i], gs_off[i + 1]):
                scratch.gmask[gsat[s]] = 0
        for i in range(n_grp):
            e = g0 + i
            nsat = gs_off[i + 1] - gs_off[i]
            for t in range(gp_off[i], gp_off[i + 1]):
                c = probe[t, 1]
                if c < 0:
                    continue
                counts[e, 0] += 1
                if probe[t, 2] == STAGED:
                    counts[e, 1] += nsat
                    counts[e, 6] += store.length[c] - runs.sorted[c]
                    c = store.next[c]
                while c >= 0:
                    counts[e, 7] += store.length[c]
                    c = store.next[c]
            counts[e, 5] += sv_off[i + 1] - sv_off[i]
        for h in range(nh):
            e = g0 + hit[h, 0]
            c, start, end = hit[h, 1], hit[h, 2], hit[h, 3]
            counts[e, 2] += 1
            counts[e, 3] += end - start
            row = store.base[c] + store.cap[c]
            counts[e, 4] += (row + end - 1) * 4 // 64 - (row + start) * 4 // 64 + 1  # (arena offsets: lines of a line-aligned arena)
    return counts


@njit(cache=True, _nrt=False)
def runs_bounds(hit, nh, gmask, store, runs, ahead, read):
    """``runs_entries``' pipeline without its test of the entries: the starts read, the entry lines prefetched;
    ``read`` 1 also reads each run's first entry (its line arriving), 2 every entry, OR-ed without a branch (the
    reads of the test); returns the OR."""
    arena, c_base, c_cap, c_k, c_sorted, c_runs = store.arena, store.base, store.cap, store.k, runs.sorted, runs.runs
    acc = np.uint32(0)
    for h in range(-2 * ahead, nh):
        run_bounds_ahead(hit, h, nh, ahead, arena, c_base, c_cap, c_k, c_sorted, c_runs, runs.sub_off, runs.sub)
        if h < 0 or read == 0:
            continue
        row = c_base[hit[h, 1]] + c_cap[hit[h, 1]]
        end = hit[h, 2] + 1 if read == 1 else hit[h, 3]
        for j in range(hit[h, 2], end):
            acc |= gmask[np.uint64(arena[np.uint64(row + j)])]
    return acc


@njit(cache=True)
def cut_kernel(ev, preds, store, runs, access, scratch, handle_id, last, ahead):
    """``clustered_events`` stopped after stage ``last`` (4; 50: stage 5 without the runs' entries; 51: with the
    first entry of each run read; 52: with every entry read, OR-ed; 5: without the later columns; 6: whole),
    with ``stage_runs`` reading run bounds ``ahead`` runs ahead (``RUN_AHEAD`` in the matcher); returns the
    matches counted."""
    n_ev = ev.offsets.shape[0] - 1
    bits = preds.bits
    conj_flat = access.conj_keys.ravel()
    sat = np.empty(max(bits.shape[0], 1), dtype=np.int64)
    gsat = np.empty(1024, dtype=np.int64)
    gs_off = np.zeros(GROUP + 1, dtype=np.int64)
    gp_off = np.zeros(GROUP + 1, dtype=np.int64)
    probe = scratch.probe
    out = np.empty(1024, dtype=np.int64)
    out_off = np.zeros(n_ev + 1, dtype=np.int64)
    nout = 0
    hit = np.empty((256, 5), dtype=np.int64)
    sv = np.empty((256, 2), dtype=np.int64)
    sv_off = np.zeros(GROUP + 1, dtype=np.int64)
    for g0 in range(0, n_ev, GROUP):
        g1 = min(n_ev, g0 + GROUP)
        gsat, probe, n_probe = stage_keys(ev, g0, g1, preds, access, conj_flat, scratch.eq_of_field, store.key_head,
                                          sat, gsat, gs_off, np.zeros(GROUP, dtype=np.int64), gp_off, probe)
        stage_lookup(probe, n_probe, access, store.key_head)
        stage_heads(probe, n_probe, store, runs)
        stage_prefetch_rows(g1 - g0, gs_off, gp_off, probe, store, runs)
        if last >= 5:  # stage_runs, its pipeline depth a parameter
            runs_index_rows(g1 - g0, gs_off, gp_off, gsat, probe, scratch.gmask, store, runs)
            hit, nh = runs_found(g1 - g0, gs_off, gs_off[1:], gp_off, gsat, probe, store, hit)
            if last >= 50:
                nout += runs_bounds(hit, nh, scratch.gmask, store, runs, ahead, last - 50) & 1
            else:
                sv = runs_entries(g1 - g0, gs_off, gsat, hit, nh, scratch.gmask, store, runs, sv, sv_off, ahead)
                if last == 6:  # the later columns, counted with stage 6 (they read the partial matches' lines)
                    runs_later_columns(g1 - g0, gp_off, probe, scratch.gmask, store, sv, sv_off)
            for s in range(gs_off[g1 - g0]):
                scratch.gmask[gsat[s]] = 0
        if last == 6:
            out, nout = scan_group(g0, g1, gsat, gs_off, gp_off, probe, sv, sv_off, bits, store, runs, out, nout,
                                   out_off, handle_id, 0, 8, 256)
    return nout


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--algorithm", default="dynamic", choices=("static", "dynamic"))
    ap.add_argument("--rounds", type=int, default=3, help="maintenance rounds to time in a row (dynamic)")
    ap.add_argument("--ahead", default=str(RUN_AHEAD),
                    help=f"comma-separated pipeline depths of stage_runs to time side by side (the matcher's: {RUN_AHEAD})")
    args = ap.parse_args(argv)
    from fastpubsub.engine.frontend.encoding import encode_batch

    events = generate_events(W0, n=args.events, seed=2)
    subs = generate_subscriptions(W0, n=args.n, seed=1)
    m = Matcher(args.algorithm)
    t = time.perf_counter()
    m.add_bulk(subs)
    load = time.perf_counter() - t
    del subs
    gc.collect()
    res = m.match_encoded(events)  # (compiles; the maintenance settles)
    res = m.match_encoded(events)
    ix = m._index
    p = ix.preds
    p.prepare()
    ev = encode_batch(events, m.attributes, m.strings).arrays()
    probe = np.empty((GROUP * max(len(ix.schemas), 1), MAX_SCHEMA), dtype=np.int64)
    scratch = ProbeScratch(ix.eq_of_field, probe, ix.gmask, np.empty(1024, dtype=np.int64), False)
    store, runs, access = ix.store.arrays(), ix.store.run_arrays(), ix.keys.arrays(ix.sch_fields)
    counts = count_stages(ev, p.arrays(), store, runs, access, scratch, np.zeros((args.events, len(COUNTERS)), np.int64))
    n_match = len(res.ids)
    print(f"N={args.n:,} {args.algorithm}: load {load:.1f} s, tables {m.stats()['hash_tables']['multi_attribute']}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("per event: " + ", ".join(f"{name} {counts[:, j].mean():.2f}" for j, name in enumerate(COUNTERS))
          + f", matches {n_match / args.events:.3f}")
    aheads = [int(a) for a in args.ahead.split(",")]
    cuts = [(last, a) for a in aheads for last in (4, 50, 51, 52, 5, 6)]
    best = {cut: float("inf") for cut in cuts}
    wall = dict(best)
    for cut in cuts:  # (compiles)
        cut_kernel(ev, p.arrays(), store, runs, access, scratch, m.handle_id, *cut)
    for _ in range(args.repeat):  # passes alternate, so that a slow spell of the machine hits every cut
        for cut in cuts:
            t0, w0 = time.process_time(), time.perf_counter()
            got = cut_kernel(ev, p.arrays(), store, runs, access, scratch, m.handle_id, *cut)
            best[cut] = min(best[cut], time.process_time() - t0)
            wall[cut] = min(wall[cut], time.perf_counter() - w0)
            if cut[0] == 6:
                assert got == n_match, (got, n_match)
    for a in aheads:
        us = {last: best[last, a] / args.events * 1e6 for last in (4, 50, 51, 52, 5, 6)}
        print(f"runs {a} ahead: CPU µs per event: stages 1-4 {us[4]:.3f}, stage 5 (runs) {us[5] - us[4]:.3f} "
              f"(index and bounds {us[50] - us[4]:.3f}, entries {us[5] - us[50]:.3f}: their lines arriving "
              f"{us[51] - us[50]:.3f}, read {us[52] - us[51]:.3f}, tested {us[5] - us[52]:.3f}), "
              f"stage 6 (scans, results) {us[6] - us[5]:.3f}, whole {us[6]:.3f} "
              f"(wall whole {wall[6, a] / args.events * 1e6:.3f})")
    if args.algorithm == "dynamic" and args.rounds > 0:
        # what best passes leave out: a maintenance round every refresh_events events, its price growing with N
        every = m.maintenance.t.refresh_events
        rounds = []
        for _ in range(args.rounds):
            t0 = time.process_time()
            m.index.maintain()
            rounds.append(time.process_time() - t0)
        round_s = min(rounds)
        if len(rounds) > 6:
            rounds = rounds[:3] + rounds[-3:]  # (the first and the last three)
        print(f"maintenance rounds: {', '.join(f'{r:.3f}' for r in rounds)} CPU s, every {every:,} events: "
              f"{round_s / every * 1e6:.3f} µs per event amortized (the cheapest); marked subscriptions "
              f"{m.stats()['maintenance']['marked_subscriptions']:,}")
    print(f"load average {os.getloadavg()[0]:.2f}")

if __name__ == "__main__":
    main()
