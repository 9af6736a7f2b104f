"""The numba pattern engine equals the oracle exactly (hypothesis: random streams, random S1-S5-style patterns)."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from oracles.patterns import OraclePatterns

from fastpubsub.patterns import parse
from fastpubsub.patterns.compile import orders_strings
from fastpubsub.patterns.engine import MODES, Limits, PatternEngine
from fastpubsub.state import KeyedStore, StateChanges, from_records, to_records

SYMBOLS = ["A", "B", "C"]
EXAMPLES = int(os.environ.get("PATTERN_EXAMPLES", "150"))  # a deeper run: PATTERN_EXAMPLES=2000
TEMPLATES = [
    'seq a: name = "{s1}" and price > {c1} within {w}ms',  # S1
    'seq a: name = "{s1}" and price > {c1} next b: name = "{s2}" and volume >= {v} where b.price < {c2} within {w}ms',  # S2
    "seq a: price > {c1} next b: name = a.name where b.price > {f} * a.price within {w}ms",  # S3
    ("seq a: volume > {v} fold r: name = a.name while r.price >= r.last.price "
     "agg n = count(), lo = min(price) until dur >= {d}ms within {w}ms"),  # S4
    ('seq a: name = "{s1}" and volume > {v} fold r: name = "{s1}" agg avg = avg(price) until dur >= {d}ms '
     'next b: name = "{s1}" where b.price > r.avg within {w}ms'),  # S5
    ("seq a: price >= {c1} next b: name = a.name and volume >= {v} where dur <= {d}ms "
     "fold r: name = a.name while r.price < r.last.price agg s = sum(volume), m = max(price), k = count() "
     "until k >= 2 next c: name = b.name where c.price > r.m - {c2} within {w}ms"),  # static + dynamic index, fold then next
    "seq a: volume = {v} next b: price > a.price + {c2} where b.name != a.name within {w}ms",  # dynamic, no equality
    "seq a: volume >= {v} next b: name = a.name where b.price < {c1} within {w}ms",  # static post-selection in the kernel
    'seq a: volume >= {v} next b: name = a.name where b.price < {c1} and b.name >= "{s2}" within {w}ms',  # in the matcher
]


@st.composite
def patterns(draw, within=st.integers(1, 30)):
    """A pattern from one of the templates with drawn constants; ``within`` draws its window (ms)."""
    t = draw(st.sampled_from(TEMPLATES))
    return parse(t.format(s1=draw(st.sampled_from(SYMBOLS)), s2=draw(st.sampled_from(SYMBOLS)),
                          c1=draw(st.integers(0, 12)), c2=draw(st.integers(0, 4)),
                          f=draw(st.sampled_from(["1", "1.05", "0.9"])), v=draw(st.sampled_from([0, 5, 100])),
                          d=draw(st.integers(0, 6)), w=draw(within)))


@st.composite
def streams(draw):
    n = draw(st.integers(0, 60))
    ts, price, out = 0, {s: 10.0 for s in SYMBOLS}, []
    for i in range(n):
        ts += draw(st.sampled_from([0, 0, 1, 1, 2, 3, 7]))
        name = draw(st.sampled_from(SYMBOLS))
        price[name] = max(0.0, price[name] + draw(st.sampled_from([-1.5, -1, -0.5, 0, 0.5, 1, 2])))
        attrs = {"name": name, "price": price[name], "volume": draw(st.sampled_from([0, 5, 100, 200]))}
        if draw(st.integers(0, 15)) == 0:
            del attrs[draw(st.sampled_from(["price", "volume"]))]  # missing attributes fail comparisons
        out.append((100 + i, ts, attrs))
    return out


def _key(w):
    return (w.notification_id, w.aggregates, w.start_ts, w.end_ts)


def _same(engine, oracle, we, wo):
    assert sorted(map(_key, we)) == sorted(map(_key, wo))
    ce, co = engine.counters, oracle.counters.as_dict()
    assert {k: ce[k] for k in co} == co
    assert engine.live() == oracle.live()


def _batches(events, cuts):
    cuts = sorted({c % (len(events) + 1) for c in cuts})
    bounds = [0] + cuts + [len(events)]
    return [events[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(patterns(), min_size=1, max_size=6), streams(), st.lists(st.integers(0, 60), max_size=4),
       st.sampled_from(MODES), st.sampled_from([None, Limits(3, 8), Limits(1, 1000), Limits(100, 4)]))
def test_engine_equals_oracle(pats, events, cuts, mode, limits):
    assume(mode != "none" or not any(map(orders_strings, pats)))  # the ablation without matcher cannot (tested below)
    engine = PatternEngine(mode, limits, capacity=2)
    oracle = OraclePatterns(limits)
    for sid, p in enumerate(pats):
        since = (sid * 3) % 7
        engine.subscribe(sid * 7 - 10, p, since)
        oracle.subscribe(sid * 7 - 10, p, since)
    we, wo = [], []
    for batch in _batches(events, cuts):
        we += engine.process_events(batch)
        wo += oracle.process(batch)
    _same(engine, oracle, we, wo)


@settings(max_examples=max(1, EXAMPLES // 2), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(patterns(), min_size=2, max_size=5), patterns(), streams(), st.integers(0, 60))
def test_replacing_and_deleting_subscriptions_mid_stream(pats, replacement, events, cut):
    engine, oracle = PatternEngine("dynamic", capacity=2), OraclePatterns()
    for sid, p in enumerate(pats):
        engine.subscribe(sid, p)
        oracle.subscribe(sid, p)
    cut %= len(events) + 1
    we, wo = engine.process_events(events[:cut]), oracle.process(events[:cut])
    since = events[cut - 1][1] if cut else 0
    engine.subscribe(0, replacement, since)
    oracle.subscribe(0, replacement, since)
    engine.unsubscribe(1)
    oracle.unsubscribe(1)
    we += engine.process_events(events[cut:])
    wo += oracle.process(events[cut:])
    _same(engine, oracle, we, wo)


@settings(max_examples=max(1, EXAMPLES // 2), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(patterns(), min_size=1, max_size=5), streams(), st.lists(st.integers(0, 60), min_size=1, max_size=4),
       st.integers(0, 60))
def test_restore_from_the_changelog_continues_exactly(pats, events, cuts, restart):
    """Changes written per batch, restored at a committed offset, replayed from there: the same witnesses."""
    def fresh():
        e = PatternEngine("dynamic", capacity=2, track_changes=True)
        for sid, p in enumerate(pats):
            e.subscribe(sid, p)
        return e
    reference = fresh()
    expected = reference.process_events(events)
    restart %= len(events) + 1
    engine, log, we = fresh(), [], []
    for batch in _batches(events[:restart], cuts):
        we += engine.process_events(batch)
        log += to_records(engine.changes())
    # an "aborted transaction": the next batch's changes reach the changelog, but the offsets are not committed
    engine.process_events(events[restart:])
    log += to_records(engine.changes())
    committed = events[restart][0] if restart < len(events) else 10**9
    store = KeyedStore.restore(from_records(log), committed)
    restored = fresh()
    restored.restore(store)
    we += restored.process_events(events[restart:])
    assert sorted(map(_key, we)) == sorted(map(_key, expected))
    assert restored.live() == reference.live()


def test_state_changes_and_store():
    changes = StateChanges([b"k1", b"k2", b"k1"], [b"v1", b"v2", None], np.array([1, 2, 3]))
    assert changes.tombstones.tolist() == [False, False, True]
    assert from_records(to_records(changes)).keys == changes.keys
    store = KeyedStore.restore(changes, committed_offset=3)  # the tombstone at offset 3 is not committed
    assert store.get(b"k1") == b"v1" and store.get(b"k2") == b"v2"
    assert KeyedStore.restore(changes, 4).get(b"k1") is None
    assert len(KeyedStore.restore(changes, 4).snapshot()) == 1
    with pytest.raises(ValueError, match="header"):
        from_records([(b"k", b"v", [])])


def test_the_no_index_ablation_refuses_string_ordering():
    with pytest.raises(ValueError, match="cannot order strings"):
        PatternEngine("none").subscribe(1, parse('seq a: name >= "M" within 1s'))
    engine = PatternEngine("static")
    engine.subscribe(1, parse('seq a: x = 1 next b: x = 2 where b.name < "M" within 1s'))
    with pytest.raises(ValueError, match="cannot order strings"):
        engine.set_mode("none")


def test_a_repeated_id_in_one_bulk_subscription_keeps_the_last():
    engine = PatternEngine()
    engine.subscribe_many([(1, parse("seq a: x = 1 within 1s"), 0), (1, parse("seq a: x = 2 within 1s"), 0)])
    assert [w.notification_id for w in engine.process_events([(0, 1, {"x": 1}), (1, 2, {"x": 2})])] == ["1/1"]


def test_bad_mode():
    with pytest.raises(ValueError, match="unknown mode"):
        PatternEngine("fast")


def test_state_stays_bounded_on_a_long_stream():
    """Instances die at within, stale heap entries and empty index keys are dropped between batches."""
    rng = np.random.default_rng(3)
    engine = PatternEngine("dynamic", Limits(max_per_subscription=20), capacity=8)
    for sid in range(40):
        engine.subscribe(sid, parse(TEMPLATES[sid % len(TEMPLATES)].format(
            s1=SYMBOLS[sid % 3], s2=SYMBOLS[(sid + 1) % 3], c1=8, c2=2, f="1", v=5, d=3, w=20)))
    names = [f"K{i}" for i in range(500)] + SYMBOLS  # many keys: index lists come and go
    sizes = []
    for b in range(30):
        events = [(b * 1000 + i, b * 2000 + 2 * i, {"name": names[rng.integers(len(names))],
                                                    "price": float(rng.integers(5, 15)), "volume": 100})
                  for i in range(1000)]
        engine.process_events(events)
        sizes.append(engine.memory_bytes())
        assert engine.live() <= 40 * 20
    assert sizes[-1] <= 2 * sizes[5]


def test_witnesses_stay_columns_until_read():
    engine = PatternEngine()
    engine.subscribe(7, parse('seq a: name = "A" fold r: name = "A" agg n = count(), m = max(price) until n >= 2 '
                              'within 1s'))
    engine.subscribe(8, parse('seq a: name = "A" and price > 1 within 1s'))
    w = engine.process_events([(0, 1, {"name": "A", "price": 1.0}), (1, 2, {"name": "A", "price": 3.0}),
                               (2, 3, {"name": "B", "price": 1.0})])
    assert len(w) == 2 and w._objects is None  # counted without objects
    assert sorted(w.sid.tolist()) == [7, 8]
    assert sorted(w.notification_ids()) == sorted(x.notification_id for x in w) == ["7/0|1#1", "8/1"]
    fold = next(x for x in w if x.sid == 7)
    assert fold.aggregates == (("r.n", 2.0), ("r.m", 3.0)) and (fold.start_ts, fold.end_ts) == (1, 2)
    assert w + [] == list(w) and [] + w == list(w)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=40), st.integers(0, 3))
def test_the_kernels_candidate_sort_is_a_stable_argsort(keys, spare):
    """The kernel sorts the candidates under the global bound into its buffers (no allocation): the order of
    ``np.argsort(kind="stable")`` over the first ``m`` keys, whatever the buffers hold beyond them."""
    from fastpubsub.patterns import kernel as K
    m = len(keys)
    buf = np.array(keys + [99] * spare, np.int64)
    order, tmp = np.full(m + spare, -7, np.int64), np.full(m + spare, -7, np.int64)
    K.argsort_stable(buf, m, order, tmp)
    assert order[:m].tolist() == np.argsort(np.array(keys, np.int64), kind="stable").tolist()


def test_atom_rows_keep_every_operand_field():
    """An atom is one 64-byte row: the packed header of each side decodes to its source, index, aggregate
    function, arithmetic flag and constant kind; the operator and static flag sit in the left header."""
    from fastpubsub.patterns import kernel as K
    from fastpubsub.patterns.compile import atom_matrix
    left = (K.SRC_AGG, 12345, K.FN_AVG, 2.5, -1.0, True, 0, 0.0)
    right = (K.SRC_CONST, 0, 0, 1.0, 0.0, False, 2, 1.0)
    at = atom_matrix([(5, True, left, right), (0, False, right, left)])
    assert at.shape == (2, K.A_WIDTH) and at.ctypes.data % 64 == 0
    h = int(at[0, K.A_LEFT])
    assert (h & 7, h >> K.H_IDX, (h >> K.H_AUX) & 7, (h >> K.H_ARITH) & 1) == (K.SRC_AGG, 12345, K.FN_AVG, 1)
    assert ((h >> K.H_OP) & 7, (h >> K.H_STATIC) & 1) == (5, 1)
    assert at[0, K.A_LEFT + 1: K.A_LEFT + 4].tolist() == [2.5, -1.0, 0.0]
    r = int(at[0, K.A_RIGHT])
    assert (r & 7, (r >> K.H_KIND) & 3, at[0, K.A_RIGHT + 3]) == (K.SRC_CONST, 2, 1.0)
    assert ((int(at[1, K.A_LEFT]) >> K.H_OP) & 7, (int(at[1, K.A_LEFT]) >> K.H_STATIC) & 1) == (0, 0)


@settings(max_examples=max(1, EXAMPLES // 2), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(patterns(), min_size=2, max_size=8), streams(), st.lists(st.integers(0, 60), min_size=1, max_size=4),
       st.randoms(use_true_random=False))
def test_churn_with_fresh_ids_mid_stream_equals_the_oracle(pats, events, cuts, rng):
    """Subscriptions created and deleted between batches, ids never reused, rows compacted at every removal."""
    engine, oracle = PatternEngine("dynamic", capacity=2), OraclePatterns()
    engine.ROW_SLACK = 0
    live, fresh = [], 0
    we, wo = [], []
    for batch in _batches(events, cuts):
        for p in pats[: rng.randint(1, len(pats))]:
            engine.subscribe(fresh, p, batch[0][1] if batch else 0)
            oracle.subscribe(fresh, p, batch[0][1] if batch else 0)
            live.append(fresh)
            fresh += 1
        for sid in rng.sample(live, rng.randint(0, len(live) - 1)):
            engine.unsubscribe(sid)
            oracle.unsubscribe(sid)
            live.remove(sid)
        we += engine.process_events(batch)
        wo += oracle.process(batch)
    _same(engine, oracle, we, wo)


def test_removed_subscriptions_rows_are_reclaimed_under_churn_with_fresh_ids():
    """Twenty live patterns, 3,000 created and deleted: the kernel's tables follow the live ones, not all ever seen."""
    engine = PatternEngine("dynamic", capacity=8)

    def pattern(sid):
        return parse(TEMPLATES[sid % len(TEMPLATES)].format(s1=SYMBOLS[sid % 3], s2=SYMBOLS[(sid + 1) % 3], c1=8,
                                                            c2=2, f="1", v=5, d=3, w=20))
    for sid in range(20):
        engine.subscribe(sid, pattern(sid))
    rows = engine.rows()
    held = engine.memory_by_structure()  # what /metrics shows (pubsub_engine_structure_bytes)
    for sid in range(20, 3020):
        engine.unsubscribe(sid - 20)
        engine.subscribe(sid, pattern(sid))
        if sid % 100 == 0:
            engine.process_events([(sid, sid, {"name": "A", "price": 9.0, "volume": 5})])
    engine.process_events([(5000, 5000, {"name": "B", "price": 9.0, "volume": 5})])  # the kernel's tables rebuilt
    slack = 1024  # PatternEngine.ROW_SLACK
    assert engine.rows() == len(engine.atom_rows) + len(engine.cap_rows) + len(engine.agg_rows) <= 2 * rows + slack
    assert len(engine.atoms) <= len(engine.atom_rows) + 1  # the kernel's table: the rows (one if there are none)
    after = engine.memory_by_structure()
    assert after.keys() == held.keys() == {"instances", "matcher"}
    assert after["matcher"] <= 2 * held["matcher"]  # the matcher of the atoms follows the live patterns too


from fastpubsub.patterns.compile import atom_matrix as _encode_whole  # noqa: E402  (the naive side, unpatched)


def _tables_as_encoded_whole(engine: PatternEngine) -> None:
    """The kernel's row tables, kept up by encoding only the rows added since the last sync, equal the whole
    lists encoded afresh (the naive version)."""
    if engine.atom_rows:
        np.testing.assert_array_equal(engine.atoms, _encode_whole(engine.atom_rows))
    assert engine.atoms.ctypes.data % 64 == 0  # the cache-line alignment survives growth
    for got, col in ((engine.cap_ev, 0), (engine.cap_col, 1)):
        if engine.cap_rows:
            assert got.flags.c_contiguous
            np.testing.assert_array_equal(got, [c[col] for c in engine.cap_rows])
    for got, col in ((engine.ag_fn, 0), (engine.ag_ev, 1), (engine.ag_slot, 2)):
        if engine.agg_rows:
            assert got.flags.c_contiguous
            np.testing.assert_array_equal(got, [a[col] for a in engine.agg_rows])


@pytest.mark.parametrize("slack", [0, 1024])
def test_the_kernels_tables_grow_by_the_new_rows_and_equal_the_rows_encoded_whole(slack, monkeypatch):
    """Under churn (a removal and an addition before each batch, with compactions at every removal or none) the
    tables follow the rows; a change encodes its own rows, not every row again."""
    from fastpubsub.patterns import compile as module

    engine = PatternEngine("dynamic", capacity=8)
    engine.ROW_SLACK = slack

    def pattern(sid):
        return parse(TEMPLATES[sid % len(TEMPLATES)].format(s1=SYMBOLS[sid % 3], s2=SYMBOLS[(sid + 1) % 3], c1=8,
                                                            c2=2, f="1", v=5, d=3, w=20))
    engine.subscribe_many([(sid, pattern(sid), 0) for sid in range(200)])
    engine.process_events([(0, 0, {"name": "A", "price": 9.0, "volume": 5})])
    _tables_as_encoded_whole(engine)
    encoded = []
    real = module.atom_matrix
    monkeypatch.setattr(module, "atom_matrix", lambda rows: encoded.append(len(rows)) or real(rows))
    for sid in range(200, 400):
        engine.unsubscribe(sid - 200)
        engine.subscribe(sid, pattern(sid))
        engine.process_events([(sid, sid, {"name": SYMBOLS[sid % 3], "price": 9.0, "volume": 5})])
        _tables_as_encoded_whole(engine)
    if slack:  # each change encodes its pattern's rows, a compaction (amortised) all: not 200 tables' worth
        assert encoded and sum(encoded) < 20 * len(engine.atom_rows)
