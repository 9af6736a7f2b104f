"""Static and dynamic clustering (sections 3 and 4) against the oracle, with tables created and dropped mid-run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import Matcher
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.structures.sorted_runs import DEAD, DEAD_SHIFT, RUN_MIN
from fastpubsub.engine.columnar import EventBatch, SubscriptionBatch, concat_subscriptions
from fastpubsub.engine.costmodel.model import CostModel
from fastpubsub.engine.costmodel.constants import unpack_schema
from fastpubsub.engine.costmodel.maintenance import Thresholds
from fastpubsub.engine.kernels.scan import INDEX_GAIN
from fastpubsub.engine.semantics import OPERATORS
from fastpubsub.engine.costmodel.statistics import AttributeStats, EventStatistics
from fastpubsub.workloads.fabret import PRESETS, WorkloadSpec, generate_events, generate_subscriptions

# tables cost almost nothing and maintenance runs after every few changes: the configuration churns
EAGER = dict(model=CostModel(K_r=0.001, C_h=0.001, K_h=0.0, K_c=1.0),
             thresholds=Thresholds(bm_max_factor=0.0, refresh_changes=3, refresh_events=4, budget=10_000))

ATTRS = ["a", "b", "c", "d"]
values = st.one_of(st.integers(0, 2), st.sampled_from(["x", "y"]), st.booleans())
predicate = st.tuples(st.sampled_from(ATTRS), st.sampled_from(OPERATORS), values)
eq_predicate = st.tuples(st.sampled_from(ATTRS), st.just("="), values)
subscription = st.lists(st.one_of(eq_predicate, eq_predicate, predicate), min_size=1, max_size=4)
event = st.dictionaries(st.sampled_from(ATTRS), values, max_size=4)
step = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 40), subscription),
    st.tuples(st.just("remove"), st.integers(0, 40), st.none()),
    st.tuples(st.just("match"), st.lists(event, min_size=1, max_size=6), st.none()),
    st.tuples(st.just("stats"), st.dictionaries(st.sampled_from(ATTRS), st.floats(0.05, 1.0), min_size=1), st.none()),
)


def statistics(presence: dict[str, float]) -> EventStatistics:
    """Skewed statistics: value 0 (and "x", True) common, the rest rare."""
    attrs = {
        a: AttributeStats(presence=p, distinct=7, top_values={(0, 0.0): 0.6, (1, "x"): 0.2, (2, True): 0.1})
        for a, p in presence.items()
    }
    return EventStatistics(event_count=1000, attributes=attrs, source="test")


@pytest.mark.parametrize("runs, level2", [(RUN_MIN, None), (2, 0), (2, 2)],
                         ids=["runs-from-RUN_MIN", "runs-from-2", "runs-and-second-level-from-2"])
@pytest.mark.parametrize("algorithm", ["static", "dynamic"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=40))
def test_long_interleavings_agree_with_the_oracle(algorithm, runs, level2, steps):
    """``runs=2``: even tiny clusters are sorted into runs (engine/structures/sorted_runs.py), so every step
    crosses that path; ``level2=2``: every run of two entries or more gets a second level too, dropped by removals
    and built again by the maintenance's rounds."""
    m, o = Matcher(algorithm, runs=runs, level2=level2, **EAGER), OracleMatcher()
    for kind, a, b in steps:
        if kind == "add":
            if a in o:
                m.remove(a)
                o.remove(a)
            m.add(a, b)
            o.add(a, b)
        elif kind == "remove":
            if a in o:
                m.remove(a)
                o.remove(a)
            else:
                with pytest.raises(KeyError):
                    m.remove(a)
        elif kind == "match":
            assert [r.tolist() for r in m.match_batch(a)] == [r.tolist() for r in o.match_batch(a)]
        else:
            m.set_statistics(statistics(a))
            if algorithm == "static":
                m.reorganize()
        assert len(m) == len(o)
        assert_marks_counted(m)
    events = [{"a": 0, "b": 0, "c": 0, "d": 0}, {"a": "x", "b": True, "c": 1, "d": "y"}]
    assert [r.tolist() for r in m.match_batch(events)] == [r.tolist() for r in o.match_batch(events)]


change = st.one_of(
    st.tuples(st.just("remove"), st.lists(st.integers(0, 10**6), min_size=1, max_size=40)),
    st.tuples(st.just("mid-run"), st.lists(st.integers(0, 10**6), min_size=1, max_size=40)),
    st.tuples(st.just("again"), st.lists(st.integers(0, 10**6), min_size=1, max_size=40)),
    st.tuples(st.just("maintain"), st.none()),
    st.tuples(st.just("match"), st.integers(0, 2**16)),
)


def run_middles(m, per_cluster: int | None = None) -> list[int]:
    """Ids of the live entries in the middle of each run (never a run's first or last one when it holds three or
    more) of every sorted prefix, cluster after cluster (``per_cluster``: of its first runs only)."""
    s = m.index.store
    out = []
    for c in np.flatnonzero((s.c_k[: s.ids.high] >= 1) & (s.c_runs[: s.ids.high] > 0)):
        b, cap, k, ns, nr = (int(x[c]) for x in (s.c_base, s.c_cap, s.c_k, s.c_sorted, s.c_runs))
        starts = s.arena[b + (k + 2) * cap : b + (k + 2) * cap + nr].tolist() + [ns]
        for r in range(nr if per_cluster is None else min(nr, per_cluster)):
            h = int(s.arena[b + k * cap + (starts[r] + starts[r + 1]) // 2])
            if h != DEAD:
                out.append(int(m.handle_id[h]))
    return out


@pytest.mark.parametrize("lists", ["clusters", "packed"])
@pytest.mark.parametrize("algorithm", ["static", "dynamic"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(change, min_size=1, max_size=20))
def test_removes_from_runs_and_ids_added_again_agree_with_the_oracle(algorithm, lists, changes):
    """Single and bulk removes taken from the middle of runs (tombstones, engine/structures/sorted_runs.py),
    purges, the same ids added again with other predicates, maintenance rounds (or a reorganize) and matching,
    against the oracle; after each change the store holds no more dead entries than an eighth of a cluster."""
    spec = small_spec("w0-small")
    subs = generate_subscriptions(spec, 1_500, seed=11)
    first, other = dict(subs.to_lists()), dict(generate_subscriptions(spec, 1_500, seed=12).to_lists())
    m = Matcher(algorithm, runs=16, lists=lists, model=CostModel(K_r=1.0, C_h=20.0, K_h=1.0, K_c=1.0))
    m.add_bulk(subs)
    o = _oracle_of(subs)
    middles = run_middles(m, per_cluster=4)[:20]
    if algorithm == "dynamic":
        m.freeze_clustering()  # (no round moving subscriptions, whose tail merges would purge the tombstones)
    for sid in middles:  # the path is taken: tombstones left in the middle of runs
        m.remove(sid)
        o.remove(sid)
    assert len(middles) == 20 and m.stats()["dead_entries"] == 20
    if algorithm == "dynamic":
        m.freeze_clustering(False)
    removed = list(middles)
    for kind, arg in changes:
        if kind in ("remove", "mid-run"):
            live = run_middles(m) if kind == "mid-run" else sorted(set(first) - set(removed))
            gone = list(dict.fromkeys(live[i % len(live)] for i in arg)) if live else []
            for sid in gone[: len(gone) // 2]:
                m.remove(sid)
            m.remove_bulk(gone[len(gone) // 2 :])
            for sid in gone:
                o.remove(sid)
            removed += gone
        elif kind == "again" and removed:
            back = list(dict.fromkeys(removed[i % len(removed)] for i in arg))
            for sid in back:  # an odd id comes back with other predicates (maybe another list)
                m.add(sid, other[sid] if sid % 2 else first[sid])
                o.add(sid, other[sid] if sid % 2 else first[sid])
            removed = [sid for sid in removed if sid not in set(back)]
        elif kind == "maintain":
            if algorithm == "dynamic":
                m.maintenance.refresh()
            else:
                m.reorganize()
        elif kind == "match":
            dicts = generate_events(spec, 40, seed=arg).to_dicts()
            assert [r.tolist() for r in m.match_batch(dicts)] == [r.tolist() for r in o.match_batch(dicts)]
        store = m.index.store
        top = store.ids.high
        assert np.all(store.c_dead[:top] <= store.c_len[:top] >> DEAD_SHIFT) and len(m) == len(o)
    dicts = generate_events(spec, 60, seed=99).to_dicts()
    assert [r.tolist() for r in m.match_batch(dicts)] == [r.tolist() for r in o.match_batch(dicts)]


def assert_marks_counted(m) -> None:
    """The maintenance's marked subscriptions per access key (which spares a round from reading every member of
    every hot list) equal a count from scratch of the marked subscriptions where they are filed."""
    maintenance = m.maintenance
    if maintenance is None:  # static
        return
    marked = np.flatnonzero(maintenance.mark_nu > 0)
    counted = maintenance.marked_in
    exact = np.bincount(maintenance.index.key_of(marked), minlength=len(counted)) if len(marked) else 0 * counted
    assert len(exact) == len(counted) and np.array_equal(exact, counted)


def small_spec(name: str, **kw) -> WorkloadSpec:
    """W0 in small: 8 attributes, 4 equality predicates of which 2 fixed, values 1..6."""
    return WorkloadSpec(name=name, n_attributes=8, subscription_attributes=(0, 8), n_predicates=4,
                        fixed=("=", "="), n_event_pairs=8, domain=(1, 6), **kw)


def small_w0(n: int, seed: int = 1):
    spec = small_spec("w0-small")
    return spec, generate_subscriptions(spec, n, seed=seed)


def _oracle_of(batch) -> OracleMatcher:
    o = OracleMatcher()
    for sid, preds in batch.to_lists():
        o.add(sid, preds)
    return o


def test_dynamic_creates_tables_under_load_and_drops_them_when_subscriptions_leave():
    spec, subs = small_w0(20_000)
    m = Matcher("dynamic", model=CostModel(K_r=1.0, C_h=20.0, K_h=1.0, K_c=1.0))
    m.add_bulk(subs)
    s = m.stats()
    tables = s["hash_tables"]["schemas"]
    assert tables, "20,000 subscriptions sharing two fixed attributes call for a multi-attribute table"
    assert s["maintenance"]["tables_created"] >= 1 and s["subscriptions_moved"] > 0
    events = generate_events(spec, 300, seed=2)
    o = _oracle_of(subs)
    dicts = events.to_dicts()
    assert [r.tolist() for r in m.match_batch(dicts)] == [r.tolist() for r in o.match_batch(dicts)]
    # nearly everyone leaves: the tables no longer pay for themselves and go
    for sid in subs.ids[:19_990].tolist():
        m.remove(sid)
        o.remove(sid)
    m.maintenance.refresh()
    s = m.stats()
    assert s["maintenance"]["tables_dropped"] >= 1 and s["hash_tables"]["multi_attribute"] == 0
    assert [r.tolist() for r in m.match_batch(dicts)] == [r.tolist() for r in o.match_batch(dicts)]


def test_static_greedy_builds_the_configuration_and_matches():
    spec, subs = small_w0(20_000)
    m = Matcher("static", model=CostModel(K_r=1.0, C_h=20.0, K_h=1.0, K_c=1.0))
    m.add_bulk(subs)
    s = m.stats()
    assert any(t["fields"] and len(t["fields"]) >= 2 for t in s["hash_tables"]["schemas"])
    o = _oracle_of(subs)
    dicts = generate_events(spec, 300, seed=3).to_dicts()
    assert [r.tolist() for r in m.match_batch(dicts)] == [r.tolist() for r in o.match_batch(dicts)]
    report = m.reorganize()
    assert report["moved"] == 20_000 and report["schemas"] == s["hash_tables"]["multi_attribute"]


@pytest.mark.parametrize("algorithm", ["static", "dynamic"])
def test_indexed_runs_of_conjunction_clusters_agree_with_the_oracle(algorithm):
    """(a0, a1) clusters of about 300 entries take the run index, looked up for a group of events at a time.

    Subscriptions of 3, 4 and 5 predicates put three clusters (1, 2 and 3
    columns left) in each (a0, a1) list: the first is scanned in stages, the
    others event by event.  Then churn leaves unsorted tails and tombstones
    in the runs, and events lacking a fixed attribute skip the table, before
    matching again.
    """
    spec = small_spec("w0-small")
    subs = concat_subscriptions([generate_subscriptions(replace(spec, n_predicates=n_p), 10_000, seed=n_p,
                                                        first_id=10_000 * (n_p - 3)) for n_p in (3, 4, 5)])
    # (level2=0: over 48 equality ids a second level prices the single lists below the pair table)
    m = Matcher(algorithm, runs=RUN_MIN, level2=0, model=CostModel(K_r=1.0, C_h=300.0, K_h=1.0, K_c=1.0))
    m.add_bulk(subs)
    assert [t["fields"] for t in m.stats()["hash_tables"]["schemas"]] == [[0, 3]]  # (a0, a1) only
    # engine.kernels.scan.run_path picks the index for an event with all 8 attributes
    assert m.index.store.c_sorted.max() > INDEX_GAIN * spec.n_event_pairs
    o = _oracle_of(subs)
    dicts = generate_events(spec, 101, seed=5).to_dicts()  # 6 groups of 16 and a short one
    assert [r.tolist() for r in m.match_batch(dicts)] == [r.tolist() for r in o.match_batch(dicts)]
    rng = np.random.default_rng(6)
    gone = rng.choice(subs.ids, size=3_000, replace=False)
    for sid in gone[:200].tolist():  # one at a time: each a tombstone in its cluster
        m.remove(sid)
    m.remove_bulk(gone[200:])  # many from one cluster: purged
    for sid in gone.tolist():
        o.remove(sid)
    more = generate_subscriptions(spec, 2_000, seed=7, first_id=30_000)
    m.add_bulk(more)
    for sid, preds in more.to_lists():
        o.add(sid, preds)
    for d in dicts[::3]:
        d.pop("a1")
    assert [r.tolist() for r in m.match_batch(dicts)] == [r.tolist() for r in o.match_batch(dicts)]


def test_dynamic_follows_a_statistics_shift_seen_online():
    """W5 -> W6 in small: the first fixed attribute's events collapse onto 2 values."""
    spec5, spec6 = small_spec("w5"), small_spec("w6", skew={0: (1, 2)})
    subs = generate_subscriptions(spec6, 20_000, seed=4)
    # plain clusters: with runs the model finds the indexed lists as good after the shift (test_costmodel_runs.py)
    m = Matcher("dynamic", model=CostModel(K_r=1.0, C_h=20.0, K_h=1.0, K_c=1.0),
                thresholds=Thresholds(refresh_events=2_000), runs=0)
    m.add_bulk(subs)
    for seed in range(20):
        m.match_encoded(generate_events(spec5, 500, seed=seed))
    before = m.stats()
    for seed in range(40):
        m.match_encoded(generate_events(spec6, 500, seed=100 + seed))
    after = m.stats()
    assert before["statistics_source"] == "uniform" and after["statistics_source"] == "online"
    assert after["subscriptions_moved"] > before["subscriptions_moved"]  # the clustering reacted
    o = _oracle_of(subs)
    dicts = generate_events(spec6, 200, seed=999).to_dicts()
    assert [r.tolist() for r in m.match_batch(dicts)] == [r.tolist() for r in o.match_batch(dicts)]


def test_reorganize_is_for_clustering_algorithms_only():
    with pytest.raises(ValueError, match="static and dynamic"):
        Matcher("propagation").reorganize()


@pytest.mark.parametrize("algorithm", ["static", "dynamic"])
def test_cluster_columns_put_the_rarest_equality_first_and_matching_still_agrees(algorithm):
    """Columns go by probability (engine/structures/cluster_store.py, order_columns): with values uniform over the constants
    subscriptions use, "rare" (40 constants) is the access predicate, then "mid" (8) is read before "common" (2)."""
    rng = np.random.default_rng(3)
    lists = [(i, [("common", "=", int(rng.integers(0, 2))), ("mid", "=", int(rng.integers(0, 8))),
                  ("rare", "=", int(rng.integers(0, 40)))]) for i in range(2_000)]
    batch = SubscriptionBatch.from_lists(lists)
    m = Matcher(algorithm)
    m.add_bulk(batch)
    ix = m.index
    cols, col_off = ix.store.payload(ix.live_handles())
    assert m.stats()["hash_tables"]["multi_attribute"] == 0 and np.all(np.diff(col_off) == 2)
    assert np.allclose(ix.pred_prob[cols[col_off[:-1]]], 1 / 8)  # "mid" first, although given second
    assert np.allclose(ix.pred_prob[cols[col_off[:-1] + 1]], 1 / 2)
    events = [{"common": int(c), "mid": int(d), "rare": int(r)}
              for c, d, r in zip(rng.integers(0, 2, 300), rng.integers(0, 8, 300), rng.integers(0, 40, 300))]
    o = _oracle_of(batch)
    assert [r.tolist() for r in m.match_batch(events)] == [r.tolist() for r in o.match_batch(events)]


def test_a_matcher_built_by_single_adds_files_like_its_bulk_twin():
    """Single adds end where add_bulk of the same subscriptions ends: filed under multi-attribute tables, same matches.

    The adds are applied in bulk chunks (engine.matcher.PENDING_MAX), so the
    dynamic loading rounds create the (a0, a1) tables early and later chunks
    go straight to them; no subscription is left in a single-field list that
    the bulk load puts in a table.  (The chunks differ from add_bulk's, so
    the three-field tables chosen may differ.)
    """
    spec, subs = small_w0(20_000)
    model = CostModel(K_r=1.0, C_h=20.0, K_h=1.0, K_c=1.0)
    single, bulk = Matcher("dynamic", model=model), Matcher("dynamic", model=model)
    for sid, preds in subs.to_lists():
        single.add(sid, preds)
    bulk.add_bulk(subs)
    s, b = single.stats()["hash_tables"], bulk.stats()["hash_tables"]
    assert b["schemas"] and s["schemas"], (s, b)
    assert s["single_field_subscriptions"] <= b["single_field_subscriptions"] + len(subs) // 100
    assert sum(t["subscriptions"] for t in s["schemas"]) >= 0.99 * sum(t["subscriptions"] for t in b["schemas"])
    events = generate_events(spec, 300, seed=2)
    got, want = single.match_encoded(events), bulk.match_encoded(events)
    assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.ids, want.ids)
    dicts = events.to_dicts()
    assert [r.tolist() for r in single.match_batch(dicts)] == [r.tolist() for r in _oracle_of(subs).match_batch(dicts)]


def test_the_subscriptions_per_filed_schema_are_counted_per_key_as_per_handle():
    """stats()' hash-table counts come from one count per access key (cheap in the service loop); the naive count
    is the schema of every live handle one by one."""
    spec, subs = small_w0(5_000)
    m = Matcher("dynamic", model=CostModel(K_r=1.0, C_h=20.0, K_h=1.0, K_c=1.0))
    m.add_bulk(subs)
    for sid in subs.ids[::3].tolist():  # some leave: tombstones in the clusters
        m.remove(sid)
    m.flush()  # removals are applied in bulk
    index = m._index
    schemas, filed = index.filed_schemas()
    each = index.key_schema(index.store.key_of(index.live_handles()))  # the schema of every live handle
    naive_schemas, naive_counts = np.unique(each, return_counts=True)
    summed = {int(s): int(filed[schemas == s].sum()) for s in np.unique(schemas)}
    assert summed == {int(s): int(n) for s, n in zip(naive_schemas, naive_counts)}
    assert filed.sum() == len(m)
    tables = m.stats()["hash_tables"]["schemas"]
    assert sum(t["subscriptions"] for t in tables) == sum(n for s, n in summed.items()
                                                       if s > 0 and len(unpack_schema(s)) >= 2)
