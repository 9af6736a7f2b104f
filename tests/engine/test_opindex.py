"""OpIndex (engine/algorithms/opindex.py): exact against the oracle on sparse, wide workloads; its kernel against tests/support/naive.py.

Subscriptions draw their attributes from thousands of names, events carry the
attributes of a few subscriptions (so that rows match, nearly match or miss
by one predicate) plus unrelated ones; every operator and OR is mixed in;
inserts, deletes and statistics that move the pivots interleave with
matching.
"""

from __future__ import annotations

import math
from dataclasses import replace

from tests.support import naive
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import AllOf, AnyOf, AttributeStats, EventStatistics, Matcher, SubscriptionBatch
from tests.engine.conformance import (add_each, bulk_load, bulk_remove, refuses_options, remove_each,
                                      strings_that_renumber)
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.frontend.encoding import encode_batch
from fastpubsub.engine.algorithms.opindex import (
    EPOCH_LIMIT, assign_ids, choose_pivots, opindex_events, signature_bit, sort_by_bucket,
)
from fastpubsub.engine.semantics import OPERATORS
from fastpubsub.workloads.sparse import (
    SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions,
)

POOL = 3000  # attribute names a0 .. a2999
HOT = [f"a{i}" for i in range(6)]  # shared by many subscriptions, so pivot lists hold several rows
STRINGS = ["", "a", "ab", "abc", "b", "ba", "é"]
numbers = st.sampled_from([0, 1, 2, 3, 1.5, -0.0, float("inf")])
scalars = st.one_of(numbers, st.sampled_from(STRINGS), st.booleans())
attribute = st.one_of(st.sampled_from(HOT), st.integers(0, POOL - 1).map(lambda i: f"a{i}"))


def _lists(values):
    return st.lists(values, min_size=1, max_size=3)


@st.composite
def _ranges(draw):
    kind = draw(st.sampled_from([numbers, st.sampled_from(STRINGS), st.booleans()]))
    lo, hi = draw(kind), draw(kind)
    return [lo, hi] if not hi < lo else [hi, lo]


predicate = st.one_of(
    st.tuples(attribute, st.sampled_from(OPERATORS), scalars),
    st.tuples(attribute, st.sampled_from(["in", "not in"]),
              st.one_of(_lists(numbers), _lists(st.sampled_from(STRINGS)), _lists(st.booleans()))),
    st.tuples(attribute, st.sampled_from(["between", "not between"]), _ranges()),
    st.tuples(attribute, st.sampled_from(["prefix", "suffix", "contains"]), st.sampled_from([s for s in STRINGS if s])),
    st.tuples(attribute, st.just("exists"), st.none()),
)
conjunction = st.lists(predicate, min_size=1, max_size=4)
subscription = st.one_of(
    conjunction, conjunction, conjunction,
    st.lists(conjunction, min_size=1, max_size=3).map(AnyOf),
    st.lists(st.lists(predicate, min_size=1, max_size=2), min_size=1, max_size=2).map(AllOf),
)
event_value = st.one_of(scalars, st.just(math.nan), st.sampled_from(["abcd", "bab", "éa"]))
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _attributes(sub) -> list[str]:
    groups = sub.disjuncts if isinstance(sub, (AnyOf, AllOf)) else [sub]
    return [a for g in groups for a, _, _ in g]


def _check(m: Matcher, o: OracleMatcher, events: list[dict]) -> None:
    assert [r.tolist() for r in m.match_batch(events)] == [o.match(e).tolist() for e in events]


def _statistics(presence: dict[str, float]) -> EventStatistics:
    return EventStatistics(event_count=1000, source="test",
                           attributes={a: AttributeStats(presence=p, distinct=4) for a, p in presence.items()})


@SETTINGS
@given(data=st.data())
def test_opindex_agrees_with_the_oracle_on_sparse_workloads_with_changing_statistics(data):
    """Interleaved single adds, bulk adds, removes, matches and statistics that re-pivot the rows."""
    m, o = Matcher("opindex"), OracleMatcher()
    subs: dict[int, object] = {}
    next_id = 0
    for _ in range(data.draw(st.integers(1, 12), label="steps")):
        step = data.draw(st.sampled_from(["add", "add", "bulk", "remove", "match", "match", "statistics"]))
        if step == "add":
            sub = data.draw(subscription)
            m.add(next_id, sub)
            o.add(next_id, sub)
            subs[next_id] = sub
            next_id += 1
        elif step == "bulk":
            batch = data.draw(st.lists(subscription, min_size=1, max_size=8))
            items = list(enumerate(batch, start=next_id))
            m.add_bulk(SubscriptionBatch.from_lists(items))
            for sid, sub in items:
                o.add(sid, sub)
                subs[sid] = sub
            next_id += len(items)
        elif step == "remove" and subs:
            gone = data.draw(st.lists(st.sampled_from(sorted(subs)), min_size=1, max_size=4, unique=True))
            m.remove_bulk(gone)
            for sid in gone:
                o.remove(sid)
                del subs[sid]
        elif step == "statistics":  # new presences: the rows' pivots move to their now rarest attribute
            names = sorted({a for s in subs.values() for a in _attributes(s)} | set(HOT))
            presence = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(names), max_size=len(names)))
            m.set_statistics(_statistics(dict(zip(names, presence))))
        else:
            events = []
            for _ in range(data.draw(st.integers(1, 4))):
                covered = data.draw(st.lists(st.sampled_from(sorted(subs)), max_size=3)) if subs else []
                names = {a for sid in covered for a in _attributes(subs[sid])}
                names |= set(data.draw(st.lists(attribute, max_size=3)))
                events.append({a: data.draw(event_value) for a in sorted(names)})
            _check(m, o, events)
    assert len(m) == len(o)
    _check(m, o, [{a: v for a in HOT} for v in (0, 1, "a", True)])


def _sparse_matcher(n: int = 1500, seed: int = 4):
    spec = replace(SPARSE_PRESETS["opindex-operators"], n_attributes=400, event_size=(10, 60))
    m = Matcher("opindex")
    m.add_bulk(generate_sparse_subscriptions(spec, n, seed=seed))
    return m, spec


def test_the_matching_kernel_agrees_with_algorithm_2_written_naively():
    m, spec = _sparse_matcher()
    batch = generate_sparse_events(spec, 60, seed=5)
    ix = m.index
    ev = encode_batch(m.derived.derive_events(batch, m.strings.ids), m.attributes, m.strings).arrays()
    handles = np.arange(len(m.handle_id), dtype=np.int64)  # report handles, not ids
    want = naive.opindex_matches(ix.arrays(), ev, ix.segments)
    assert sum(map(len, want)) > 0
    epoch = ix.epoch
    for room in (1 << 16, 3):  # 3: the candidate list grows many times within an event
        off, got, epoch = opindex_events(ev, ix.arrays(), handles, ix.segments, epoch, room)
        assert [got[off[i]:off[i + 1]].tolist() for i in range(len(off) - 1)] == want


def _assert_well_formed(ix) -> None:
    """Segments sorted by (field, value, slot), signatures exactly the bits of their entries, one slot per live row."""
    a = ix.arrays()
    seen = 0
    for d in range(ix.n_dirs):
        for seg in range(ix.segments):
            entries = naive.opindex_segment(a, d, ix.segments, seg)
            assert entries == sorted(entries)
            op = int(ix.b_op[d * ix.segments + seg])
            sig = 0
            for f, v, _ in entries:
                assert f // 3 % ix.segments == seg
                key = 0 if op else (int(np.float64(v + 0.0).view(np.int64)) if f % 3 == 0 else int(v))
                sig |= 1 << int(signature_bit(f, key))
            assert int(ix.seg_sig[d * ix.segments + seg]) == sig
            seen += len(entries)
    assert seen == ix.n_entries
    live = np.flatnonzero(ix.live)
    pos = ix.c_base[ix.h_list[live]] + ix.h_slot[live]
    assert len(set(pos.tolist())) == len(live) and (ix.c_handle[pos] == live).all()
    assert (ix.c_need[pos] == ix.h_size[live]).all()


def test_churn_reclaims_space_and_keeps_the_structure_well_formed():
    """Most rows removed, many added: compaction of segments, counters and the per-row predicate pool."""
    spec = replace(SPARSE_PRESETS["opindex-operators"], n_attributes=300, event_size=(10, 40))
    first = generate_sparse_subscriptions(spec, 3000, seed=1)
    more = generate_sparse_subscriptions(spec, 2000, seed=3, first_id=10_000)
    events = [e for e in generate_sparse_events(spec, 40, seed=6).to_dicts()]
    m, o = Matcher("opindex"), OracleMatcher()
    bulk_load(m, o, first)
    bulk_remove(m, o, np.random.default_rng(2).permutation(sorted(o._subs))[:2500].tolist())
    _check(m, o, events)
    _assert_well_formed(m.index)
    m.index._compact_counters()  # abandoned counter regions go (at scale: when they outweigh the live ones)
    assert m.index.c_used == int(m.index.c_top[: m.index.n_lists].sum())
    _check(m, o, events)
    _assert_well_formed(m.index)
    bulk_load(m, o, more)
    remove_each(m, o, sorted(o._subs)[::3])
    _check(m, o, events)
    _assert_well_formed(m.index)
    m.remove_bulk(sorted(o._subs))
    ix = m.index
    assert len(m) == 0 and ix.n_entries == 0 and m.stats()["pivot_lists"] == 0 and m.stats()["predicates"] == 0
    assert ix.pool_top < 4096  # the per-row predicate pool was compacted
    o = OracleMatcher()
    add_each(m, o, [(1, [("a1", "=", 1), ("a2", ">", 0)]), (2, [("a2", "between", [0, 5])])])
    _check(m, o, [{"a1": 1, "a2": 3}, {"a2": 0}, {"a2": 9}])
    _assert_well_formed(m.index)
    assert m.index.e_top < 64  # the segments' arena was compacted before the next insert


def test_pivot_is_the_attribute_least_frequent_in_events_and_moves_with_the_statistics():
    m, o = Matcher("opindex"), OracleMatcher()
    subs = [(1, [("brand", "=", "x"), ("color", "=", "red")]), (2, [("brand", "=", "x"), ("size", ">", 3)]),
            (3, [("color", "!=", "red"), ("size", "<=", 4)]), (4, [("brand", "in", ["y", "z"])])]
    for sid, p in subs:
        m.add(sid, p)
        o.add(sid, p)

    def pivots():
        ix = m.index
        names = {v: k for k, v in m.attributes.ids.items()}
        handles = m.id_table.lookup(np.array([1, 2, 3], dtype=np.int64), m.handle_id)  # (4 has two rows, both under brand)
        return [names[int(f) // 3] for f in ix.pivot_fields(handles)]

    # no statistics: the paper's fallback, frequency among the subscriptions (brand 4 rows, color 2, size 2;
    # ties: the lower field)
    assert pivots() == ["color", "size", "color"]
    m.set_statistics(_statistics({"brand": 0.9, "color": 0.5, "size": 0.01}))
    assert pivots() == ["color", "size", "size"] and m.stats()["moved_by_refresh"] == 1
    m.set_statistics(_statistics({"brand": 0.001, "color": 0.5, "size": 0.7}))
    assert pivots() == ["brand", "brand", "color"]
    events = [{"brand": "x", "color": "red", "size": 4}, {"brand": "x", "size": 4}, {"color": "blue", "size": 4}]
    _check(m, o, events)
    assert m.reorganize()["moved"] == 0


def test_counters_survive_the_epoch_limit():
    m, spec = _sparse_matcher(800)
    o_events = generate_sparse_events(spec, 50, seed=9)
    before = m.match_encoded(o_events)
    m.index.epoch = EPOCH_LIMIT - 20
    for _ in range(3):
        after = m.match_encoded(o_events)
        assert np.array_equal(after.offsets, before.offsets) and np.array_equal(after.ids, before.ids)
    assert m.index.epoch < 200


def test_string_codes_renumbered_under_order_predicates():
    """A bulk load of many new strings renumbers every code (engine/frontend/encoding.py); stored order values follow."""
    m, o = Matcher("opindex"), OracleMatcher()
    first = [(0, [("s", "<", "m"), ("t", "=", 1)]), (1, [("s", ">=", "m5")]), (2, [("s", "between", ["b", "n"])])]
    words, more = strings_that_renumber()
    for batch in (first, more):
        bulk_load(m, o, batch)
    _check(m, o, [{"s": w, "t": 1} for w in ["", "m", "m5", "a", "zz", "m4", "b", "n"] + words[::17]])
    bulk_remove(m, o, [0, 1, 2] + [10 + i for i in range(0, len(words), 3)])
    _check(m, o, [{"s": w} for w in words[::7]])
    _assert_well_formed(m.index)


def test_options():
    refuses_options("opindex", [({"segments": 0}, "segments must be a positive integer"),
                                ({"lookahead": 3}, "opindex takes no option"),
                                ({"runs": 64}, "option of static and dynamic")])
    m, o = Matcher("opindex", segments=1), OracleMatcher()
    add_each(m, o, [(1, [("a", "=", 1), ("b", "<", 2)]), (2, [("b", ">=", 1)])])
    _check(m, o, [{"a": 1, "b": 1}, {"b": 5}, {"a": 1}])


def test_the_filing_kernels_agree_with_their_naive_references():
    rng = np.random.default_rng(11)
    for trial in range(20):
        n = int(rng.integers(1, 300))
        sizes = rng.integers(1, 6, size=n)
        off = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        fields = rng.integers(0, 40, size=int(off[-1])).astype(np.int64)
        delta = rng.choice([0.0, 0.1, 0.5, 1.0], size=40)
        subs = rng.integers(0, 4, size=40).astype(np.int64)
        assert choose_pivots(off, fields, delta, subs).tolist() == naive.opindex_pivots(off, fields, delta, subs)
        m = int(rng.integers(1, 500))
        buckets = rng.integers(0, 3 if trial % 2 else 60, size=m).astype(np.int64)  # big groups, then small ones
        f = rng.integers(0, 5, size=m).astype(np.int64)
        v = rng.choice([-1.0, 0.0, 2.5, 7.0], size=m)
        s = rng.integers(0, 50, size=m).astype(np.int64)
        assert sort_by_bucket(buckets, f, v, s).tolist() == naive.opindex_entry_order(buckets, f, v, s)
        table = np.full(100, -1, dtype=np.int32)
        known = {int(k): int(i) for i, k in enumerate(rng.choice(100, size=10, replace=False))}
        table[list(known)] = list(known.values())
        keys = rng.integers(0, 100, size=m).astype(np.int64)
        ids, top, fresh = assign_ids(keys, table, 10)
        want, want_top = naive.opindex_assign_ids(keys, dict(known), 10)
        assert ids.tolist() == want and top == want_top
        assert sorted(set(keys[fresh].tolist())) == sorted(set(keys.tolist()) - set(known))


def test_wide_events_with_many_candidate_segments():
    """Events of 400 attributes, rows of 20 predicates over them, one segment per list: most signatures are
    saturated and an event reaches tens of thousands of candidate segments."""
    rng = np.random.default_rng(8)
    names = [f"w{i}" for i in range(400)]
    m, o = Matcher("opindex", segments=1), OracleMatcher()
    for sid in range(300):
        ops = rng.choice(["<=", ">=", "!="], size=20)
        preds = [(names[int(a)], str(op), {"<=": int(rng.integers(1, 3)), ">=": int(rng.integers(0, 2)), "!=": 3}[op])
                 for a, op in zip(rng.choice(400, size=20, replace=False), ops)]
        m.add(sid, preds)
        o.add(sid, preds)
    events = [{n: int(rng.integers(3)) for n in names} for _ in range(3)]
    _check(m, o, events)
    assert sum(len(o.match(e)) for e in events) > 10


def test_a_warm_process_loads_opindexs_kernels_from_numbas_cache():
    """No closure, no captured dispatcher: a second process finds every opindex kernel it runs in the cache."""
    from benchmarks.engine.warm_start import run_process

    run_process("opindex", 500)
    warm = run_process("opindex", 500)
    assert warm["compiled"] == [] and warm["events"] == 200
    assert "fastpubsub.engine.algorithms.opindex.opindex_events" in warm["loaded"]
