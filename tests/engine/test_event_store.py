"""Valid events: a new subscription is evaluated against every still-valid event."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.engine.columnar import EventBatch, concat_events, take_events
from fastpubsub.engine.validity.event_store import ValidEventStore
from fastpubsub.engine.semantics import OPERATORS, compare

ATTRS = ["a", "b", "c"]
values = st.one_of(
    st.integers(-3, 3), st.sampled_from([0.5, -1.5, math.nan]), st.sampled_from(["", "x", "y", "xy"]), st.booleans()
)
events = st.dictionaries(st.sampled_from(ATTRS), values, max_size=3)
predicates = st.lists(
    st.tuples(st.sampled_from(ATTRS + ["zz"]), st.sampled_from(OPERATORS), values.filter(lambda v: v == v)),
    min_size=1,
    max_size=3,
)


def holds(preds, event):
    return all(a in event and compare(op, event[a], v) for a, op, v in preds)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.tuples(events, st.integers(0, 30)), max_size=8), max_size=6),
    st.lists(predicates, min_size=1, max_size=4),
    st.integers(0, 30),
)
def test_store_agrees_with_the_oracle(batches, subscriptions, expire_at):
    store = ValidEventStore(max_events=1000, max_chunks=3)  # small: compaction happens
    kept = {}
    n = 0
    for batch in batches:
        ids = [f"e{n + i}" for i in range(len(batch))]
        n += len(batch)
        store.add(EventBatch.from_dicts([e for e, _ in batch]), ids, np.array([t for _, t in batch]), now=5)
        kept.update({i: (e, t) for i, (e, t) in zip(ids, batch) if t > 5})
    store.expire(expire_at)
    live = {i: e for i, (e, t) in kept.items() if t > expire_at}
    assert len(store) == len(live)
    for preds in subscriptions:
        got = store.match(preds)
        want = sorted(i for i, e in live.items() if holds(preds, e))
        assert sorted(i for i, _ in got) == want
        for i, e in got:
            assert e == live[i] or all(  # NaN != NaN: compare the rest
                (e[k] == live[i][k]) or (e[k] != e[k] and live[i][k] != live[i][k]) for k in e
            )


def test_the_store_is_bounded_and_evicts_the_soonest_to_expire():
    store = ValidEventStore(max_events=3)
    store.add(EventBatch.from_dicts([{"a": 1}] * 4), ["e0", "e1", "e2", "e3"], np.array([50, 10, 40, 30]), now=0)
    assert len(store) == 3 and store.stats()["evicted"] == 1
    assert sorted(i for i, _ in store.match([("a", "=", 1)])) == ["e0", "e2", "e3"]
    store.add(EventBatch.from_dicts([{"a": 1}]), ["e4"], np.array([100]), now=0)
    assert sorted(i for i, _ in store.match([("a", "=", 1)])) == ["e0", "e2", "e4"]
    assert store.expire(45) == 1 and len(store) == 2


def test_take_and_concat_keep_events_intact():
    a = EventBatch.from_dicts([{"x": "s", "y": 1}, {"z": True}, {"x": "t"}])
    b = EventBatch.from_dicts([{"z": False, "w": 2.5}])
    assert take_events(a, np.array([2, 0])).to_dicts() == [{"x": "t"}, {"x": "s", "y": 1}]
    assert concat_events([a, b]).to_dicts() == a.to_dicts() + b.to_dicts()
    assert concat_events([]).to_dicts() == []
