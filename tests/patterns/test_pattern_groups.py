"""Merged start states: the start groups' sorted threshold walk (kernel.group_starts) equals a member-by-member check."""

import math

import numpy as np
from hypothesis import given, settings, strategies as st

from fastpubsub.engine import EventBatch
from fastpubsub.patterns import kernel as K, parse
from fastpubsub.patterns.engine import PatternEngine

from tests.support.naive import pattern_group_starts

OPS = ["<", "<=", ">", ">="]
values = st.sampled_from([0, 1, 2, 2.5, 3, -1, 1e9])


@st.composite
def starts(draw):
    name = draw(st.sampled_from(["A", "B"]))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return f'name = "{name}"'  # no remaining predicate
    if kind == 1:
        return f'name = "{name}" and {draw(st.sampled_from(["price", "volume"]))} {draw(st.sampled_from(OPS))} {draw(values)}'
    if kind == 2:  # two remaining atoms: not a threshold member
        return f'name = "{name}" and price {draw(st.sampled_from(OPS))} {draw(values)} and volume != {draw(values)}'
    return f'price {draw(st.sampled_from(OPS))} {draw(values)}'  # no equality: the whole start is the group key


event_values = st.one_of(values, st.just(float("nan")), st.just("x"), st.just(True), st.none())


@settings(max_examples=60, deadline=None)
@given(st.lists(starts(), min_size=1, max_size=25), st.lists(st.tuples(event_values, event_values), min_size=1,
                                                              max_size=6))
def test_group_starts_equal_member_by_member(texts, events):
    engine = PatternEngine()
    engine.subscribe_many((sid, parse(f"seq a: {t} within 1s"), 0) for sid, t in enumerate(texts))
    engine.unsubscribe(0)  # a group may lose members (and disappear)
    engine._sync_tables()
    dicts = []
    for price, volume in events:
        d = {"name": "A"}
        if price is not None:
            d["price"] = price
        if volume is not None:
            d["volume"] = volume
        dicts.append(d)
    ev_kind, ev_num = engine._event_matrix(EventBatch.from_dicts(dicts))
    for g, key in enumerate(engine.start_groups.keys):
        if key is None:
            continue
        size = int(engine.grp_size[g])
        assert size == len(engine.start_groups.members[g])
        for i, d in enumerate(dicts):
            cre_p = np.zeros(size + 1, np.int64)
            cre_parent = np.zeros(size + 1, np.int64)
            n = K.group_starts(engine._groups(), g, i, ev_kind, ev_num, cre_p, cre_parent, 0)
            got = sorted(zip(cre_p[:n].tolist(), cre_parent[:n].tolist()))
            assert got == pattern_group_starts(engine, g, d), (texts, d)


def test_members_of_one_group_share_one_matcher_entry():
    engine = PatternEngine()
    engine.subscribe_many((sid, parse(f'seq a: name = "A" and price > {sid} within 1s'), 0) for sid in range(10))
    assert len([k for k in engine.start_groups.keys if k is not None]) == 1
    got = engine.process_events([(0, 1, {"name": "A", "price": 4.0}), (1, 2, {"name": "A", "price": 4.5})])
    assert sorted(w.notification_id for w in got) == sorted([f"{s}/0" for s in range(4)] + [f"{s}/1" for s in range(5)])
    for sid in range(10):
        engine.unsubscribe(sid)
    assert all(k is None for k in engine.start_groups.keys) and not math.isnan(engine.matcher.stats()["memory_bytes"])
