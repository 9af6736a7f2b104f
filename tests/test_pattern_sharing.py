"""Shared instances: one slot per (start event, step structure) for one-step patterns, exactly the oracle's results.

Subscriptions here mostly share: few symbols, few constants, one-step templates whose step binds the same
events (S3's ``name = a.name``, S2's ``name = "X"``, a correlation without equality, a post-selection ordering
strings) with different post-selections and ``within``; late events; caps; subscriptions added, replaced and
deleted between batches (a leader or a member of a shared slot leaves).
"""

import numpy as np
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from fastpubsub.patterns import parse
from fastpubsub.patterns.engine import MODES, PatternEngine, orders_strings
from fastpubsub.patterns.oracle import Limits, OraclePatterns

from test_pattern_engine import SYMBOLS
from test_pattern_expiry import assert_expiry_sound, late_streams

SHARING = [
    "seq a: price > {c1} next b: name = a.name where b.price > {f} * a.price within {w}ms",  # S3
    'seq a: price > {c1} next b: name = "{s2}" and volume >= {v} where b.price < {c2} within {w}ms',  # S2
    "seq a: volume >= {v} next b: price > a.price + {c2} where b.name != a.name within {w}ms",  # no equality
    'seq a: volume >= {v} next b: name = a.name where b.price < {c1} and b.name >= "{s2}" within {w}ms',  # in the matcher
    'seq a: price > {c1} fold r: name = a.name agg n = count() until n >= 2 within {w}ms',  # a fold: never shared
]


@st.composite
def sharing_patterns(draw):
    t = draw(st.sampled_from(SHARING))
    return parse(t.format(s2=draw(st.sampled_from(SYMBOLS)), c1=draw(st.sampled_from([0, 9, 11])),
                          c2=draw(st.sampled_from([0, 1])), f=draw(st.sampled_from(["1", "1.05", "0.9"])),
                          v=draw(st.sampled_from([0, 5])), w=draw(st.sampled_from([3, 8, 20]))))


def _key(w):
    return (w.notification_id, w.aggregates, w.start_ts, w.end_ts)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sharing_patterns(), min_size=2, max_size=10), late_streams(), st.lists(st.integers(0, 50), max_size=3),
       st.lists(st.tuples(st.integers(0, 11), st.one_of(st.none(), sharing_patterns())), max_size=4),
       st.sampled_from(MODES), st.sampled_from([None, Limits(2, 6), Limits(1, 1000), Limits(100, 3)]))
def test_shared_instances_equal_the_oracle(pats, events, cuts, changes, mode, limits):
    assume(mode != "none" or not any(map(orders_strings, pats)))
    assume(mode != "none" or not any(p is not None and orders_strings(p) for _, p in changes))
    engine = PatternEngine(mode, limits, capacity=2)
    oracle = OraclePatterns(limits)
    for sid, p in enumerate(pats):
        engine.subscribe(sid, p)
        oracle.subscribe(sid, p)
    cuts = sorted({c % (len(events) + 1) for c in cuts})
    bounds = [0] + cuts + [len(events)]
    we, wo = [], []
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        we += engine.process_events(events[a:b])
        wo += oracle.process(events[a:b])
        assert_expiry_sound(engine)
        assert engine.live() == oracle.live()
        if k < len(changes):
            sid, p = changes[k]
            since = events[b - 1][1] if b else 0
            if p is None:
                if sid in engine:
                    engine.unsubscribe(sid)
                    oracle.unsubscribe(sid)
            else:
                engine.subscribe(sid, p, since)
                oracle.subscribe(sid, p, since)
            assert engine.live() == oracle.live()
    assert sorted(map(_key, we)) == sorted(map(_key, wo))
    ce, co = engine.counters, oracle.counters.as_dict()
    assert {k: ce[k] for k in co} == co


def _s3(f, w):
    return parse(f"seq a: price > 5 next b: name = a.name where b.price > {f} * a.price within {w}ms")


def test_subscriptions_started_by_one_event_share_one_slot_and_leave_it_one_by_one():
    engine, oracle = PatternEngine(), OraclePatterns()
    for sid, (f, w) in enumerate([("1", 10), ("1.05", 10), ("0.9", 30), ("1", 30)]):
        engine.subscribe(sid, _s3(f, w))
        oracle.subscribe(sid, _s3(f, w))
    both = lambda evs: ([w.notification_id for w in engine.process_events(evs)],  # noqa: E731
                        [w.notification_id for w in oracle.process(evs)])
    assert both([(0, 0, {"name": "A", "price": 10.0})]) == ([], [])
    slots = np.flatnonzero(engine.inst_alive)
    assert len(slots) == 1 and sorted(engine.members(int(slots[0]))) == [0, 1, 2, 3]  # one slot, four instances
    assert engine.live() == oracle.live() == 4
    engine.unsubscribe(0)  # the slot's first member leaves; the others keep it
    oracle.unsubscribe(0)
    assert engine.live() == 3 and sorted(engine.members(int(slots[0]))) == [1, 2, 3]
    got = both([(1, 11, {"name": "B", "price": 1.0})])  # past 0 + 10: members 1 expire, 2 and 3 wait
    assert got == ([], []) and engine.live() == oracle.live() == 2
    assert engine.counters["expired"] == oracle.counters.as_dict()["expired"] == 1
    got = both([(2, 20, {"name": "A", "price": 10.5})])  # 10.5 > 0.9 * 10 and > 1 * 10: both complete
    assert sorted(got[0]) == sorted(got[1]) == ["2/0|2", "3/0|2"]
    assert engine.counters == {**engine.counters, **oracle.counters.as_dict()}


def test_a_snapshot_lists_each_member_of_a_shared_slot():
    shared, alone = PatternEngine(), PatternEngine()
    alone.share = False
    for e in (shared, alone):
        for sid, f in enumerate(["1", "1.05", "0.9"]):
            e.subscribe(sid, _s3(f, 50))
        e.process_events([(0, 0, {"name": "A", "price": 10.0}), (1, 1, {"name": "B", "price": 9.0})])
    assert int(shared.inst_alive.sum()) == 2 and int(alone.inst_alive.sum()) == 6
    a, b = shared.export_state(), alone.export_state()
    assert sorted(zip(a.keys, a.values)) == sorted(zip(b.keys, b.values))
