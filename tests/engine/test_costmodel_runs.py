"""The price of lists with a run index (engine/costmodel/runs.py) and what it makes static and dynamic build."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fastpubsub.engine import RUN_MIN, Matcher
from fastpubsub.engine.costmodel.maintenance import Thresholds
from fastpubsub.engine.costmodel.model import CALIBRATED, CostModel
from fastpubsub.engine.costmodel.runs import (RUN_CALIBRATED, RunCosts, RunPricing, calibrated_run_costs,
                                              candidate_benefits, drop_benefits, save_run_costs)
from fastpubsub.engine.costmodel.constants import unpack_schema
from fastpubsub.engine.costmodel.greedy import enumerate_multi
from fastpubsub.engine.costmodel.model import MODEL_PATH_ENV
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.costmodel.statistics import StatisticsCollector

#: Probes cheap enough that a few tens of thousands of subscriptions call for tables (the calibrated C_h needs millions).
CHEAP = CostModel(K_r=CALIBRATED.K_r, C_h=40.0, K_h=0.0, K_c=CALIBRATED.K_c)
PRICING = RunPricing(CALIBRATED, RUN_CALIBRATED, run_min=RUN_MIN, nsat=32.0, fields=31.0)


def test_short_lists_cost_a_check_per_entry_and_indexed_ones_far_less():
    assert PRICING.list_checks(np.array([1.0, 100.0, 300.0]), 1 / 35).tolist() == [1.0, 100.0, 300.0]
    n = np.array([1_000.0, 10_000.0, 100_000.0])
    cost = PRICING.list_checks(n, 1 / 35)
    assert PRICING.indexed(n).all()
    assert (cost[1:] < n[1:] / 3).all() and np.all(np.diff(cost) > 0)
    # past a few thousand entries the runs found stop growing: ten times the entries, well under ten times the price
    assert cost[2] < 7 * cost[1]
    # a rarer first column finds fewer entries
    assert PRICING.list_checks(np.array([10_000.0]), 1 / 100)[0] < cost[1]


def test_the_second_level_pays_from_runs_longer_than_its_bitmap_words_cost_in_entries():
    """A W0 list at 10M (8,163 entries: 31 runs of 7.5) costs the same with the model's second level and without;
    at 100M (81,600: runs of 75) less.  The threshold is K_s * B / K_e: wider bitmaps need longer runs."""
    from dataclasses import replace

    model = replace(PRICING, level2=None, words=35.0)
    assert model.level2_min() == int(RUN_CALIBRATED.K_s * 35.0 / RUN_CALIBRATED.K_e) + 1
    assert replace(model, words=70.0).level2_min() > model.level2_min() > replace(model, words=8.0).level2_min()
    off = replace(PRICING, level2=0)
    assert off.level2_min() == 0
    at_10m, at_100m = np.array([8_163.0]), np.array([81_600.0])
    assert model.list_checks(at_10m, 1 / 35) == off.list_checks(at_10m, 1 / 35)
    assert model.list_checks(at_100m, 1 / 35) < 0.8 * off.list_checks(at_100m, 1 / 35)
    forced = replace(PRICING, level2=4)  # (tests force it)
    assert forced.level2_min() == 4 and forced.list_checks(at_10m, 1 / 35) < off.list_checks(at_10m, 1 / 35)


def test_the_matcher_builds_the_second_level_where_its_cost_model_says_and_matches_like_the_oracle():
    """W0 in small with a1 on one value: single-field lists of a thousand entries, runs of a few dozen, which the
    model (8 x 6 equality ids: a bitmap of 2 words) indexes; ``level2=0`` builds none.  Removals leave tombstones
    and keep every cluster's second level; the dead entries of a sub-run are never reported."""
    from dataclasses import replace

    spec = replace(PRESETS["W0"], n_attributes=8, subscription_attributes=(0, 8), n_predicates=4, n_event_pairs=8,
                   domain=(1, 6), skew={1: (1, 1)})
    subs = generate_subscriptions(spec, 6_000, seed=1)
    dicts = generate_events(spec, 120, seed=2).to_dicts()
    oracle = OracleMatcher()
    for sid, preds in subs.to_lists():
        oracle.add(sid, preds)
    want = [r.tolist() for r in oracle.match_batch(dicts)]
    chosen, off = Matcher("dynamic"), Matcher("dynamic", level2=0)
    for m in (chosen, off):
        m.add_bulk(subs)
        assert [r.tolist() for r in m.match_batch(dicts)] == want
    assert chosen.stats()["level2_min"] == 2 and chosen.stats()["level2_clusters"] > 0
    assert off.stats()["level2_clusters"] == 0
    indexed = chosen.stats()["level2_clusters"]
    gone = subs.ids[::50]
    for sid in gone.tolist():
        chosen.remove(sid)
        oracle.remove(sid)
    want = [r.tolist() for r in oracle.match_batch(dicts)]
    assert chosen.stats()["dead_entries"] > 0 and chosen.stats()["level2_clusters"] == indexed
    assert [r.tolist() for r in chosen.match_batch(dicts)] == want
    chosen.index.sort_tails(np.arange(len(chosen.index.store.key_head)))  # what a round does with the hot lists
    assert chosen.stats()["level2_clusters"] == indexed
    assert [r.tolist() for r in chosen.match_batch(dicts)] == want


def _naive_benefit(rows, list_of, list_n, list_nu, cur_nu, cand_rows, pi, weight):
    """Brute force: every list's price before and after the candidate takes its rows."""
    before = sum(list_nu[l] * PRICING.list_checks(np.array([list_n[l]]), pi)[0] for l in range(len(list_n)))
    moved = [(r, nu, t) for r, nu, t in cand_rows if nu < cur_nu[r]]
    left = list(list_n)
    dest: dict[int, list[float]] = {}
    for r, nu, t in moved:
        left[list_of[r]] -= weight
        dest.setdefault(t, [nu, 0.0])[1] += weight
    after = sum(list_nu[l] * PRICING.list_checks(np.array([left[l]]), pi)[0] for l in range(len(list_n)))
    after += sum(nu * PRICING.list_checks(np.array([n]), pi)[0] for nu, n in dest.values())
    return before - after


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.booleans()), min_size=1, max_size=40),
       st.sampled_from([1.0, 50.0, 400.0]))
def test_candidate_benefits_are_the_lists_emptied_against_the_lists_filled(rows, weight):
    list_n = np.zeros(3)
    for l, _, _ in rows:
        list_n[l] += weight
    list_nu = np.array([1 / 35, 1 / 30, 1 / 2])
    row_list = np.array([l for l, _, _ in rows])
    cur_nu = list_nu[row_list]
    e_row = np.arange(len(rows))
    e_tup = np.array([t for _, t, _ in rows])
    e_nu = np.where([m for _, _, m in rows], cur_nu / 35, cur_nu * 2)  # some rows would not move
    got = candidate_benefits(PRICING, 1 / 35, row_list, list_n, list_nu, np.full(len(rows), weight), cur_nu, e_row,
                             np.zeros(len(rows), np.int64), e_nu, e_tup, 1)[0]
    want = _naive_benefit(range(len(rows)), row_list, list_n, list_nu, cur_nu,
                          list(zip(e_row.tolist(), e_nu.tolist(), e_tup.tolist())), 1 / 35, weight)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_dropping_a_table_is_priced_by_the_same_projection_as_creating_it():
    """A table that took a whole list is worth, to keep, what it was worth to create."""
    n = 40_000.0
    rows = 35 * 4
    row_list = np.zeros(rows, np.int64)
    tup = np.repeat(np.arange(35), 4)
    nu_l, nu_d = 1 / 35, 1 / 35 / 35
    created = candidate_benefits(PRICING, 1 / 35, row_list, np.array([n]), np.array([nu_l]), np.full(rows, n / rows),
                                 np.full(rows, nu_l), np.arange(rows), np.zeros(rows, np.int64), np.full(rows, nu_d),
                                 tup, 1)[0]
    kept = drop_benefits(PRICING, 1 / 35, np.zeros(35, np.int64), np.full(35, n / 35), np.full(35, nu_d),
                         np.zeros(35, np.int64), np.zeros(35), np.full(35, nu_l), 1)[0]
    assert kept == pytest.approx(created)


def test_enumerate_multi_names_the_schema_and_the_list_of_each_subset():
    """A row's subsets of 2 and 3 distinct fields (two equalities on one field are no schema): each one's packed
    schema, nu, length and the packed tuple of its predicates, the list the row would join under that schema."""
    off = np.array([0, 3, 5], np.int64)
    attr, value = np.array([0, 1, 2, 4, 4]), np.array([10, 20, 30, 40, 50])
    prob = np.array([0.5, 0.1, 0.2, 0.3, 0.3])
    rows, keys, nus, lens, tup = enumerate_multi(off, attr, value, prob, 3)
    mask = (1 << 21) - 1
    lists = [tuple(v for v in ((t >> (21 * i)) & mask for i in range(3)) if v) for t in tup.tolist()]
    got = {(r, unpack_schema(k), round(nu, 12), n, t)
           for r, k, nu, n, t in zip(rows.tolist(), keys.tolist(), nus.tolist(), lens.tolist(), lists)}
    assert got == {(0, (0, 1), 0.05, 2, (10, 20)), (0, (0, 2), 0.1, 2, (10, 30)), (0, (1, 2), 0.02, 2, (20, 30)),
                   (0, (0, 1, 2), 0.01, 3, (10, 20, 30))}
    assert len(enumerate_multi(off, attr, value, prob, 2)[0]) == 3  # pairs only


def test_run_costs_are_saved_beside_the_cost_model(tmp_path, monkeypatch):
    monkeypatch.setenv(MODEL_PATH_ENV, str(tmp_path / "model.json"))
    assert calibrated_run_costs() == RUN_CALIBRATED
    save_run_costs(RunCosts(K_run=7.0, K_l=1.5))
    assert calibrated_run_costs() == RunCosts(K_run=7.0, K_l=1.5)
    (tmp_path / "run_costs.json").write_text("{")
    with pytest.raises(ValueError, match="calibration --save"):
        calibrated_run_costs()


def test_runs_are_the_default_of_static_and_dynamic():
    for algorithm in ("static", "dynamic"):
        assert Matcher(algorithm).index.store.run_min == RUN_MIN
        assert Matcher(algorithm, runs=0).index.store.run_min == 0
    Matcher("propagation")  # no runs option there, and none given by default


def test_with_runs_w0_keeps_the_pair_table_and_builds_no_triple_and_matches_exactly():
    subs = generate_subscriptions(PRESETS["W0"], 20_000, seed=3)
    events = generate_events(PRESETS["W0"], 40, seed=4)
    oracle = OracleMatcher()
    for sid, preds in subs.to_lists():
        oracle.add(sid, preds)
    want = [sorted(w.tolist()) for w in oracle.match_batch(events.to_dicts())]
    for algorithm in ("static", "dynamic"):
        m = Matcher(algorithm, model=CHEAP)
        m.add_bulk(subs)
        assert [sorted(t) for t in (s["fields"] for s in m.stats()["hash_tables"]["schemas"])] == [[0, 3]]
        assert [sorted(g.tolist()) for g in m.match_encoded(events).split()] == want


def test_with_runs_a_table_that_splits_an_indexed_list_into_short_ones_is_not_built():
    """W3: pair tables (a0, x) would split each indexed a0 list into plain lists that cost as much as they save."""
    subs = generate_subscriptions(PRESETS["W3"], 40_000, seed=5)
    plain, runs = Matcher("dynamic", runs=0, model=CHEAP), Matcher("dynamic", model=CHEAP)
    plain.add_bulk(subs)
    runs.add_bulk(subs)
    assert len(plain.index.schemas) > 0  # the paper's model splits the long lists
    assert len(runs.index.schemas) == 0


def test_with_runs_keys_within_the_filing_tolerance_are_ties_that_keep_the_first():
    """Noisy measured probabilities must not pull a subscription out of its list for a key barely rarer."""
    from fastpubsub.engine.costmodel.constants import pack_schema
    from fastpubsub.engine.costmodel.greedy import EqualityProfile, best_assignment
    from fastpubsub.engine.costmodel.runs import FILING_TOLERANCE

    # fields 0 (a0, common), 1 (a1), 2 (a free field measured a little rarer than a1)
    prof = EqualityProfile(np.array([0, 3]), np.array([0, 1, 2]), np.array([10, 20, 30]),
                           np.array([0.5, 0.03, 0.02]), np.array([3]))
    singles = np.array([pack_schema([0]), pack_schema([1]), pack_schema([2])])
    assert best_assignment(prof, singles)[0][0] == pack_schema([2])  # the paper's rule: the smallest nu
    assert best_assignment(prof, singles, tol=FILING_TOLERANCE)[0][0] == pack_schema([1])
    # a table that is really better still wins: (a0, a1) at 0.015 against 0.02, and a field far rarer
    pair = np.append(singles, pack_schema([0, 1]))
    assert best_assignment(prof, pair, tol=FILING_TOLERANCE)[0][0] == pack_schema([0, 1])
    prof.prob[2] = 0.001
    assert best_assignment(prof, pair, tol=FILING_TOLERANCE)[0][0] == pack_schema([2])


def _tails(m: Matcher) -> tuple[int, int]:
    """Entries waiting in unsorted tails of clusters with runs, and those of tails of a 64th of their cluster or more."""
    from fastpubsub.engine.structures.sorted_runs import TAIL_MERGE_SHIFT

    m.flush()
    st = m.index.store
    top = st.ids.high
    runs = (st.c_k[:top] >= 1) & (st.c_len[:top] >= st.run_min)
    tail = st.c_len[:top][runs] - st.c_sorted[:top][runs]
    return int(tail.sum()), int(tail[(tail > 0) & (tail >= st.c_len[:top][runs] >> TAIL_MERGE_SHIFT)].sum())


def test_a_maintenance_round_merges_the_hot_lists_tails_into_their_runs_and_matches_stay_exact():
    """Inserts wait in unsorted tails checked one by one; each round puts those of the hot lists into their runs."""
    spec = PRESETS["W6"]
    m = Matcher("dynamic", runs=32, thresholds=Thresholds(refresh_changes=10**9, refresh_events=10**9))
    frozen = Matcher("dynamic", runs=32)
    oracle = OracleMatcher()
    first = generate_subscriptions(spec, 6000, seed=11)
    later = generate_subscriptions(spec, 300, seed=12, first_id=6000)  # a few per list: they wait in the tails
    for x in (m, frozen):
        x.add_bulk(first)
    frozen.freeze_clustering()
    for sid, preds in list(first.to_lists()) + list(later.to_lists()):
        oracle.add(sid, preds)
    m.remove_bulk(np.arange(0, 6000, 7))
    frozen.remove_bulk(np.arange(0, 6000, 7))
    for sid in range(0, 6000, 7):
        oracle.remove(sid)
    for sid, preds in later.to_lists():  # one by one, as a service files them
        m.add(sid, preds)
        frozen.add(sid, preds)
        if sid % 50 == 0:
            m.flush()
            frozen.flush()
    events = generate_events(spec, 60, seed=13)
    want = [sorted(w.tolist()) for w in oracle.match_batch(events.to_dicts())]
    before = _tails(m)
    assert before[1] > 0 and _tails(frozen) == before
    m.index.maintain()  # no event matched since the last round: the tails cost nothing yet
    assert _tails(m) == before and m.stats()["maintenance"]["tails_sorted"] == 0
    m.match_encoded(events)
    m.index.maintain()
    assert _tails(m)[1] == 0 < _tails(frozen)[1]  # the frozen twin keeps its tails: no round runs
    assert m.stats()["maintenance"]["tails_sorted"] == before[1] and _tails(m)[0] == before[0] - before[1]
    assert m.stats()["maintenance"]["tails_sorted"] > 0
    for x in (m, frozen):
        assert [sorted(g.tolist()) for g in x.match_encoded(events).split()] == want
    # and the merged runs keep working under later changes
    gone = [sid for sid in range(1, 6000, 5) if sid % 7]
    m.remove_bulk(np.array(gone))
    for sid in gone:
        oracle.remove(sid)
    want = [sorted(w.tolist()) for w in oracle.match_batch(events.to_dicts())]
    assert [sorted(g.tolist()) for g in m.match_encoded(events).split()] == want


def test_sort_tails_merges_the_tails_of_a_given_share_and_leaves_plain_stores_and_unknown_keys_alone():
    from fastpubsub.engine.structures.cluster_store import ClusterStore

    st = ClusterStore(runs=8)
    keys = np.array([3, 3, 3, 5], dtype=np.int64)
    rng = np.random.default_rng(0)
    for start in (0, 64):  # 64 entries sorted by the first append, then a tail of 8 (one cluster per key: k = 2)
        n = 64 if start == 0 else 8
        clusters = st.clusters_for(np.full(n, 3, dtype=np.int64), np.full(n, 2, dtype=np.int64))
        payload = rng.integers(0, 50, size=2 * n)
        st.append(clusters, np.arange(start, start + n), payload, np.arange(0, 2 * n + 1, 2))
    c = int(st.key_head[3])
    assert (st.c_len[c], st.c_sorted[c]) == (72, 64)
    assert st.sort_tails(keys, shift=3) == 0  # 8 entries: under an eighth of 72
    assert st.sort_tails(keys) == 8 and st.c_sorted[c] == 72  # a 64th or more: merged
    column = st.arena[st.c_base[c] : st.c_base[c] + 72]
    assert np.all(np.diff(column) >= 0)  # sorted by the first column
    assert ClusterStore(runs=0).sort_tails(np.array([0, 1])) == 0
    assert ClusterStore(runs=64).sort_tails(np.array([-1, 10**6])) == 0


def test_refines_holds_when_the_new_schema_has_every_field_of_the_current_one():
    from fastpubsub.engine.costmodel.constants import pack_schema
    from fastpubsub.engine.costmodel.maintenance import _refines

    new = np.array([pack_schema([0, 3]), pack_schema([0, 3]), pack_schema([1, 2]), pack_schema([0, 3, 5]), 0])
    cur = np.array([pack_schema([3]), pack_schema([5]), pack_schema([1, 2]), pack_schema([0, 3]), pack_schema([3])])
    assert _refines(new, cur).tolist() == [True, False, True, True, False]


def test_dynamic_files_w6_under_the_pair_table_that_pays_and_keeps_it_round_after_round():
    """W6 (a0 on 2 values): (a0, a1) is at nu 1/70 against a1's 1/35, within the filing tolerance, yet it refines
    a1's key: the maintenance must move the subscriptions it priced the table for, not create it empty and drop it."""
    spec = PRESETS["W6"]
    subs = generate_subscriptions(spec, 20_000, seed=21)
    events = generate_events(spec, 40, seed=22)
    stats = StatisticsCollector()
    for i in range(20):
        stats.observe(generate_events(spec, 256, seed=[23, i]))
    m = Matcher("dynamic", runs=32, model=CHEAP)
    m.set_statistics(stats.snapshot())
    m.add_bulk(subs)
    for _ in range(3):
        m.index.maintenance.refresh()
    tables = m.stats()["hash_tables"]["schemas"]
    assert [t["fields"] for t in tables] == [[0, 3]] and tables[0]["subscriptions"] > 0.9 * len(subs)
    mnt = m.stats()["maintenance"]
    assert mnt["tables_created"] - mnt["tables_dropped"] == 1  # created once, never dropped again
    oracle = OracleMatcher()
    for sid, preds in subs.to_lists():
        oracle.add(sid, preds)
    want = [sorted(w.tolist()) for w in oracle.match_batch(events.to_dicts())]
    assert [sorted(g.tolist()) for g in m.match_encoded(events).split()] == want
