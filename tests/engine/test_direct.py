"""Packed lists with direct predicate tests (engine/algorithms/packed.py, engine/algorithms/direct.py): static and dynamic over sparse
attributes without a bit vector filled per event."""

from dataclasses import replace
from functools import partial

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import naive
from fastpubsub.engine import Matcher
from fastpubsub.engine.columnar import SubscriptionBatch
from tests.engine.conformance import Interleaving, add_each
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.algorithms.direct import scan_list_direct_into
from fastpubsub.engine.algorithms import packed
from fastpubsub.engine.algorithms.packed import PACKED, packed_heads, scan_packed_into
from fastpubsub.engine.frontend.encoding import encode_batch
from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions
from fastpubsub.engine.costmodel.statistics import AttributeStats, EventStatistics
from tests.support.random_workload import random_subscriptions

OPERATORS_SPEC = SPARSE_PRESETS["opindex-operators"]


def sparse_statistics(n: int) -> EventStatistics:
    return EventStatistics(event_count=10_000, source="snapshot", attributes={
        f"a{i}": AttributeStats(presence=min(1.0, 40 / n * (1 + (i % 7))), distinct=50) for i in range(n)})


def sparse_matcher(spec, **options) -> Matcher:
    """A dynamic matcher (``options``) that knows the presences of the workload's attributes."""
    m = Matcher("dynamic", **options)
    m.set_statistics(sparse_statistics(spec.n_attributes))
    return m


def random_events(n: int, seed: int) -> list[dict]:
    """Events over random_workload's attributes with values of every kind (some not comparable with the predicates)."""
    import random

    from tests.support.random_workload import ATTRIBUTES, _value
    rng = random.Random(seed)
    return [{a: _value(rng, ATTRIBUTES[a]) for a in rng.sample(sorted(ATTRIBUTES), rng.randint(1, 6))}
            for _ in range(n)]


def test_options_and_the_automatic_choice():
    assert Matcher("dynamic", lists="packed").stats()["lists"] == "packed"
    assert Matcher("static", lists="clusters").stats()["lists"] == "clusters"
    assert Matcher("dynamic").stats()["lists"] == "clusters"  # no predicate yet: a few fields
    with pytest.raises(ValueError, match="lists"):
        Matcher("dynamic", lists="flat")
    m = Matcher("dynamic")
    m.set_statistics(sparse_statistics(3000))
    m.add_bulk(generate_sparse_subscriptions(replace(OPERATORS_SPEC, n_attributes=3000), 2000, seed=1))
    assert m.stats()["lists"] == "packed"  # thousands of fields
    m.match({"a1": 3})
    assert m.stats()["packed_keys"] > 1000
    # thousands of fields but equalities only (the eBay-like catalogue): phase 1 is its equality probes, no packing
    e = Matcher("dynamic")
    e.add_bulk(generate_sparse_subscriptions(SPARSE_PRESETS["ebay"], 3000, seed=1))
    assert e.preds.n_fields >= 4096 and e.stats()["lists"] == "clusters"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.sampled_from(["static", "dynamic"]), st.sampled_from([0, 4]),
       st.sampled_from([(True, "auto"), (False, "scan"), (False, "bitmaps")]))
def test_every_operator_and_value_kind_agree_with_the_oracle(seed, algorithm, runs, catch_all):
    """Packed lists forced on a small workload of every operator (lowered ones too) and kind, runs on or off, the
    catch-all scanned (packed when short) or on the bit-parallel path; some lists too long to pack."""
    subs = random_subscriptions(300, seed)
    events = random_events(60, seed + 1)
    presence, mode = catch_all
    m = Matcher(algorithm, lists="packed", runs=runs, presence=presence, catch_all=mode)
    o = OracleMatcher()
    add_each(m, o, [(sid, sub.predicates) for sid, sub in subs])
    assert [r.tolist() for r in m.match_batch(events)] == [r.tolist() for r in o.match_batch(events)]


@pytest.mark.parametrize("algorithm", ["static", "dynamic"])
def test_thousands_of_sparse_attributes_every_operator_as_the_bit_vector_and_the_oracle(algorithm):
    spec = replace(OPERATORS_SPEC, n_attributes=3000, event_size=(20, 60))
    subs = generate_sparse_subscriptions(spec, 4000, seed=3)
    events = generate_sparse_events(spec, 120, seed=4)
    o = OracleMatcher()
    for sid, sub in subs.to_lists():
        o.add(sid, sub)
    want = [r.tolist() for r in o.match_batch(events.to_dicts())]
    assert sum(map(len, want)) > 100
    for lists in ("auto", "clusters"):
        m = Matcher(algorithm, lists=lists)
        m.set_statistics(sparse_statistics(3000))
        m.add_bulk(subs)
        assert m.stats()["lists"] == ("packed" if lists == "auto" else "clusters")
        assert [r.tolist() for r in m.match_encoded(events).split()] == want


def test_changes_between_batches_are_seen():
    """Blocks are repacked when their lists change, and rebuilt when new strings shift the order codes; the
    predicate rows when predicates are added (ids recycled)."""
    m = Matcher("dynamic", lists="packed")
    o = OracleMatcher()
    both = lambda f, *a: (getattr(m, f)(*a), getattr(o, f)(*a))  # noqa: E731
    both("add", 1, [("s", "<", "m"), ("x", ">=", 2)])
    both("add", 2, [("s", "!=", "c")])
    events = [{"s": "d", "x": 3}, {"s": "c", "x": 1}, {"s": "z"}]
    assert [r.tolist() for r in m.match_batch(events)] == [r.tolist() for r in o.match_batch(events)]
    both("remove", 1)
    both("add", 3, [("s", ">", "ca"), ("s", "<", "cb")])  # new strings between existing ones: codes change
    both("add", 4, [("x", "<=", 2.5), ("y", "=", True)])
    events += [{"s": "caa", "x": 2}, {"s": "cb", "y": True, "x": 2.5}, {"s": "ca", "y": False}]
    assert [r.tolist() for r in m.match_batch(events)] == [r.tolist() for r in o.match_batch(events)]


def grown(scan):
    """``(out, n)`` of ``scan(out)`` from an ``out`` of 4, doubled while the scan says it has no room (-1)."""
    out = np.empty(4, np.int64)
    while (n := scan(out)) < 0:
        out = np.empty(2 * len(out), np.int64)
    return out, n


def slotted(ev, sc):
    """Each event ``e`` of the encoded batch ``ev`` with its fields in the direct tests' slots (``sc.slot[f]``: the
    event, its equality bits, its order code), as matching leaves them: yields ``(e, {field: (code, eqbits)})``
    and frees the slots again after."""
    for e in range(len(ev.offsets) - 1):
        pairs = {}
        for j in range(ev.offsets[e], ev.offsets[e + 1]):
            f = int(ev.field[j])
            if 0 <= f < len(sc.slot):
                pairs[f] = (float(ev.code[j]), int(ev.eqbits[j]))
                sc.slot[f, 0], sc.slot[f, 1], sc.slot_f[f, 2] = e, ev.eqbits[j], ev.code[j]
        yield e, pairs
        for f in pairs:
            sc.slot[f, 0] = -1


def test_the_cluster_scan_is_the_naive_direct_scan():
    """:func:`scan_list_direct_into` on every list an event could reach, against tests/support/naive.py."""
    spec = replace(OPERATORS_SPEC, n_attributes=200, event_size=(10, 40))
    m = sparse_matcher(spec, lists="packed", runs=4)
    m.add_bulk(generate_sparse_subscriptions(spec, 3000, seed=5))
    m.flush()
    m.preds.prepare()
    ix = m.index
    store = ix.store.arrays()
    dp, sc = ix.direct.arrays(), ix.direct.scratch()
    ev = encode_batch(generate_sparse_events(spec, 12, seed=6), m.attributes, m.strings).arrays()
    heads = [int(h) for h in store.key_head if h >= 0]
    checked = 0
    for e, pairs in slotted(ev, sc):
        for h in heads:
            out, n = grown(lambda out: scan_list_direct_into(h, store, dp.row, dp.row_f, sc.slot, sc.slot_f, e, out, 0))
            want = naive.direct_scan(m.preds, store, h, pairs)
            assert out[:n].tolist() == want
            checked += len(want)
    assert checked > 50


def test_packed_blocks_are_the_naive_direct_scan_of_their_lists():
    """Every packed block holds its list's entries (:func:`scan_packed_into` = the naive scan of the clusters), through
    inserts and deletes between batches."""
    spec = replace(OPERATORS_SPEC, n_attributes=200, event_size=(10, 40))
    m = sparse_matcher(spec, lists="packed")
    m.add_bulk(generate_sparse_subscriptions(spec, 2000, seed=7))
    events = generate_sparse_events(spec, 10, seed=8)
    m.match_encoded(events)
    m.remove_bulk(np.arange(0, 2000, 3))
    m.add_bulk(generate_sparse_subscriptions(spec, 500, seed=9, first_id=5000))
    m.flush()
    m.match_encoded(events)
    ix = m.index
    store, packed = ix.store.arrays(), ix.packed.arrays()
    sc = ix.direct.scratch()
    ev = encode_batch(events, m.attributes, m.strings).arrays()
    keys = np.flatnonzero((packed.start >= 0) & (store.key_head[: len(packed.start)] >= 0))
    assert len(keys) > 100
    probe = np.zeros((len(keys), 3), dtype=np.int64)
    probe[:, 0], probe[:, 1] = keys, -3  # known keys (engine.kernels.probing.KNOWN_KEY)
    packed_heads(probe, len(keys), ix.keys.arrays(ix.sch_fields), store, packed.start, packed.data)
    assert np.all(probe[:, 1] == PACKED)
    for e, pairs in slotted(ev, sc):
        for t, q in enumerate(keys.tolist()):
            out, n = grown(lambda out: scan_packed_into(packed.data, packed.data_f, probe[t, 2], sc.slot, sc.slot_f, e,
                                                        out, 0))
            assert sorted(out[:n].tolist()) == sorted(naive.direct_scan(m.preds, store, int(store.key_head[q]), pairs))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.lists(st.sampled_from(["add", "remove", "match"]), min_size=4, max_size=10))
def test_inserts_and_deletes_interleaved_with_matching_agree_with_the_oracle(seed, steps):
    """Changed lists repacked between batches (and the blocks rebuilt once the abandoned ones dominate)."""
    spec = replace(OPERATORS_SPEC, n_attributes=60, event_size=(5, 30), subscription_size=(1, 4))
    rng = np.random.default_rng(seed)
    m = sparse_matcher(spec, lists="packed")
    slack, packed.REPACK_SLACK = packed.REPACK_SLACK, 0  # rebuilt as soon as abandoned blocks outweigh live ones
    try:
        _interleave(m, spec, rng, steps)
    finally:
        packed.REPACK_SLACK = slack


def _interleave(m, spec, rng, steps):
    o = OracleMatcher()
    changes = Interleaving(m, o, partial(generate_sparse_subscriptions, spec), sizes=(20, 300), share=2)
    for step in steps:
        changes.step(step, rng)
        events = generate_sparse_events(spec, 10, seed=int(rng.integers(1 << 30)))
        assert [r.tolist() for r in m.match_encoded(events).split()] == [r.tolist() for r in
                                                                         o.match_batch(events.to_dicts())]


def test_a_saved_matcher_packs_again_after_loading():
    """engine/structure.py's dump leaves the blocks and rows out; the loaded matcher rebuilds them and agrees."""
    from fastpubsub.engine import dump_index, load_index
    spec = replace(OPERATORS_SPEC, n_attributes=3000, event_size=(20, 60))
    m = sparse_matcher(spec)
    m.add_bulk(generate_sparse_subscriptions(spec, 4000, seed=11))
    events = generate_sparse_events(spec, 50, seed=12)
    want = [r.tolist() for r in m.match_encoded(events).split()]
    assert m.stats()["packed_keys"] > 0
    blob = dump_index(m)
    loaded = load_index(blob)
    assert loaded.index.packed.used == 0
    assert [r.tolist() for r in loaded.match_encoded(events).split()] == want
    assert loaded.stats()["packed_keys"] == m.stats()["packed_keys"]


def test_blocks_of_removed_subscriptions_give_their_room_back():
    """A rebuild of the blocks sizes ``data`` to the live ones: after most subscriptions leave, the packed lists
    shrink with them instead of keeping the room they once needed (memory under churn)."""
    spec = replace(OPERATORS_SPEC, n_attributes=300, event_size=(10, 40))
    m = sparse_matcher(spec, lists="packed")
    m.add_bulk(generate_sparse_subscriptions(spec, 20_000, seed=21))
    events = generate_sparse_events(spec, 10, seed=22)
    m.match_encoded(events)
    full = m.index.packed.data.nbytes
    slack, packed.REPACK_SLACK = packed.REPACK_SLACK, 0
    try:
        for start in range(0, 18_000, 2000):  # nine tenths leave, a batch at a time, matched between
            m.remove_bulk(np.arange(start, start + 2000))
            m.match_encoded(events)
    finally:
        packed.REPACK_SLACK = slack
    p = m.index.packed
    assert p.rebuilds >= 2 and p.live > 0
    assert p.data.nbytes <= 8 * (2.5 * p.live + 64) < full / 2
    o = OracleMatcher()
    for sid, sub in generate_sparse_subscriptions(spec, 20_000, seed=21).to_lists()[18_000:]:
        o.add(sid, sub)
    assert [r.tolist() for r in m.match_encoded(events).split()] == [r.tolist() for r in o.match_batch(events.to_dicts())]


def test_packed_blocks_stay_near_the_live_ones_under_steady_churn():
    """Steady churn (as many subscriptions added as removed, matched between) repacks the changed lists at the end
    of ``data``: the array grows by a quarter and is rebuilt once the blocks left behind pass a quarter of the live
    ones, so it stays within 1.6 times the live blocks (it swung past twice them when it doubled)."""
    spec = replace(OPERATORS_SPEC, n_attributes=300, event_size=(10, 40))
    subs = dict(generate_sparse_subscriptions(spec, 8000, seed=31).to_lists())
    m = sparse_matcher(spec, lists="packed")
    m.add_bulk(SubscriptionBatch.from_lists([(i, subs[i]) for i in range(4000)]))
    events = generate_sparse_events(spec, 10, seed=32)
    m.match_encoded(events)
    slack, packed.REPACK_SLACK = packed.REPACK_SLACK, 0
    ratios = []
    try:
        rng = np.random.default_rng(33)
        live = list(range(4000))
        spare = list(range(4000, 8000))
        for _ in range(150):  # 40 out and 40 in per tick: the population holds
            out = [live.pop(int(rng.integers(len(live)))) for _ in range(40)]
            back = [spare.pop(int(rng.integers(len(spare)))) for _ in range(40)]
            m.remove_bulk(np.array(out, np.int64))
            m.add_bulk(SubscriptionBatch.from_lists([(i, subs[i]) for i in back]))
            live += back
            spare += out
            m.match_encoded(events)
            p = m.index.packed
            ratios.append(p.data.nbytes / (8 * p.live))
    finally:
        packed.REPACK_SLACK = slack
    assert m.index.packed.rebuilds >= 3
    assert max(ratios) <= 1.6, max(ratios)
