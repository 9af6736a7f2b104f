"""Each numba kernel against a naive Python statement of what it computes, on small arrays."""

from __future__ import annotations

import numpy as np
import pytest

from engine.clusters import ClusterStore
from engine.encoding import StringDictionary
from engine.hashtable import HashTable
from engine.predicates import PredicateTable, has_duplicate_attribute, satisfied_predicates
from engine.clusters import OP_RANK, order_columns
from engine.propagation import choose_access
from engine.scan import MAX_SPECIALISED, scan_cluster, scan_dispatch
from engine.semantics import OPERATORS, compare


def naive_scan(k, arena, bits, base, cap, n):
    return [int(arena[base + k * cap + j]) for j in range(n) if all(bits[arena[base + r * cap + j]] for r in range(k))]


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
        want = naive_scan(k, arena, bits, base, cap, n)
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
        n = satisfied_predicates(0, 1, np.array([0 if x == x else -1]), np.array([x]), np.array([x + 0.0]).view(np.int64),
                                 *preds.phase1_args(), sat)
        got = sorted(sat[:n].tolist())
        want = sorted(int(p) for p, (op, c) in zip(pids, table) if compare(op, x, c))
        assert got == want, x


def test_duplicate_attribute_check():
    assert has_duplicate_attribute(np.array([0, 2, 4]), np.array([0, 1, 1, 1]), 2)
    assert not has_duplicate_attribute(np.array([0, 2, 4]), np.array([0, 1, 1, 0]), 2)


def test_access_choice_and_column_order():
    # predicate id -> operator: 0 '=', 1 '!=', 2 '<', 3 '=' ; 3 is referenced less, so it is the access predicate
    op = np.array([0, 1, 2, 0], dtype=np.int8)
    refcount = np.array([5, 1, 1, 2])
    off = np.array([0, 4, 6])
    pids = np.array([1, 0, 2, 3, 1, 2])
    access = choose_access(off, pids, op, refcount)
    ks, cols, col_off = order_columns(off, pids, op, access, OP_RANK)
    assert access[:, 0].tolist() == [3, -1] and ks.tolist() == [3, 2]
    assert cols[col_off[0] : col_off[1]].tolist() == [0, 2, 1]  # =, <, != : likely-false first
    assert cols[col_off[1] : col_off[2]].tolist() == [2, 1]
    # a conjunction as access: both of its predicates leave the columns
    ks, cols, col_off = order_columns(off, pids, op, np.array([[0, 3, -1], [-1, -1, -1]]), OP_RANK)
    assert ks.tolist() == [2, 2] and cols[col_off[0] : col_off[1]].tolist() == [2, 1]


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
