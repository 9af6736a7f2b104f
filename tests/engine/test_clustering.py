"""Schema-based clustering (section 3): best clustering instance and the greedy, against brute force."""

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.engine.costmodel.greedy import (
    EqualityProfile,
    best_assignment,
    greedy_configuration,
    pack_schema,
    unpack_schema,
)
from fastpubsub.engine.costmodel.model import CostModel, matching_cost

MODEL = CostModel(K_r=5.0, C_h=20.0, K_h=3.0, K_c=1.5)


def profile_of(rows, n_values=100):
    """rows: list of {attr: value}; every predicate has nu = 1 / n_values."""
    off, attr, value = [0], [], []
    for r in rows:
        for a in sorted(r):
            attr.append(a)
            value.append(r[a])
        off.append(len(attr))
    m = len(attr)
    return EqualityProfile(
        np.array(off, np.int64), np.array(attr, np.int64), np.array(value, np.int64),
        np.full(m, 1.0 / n_values), np.array([max(len(r), 1) + 1 for r in rows], np.int64),
    )


def brute_best(rows, probs, config):
    """Per row: min over configured schemas X within the row's attributes of prod(prob)."""
    out = []
    for r, p in zip(rows, probs):
        best = 1.0
        for k in range(1, 4):
            for xs in itertools.combinations(sorted(r), k):
                if pack_schema(xs) in config:
                    best = min(best, math.prod(p[a] for a in xs))
        out.append(best)
    return np.array(out)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.dictionaries(st.integers(0, 6), st.integers(0, 3), max_size=5), min_size=1, max_size=25),
    st.lists(st.frozensets(st.integers(0, 6), min_size=1, max_size=3), max_size=10),
    st.lists(st.floats(0.01, 1.0), min_size=7, max_size=7),
)
def test_best_assignment_matches_brute_force(rows, schemas, attr_prob):
    prof = profile_of(rows)
    prof.prob = np.array([attr_prob[a] for a in prof.attr.tolist()])
    config = {pack_schema(s) for s in schemas}
    key, nu, length = best_assignment(prof, np.array(sorted(config), np.int64))
    probs = [{a: attr_prob[a] for a in r} for r in rows]
    np.testing.assert_allclose(nu, brute_best(rows, probs, config))
    for k, r, ln in zip(key.tolist(), rows, length.tolist()):
        xs = unpack_schema(k)
        assert set(xs) <= set(r) and len(xs) == ln
        assert k == 0 or k in config


def example_3_1(per_group=300, n_values=100, seed=0):
    """Fabret et al. example 3.1, scaled: 7 groups, one per non-empty subset of {A, B, C}."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(1, 4):
        for xs in itertools.combinations(range(3), k):
            for _ in range(per_group):
                rows.append({a: int(rng.integers(n_values)) for a in xs})
    return rows


def test_greedy_on_example_3_1_reaches_the_best_configuration():
    rows = example_3_1(per_group=10_000)  # enough subscriptions for tables to pay for themselves
    prof = profile_of(rows)
    cfg = greedy_configuration(prof, mu=lambda attrs: 1.0, model=MODEL, max_space=float("inf"))
    multi = [pack_schema(xs) for k in (2, 3) for xs in itertools.combinations(range(3), k)]
    singles = [pack_schema([a]) for a in range(3)]

    def cost(extra):
        config = set(singles) | set(extra)
        _, nu, _ = best_assignment(prof, np.array(sorted(config), np.int64))
        sizes = [len(unpack_schema(k)) for k in extra]
        return matching_cost(MODEL, np.ones(len(extra)), np.array(sizes), nu)

    optimum = min(cost(c) for k in range(len(multi) + 1) for c in itertools.combinations(multi, k))
    got = cost(list(cfg.multi))
    assert got <= optimum * 1.05
    # at this scale the pair tables pay for themselves (section 3, C_2 beats C_1); ABC would save
    # less than its probe costs once its subscriptions sit in a pair table; what is left is the
    # single-attribute groups, which no table can help
    assert sorted(cfg.multi.tolist()) == sorted(multi[:3])
    assert got < 0.6 * cost([])
    assert [s["schema"] for s in cfg.steps]  # the greedy logged its choices
    # every subscription is filed under a configured schema within its own attributes
    assert all(set(unpack_schema(k)) <= set(r) for k, r in zip(cfg.key.tolist(), rows))


def test_greedy_respects_the_space_bound_and_stops_without_benefit():
    rows = example_3_1(per_group=10_000)
    prof = profile_of(rows)
    tight = greedy_configuration(prof, mu=lambda attrs: 1.0, model=MODEL, max_space=0.0)
    assert len(tight.multi) == 0 and tight.steps == []
    # tables that cost more per event than they save are never created
    dear = CostModel(K_r=1e9, C_h=20.0, K_h=3.0, K_c=1.5)
    assert len(greedy_configuration(prof, mu=lambda attrs: 1.0, model=dear).multi) == 0


def test_subscriptions_without_equalities_go_to_the_catch_all():
    prof = profile_of([{}, {0: 1}])
    cfg = greedy_configuration(prof, mu=lambda a: 1.0, model=MODEL)
    assert cfg.key.tolist() == [0, pack_schema([0])]
    assert cfg.nu.tolist() == [1.0, 0.01]


def test_calibration_measures_every_constant_and_saves_where_the_matcher_looks(tmp_path, monkeypatch, capsys):
    """``python -m fastpubsub.engine.costmodel.calibration --save``: the model the cost-based algorithms use (engine/costmodel/model.py)."""
    import json

    from fastpubsub.engine.costmodel import calibration
    from fastpubsub.engine.costmodel.model import MODEL_PATH_ENV, calibrated_model

    path = tmp_path / "model.json"
    monkeypatch.setenv(MODEL_PATH_ENV, str(path))
    calibration.main(["--repeat", "1", "--save"])
    printed = json.loads(capsys.readouterr().out.split("saved to")[0])
    model = calibrated_model()
    from fastpubsub.engine.costmodel.runs import calibrated_run_costs, run_costs_path

    runs = calibrated_run_costs()
    assert {**model.as_dict(), **runs.as_dict()} == printed and json.loads(path.read_text()) == model.as_dict()
    assert json.loads(run_costs_path().read_text()) == runs.as_dict() and runs.K_run > 0 and runs.K_l > 0 and runs.K_s > 0
    assert model.K_r > 0 and model.C_h > 0 and model.K_c > 0 and model.K_h >= 0
