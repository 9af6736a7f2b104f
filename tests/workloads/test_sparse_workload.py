"""The sparse workload generators follow OpIndex's section 7.1 (and its eBay model), deterministic by seed."""

from dataclasses import replace

import numpy as np
import pytest

from fastpubsub.engine import Matcher
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.frontend.lowering import parse_derived
from fastpubsub.engine.semantics import KIND_STRING, OP_CODE
from fastpubsub.workloads.sparse import (
    OPINDEX, SPARSE_PRESETS, SparseSpec, generate_sparse_events, generate_sparse_subscriptions,
)


def _per_row(batch, values):
    return np.split(np.asarray(values), np.asarray(batch.offsets)[1:-1])


def test_opindex_defaults_follow_table_3():
    subs = generate_sparse_subscriptions(OPINDEX, 40_000, seed=1, first_id=5)
    subs.validate()
    assert len(subs) == subs.n_subscriptions == 40_000  # =, <=, >= lower to one row each
    assert subs.ids.tolist() == list(range(5, 40_005))
    sizes = np.diff(subs.offsets)
    assert sizes.min() == 1 and sizes.max() == 8 and abs(sizes.mean() - 4.5) < 0.05
    assert all(len(set(r.tolist())) == len(r) for r in _per_row(subs, subs.attributes)[:2000])
    share = np.bincount(subs.operators, minlength=6) / len(subs.operators)
    assert abs(share[OP_CODE["="]] - 0.4) < 0.01 and abs(share[OP_CODE["<="]] - 0.3) < 0.01
    assert abs(share[OP_CODE[">="]] - 0.3) < 0.01 and share[[1, 2, 4]].sum() == 0
    assert subs.numbers.min() == 1 and subs.numbers.max() == 50
    no_eq = np.mean([not (r == 0).any() for r in _per_row(subs, subs.operators)])
    assert abs(no_eq - np.mean([0.6 ** k for k in range(1, 9)])) < 0.01  # 18.5 %
    events = generate_sparse_events(OPINDEX, 500, seed=2)
    events.validate()
    rows = events.attributes.reshape(500, 40)
    assert all(len(set(r)) == 40 for r in rows.tolist()) and rows.max() < 20_000


def test_same_seed_same_batch_other_seed_differs():
    spec = SPARSE_PRESETS["opindex-operators"]
    a, b, c = (generate_sparse_subscriptions(spec, 300, seed=s) for s in (7, 7, 8))
    assert a.to_lists() == b.to_lists() != c.to_lists()
    e1, e2, e3 = (generate_sparse_events(spec, 50, seed=s) for s in (7, 7, 8))
    assert e1.to_dicts() == e2.to_dicts() != e3.to_dicts()


def test_zipf_makes_low_ranks_popular_in_events_and_subscriptions():
    spec = replace(OPINDEX, n_attributes=2000, attribute_zipf=1.0)
    events = generate_sparse_events(spec, 2000, seed=1)
    counts = np.bincount(events.attributes, minlength=2000)
    assert counts[0] > 0.9 * 2000 and counts[0] > 5 * counts[100] > 0
    subs = generate_sparse_subscriptions(spec, 5000, seed=1)
    sc = np.bincount(subs.attributes, minlength=2000)
    assert sc[0] > 5 * sc[100]


def test_ebay_model_weights_subscriptions_by_log_frequency():
    spec = SPARSE_PRESETS["ebay"]
    assert spec.n_attributes == 10_204
    ev = spec.event_weights()
    assert abs(ev[1] / ev[0] - 17 / 31) < 1e-9  # brand 31 %, country of manufacture 17 %
    sw = spec.subscription_weights()
    assert np.all(np.diff(sw) < 0) and sw[-1] / sw[0] > 0.2  # log flattens the skew
    events = generate_sparse_events(spec, 1000, seed=3)
    sizes = np.diff(events.offsets)
    assert sizes.min() >= 3 and sizes.max() <= 15
    subs = generate_sparse_subscriptions(spec, 2000, seed=3)
    subs.validate()
    assert subs.n_subscriptions == 2000 and len(subs) > 2000  # `in` lowers to one row per value
    assert set(subs.operators.tolist()) == {OP_CODE["="]}


def test_every_operator_is_lowered_as_the_engine_lowers_it():
    spec = replace(SPARSE_PRESETS["opindex-operators"], n_attributes=400)
    subs = generate_sparse_subscriptions(spec, 3000, seed=4)
    subs.validate()
    assert set(subs.operators.tolist()) == set(range(6))
    derived = [parse_derived(a) for a in subs.attribute_names[400:]]
    assert derived and all(d is not None and d[0] == "prefix" for d in derived)
    assert subs.disjunct.any()  # in, not between, exists
    assert (subs.kinds == KIND_STRING).any()
    events = generate_sparse_events(spec, 300, seed=5)
    assert len(events.strings) == int((events.kinds == KIND_STRING).sum()) > 0


@pytest.mark.parametrize("name", sorted(SPARSE_PRESETS))
def test_matcher_agrees_with_the_oracle_on_each_preset(name):
    spec = replace(SPARSE_PRESETS[name], n_attributes=200)
    subs = generate_sparse_subscriptions(spec, 1500, seed=11)
    events = generate_sparse_events(spec, 150, seed=12)
    oracle = OracleMatcher()
    for sid, sub in subs.to_lists():
        oracle.add(sid, sub)
    expected = oracle.match_batch(events.to_dicts())
    assert sum(map(len, expected)) > 50
    m = Matcher("dynamic")
    m.add_bulk(subs)
    got = m.match_encoded(events).split()
    assert [g.tolist() for g in got] == [e.tolist() for e in expected]


def test_bad_specs_are_rejected():
    with pytest.raises(ValueError, match="subscription_size"):
        SparseSpec(n_attributes=4, subscription_size=(1, 8))
    with pytest.raises(ValueError, match="unknown or unsupported"):
        SparseSpec(operators=(("contains", 1.0),))
    with pytest.raises(ValueError, match="string attributes only"):
        SparseSpec(operators=(("prefix", 1.0),))
    with pytest.raises(ValueError, match="positive shares"):
        SparseSpec(operators=(("=", 0.0),))
    with pytest.raises(ValueError, match="list_size"):
        SparseSpec(value_range=2, list_size=3)
