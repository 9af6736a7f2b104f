"""Each numba kernel against a naive Python statement of what it computes, on small arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import naive

from fastpubsub.engine.structures.cluster_store import ClusterStore
from fastpubsub.engine.structures.sorted_runs import (DEAD, DEAD_SHIFT, SUB_BUILD, index_run, sub_index, sub_index_size,
                                                      sub_lookup)
from fastpubsub.engine.frontend.encoding import StringDictionary, repeated_fields
from fastpubsub.engine.structures.hashtable import HashTable, IdTable
from fastpubsub.engine.structures.predicates import (PredicateTable, fields_in_use, fields_of, group_order,
                                                     satisfied_predicates)
from fastpubsub.engine.structures.cluster_store import NO_PROBABILITIES, OP_RANK, order_columns
from fastpubsub.engine.algorithms.propagation import choose_access
from fastpubsub.engine.kernels.scan import MAX_SPECIALISED, scan_cluster, scan_clusters_into, scan_dispatch, scan_runs_into
from fastpubsub.engine.semantics import KINDS, OPERATORS, compare


@pytest.mark.parametrize("prefetch_columns", [0, 2])
@pytest.mark.parametrize("k", list(range(MAX_SPECIALISED + 1)) + [13])
def test_scan_kernels_match_naive(k, prefetch_columns):
    rng = np.random.default_rng(k)
    n_bits = 40
    bits = (rng.random(n_bits) < 0.9).astype(np.uint8)
    matched = 0
    K = k if k <= MAX_SPECIALISED else -1
    for n in (0, 1, 3, 4, 37):
        cap = n + 3
        base = 5
        arena = np.full(base + (k + 1) * cap + 2, -7, dtype=np.int32)
        for r in range(k):
            arena[base + r * cap : base + r * cap + n] = rng.integers(0, n_bits, n)
        arena[base + k * cap : base + k * cap + n] = rng.permutation(1000)[:n]
        arena[base + k * cap + rng.choice(n, n // 4, replace=False)] = DEAD  # removed entries: never reported
        want = naive.scan_cluster(bits, arena, k, base, cap, n)
        out = np.full(n + 2, -1, dtype=np.int64)
        got = scan_cluster(K, prefetch_columns, 4, 8, k, arena, bits, base, cap, n, out, 2)
        assert out[2:got].tolist() == want and got == 2 + len(want)
        out2 = np.full(n + 2, -1, dtype=np.int64)
        assert scan_dispatch(prefetch_columns, 4, 8, k, arena, bits, base, cap, n, out2, 0) == len(want)
        assert out2[: len(want)].tolist() == want
        matched += len(want)
    assert matched, "the random cases should produce matches"


def test_hash_table_against_dict():
    rng = np.random.default_rng(1)
    t = HashTable(width=2, capacity=8)
    ref: dict[tuple[int, int], int] = {}
    for step in range(30):
        keys = rng.integers(-20, 20, size=(50, 2))
        vals, _ = t.get_or_insert(keys, 1000 * step)
        nxt = 1000 * step
        for row, v in zip(map(tuple, keys.tolist()), vals.tolist()):
            if row not in ref:
                ref[row] = nxt
                nxt += 1
            assert ref[row] == v
        gone = rng.integers(-20, 20, size=(30, 2))
        removed = t.delete(gone)
        uniq = {tuple(r) for r in gone.tolist()}
        assert removed == sum(1 for r in uniq if ref.pop(r, None) is not None)
        probe = rng.integers(-20, 20, size=(60, 2))
        assert t.lookup(probe).tolist() == [ref.get(tuple(r), -1) for r in probe.tolist()]
        assert len(t) == len(ref)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 40), st.integers(-5, 5)), min_size=1, max_size=12),
       seed=st.integers(0, 2**32 - 1))
def test_id_table_maps_ids_to_handles_like_a_dict(steps, seed):
    """The matcher's id -> handle table reads each id from ``hid[handle]``: through growth, deletions that shift
    probe chains back, released handles taken again under other ids, and ids from a narrow range (long chains)
    or the whole int64 range."""
    rng = np.random.default_rng(seed)
    t = IdTable(capacity=8)
    hid = np.zeros(0, dtype=np.int64)
    ref: dict[int, int] = {}
    free: list[int] = []
    for n_add, n_del, span in steps:
        lo, hi = (-2**62, 2**62) if span == 0 else (-abs(span) * 30, abs(span) * 30 + 1)
        fresh = np.setdiff1d(rng.integers(lo, hi, size=n_add), np.array(list(ref), dtype=np.int64))
        rng.shuffle(fresh)
        handles = np.array([free.pop() if free else len(hid) + i for i in range(len(fresh))], dtype=np.int64)
        if len(handles):
            top = int(handles.max()) + 1
            hid = np.concatenate([hid, np.zeros(max(0, top - len(hid)), dtype=np.int64)])
            hid[handles] = fresh
        t.insert(handles, hid)
        ref.update(zip(fresh.tolist(), handles.tolist()))
        gone = rng.choice(np.array(list(ref), dtype=np.int64), size=min(n_del, len(ref)), replace=False)
        absent = np.setdiff1d(rng.integers(lo, hi, size=5), np.array(list(ref), dtype=np.int64))
        assert t.delete(np.concatenate([gone, absent]), hid) == len(gone)
        for g in gone.tolist():
            free.append(ref.pop(g))
        probe = np.concatenate([np.array(list(ref), dtype=np.int64), gone, absent])
        assert t.lookup(probe, hid).tolist() == [ref.get(k, -1) for k in probe.tolist()]
        assert [t.has(k, hid) for k in probe.tolist()] == [k in ref for k in probe.tolist()]
        assert len(t) == len(ref) and sorted(t.handles().tolist()) == sorted(ref.values())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(-3, 3)), max_size=40),
                                st.lists(st.integers(0, 60), max_size=20)), min_size=1, max_size=6))
def test_predicate_table_interns_and_frees_like_a_dict(steps):
    """Equalities in the keyed hash table, other operators in the keyless one: each distinct (attribute, op,
    number) has one id while referenced, and a freed one is found no more (its key may come back with a new id)."""
    preds = PredicateTable(StringDictionary())
    ref: dict[tuple[int, int, int], int] = {}
    for added, dropped in steps:
        if added:
            f, o, v = (np.array(x) for x in zip(*added))
            ids = preds.intern(f.astype(np.int64) * len(KINDS), o.astype(np.int8), v.astype(np.float64).view(np.int64))
            for key, i in zip(added, ids.tolist()):
                assert ref.setdefault(key, i) == i
            assert len(set(ref.values())) == len(ref)
            preds.incref(ids)
        live = sorted(ref.items())
        gone = [live[i % len(live)] for i in dropped] if live else []
        counts = {key: int(preds.refcount[i]) for key, i in live}
        drop = []
        for key, i in gone:
            if counts[key] > 0:
                counts[key] -= 1
                drop.append(i)
        dead = set(preds.decref(np.array(drop, dtype=np.int64)).tolist())
        for key, i in live:
            assert (i in dead) == (counts[key] == 0)
            if counts[key] == 0:
                del ref[key]
        assert len(preds.table) + len(preds.ranges) == len(ref) == preds.n_live


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.floats(-5, 5)), max_size=60))
def test_group_order_is_lexsort(rows):
    key = np.array([k for k, _ in rows], dtype=np.int64)
    vals = np.array([v for _, v in rows], dtype=np.float64)
    got = group_order(np.argsort(vals, kind="stable"), key, 8)
    assert got.tolist() == np.lexsort((vals, key)).tolist()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 5), st.integers(-1, 2)), min_size=1, max_size=40),
       st.lists(st.integers(0, 39), max_size=30))
def test_field_masks_are_np_unique(table, picks):
    field = np.array([f for f, _, _ in table], dtype=np.int64)
    op = np.array([o for _, o, _ in table], dtype=np.int8)
    refcount = np.array([r for _, _, r in table], dtype=np.int32)
    pids = np.array([p % len(table) for p in picks], dtype=np.int64)
    assert np.flatnonzero(fields_of(field, pids, 10)).tolist() == np.unique(field[pids]).tolist()
    for eq_only in (False, True):
        for live_only in (False, True):
            keep = np.ones(len(table), dtype=bool)
            if eq_only:
                keep &= op == 0
            if live_only:
                keep &= refcount > 0
            got = np.flatnonzero(fields_in_use(field, op, refcount, len(table), 10, eq_only, live_only))
            assert got.tolist() == np.unique(field[keep]).tolist()


def test_satisfied_predicates_against_compare():
    """Phase 1 on one attribute: every operator, numbers, against engine.semantics.compare."""
    strings = StringDictionary()
    preds = PredicateTable(strings)
    consts = [1.0, 2.0, 2.5, -1.0, 7.0]
    table = [(op, c) for op in OPERATORS for c in consts]
    field = np.zeros(len(table), dtype=np.int64)  # attribute 0, kind number
    ops = np.array([OPERATORS.index(op) for op, _ in table], dtype=np.int8)
    eqbits = np.array([c for _, c in table]).view(np.int64)
    pids = preds.intern(field, ops, eqbits)
    preds.incref(pids)
    preds.prepare()
    sat = np.empty(preds.n_ids, dtype=np.int64)
    for x in [-5.0, -1.0, 0.0, 1.0, 2.0, 2.25, 2.5, 7.0, 9.0, np.nan]:
        p = preds.arrays()
        n = satisfied_predicates(0, 1, np.array([0 if x == x else -1]), np.array([x]), np.array([x + 0.0]).view(np.int64),
                                 p.table_keys, p.table_vals, p.group_of, p.g_start, p.g_end, p.g_vals, p.g_pids, sat,
                                 0, p.bits)
        got = sorted(sat[:n].tolist())
        want = sorted(int(p) for p, (op, c) in zip(pids, table) if compare(op, x, c))
        assert got == want, x


def test_repeated_fields_are_flagged_per_event():
    assert repeated_fields(np.array([0, 2, 4, 6]), np.array([0, 1, 1, 1, -1, -1]), 2).tolist() == [0, 1, 0]


def test_satisfied_predicates_writes_each_predicate_once_for_repeated_fields():
    preds = PredicateTable(StringDictionary())
    pids = preds.intern(np.array([0, 0, 0]), np.array([0, 2, 1], np.int8), np.array([1.0, 5.0, 9.0]).view(np.int64))
    preds.incref(pids)
    preds.prepare()
    p = preds.arrays()
    sat = np.empty(preds.n_ids, dtype=np.int64)  # room for each predicate once: a second write would overflow
    values = np.array([1.0, 1.0, 2.0, 3.0])
    n = satisfied_predicates(0, 4, np.zeros(4, np.int64), values, values.view(np.int64), p.table_keys, p.table_vals,
                             p.group_of, p.g_start, p.g_end, p.g_vals, p.g_pids, sat, 1, p.bits)
    assert sorted(sat[:n].tolist()) == sorted(pids.tolist())  # = 1, < 5, != 9: each satisfied, each once
    assert not p.bits.any()  # left at rest


def test_access_choice_and_column_order():
    # predicate id -> operator: 0 '=', 1 '!=', 2 '<', 3 '=' ; 3 is referenced less, so it is the access predicate
    op = np.array([0, 1, 2, 0], dtype=np.int8)
    refcount = np.array([5, 1, 1, 2])
    off = np.array([0, 4, 6])
    pids = np.array([1, 0, 2, 3, 1, 2])
    access = choose_access(off, pids, op, refcount)
    ks, cols, col_off = order_columns(off, pids, op, access, OP_RANK, NO_PROBABILITIES)
    assert access[:, 0].tolist() == [3, -1] and ks.tolist() == [3, 2]
    assert cols[col_off[0] : col_off[1]].tolist() == [0, 2, 1]  # =, <, != : likely-false first
    assert cols[col_off[1] : col_off[2]].tolist() == [2, 1]
    # a conjunction as access: both of its predicates leave the columns
    ks, cols, col_off = order_columns(off, pids, op, np.array([[0, 3, -1], [-1, -1, -1]]), OP_RANK, NO_PROBABILITIES)
    assert ks.tolist() == [2, 2] and cols[col_off[0] : col_off[1]].tolist() == [2, 1]


def test_columns_of_one_rank_go_rarest_first_and_ties_keep_their_order():
    # four equalities (0, 2, 3, 5), a range (1) and a !=  (4); no access predicate
    op = np.array([0, 2, 0, 0, 1, 0], dtype=np.int8)
    prob = np.array([0.5, 1.0, 0.02, 0.5, 1.0, 0.1])
    off = np.array([0, 6])
    pids = np.array([0, 1, 2, 3, 4, 5])
    none = np.full((1, 1), -1, dtype=np.int64)
    ks, cols, _ = order_columns(off, pids, op, none, OP_RANK, prob)
    assert cols.tolist() == [2, 5, 0, 3, 1, 4]  # equalities by probability (0 before 3: a tie), then <, then !=
    _, cols, _ = order_columns(off, pids[::-1].copy(), op, none, OP_RANK, prob)
    assert cols.tolist() == [2, 5, 3, 0, 1, 4]  # the tie now in the other order
    _, cols, _ = order_columns(off, pids, op, none, OP_RANK, NO_PROBABILITIES)
    assert cols.tolist() == [0, 2, 3, 5, 1, 4]


def test_cluster_store_swap_remove_and_compaction():
    s = ClusterStore()
    rng = np.random.default_rng(0)
    entries = np.arange(200, dtype=np.int64)
    keys = rng.integers(0, 5, 200)
    ks = keys % 3
    payload_off = np.r_[0, np.cumsum(ks)]
    payload = rng.integers(0, 100, payload_off[-1])
    s.append(s.clusters_for(keys, ks), entries, payload, payload_off)
    model = {int(e): (int(keys[e]), payload[payload_off[e] : payload_off[e + 1]].tolist()) for e in entries}
    for e in rng.permutation(200)[:150]:
        s.remove(np.array([e]))
        del model[int(e)]
    s.compact()
    rest = np.array(sorted(model), dtype=np.int64)
    cols, off = s.payload(rest)
    assert s.key_of(rest).tolist() == [model[e][0] for e in rest.tolist()]
    assert [cols[off[i] : off[i + 1]].tolist() for i in range(len(rest))] == [model[e][1] for e in rest.tolist()]
    assert int(s.c_len[: s.ids.high].sum()) == 50


def check_runs(s: ClusterStore) -> None:
    """The run invariant of every cluster: sorted prefix, run rows describing it exactly, positions of the live
    entries recorded, dead entries (tombstones) only in the sorted prefix, counted, at most an eighth of it all."""
    for c in np.flatnonzero(s.c_k[: s.ids.high] >= 0):
        b, cap, k, n, ns, nr = (int(x[c]) for x in (s.c_base, s.c_cap, s.c_k, s.c_len, s.c_sorted, s.c_runs))
        line = s.arena[b + k * cap : b + k * cap + n]
        dead = line == DEAD
        assert not dead[ns:].any() and int(dead.sum()) == s.c_dead[c] <= n >> DEAD_SHIFT
        alive = np.flatnonzero(~dead)
        assert (s.e_pos[line[alive]] == alive).all() and (s.e_cluster[line[alive]] == c).all()
        if ns == 0:
            assert nr == 0
            continue
        first = s.arena[b : b + ns]
        assert (np.diff(first) >= 0).all()
        starts = np.flatnonzero(np.r_[True, first[1:] != first[:-1]])
        assert nr == len(starts)
        assert s.arena[b + (k + 2) * cap : b + (k + 2) * cap + nr].tolist() == starts.tolist()
        assert s.arena[b + (k + 1) * cap : b + (k + 1) * cap + nr].tolist() == first[starts].tolist()
        ir = b + (k + 3) * cap
        if s.arena[ir + 1] > 0:  # the run index: every predicate id in range maps to its run or to -1
            lo = int(s.arena[ir])
            run_of = {int(p): r for r, p in enumerate(first[starts])}
            for p in range(lo - 2, lo + 32 * int(s.arena[ir + 1]) + 2):
                assert index_run(s.arena, ir, p) == run_of.get(p, -1)


def check_second_level(s: ClusterStore) -> int:
    """Every second-level index answers as the run it indexes (naive.second_level): each predicate id in its range
    finds exactly the run's entries with that second column, or nothing if none has it; runs without an index are
    shorter than ``level2`` (or their ids span more words than they have entries).  Returns the runs indexed."""
    runs = s.run_arrays()
    indexed = 0
    for c in np.flatnonzero(s.c_k[: s.ids.high] >= 0):
        if s.c_sub[c] < 0:
            continue
        assert s.sub_min > 0 and s.c_sorted[c] > 0
        for r in range(int(s.c_runs[c])):
            want = naive.second_level(int(c), r, s.arrays(), runs)
            x, x_end = sub_index(s.sub, s.c_sub, c, r)
            m = sum(len(v) for v in want.values())
            if x < 0:
                span = ((max(want) - (min(want) >> 5 << 5)) >> 5) + 1
                assert m < s.sub_min or span > m
                continue
            indexed += 1
            lo, w = int(s.sub[x]), int(s.sub[x + 1])
            assert lo % 32 == 0 and x_end - x == sub_index_size(w, len(want))
            for p in range(lo - 2, lo + 32 * w + 2):
                a, b = sub_lookup(s.sub, x, p)
                assert list(range(a, b)) == want.get(p, [])
            assert set(want) <= set(range(lo, lo + 32 * w))
    return indexed


def scan_all(s: ClusterStore, bits: np.ndarray, keys) -> list[int]:
    """Every list of ``keys`` scanned into an ``out`` that starts small: grown and scanned again when it is full."""
    out = np.zeros(4, dtype=np.int64)
    nout = 0
    sat = np.flatnonzero(bits).astype(np.int64)
    st, rn = s.arrays(), s.run_arrays()
    for q in keys:
        if q < len(s.key_head):
            while True:
                got = scan_clusters_into(st.key_head[q], st.arena, st.next, st.base, st.cap, st.length, st.k,
                                         rn.sorted, rn.runs, bits, out, nout, 2, 4, 8, sat, 0, len(sat))
                if got >= 0:
                    nout = got
                    break
                out = np.concatenate([out, np.zeros(len(out), dtype=np.int64)])
    return sorted(out[:nout].tolist())


@pytest.mark.parametrize("run_min, level2", [(2, 0), (64, 0), (2, 2), (64, 5)])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), ops=st.lists(st.tuples(st.sampled_from(["add", "remove", "bulk", "again", "tails"]),
                                                         st.integers(1, 300)), min_size=1, max_size=12))
def test_cluster_runs_stay_sorted_and_scan_like_plain_clusters(run_min, level2, seed, ops):
    """Appends, single and bulk removes (tombstones in the sorted prefixes, purged past an eighth of a cluster),
    removed entries appended again (a handle reused) and the maintenance's tail merges; with a second level, every
    index answers as its run (``check_second_level``) through tombstones and purges."""
    rng = np.random.default_rng(seed)
    s = ClusterStore(runs=run_min, level2=level2)
    model: dict[int, tuple[int, list[int]]] = {}
    next_entry = 0
    n_bits = 12  # few distinct first columns: long runs
    for kind, count in ops:
        if kind in ("add", "again"):
            if kind == "add":
                entries = np.arange(next_entry, next_entry + count, dtype=np.int64)
                next_entry += count
            else:  # entries removed before, appended again (new columns, maybe another cluster)
                entries = np.setdiff1d(np.arange(next_entry), np.array(list(model), dtype=np.int64))[:count]
                count = len(entries)
            keys = rng.integers(1, 4, count)
            ks = rng.integers(0, 4, count)
            payload_off = np.r_[0, np.cumsum(ks)]
            payload = rng.integers(0, n_bits, payload_off[-1])
            s.append(s.clusters_for(keys, ks), entries, payload, payload_off)
            for i, e in enumerate(entries.tolist()):
                model[e] = (int(keys[i]), payload[payload_off[i] : payload_off[i + 1]].tolist())
        elif kind == "tails":
            s.sort_tails(np.array([1, 2, 3]))
            live = s.c_k[: s.ids.high] >= 0
            assert not ((s.c_sub[: s.ids.high] == SUB_BUILD) & live).any()  # every block marked is built
        elif model:
            live = np.array(sorted(model), dtype=np.int64)
            gone = rng.permutation(live)[: min(count, len(live))]
            if kind == "remove":
                for e in gone[:40]:
                    s.remove(np.array([e]))
                    del model[int(e)]
            else:
                s.remove(gone)
                for e in gone.tolist():
                    del model[e]
        check_runs(s)
        check_second_level(s)
        bits = (rng.random(n_bits) < 0.6).astype(np.uint8)
        want = sorted(e for e, (q, cols) in model.items() if all(bits[p] for p in cols))
        assert scan_all(s, bits, [1, 2, 3]) == want
    s.compact()
    check_runs(s)
    live = np.array(sorted(model), dtype=np.int64)
    if len(live):
        cols, off = s.payload(live)
        assert [cols[off[i] : off[i + 1]].tolist() for i in range(len(live))] == [model[e][1] for e in live.tolist()]


def test_a_long_cluster_is_scanned_run_by_run():
    """300 entries on 12 first-column predicates: 12 runs, sorted, and the tail merged in past an eighth."""
    s = ClusterStore(runs=64)
    rng = np.random.default_rng(3)
    payload = rng.integers(0, 12, 600)
    s.append(s.clusters_for(np.ones(300, np.int64), np.full(300, 2)), np.arange(300), payload, np.arange(0, 601, 2))
    c = int(s.e_cluster[0])
    assert s.c_sorted[c] == 300 and s.c_runs[c] == 12
    s.append(s.clusters_for(np.ones(30, np.int64), np.full(30, 2)), np.arange(300, 330), payload[:60], np.arange(0, 61, 2))
    assert s.c_sorted[c] == 300 and s.c_len[c] == 330  # a tail of 30 <= 300 / 8 waits
    s.append(s.clusters_for(np.ones(10, np.int64), np.full(10, 2)), np.arange(330, 340), payload[:20], np.arange(0, 21, 2))
    assert s.c_sorted[c] == 340  # 40 > 300 / 8: merged
    check_runs(s)
    b0, cap0 = int(s.c_base[c]), int(s.c_cap[c])
    at = int(s.e_pos[5])
    s.remove(np.array([5]))  # a removal from the sorted prefix leaves a tombstone: no run moves
    assert s.c_sorted[c] == 340 and s.c_len[c] == 340 and s.c_dead[c] == 1 and s.arena[b0 + 2 * cap0 + at] == DEAD
    check_runs(s)
    s.remove(np.arange(6, 48))  # 43 dead > 340 / 8: purged, the runs rebuilt over the 297 left
    assert s.c_sorted[c] == 297 and s.c_len[c] == 297 and s.c_dead[c] == 0
    check_runs(s)
    s.remove(np.arange(100, 120))  # 20 dead <= 297 / 8: scanned past, never reported
    assert s.c_dead[c] == 20
    check_runs(s)
    b, cap, k, ns, nr = (int(x[c]) for x in (s.c_base, s.c_cap, s.c_k, s.c_sorted, s.c_runs))
    for trial in range(20):  # both ways of finding the passing runs, against the naive scan
        bits = (rng.random(12) < 0.3).astype(np.uint8)
        sat = np.flatnonzero(bits).astype(np.int64)
        want = sorted(naive.scan_cluster(bits, s.arena, k, b, cap, ns))
        for by_index in (False, True):
            out = np.zeros(ns, dtype=np.int64)
            hits = np.full(nr, -1, dtype=np.int64)
            got = scan_runs_into(k, s.arena, bits, b, cap, ns, nr, out, 0, 8, by_index, sat, 0, len(sat), hits, 0)
            assert sorted(out[:got].tolist()) == want


def _load_in_chunks(s: ClusterStore, chunks: range, model: dict, seed: int = 5) -> int:
    """Append 40,000 entries of two columns per chunk over 49 keys; returns the rows the clusters hold."""
    rng = np.random.default_rng(seed)
    for chunk in chunks:
        entries = np.arange(chunk * 40_000, (chunk + 1) * 40_000)
        keys = rng.integers(1, 50, len(entries))
        payload = rng.integers(0, 200, 2 * len(entries))
        s.append(s.clusters_for(keys, np.full(len(entries), 2)), entries, payload, np.arange(0, 2 * len(entries) + 1, 2))
        model.update({int(e): payload[2 * i : 2 * i + 2].tolist() for i, e in enumerate(entries)})
    live = s.c_k[: s.ids.high] >= 0
    return int(np.sum(s.rows(s.c_k[: s.ids.high][live]) * s.c_len[: s.ids.high][live]))


def _assert_holds(s: ClusterStore, model: dict) -> None:
    check_runs(s)
    live = np.array(sorted(model), dtype=np.int64)
    cols, off = s.payload(live)
    assert cols.reshape(-1, 2).tolist() == [model[e] for e in live.tolist()]


def test_trim_compacts_what_a_chunked_load_left_behind():
    """Clusters grown chunk by chunk in a small arena leave relocated copies behind; trim rewrites it densely."""
    s, model = ClusterStore(runs=64), {}
    data = _load_in_chunks(s, range(4), model)
    assert len(s.arena) > 2.5 * data and s.garbage > 0  # what the load left
    s.trim()
    assert len(s.arena) <= 1.5 * data + 4096 and s.garbage == 0  # half the length as room, no abandoned segments
    _assert_holds(s, model)
    s.trim()  # nothing left to gain: no rewrite
    assert s.garbage == 0


def test_a_bulk_into_full_clusters_compacts_once_instead_of_abandoning_them():
    """Once relocating a bulk's clusters would abandon more than stays, the store compacts, fitting them to what
    they need: the later chunks of a load leave nothing abandoned and an arena near its live rows."""
    s, model = ClusterStore(runs=64), {}
    data = _load_in_chunks(s, range(12), model)
    assert s.garbage == 0 and len(s.arena) <= 1.25 * data
    _assert_holds(s, model)
    arena = s.arena
    s.trim()  # within a quarter of what a compaction leaves: kept
    assert s.arena is arena


# -- the stages of engine/kernels/probing.py, each against tests/support/naive.py -------------------------------------------------

def _conjunction_matcher(fixed=("=", "="), sizes=(3, 4, 5), level2=0):
    """Static with runs on a small W0: (a0, a1) conjunction lists of about 300 entries, sorted and indexed
    (``fixed``: the fixed predicates, W1's ``("=", "=", "<=")`` for an inequality in every subscription;
    ``level2``: runs of that many entries or more get a second level, built again after the removals)."""
    from dataclasses import replace

    from fastpubsub.engine import Matcher, RUN_MIN
    from fastpubsub.engine.columnar import concat_subscriptions
    from fastpubsub.engine.costmodel.model import CostModel
    from fastpubsub.workloads.fabret import WorkloadSpec, generate_events, generate_subscriptions

    spec = WorkloadSpec(name="w0-small", n_attributes=8, subscription_attributes=(0, 8), n_predicates=max(sizes),
                        fixed=fixed, n_event_pairs=8, domain=(1, 6))
    subs = concat_subscriptions([generate_subscriptions(replace(spec, n_predicates=n_p), 10_000, seed=n_p,
                                                        first_id=10_000 * (n_p - 3)) for n_p in sizes])
    m = Matcher("static", runs=RUN_MIN, level2=level2, model=CostModel(K_r=1.0, C_h=300.0, K_h=1.0, K_c=1.0))
    m.add_bulk(subs)
    rng = np.random.default_rng(3)
    for sid in rng.choice(subs.ids, size=300, replace=False).tolist():  # unsorted tails, tombstones
        m.remove(sid)
    if level2:
        m.index.sort_tails(np.arange(len(m.index.store.key_head)))
        assert check_second_level(m.index.store) > 0
    events = generate_events(spec, 40, seed=5)
    sparse = generate_events(replace(spec, n_event_pairs=3), 30, seed=6)  # events lacking a0 or a1 skip the table
    return m, [events, sparse]


def _stage_arrays(m):
    """The matcher's arrays and the probing stages' scratch, as ``clustered_events`` sets them up."""
    from fastpubsub.engine.kernels.probing import GROUP

    ix = m.index
    m.preds.prepare()
    preds, store, runs = m.preds.arrays(), ix.store.arrays(), ix.store.run_arrays()
    access = ix.keys.arrays(ix.sch_fields)
    eq_of_field = np.full(max(m.preds.n_fields, 1), -1, dtype=np.int64)
    gmask = np.zeros(len(preds.bits), dtype=np.uint32)
    sat = np.empty(len(preds.bits), dtype=np.int64)
    gsat, probe = np.empty(4, dtype=np.int64), np.empty((2, 3), dtype=np.int64)
    gs_off, gp_off, sv_off = (np.zeros(GROUP + 1, dtype=np.int64) for _ in range(3))
    hit, sv = np.empty((1, 5), dtype=np.int64), np.empty((1, 2), dtype=np.int64)
    return preds, store, runs, access, eq_of_field, gmask, sat, gsat, probe, gs_off, gp_off, sv_off, hit, sv


def _naive_runs_found(n_grp, gs_off, gp_off, gsat, probe, store, runs):
    """``(event, cluster, run)`` of every run the group's staged probes find from all of each event's satisfied
    predicates (naive.runs_found), sorted."""
    from fastpubsub.engine.kernels.run_lookups import STAGED

    return sorted((i, int(c), r) for i in range(n_grp)
                  for c, mark in zip(probe[gp_off[i]:gp_off[i + 1], 1], probe[gp_off[i]:gp_off[i + 1], 2])
                  if mark == STAGED
                  for r in naive.runs_found(gsat[gs_off[i]:gs_off[i + 1]].tolist(), int(c), store, runs))


def _ge_end():
    from fastpubsub.engine.kernels.probing import GROUP

    return np.zeros(GROUP, dtype=np.int64)


@pytest.mark.parametrize("fixed, sizes", [(("=", "="), (3, 4, 5)), (("=", "=", "<=", "<=", ">="), (5, 6, 7))],
                         ids=["W0-like", "W2-like"])
def test_probing_stages_agree_with_their_naive_references(fixed, sizes):
    """Every stage against its naive reference, on equalities (W0: few entries pass a column) and on inequalities
    in the later columns (W2: about half pass each, the later columns tested column by column)."""
    from fastpubsub.engine.frontend.encoding import encode_batch
    from fastpubsub.engine.kernels.probing import (GROUP, scan_group, stage_heads, stage_keys, stage_lookup,
                                                   stage_prefetch_rows)
    from fastpubsub.engine.kernels.run_lookups import RUN_AHEAD, STAGED, runs_found, runs_index_rows, stage_runs

    m, batches = _conjunction_matcher(fixed=fixed, sizes=sizes)
    ix = m.index
    assert len(ix.schemas) == 1 and ix.store.c_sorted.max() > 0
    (preds, store, runs, access, eq_of_field, gmask, sat, gsat, probe, gs_off, gp_off, sv_off, hit,
     sv) = _stage_arrays(m)
    ge_end = _ge_end()
    staged_events = 0
    most_runs = 0  # runs found in one group: past 2 * RUN_AHEAD, stage_runs' pipeline runs full
    later_dropped = 0  # entries whose first two columns hold but a later one does not
    for batch in batches:
        ev = encode_batch(batch, m.attributes, m.strings).arrays()
        n_ev = len(ev.offsets) - 1
        for g0 in range(0, n_ev, GROUP):
            g1 = min(n_ev, g0 + GROUP)
            gsat, probe, n_probe = stage_keys(ev, g0, g1, preds, access, access.conj_keys.ravel(), eq_of_field,
                                              store.key_head, sat, gsat, gs_off, ge_end, gp_off, probe)
            assert np.all(eq_of_field == -1)  # left at rest
            stage_lookup(probe, n_probe, access, store.key_head)
            stage_heads(probe, n_probe, store, runs)
            stage_prefetch_rows(g1 - g0, gs_off, gp_off, probe, store, runs)
            # stage 5b on its own (5a marks the staged probes and sets gmask, cleared again by stage_runs)
            runs_index_rows(g1 - g0, gs_off, gp_off, gsat, probe, gmask, store, runs)
            hit, nh = runs_found(g1 - g0, gs_off, gs_off[1:], gp_off, gsat, probe, store, hit)
            found = sorted(map(tuple, hit[:nh, :3].tolist()))
            assert found == _naive_runs_found(g1 - g0, gs_off, gp_off, gsat, probe, store, runs)
            most_runs = max(most_runs, nh)
            gmask[:] = 0
            probe[:n_probe, 2] = 0
            hit, sv = stage_runs(g1 - g0, gs_off, gs_off[1:], gp_off, gsat, probe, gmask, store, runs, hit, sv, sv_off)
            assert not gmask.any()  # left at rest
            out_off = np.zeros(n_ev + 1, dtype=np.int64)
            out, _ = scan_group(g0, g1, gsat, gs_off, gp_off, probe, sv, sv_off, preds.bits, store, runs,
                                np.empty(4, dtype=np.int64), 0, out_off, np.arange(len(m.handle_id)), 2, 8, 64)
            assert not preds.bits.any()  # left at rest
            for i in range(g1 - g0):
                esat = gsat[gs_off[i]:gs_off[i + 1]].copy()
                sat_list = esat.tolist()
                rows = probe[gp_off[i]:gp_off[i + 1]]
                heads = sorted(int(c) for c in rows[:, 1] if c >= 0)
                assert heads == naive.heads_reached(sat_list, preds, access, store)
                staged = [int(c) for c, mark in zip(rows[:, 1], rows[:, 2]) if mark == STAGED]
                staged_events += bool(staged)
                want_pairs = sorted(p for c in staged for p in naive.run_matches(sat_list, c, store, runs))
                later_dropped += sum(len(naive.run_entries(sat_list, c, store, runs)) for c in staged) - len(want_pairs)
                assert sorted(map(tuple, sv[sv_off[i]:sv_off[i + 1]].tolist())) == want_pairs
                # scan_group's handles of event g0 + i (handle_id = identity here), then the naive scan's
                got = out[out_off[g0 + i]:out_off[g0 + i + 1]].tolist()
                assert got == naive.scan_lists(sat_list, heads, store)
    assert staged_events > 0  # the run index path was exercised
    assert most_runs > 2 * RUN_AHEAD  # ... with its prefetching pipeline full, not only filling and draining
    assert later_dropped > 0  # ... and the later columns' passes dropped entries


@settings(max_examples=100, deadline=None)
@given(events=st.lists(st.lists(st.integers(-3, 3), max_size=6).map(sorted), max_size=6))
def test_distinct_per_event_against_naive(events):
    from fastpubsub.engine.matcher import distinct_per_event

    offsets = np.zeros(len(events) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in events], out=offsets[1:])
    ids = np.array([x for e in events for x in e], dtype=np.int64)
    got, want = distinct_per_event(offsets, ids), naive.distinct_per_event(offsets, ids)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


def test_flatness_counters_agree_with_the_naive_stages():
    """``benchmarks.engine.flatness`` counts per event what stage 5 does: runs found, their entries, those passing column 1."""
    from benchmarks.engine.flatness import COUNTERS, count_stages
    from fastpubsub.engine.structures.sorted_runs import INDEX_ROW, STARTS_ROW, run_row
    from fastpubsub.engine.frontend.encoding import encode_batch
    from fastpubsub.engine.kernels.probing import GROUP, ProbeScratch
    from fastpubsub.engine.kernels.scan import BY_INDEX, run_path

    m, batches = _conjunction_matcher()
    ix = m.index
    m.preds.prepare()
    preds, store, runs = m.preds.arrays(), ix.store.arrays(), ix.store.run_arrays()
    access = ix.keys.arrays(ix.sch_fields)
    col = {name: j for j, name in enumerate(COUNTERS)}
    for batch in batches:
        ev = encode_batch(batch, m.attributes, m.strings).arrays()
        n_ev = len(ev.offsets) - 1
        scratch = ProbeScratch(np.full(max(m.preds.n_fields, 1), -1, dtype=np.int64),
                               np.empty((GROUP, 3), dtype=np.int64), np.zeros(len(preds.bits), dtype=np.uint32),
                               np.empty(4, dtype=np.int64), False)  # (a short output: the kernel grows it)
        counts = count_stages(ev, preds, store, runs, access, scratch, np.zeros((n_ev, len(COUNTERS)), np.int64))
        assert not scratch.gmask.any() and np.all(scratch.eq_of_field == -1)  # left at rest
        sat = np.empty(len(preds.bits), dtype=np.int64)
        for e in range(n_ev):
            ns = satisfied_predicates(ev.offsets[e], ev.offsets[e + 1], ev.field, ev.code, ev.eqbits, preds.table_keys,
                                      preds.table_vals, preds.group_of, preds.g_start, preds.g_end, preds.g_vals,
                                      preds.g_pids, sat, ev.repeats[e], preds.bits)
            esat = sat[:ns].tolist()
            heads = naive.heads_reached(esat, preds, access, store)
            staged = [c for c in heads if run_path(runs, c, ns) == BY_INDEX
                      and store.arena[run_row(store.base[c], store.cap[c], store.k[c], INDEX_ROW) + 1] > 0]
            found = [(c, r) for c in staged for r in naive.runs_found(esat, c, store, runs)]

            def bounds(c, r):
                sr = run_row(int(store.base[c]), int(store.cap[c]), int(store.k[c]), STARTS_ROW)
                end = int(store.arena[sr + r + 1]) if r + 1 < runs.runs[c] else int(runs.sorted[c])
                return int(store.arena[sr + r]), end

            assert counts[e, col["lists"]] == len(heads)
            assert counts[e, col["index_lookups"]] == ns * len(staged)
            assert counts[e, col["runs_found"]] == len(found)
            assert counts[e, col["run_entries"]] == sum(b - a for a, b in (bounds(c, r) for c, r in found))
            assert counts[e, col["passing_second"]] == sum(len(naive.run_entries(esat, c, store, runs)) for c in staged)
            assert counts[e, col["tail_entries"]] == sum(int(store.length[c] - runs.sorted[c]) for c in staged)
    assert counts[:, col["runs_found"]].sum() > 0


@pytest.mark.parametrize("level2", [0, 4])
@pytest.mark.parametrize("ahead", [1, 2, 7, 16, 64])
def test_runs_entries_at_any_pipeline_depth_agree_with_the_naive_stage(ahead, level2):
    """``runs_entries(..., ahead)``: whatever the prefetch distance (shorter or longer than a group's runs), the same
    pairs; with a second level (``level2`` 4: runs of 4 entries or more), its lookups find what testing every entry
    of the run finds (naive.run_entries)."""
    from fastpubsub.engine.frontend.encoding import encode_batch
    from fastpubsub.engine.kernels.probing import GROUP, stage_heads, stage_keys, stage_lookup
    from fastpubsub.engine.kernels.run_lookups import STAGED, runs_entries, runs_found, runs_index_rows

    m, batches = _conjunction_matcher(level2=level2)
    (preds, store, runs, access, eq_of_field, gmask, sat, gsat, probe, gs_off, gp_off, sv_off, hit,
     sv) = _stage_arrays(m)
    ge_end = _ge_end()
    checked = by_level2 = 0
    for batch in batches:
        ev = encode_batch(batch, m.attributes, m.strings).arrays()
        n_ev = len(ev.offsets) - 1
        for g0 in range(0, n_ev, GROUP):
            g1 = min(n_ev, g0 + GROUP)
            gsat, probe, n_probe = stage_keys(ev, g0, g1, preds, access, access.conj_keys.ravel(), eq_of_field,
                                              store.key_head, sat, gsat, gs_off, ge_end, gp_off, probe)
            stage_lookup(probe, n_probe, access, store.key_head)
            stage_heads(probe, n_probe, store, runs)
            runs_index_rows(g1 - g0, gs_off, gp_off, gsat, probe, gmask, store, runs)
            hit, nh = runs_found(g1 - g0, gs_off, gs_off[1:], gp_off, gsat, probe, store, hit)
            sv = runs_entries(g1 - g0, gs_off, gsat, hit, nh, gmask, store, runs, sv, sv_off, ahead)
            by_level2 += int((hit[:nh, 4] >= 0).sum())
            gmask[:] = 0
            for i in range(g1 - g0):
                esat = gsat[gs_off[i]:gs_off[i + 1]].tolist()
                staged = [int(c) for c, mark in zip(probe[gp_off[i]:gp_off[i + 1], 1], probe[gp_off[i]:gp_off[i + 1], 2])
                          if mark == STAGED]
                want = sorted(p for c in staged for p in naive.run_entries(esat, c, store, runs))
                assert sorted(map(tuple, sv[sv_off[i]:sv_off[i + 1]].tolist())) == want
                checked += len(want)
    assert checked > 0 and (by_level2 > 0) == (level2 > 0)


@settings(max_examples=60, deadline=None)
@given(vals=st.lists(st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0, float("inf"), float("nan")]), max_size=12),
       x=st.sampled_from([-2.0, 0.0, 0.5, 2.0, float("inf"), float("nan")]), cut=st.integers(0, 12))
def test_phase1_bisection_is_searchsorted_on_the_group(vals, x, cut):
    """``_bisect`` (phase 1's search of a group's constants, without a view) is ``np.searchsorted`` on the slice,
    NaN sorted last as numpy does, on either side."""
    from numba import njit

    from fastpubsub.engine.structures.predicates import _bisect

    a = np.sort(np.array(vals, dtype=np.float64))
    lo = min(cut, len(a))
    bisect = njit(lambda a, lo, hi, x, right: _bisect(a, lo, hi, x, right))
    for right, side in ((False, "left"), (True, "right")):
        assert bisect(a, lo, len(a), x, right) == lo + np.searchsorted(a[lo:], x, side=side)


def test_run_index_looked_up_for_equalities_alone_finds_every_run():
    """W1's subscriptions (an inequality in each, a free equality in most): stage 1 puts each event's equalities
    first; while every filed entry's first column is an equality, the runs found from those alone are the runs
    found from all its satisfied predicates (naive), and a subscription of inequalities alone turns that off."""
    from fastpubsub.engine.frontend.encoding import encode_batch
    from fastpubsub.engine.kernels.probing import GROUP, stage_heads, stage_keys, stage_lookup
    from fastpubsub.engine.kernels.run_lookups import runs_found, runs_index_rows

    m, batches = _conjunction_matcher(fixed=("=", "=", "<="), sizes=(4, 5))
    ix = m.index
    assert ix.n_first_not_eq == 0 and ix.store.c_sorted.max() > 0
    (preds, store, runs, access, eq_of_field, gmask, sat, gsat, probe, gs_off, gp_off, sv_off, hit,
     sv) = _stage_arrays(m)
    ge_end = _ge_end()
    skipped = found_runs = 0
    for batch in batches:
        ev = encode_batch(batch, m.attributes, m.strings).arrays()
        n_ev = len(ev.offsets) - 1
        for g0 in range(0, n_ev, GROUP):
            g1 = min(n_ev, g0 + GROUP)
            gsat, probe, n_probe = stage_keys(ev, g0, g1, preds, access, access.conj_keys.ravel(), eq_of_field,
                                              store.key_head, sat, gsat, gs_off, ge_end, gp_off, probe)
            for i in range(g1 - g0):
                ops = m.preds.op[gsat[gs_off[i]:gs_off[i + 1]]]
                n_eq = ge_end[i] - gs_off[i]
                assert np.all(ops[:n_eq] == 0) and np.all(ops[n_eq:] != 0)
                skipped += len(ops) - n_eq
            stage_lookup(probe, n_probe, access, store.key_head)
            stage_heads(probe, n_probe, store, runs)
            runs_index_rows(g1 - g0, gs_off, gp_off, gsat, probe, gmask, store, runs)
            hit, nh = runs_found(g1 - g0, gs_off, ge_end, gp_off, gsat, probe, store, hit)
            want = _naive_runs_found(g1 - g0, gs_off, gp_off, gsat, probe, store, runs)
            assert sorted(map(tuple, hit[:nh, :3].tolist())) == want
            found_runs += nh
            gmask[:] = 0
            probe[:n_probe, 2] = 0
    assert skipped > 0 and found_runs > 0
    m.add(10**9, [("a0", "=", 1), ("a1", "=", 2), ("a2", "<=", 3)])  # nothing besides its access equalities
    m.flush()
    assert ix.n_first_not_eq == 1
    m.remove(10**9)
    m.flush()
    assert ix.n_first_not_eq == 0
