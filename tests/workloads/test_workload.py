"""The workload generator follows Table 1 of Fabret et al. and is deterministic."""

import numpy as np
import pytest

from fastpubsub.engine.semantics import OP_CODE
from fastpubsub.workloads.fabret import PRESETS, WorkloadSpec, generate_events, generate_subscriptions


def _rows(batch, k):
    return batch.attributes.reshape(-1, k), batch.operators.reshape(-1, k), batch.numbers.reshape(-1, k)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_well_formed(name):
    spec = PRESETS[name]
    subs = generate_subscriptions(spec, 2000, seed=3, first_id=10)
    subs.validate()
    k = spec.n_predicates
    attrs, ops, values = _rows(subs, k)
    lo, hi = spec.subscription_attributes
    n_fix = len(spec.fixed)
    # fixed predicates sit on the first common attributes with the listed operators
    assert (attrs[:, :n_fix] == np.arange(lo, lo + n_fix)).all()
    assert (ops[:, :n_fix] == [OP_CODE[o] for o in spec.fixed]).all()
    assert (ops[:, n_fix:] == OP_CODE[spec.free_operator]).all()
    # every predicate of a subscription is on its own attribute, inside the range
    assert all(len(set(r)) == k for r in attrs.tolist())
    assert attrs.min() >= lo and attrs.max() < hi
    lower, upper = spec.bounds()
    assert (values >= lower[attrs]).all() and (values <= upper[attrs]).all()
    assert subs.ids.tolist() == list(range(10, 2010))

    events = generate_events(spec, 300, seed=4)
    events.validate()
    ea = events.attributes.reshape(-1, spec.n_event_pairs)
    assert all(len(set(r)) == spec.n_event_pairs for r in ea.tolist())
    ev = events.numbers.reshape(ea.shape)
    assert (ev >= lower[ea]).all() and (ev <= upper[ea]).all()


def test_same_seed_same_batch_and_other_seed_differs():
    a = generate_subscriptions(PRESETS["W0"], 500, seed=7)
    b = generate_subscriptions(PRESETS["W0"], 500, seed=7)
    c = generate_subscriptions(PRESETS["W0"], 500, seed=8)
    assert a.to_lists() == b.to_lists()
    assert a.to_lists() != c.to_lists()


def test_values_cover_the_domain_uniformly():
    subs = generate_subscriptions(PRESETS["W0"], 35_000, seed=1)
    counts = np.bincount(subs.numbers.astype(np.int64), minlength=36)[1:]
    assert counts.min() > 0.8 * counts.mean() and counts.max() < 1.2 * counts.mean()


def test_w6_skews_the_first_fixed_attribute_for_events_and_subscriptions():
    spec = PRESETS["W6"]
    subs = generate_subscriptions(spec, 1000, seed=1)
    attrs, _, values = _rows(subs, spec.n_predicates)
    assert set(values[attrs == 0].astype(int).tolist()) == {1, 2}
    events = generate_events(spec, 200, seed=1)
    assert set(events.numbers[events.attributes == 0].astype(int).tolist()) == {1, 2}


def test_w3_and_w4_use_disjoint_attribute_halves():
    w3 = generate_subscriptions(PRESETS["W3"], 500, seed=1)
    w4 = generate_subscriptions(PRESETS["W4"], 500, seed=1)
    assert w3.attributes.max() < 16 <= w4.attributes.min()


def test_impossible_specs_are_rejected():
    with pytest.raises(ValueError, match="do not fit"):
        WorkloadSpec(name="bad", n_predicates=20, subscription_attributes=(0, 8))
    with pytest.raises(ValueError, match="unknown operator"):
        WorkloadSpec(name="bad", fixed=("~",))
