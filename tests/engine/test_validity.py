"""Deadlines in event time: replace, discard, bulk expiry, bounded memory."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.engine.validity.deadlines import DeadlineQueue


def test_pop_due_returns_expired_ids_once_in_deadline_order():
    q = DeadlineQueue()
    q.set(1, 100)
    q.set(2, 50)
    q.set(3, 200)
    q.set(1, 300)  # replaced: the old deadline 100 no longer counts
    assert q.pop_due(99).tolist() == [2]
    assert q.pop_due(250).tolist() == [3]
    assert q.pop_due(250).tolist() == []
    assert len(q) == 1 and q.get(1) == 300
    q.set(1, None)
    assert len(q) == 0 and q.pop_due(10**12).tolist() == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "discard", "pop"]), st.integers(0, 20), st.integers(0, 100)), max_size=80))
def test_queue_agrees_with_a_plain_dict(ops):
    q, model = DeadlineQueue(), {}
    for op, key, t in ops:
        if op == "set":
            q.set(key, t)
            model[key] = t
        elif op == "discard":
            q.discard(key)
            model.pop(key, None)
        else:
            due = sorted((d, k) for k, d in model.items() if d <= t)
            assert sorted(q.pop_due(t).tolist()) == sorted(k for _, k in due)
            for _, k in due:
                del model[k]
        assert len(q) == len(model)
        expected_next = min(model.values()) if model else None
        assert q.next_deadline() == expected_next


def test_churn_keeps_the_heap_bounded():
    q = DeadlineQueue()
    rng = random.Random(1)
    q.set_many(range(10_000), [rng.randrange(10**6) for _ in range(10_000)])
    for _ in range(50_000):  # rescheduling creates stale heap entries
        q.set(rng.randrange(10_000), rng.randrange(10**6))
    assert len(q) == 10_000
    assert len(q._heap) <= 2 * len(q) + 1024
