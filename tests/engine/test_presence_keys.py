"""Presence keys (the pivot attribute of OpIndex) in static and dynamic: every subscription has something to key on."""

import itertools
import math
from dataclasses import replace
from functools import partial

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import naive
from fastpubsub.engine import Matcher
from tests.engine.conformance import Interleaving
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.costmodel.constants import pack_schema, presence_field, presence_schema
from fastpubsub.engine.costmodel.greedy import EqualityProfile, best_assignment
from fastpubsub.engine.costmodel.statistics import AttributeStats, EventStatistics
from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions

OPERATORS_SPEC = SPARSE_PRESETS["opindex-operators"]


def statistics(presence: dict[str, float], distinct: int = 50) -> EventStatistics:
    """A snapshot with these attribute presences (no value types: a field is as frequent as its attribute)."""
    return EventStatistics(event_count=10_000, source="snapshot", attributes={
        a: AttributeStats(presence=p, distinct=distinct) for a, p in presence.items()})


def filed_fields(m: Matcher, ids) -> list:
    """Per subscription id: ("presence", attribute) / ("eq", (attributes)) / "catch-all"."""
    m.flush()
    h = m.id_table.lookup(np.asarray(ids, dtype=np.int64), m.handle_id)
    names = list(m.attributes.ids)
    out = []
    for k in m.index.key_schema(m.index.store.key_of(h)).tolist():  # the schema each one is filed under
        if k < 0:
            out.append(("presence", names[int(presence_field(np.array([k]))[0]) // 3]))
        elif k == 0:
            out.append("catch-all")
        else:
            from fastpubsub.engine.costmodel.constants import unpack_schema
            out.append(("eq", tuple(names[f // 3] for f in unpack_schema(k))))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.dictionaries(st.integers(0, 5), st.integers(0, 3), max_size=4),
                       st.one_of(st.none(), st.tuples(st.integers(0, 9), st.floats(0.001, 1.0)))),
             min_size=1, max_size=20),
    st.lists(st.frozensets(st.integers(0, 5), min_size=1, max_size=3), max_size=6),
    st.lists(st.floats(0.001, 1.0), min_size=6, max_size=6),
)
def test_best_assignment_takes_the_presence_key_where_it_is_cheaper(rows, schemas, attr_prob):
    """The best clustering instance over equality schemas and presence keys, against brute force."""
    off, attr, value = [0], [], []
    for r, _ in rows:
        for a in sorted(r):
            attr.append(a)
            value.append(r[a])
        off.append(len(attr))
    pf = np.array([-1 if p is None else p[0] for _, p in rows], np.int64)
    pn = np.array([1.0 if p is None else p[1] for _, p in rows])
    prof = EqualityProfile(np.array(off, np.int64), np.array(attr, np.int64), np.array(value, np.int64),
                           np.array([attr_prob[a] for a in attr]), np.full(len(rows), 5, np.int64), pf, pn)
    config = sorted({pack_schema(s) for s in schemas} | {pack_schema([a]) for a in range(6)})
    key, nu, length = best_assignment(prof, np.array(config, np.int64))
    for (r, p), k, n, ln in zip(rows, key.tolist(), nu.tolist(), length.tolist()):
        eq_best = min([math.prod(attr_prob[a] for a in xs) for j in (1, 2, 3)
                       for xs in itertools.combinations(sorted(r), j) if pack_schema(xs) in config], default=1.0)
        want = eq_best if p is None else min(eq_best, p[1])
        assert math.isclose(n, want)
        if p is not None and (p[1] < eq_best or not r):
            assert k == presence_schema(p[0]) and ln == 0  # a presence key implies no predicate
        elif r:
            assert k > 0
        else:
            assert k == 0


@pytest.mark.parametrize("algorithm", ["static", "dynamic"])
def test_a_subscription_without_equality_is_filed_under_its_rarest_attribute(algorithm):
    m = Matcher(algorithm)
    m.set_statistics(statistics({"rare": 0.01, "mid": 0.3, "common": 0.9}))
    m.add(1, [("common", ">=", 3), ("rare", "<", 7), ("mid", "!=", 2)])
    m.add(2, [("common", "<=", 3)])
    m.add(3, [("common", "=", 5), ("rare", ">", 1)])  # 0.9 / 50 is more than 0.01: presence of rare wins
    m.add(4, [("mid", "=", 5), ("rare", ">", 1)])  # 0.3 / 50 is less: the equality wins
    assert filed_fields(m, [1, 2, 3, 4]) == [("presence", "rare"), ("presence", "common"), ("presence", "rare"),
                                             ("eq", ("mid",))]
    ht = m.stats()["hash_tables"]
    assert ht["presence_subscriptions"] == 3 and ht["catch_all_subscriptions"] == 0
    assert m.match({"common": 5, "rare": 3, "mid": 5}).tolist() == [1, 3, 4]
    assert m.match({"common": 1, "mid": 5}).tolist() == [2]
    off = Matcher(algorithm, presence=False)
    off.add(2, [("common", "<=", 3)])
    assert off.stats()["hash_tables"]["catch_all_subscriptions"] == 1


def test_without_statistics_the_subscription_database_picks_the_pivot():
    """Uniform statistics say every attribute is present: ties go to the field fewest predicates use (section 4.1)."""
    m = Matcher("dynamic")
    for i in range(20):
        m.add(100 + i, [("popular", "=", i)])
    m.add(1, [("popular", ">", 3), ("seldom", "<", 2)])
    assert filed_fields(m, [1]) == [("presence", "seldom")]


def test_presence_keys_are_reached_as_the_naive_reference_says():
    """Stage 1 of the clustered kernel (its variant with presence keys) adds the presence list of every field an event
    carries."""
    from fastpubsub.engine.frontend.encoding import encode_batch
    from fastpubsub.engine.kernels.probing import GROUP, stage_heads, stage_keys_sparse, stage_lookup

    spec = replace(OPERATORS_SPEC, n_attributes=300)
    m = Matcher("dynamic")
    m.set_statistics(statistics({f"a{i}": 0.05 + i / 400 for i in range(300)}))
    m.add_bulk(generate_sparse_subscriptions(spec, 3000, seed=1))
    ix = m.index
    assert ix.keys.n_presence > 0
    m.preds.prepare()
    preds, store = m.preds.arrays(), ix.store.arrays()
    access = ix.keys.arrays(ix.sch_fields)
    eq_of_field = np.full(max(m.preds.n_fields, 1), -1, dtype=np.int64)
    sat = np.empty(len(preds.bits), dtype=np.int64)
    gsat, probe = np.empty(4, dtype=np.int64), np.empty((2, 3), dtype=np.int64)
    gs_off, gp_off = np.zeros(GROUP + 1, dtype=np.int64), np.zeros(GROUP + 1, dtype=np.int64)
    ev = encode_batch(generate_sparse_events(spec, 40, seed=2), m.attributes, m.strings).arrays()
    presence_heads = 0
    for g0 in range(0, 40, GROUP):
        g1 = min(40, g0 + GROUP)
        gsat, probe, n_probe = stage_keys_sparse(ev, g0, g1, preds, access, access.conj_keys.ravel(), eq_of_field,
                                          store.key_head, sat, gsat, gs_off, np.zeros(GROUP, dtype=np.int64), gp_off,
                                          probe)
        stage_lookup(probe, n_probe, access, store.key_head)
        stage_heads(probe, n_probe, store, ix.store.run_arrays())
        for i in range(g1 - g0):
            fields = ev.field[ev.offsets[g0 + i]:ev.offsets[g0 + i + 1]].tolist()
            heads = sorted(int(c) for c in probe[gp_off[i]:gp_off[i + 1], 1] if c >= 0)
            want = naive.heads_reached(gsat[gs_off[i]:gs_off[i + 1]].tolist(), preds, access, store, fields)
            assert heads == want
            presence_heads += len(want) - len(naive.heads_reached(gsat[gs_off[i]:gs_off[i + 1]].tolist(), preds,
                                                                  access, store))
    assert presence_heads > 0


@pytest.mark.parametrize("algorithm", ["static", "dynamic"])
def test_thousands_of_sparse_attributes_and_every_operator_agree_with_the_oracle(algorithm):
    spec = replace(OPERATORS_SPEC, n_attributes=3000, event_size=(20, 60))
    subs = generate_sparse_subscriptions(spec, 4000, seed=3)
    events = generate_sparse_events(spec, 150, seed=4)
    m = Matcher(algorithm)
    m.set_statistics(statistics({f"a{i}": min(1.0, 40 / 3000 * (1 + (i % 7))) for i in range(3000)}))
    m.add_bulk(subs)
    o = OracleMatcher()
    for sid, sub in subs.to_lists():
        o.add(sid, sub)
    assert m.stats()["hash_tables"]["catch_all_subscriptions"] == 0
    assert m.stats()["hash_tables"]["presence_subscriptions"] > 300
    dicts = events.to_dicts()
    want = o.match_batch(dicts)
    assert sum(map(len, want)) > 100
    assert [r.tolist() for r in m.match_encoded(events).split()] == [r.tolist() for r in want]


class _Shift:
    """Statistics in which attributes ``low`` are rare and the others common (and the mirror image)."""

    def __init__(self, n: int) -> None:
        self.names = [f"a{i}" for i in range(n)]

    def favour(self, rare: set[int]) -> EventStatistics:
        return statistics({a: 0.01 if i in rare else 0.8 for i, a in enumerate(self.names)})


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.lists(st.sampled_from(["add", "remove", "shift", "match"]), min_size=4,
                                           max_size=10))
def test_pivots_follow_statistics_changed_mid_run_with_inserts_and_deletes(seed, steps):
    n_attr = 40
    spec = replace(OPERATORS_SPEC, n_attributes=n_attr, event_size=(5, 30), subscription_size=(1, 4))
    shift = _Shift(n_attr)
    low, high = set(range(0, n_attr, 2)), set(range(1, n_attr, 2))
    rng = np.random.default_rng(seed)
    m = Matcher("dynamic")
    o = OracleMatcher()
    rare = low
    m.set_statistics(shift.favour(rare))
    changes = Interleaving(m, o, partial(generate_sparse_subscriptions, spec), sizes=(50, 250), share=3)
    for step in steps:
        changes.step(step, rng)
        if step == "shift":
            rare = high if rare is low else low
            m.set_statistics(shift.favour(rare))
        events = generate_sparse_events(spec, 15, seed=int(rng.integers(1 << 30)))
        dicts = events.to_dicts()
        assert [r.tolist() for r in m.match_encoded(events).split()] == [r.tolist() for r in o.match_batch(dicts)]
        if step == "shift":
            # new statistics re-price every list (section 4's maintenance until quiet) and new subscriptions are
            # filed under their best key: no list that costs more than a check per event (BM > BMmax) keeps a
            # subscription a configured key or a presence key would serve better
            ix = m.index
            live = ix.live_handles()
            keys = ix.key_of(live)
            hot = ix.key_nu(keys) * ix.key_refs(keys) > ix.maintenance.bm_max
            if step == "shift" and hot.any():
                _, best = ix.best_configured(live[hot])
                assert np.all(ix.key_nu(keys[hot]) <= best * (1 + 1e-9))
    assert m.stats()["hash_tables"]["catch_all_subscriptions"] == 0


def test_a_statistics_shift_moves_subscriptions_to_their_new_rarest_attribute():
    """x rare, y common -> x common, y rare: the presence lists of x grow hot and move to y."""
    m = Matcher("dynamic")
    m.set_statistics(statistics({"x": 0.01, "y": 0.9}))
    for i in range(200):
        m.add(i, [("x", "<=", i % 50), ("y", ">=", i % 7)])
    assert set(filed_fields(m, range(200))) == {("presence", "x")}
    m.remove(7)
    m.add(1000, [("x", ">", 3), ("y", "!=", 2)])
    m.set_statistics(statistics({"x": 0.9, "y": 0.01}))
    ids = [i for i in range(200) if i != 7] + [1000]
    assert set(filed_fields(m, ids)) == {("presence", "y")}
    want = [i for i in range(200) if i != 7 and 10 <= i % 50 and 3 >= i % 7] + [1000]
    assert m.match({"x": 10, "y": 3}).tolist() == want
