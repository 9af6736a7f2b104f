"""Expiry through the per-``within`` queues (kernel module docstring): engine == oracle, and the queues stay sound.

Instances wait in one FIFO queue per distinct ``within`` value, in deadline order; late events (a timestamp
below the partition's event time), fold outputs (an inherited, older start) and restored instances go to the
lazy heap instead.  These streams have late events, few distinct ``within`` values (queues shared by many
subscriptions), and subscriptions added, replaced and deleted between batches (queues emptied and reused).
"""

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from fastpubsub.patterns import kernel as K, parse
from fastpubsub.patterns.engine import PatternEngine
from fastpubsub.patterns.oracle import Limits, OraclePatterns

from test_pattern_engine import SYMBOLS, TEMPLATES

WITHIN = [3, 8, 20]


@st.composite
def patterns(draw):
    t = draw(st.sampled_from(TEMPLATES))
    return parse(t.format(s1=draw(st.sampled_from(SYMBOLS)), s2=draw(st.sampled_from(SYMBOLS)),
                          c1=draw(st.integers(0, 12)), c2=draw(st.integers(0, 4)),
                          f=draw(st.sampled_from(["1", "1.05", "0.9"])), v=draw(st.sampled_from([0, 5, 100])),
                          d=draw(st.integers(0, 6)), w=draw(st.sampled_from(WITHIN))))


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
    """Every live instance waits for expiry exactly once: in its queue (deadline order, linked both ways, the queue
    in the queue heap under a key no later than its head) or in the heap (an entry of its generation)."""
    alive = np.flatnonzero(engine.inst_alive)
    queued = set()
    n_qh = int(engine.st[K.ST_QHEAP])
    qkeys = dict(zip(engine.qh_q[:n_qh].tolist(), engine.qh_key[:n_qh].tolist()))
    assert len(qkeys) == n_qh and all(engine.q_in[q] for q in qkeys)
    for q in range(len(engine.q_head)):
        s, prev, last = int(engine.q_head[q]), -1, None
        if s >= 0:
            assert q in qkeys
        while s >= 0:
            assert engine.inst_alive[s] and engine.exp_q[s] == q and engine.exp_prev[s] == prev
            p = int(engine.inst_p[s])
            assert engine.pat_wq[p] == q and engine.q_within[q] == engine.pat_within[p]
            d = int(engine.inst_start[s] + engine.q_within[q])
            assert qkeys[q] <= d and (last is None or last <= d) and d <= engine.q_last[q]
            queued.add(s)
            prev, last, s = s, d, int(engine.exp_next[s])
        assert engine.q_tail[q] == prev
    n_h = int(engine.st[K.ST_HEAP])
    in_heap = {int(s) for s, g in zip(engine.heap_s[:n_h], engine.heap_g[:n_h]) if engine.inst_gen[s] == g}
    for s in alive.tolist():
        assert (s in queued) != (s in in_heap and engine.inst_alive[s] and engine.exp_q[s] < 0)


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


def test_a_queue_nobody_uses_is_reused_for_another_within():
    engine, oracle = PatternEngine(), OraclePatterns()
    both = lambda f, *a: (getattr(engine, f)(*a), getattr(oracle, f)(*a))  # noqa: E731
    both("subscribe", 1, parse('seq a: name = "A" next b: name = "B" within 5ms'))
    both("subscribe", 2, parse('seq a: name = "A" next b: name = "C" within 5ms'))
    assert engine.pat_wq[engine.sid_slot[1]] == engine.pat_wq[engine.sid_slot[2]]  # one queue per within value
    events = [(0, 0, {"name": "A"}), (1, 1, {"name": "A"})]
    assert len(engine.process_events(events)) == len(oracle.process(events)) == 0
    assert engine.live() == 4
    both("unsubscribe", 1)
    both("unsubscribe", 2)  # the queue is empty and unused: it leaves the queue heap
    assert engine.live() == 0 and int(engine.st[K.ST_QHEAP]) == 0 and len(engine.free_wq) == 1
    both("subscribe", 3, parse('seq a: name = "A" next b: name = "B" within 50ms'), 1)
    assert engine.q_within[engine.pat_wq[engine.sid_slot[3]]] == 50 and len(engine.wq_refs) == 1
    events = [(2, 10, {"name": "A"}), (3, 40, {"name": "X"}), (4, 55, {"name": "B"}), (5, 70, {"name": "A"}),
              (6, 119, {"name": "B"})]
    got = [w.notification_id for w in engine.process_events(events)]
    assert got == [w.notification_id for w in oracle.process(events)] == ["3/2|4", "3/5|6"]
    assert engine.counters["expired"] == 0
    late = [(7, 60, {"name": "A"}), (8, 200, {"name": "Z"})]  # late: its deadline 110 is before the queue's last
    engine.process_events(late[:1])
    oracle.process(late[:1])
    assert_expiry_sound(engine)
    assert engine.live() == 1 and engine.exp_q[np.flatnonzero(engine.inst_alive)[0]] == -1
    engine.process_events(late[1:])
    oracle.process(late[1:])
    assert engine.live() == oracle.live() == 0
    assert engine.counters["expired"] == oracle.counters.as_dict()["expired"] == 1
