"""Expiry (``within``) is driven by the partition's event time: engine == oracle with late events.

The streams here have late events (a timestamp below the event time already seen: their instances start with
a deadline that may already be behind it), few distinct ``within`` values shared by many subscriptions, and
subscriptions added, replaced with another ``within`` and deleted between batches.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.support.oracles.patterns import OraclePatterns

from fastpubsub.patterns import kernel as K, parse
from fastpubsub.patterns.engine import Limits, PatternEngine

from tests.patterns.test_pattern_engine import SYMBOLS, patterns as any_patterns

WITHIN = [3, 8, 20]


def patterns():
    """Few distinct ``within`` values, each shared by many subscriptions."""
    return any_patterns(within=st.sampled_from(WITHIN))


@st.composite
def late_streams(draw):
    """Ticks whose timestamps sometimes fall behind the event time already seen (late events)."""
    n = draw(st.integers(0, 50))
    clock, price, out = 0, {s: 10.0 for s in SYMBOLS}, []
    for i in range(n):
        clock += draw(st.sampled_from([0, 1, 1, 2, 3]))
        ts = max(0, clock - draw(st.sampled_from([0, 0, 0, 0, 2, 5, 12])))
        name = draw(st.sampled_from(SYMBOLS))
        price[name] = max(0.0, price[name] + draw(st.sampled_from([-1.5, -1, -0.5, 0, 0.5, 1, 2])))
        out.append((100 + i, ts, {"name": name, "price": price[name], "volume": draw(st.sampled_from([0, 5, 100]))}))
    return out


def _key(w):
    return (w.notification_id, w.aggregates, w.start_ts, w.end_ts)


def assert_expiry_sound(engine):
    """Every live instance waits for expiry: the deadline heap holds an entry with its deadline."""
    n = int(engine.st[K.ST_HEAP])
    rows = engine.heap[K.HEAP_BASE: K.HEAP_BASE + n]
    waiting = {int(s) for d, s in rows if engine.inst_deadline[s] == d}
    assert set(np.flatnonzero(engine.inst_alive).tolist()) <= waiting


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(patterns(), min_size=1, max_size=6), late_streams(), st.lists(st.integers(0, 50), max_size=3),
       st.lists(st.tuples(st.integers(0, 7), st.one_of(st.none(), patterns())), max_size=4),
       st.sampled_from([None, Limits(3, 8), Limits(1, 1000)]))
def test_expiry_with_late_events_and_changing_subscriptions(pats, events, cuts, changes, limits):
    """Between batches a subscription is added, replaced (another ``within``) or deleted (``None``)."""
    engine = PatternEngine("dynamic", limits, capacity=2)
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
            assert_expiry_sound(engine)
    assert sorted(map(_key, we)) == sorted(map(_key, wo))
    ce, co = engine.counters, oracle.counters.as_dict()
    assert {k: ce[k] for k in co} == co
    assert engine.live() == oracle.live()


def test_a_late_start_expires_by_the_event_time_not_its_own():
    """A late event starts an instance whose deadline is already behind the event time: the next event ends it."""
    engine, oracle = PatternEngine(), OraclePatterns()
    for x in (engine, oracle):
        x.subscribe(1, parse('seq a: name = "A" next b: name = "B" within 50ms'))
    events = [(0, 10, {"name": "A"}), (1, 55, {"name": "B"}), (2, 119, {"name": "X"}), (3, 60, {"name": "A"})]
    assert [w.notification_id for w in engine.process_events(events)] == ["1/0|1"]
    assert [w.notification_id for w in oracle.process(events)] == ["1/0|1"]
    assert engine.live() == oracle.live() == 1  # started at 60, dead after 110, but no event has come since
    later = [(4, 120, {"name": "B"})]  # strictly later than the start, yet past the deadline: expired, not completed
    assert len(engine.process_events(later)) == len(oracle.process(later)) == 0
    assert engine.live() == oracle.live() == 0
    assert engine.counters["expired"] == oracle.counters.as_dict()["expired"] == 1
