"""Direct predicate tests (engine/direct.py): static and dynamic without a bit vector filled per event."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import naive
from fastpubsub.engine import Matcher, OracleMatcher
from fastpubsub.engine.direct import scan_list_direct
from fastpubsub.engine.encoding import encode_batch
from fastpubsub.engine.sparse_workload import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions
from fastpubsub.engine.statistics import AttributeStats, EventStatistics
from random_workload import random_subscriptions

OPERATORS_SPEC = SPARSE_PRESETS["opindex-operators"]


def sparse_statistics(n: int) -> EventStatistics:
    return EventStatistics(event_count=10_000, source="snapshot", attributes={
        f"a{i}": AttributeStats(presence=min(1.0, 40 / n * (1 + (i % 7))), distinct=50) for i in range(n)})


def random_events(n: int, seed: int) -> list[dict]:
    """Events over random_workload's attributes with values of every kind (some not comparable with the predicates)."""
    import random

    from random_workload import ATTRIBUTES, _value
    rng = random.Random(seed)
    return [{a: _value(rng, ATTRIBUTES[a]) for a in rng.sample(sorted(ATTRIBUTES), rng.randint(1, 6))}
            for _ in range(n)]


def test_options_and_the_automatic_choice():
    assert Matcher("dynamic", phase1="direct").stats()["phase1"] == "direct"
    assert Matcher("static", phase1="bits").stats()["phase1"] == "bits"
    assert Matcher("dynamic").stats()["phase1"] == "bits"  # no predicate yet: a few fields
    with pytest.raises(ValueError, match="phase1"):
        Matcher("dynamic", phase1="lazy")
    m = Matcher("dynamic")
    m.set_statistics(sparse_statistics(3000))
    m.add_bulk(generate_sparse_subscriptions(replace(OPERATORS_SPEC, n_attributes=3000), 2000, seed=1))
    assert m.stats()["phase1"] == "direct"  # thousands of fields


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.sampled_from(["static", "dynamic"]), st.sampled_from([0, 4]))
def test_every_operator_and_value_kind_agree_with_the_oracle(seed, algorithm, runs):
    """Direct tests forced on a small workload of every operator (lowered ones too) and kind, runs on or off."""
    subs = random_subscriptions(300, seed)
    events = random_events(60, seed + 1)
    m = Matcher(algorithm, phase1="direct", runs=runs)
    o = OracleMatcher()
    for sid, sub in subs:
        m.add(sid, sub.predicates)
        o.add(sid, sub.predicates)
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
    for phase1 in ("auto", "bits"):
        m = Matcher(algorithm, phase1=phase1)
        m.set_statistics(sparse_statistics(3000))
        m.add_bulk(subs)
        assert m.stats()["phase1"] == ("direct" if phase1 == "auto" else "bits")
        assert [r.tolist() for r in m.match_encoded(events).split()] == want


def test_new_predicates_and_strings_between_batches_are_seen():
    """The direct rows are rebuilt when predicates are added (ids recycled) or new strings shift the order codes."""
    m = Matcher("dynamic", phase1="direct")
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


def test_the_cluster_scan_is_the_naive_direct_scan():
    """:func:`scan_list_direct` on every list an event could reach, against tests/naive.py."""
    spec = replace(OPERATORS_SPEC, n_attributes=200, event_size=(10, 40))
    m = Matcher("dynamic", phase1="direct", runs=4)
    m.set_statistics(sparse_statistics(200))
    m.add_bulk(generate_sparse_subscriptions(spec, 3000, seed=5))
    m.flush()
    m.preds.prepare()
    ix = m.index
    store = ix.store.arrays()
    dp, sc = ix.direct.arrays(), ix.direct.scratch()
    ev = encode_batch(generate_sparse_events(spec, 12, seed=6), m.attributes, m.strings).arrays()
    heads = [int(h) for h in store.key_head if h >= 0]
    checked = 0
    for e in range(len(ev.offsets) - 1):
        pairs = {}
        for j in range(ev.offsets[e], ev.offsets[e + 1]):
            f = int(ev.field[j])
            if 0 <= f < len(sc.slot):
                pairs[f] = (float(ev.code[j]), int(ev.eqbits[j]))
                sc.slot[f, 0], sc.slot[f, 1], sc.slot_f[f, 2] = e, ev.eqbits[j], ev.code[j]
        for h in heads:
            out, n = scan_list_direct(h, store, dp.row, dp.row_f, sc.slot, sc.slot_f, e, np.empty(4, np.int64), 0)
            want = naive.direct_scan(m.preds, store, h, pairs)
            assert out[:n].tolist() == want
            checked += len(want)
        for f in pairs:
            sc.slot[f, 0] = -1
    assert checked > 50
