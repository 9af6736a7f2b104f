"""Prefix groups: subscriptions that are one ``prefix`` predicate, filed as ascending id groups on a trie.

The kernels against the naive reference (tests/support/naive.py), the structure against a model under adds and
removes (unicode, lone surrogates, prefixes longer than the values), and the matcher against the oracle
for every algorithm with prefix-only subscriptions mixed with others.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.naive import prefix_groups_content, prefix_groups_matches

from fastpubsub.engine import ALGORITHMS, AnyOf, Matcher, SubscriptionBatch
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.structures.prefix_groups import PrefixGroups, code_points, prefix_fill

ALPHABET = ["a", "b", "é", "\U0001f600", "\ud800", "0"]
text = st.lists(st.sampled_from(ALPHABET), min_size=0, max_size=6).map("".join)
prefix = st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=5).map("".join)
attribute = st.sampled_from(["t", "u"])
event = st.dictionaries(st.sampled_from(["t", "u", "x"]), st.one_of(text, st.integers(0, 2), st.booleans()),
                        max_size=3)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _model_matches(model: dict[int, tuple[str, str]], events: list[dict]) -> list[list[int]]:
    return [sorted(i for i, (a, p) in model.items() if isinstance(e.get(a), str) and e[a].startswith(p))
            for e in events]


def _check_structure(pg: PrefixGroups, model: dict[int, tuple[str, str]]) -> None:
    want: dict[tuple[str, str], list[int]] = {}
    for i, key in sorted(model.items()):
        want.setdefault(key, []).append(i)
    assert prefix_groups_content(pg) == want  # every group ascending, exactly its subscriptions
    # the trie holds the live prefixes, their ancestors and one root per attribute seen, nothing else
    spelled = {(a, p[:k]) for a, p in want for k in range(1, len(p) + 1)}
    assert len(pg.trie) == len(spelled)
    assert len(pg.pool) == len(spelled) + len(pg.roots)
    assert len(pg) == len(model)


@SETTINGS
@given(steps=st.lists(st.tuples(st.booleans(), st.lists(st.tuples(attribute, prefix), max_size=12)), min_size=1,
                      max_size=6),
       events=st.lists(event, min_size=1, max_size=8), small_arena=st.booleans())
def test_groups_follow_adds_and_removes_and_match_like_startswith(steps, events, small_arena):
    pg = PrefixGroups()
    if small_arena:
        pg.compact_min = 0  # compact as soon as half the arena is garbage
    model: dict[int, tuple[str, str]] = {}
    handle_of: dict[int, int] = {}
    next_id = 0
    batch = EventBatch.from_dicts(events)
    for remove, subs in steps:
        if remove and model:
            gone = sorted(model)[::2]
            pg.remove(np.array([handle_of.pop(i) for i in gone]), np.array(gone))
            for i in gone:
                del model[i]
        new = {}
        for a, p in subs:
            new[next_id * 7 % 101 - 50 + 1000 * next_id] = (a, p)  # ids not in insertion order, some negative
            next_id += 1
        if new:
            handles = np.arange(len(handle_of) + 1000 * next_id, len(handle_of) + 1000 * next_id + len(new))
            handle_of.update(zip(new, handles.tolist()))
            pg.add(handles, np.array(list(new)), [a for a, _ in new.values()], [p for _, p in new.values()])
            model.update(new)
        _check_structure(pg, model)
        off, ids = pg.match(batch)
        got = [ids[off[e]: off[e + 1]].tolist() for e in range(len(events))]
        assert got == prefix_groups_matches(pg, events) == _model_matches(model, events)


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), min_size=1, max_size=7), seed=st.integers(0, 2**31))
def test_the_fill_kernel_merges_disjoint_groups_like_a_sort(sizes, seed):
    rng = np.random.default_rng(seed)
    values = rng.choice(10_000, size=sum(sizes), replace=False).astype(np.int64) - 5000
    parts = np.split(values, np.cumsum(sizes)[:-1])
    arena = np.concatenate([np.sort(p) for p in parts] + [np.zeros(3, dtype=np.int64)])
    length = np.array(sizes, dtype=np.int64)
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    # one event with every group, one with none, one with the first group only
    groups = np.concatenate([np.arange(len(sizes)), [0]]).astype(np.int64)
    goff = np.array([0, len(sizes), len(sizes), len(sizes) + 1], dtype=np.int64)
    counts = [sum(sizes), 0, sizes[0]]
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    out = np.full(off[-1], -1, dtype=np.int64)
    prefix_fill(off, groups, goff, base, length, arena, out)
    assert out.tolist() == sorted(values.tolist()) + sorted(parts[0].tolist())


def test_code_points_keep_lone_surrogates_and_astral_characters():
    cps, off = code_points(["a\ud800", "", "\U0001f600é"])
    assert off.tolist() == [0, 2, 2, 4] and cps.tolist() == [97, 0xD800, 0x1F600, 0xE9]


prefix_sub = st.tuples(attribute, prefix).map(lambda ap: [(ap[0], "prefix", ap[1])])
other_sub = st.one_of(
    st.tuples(attribute, prefix).map(lambda ap: [(ap[0], "prefix", ap[1]), ("x", "=", 1)]),
    st.tuples(attribute, prefix).map(lambda ap: AnyOf([[(ap[0], "prefix", ap[1])], [("x", "=", 2)]])),
    st.tuples(attribute, text).map(lambda av: [(av[0], "=", av[1])]),
    st.tuples(attribute, prefix).map(lambda ap: [(ap[0], "suffix", ap[1])]),
)
subscriptions = st.dictionaries(st.integers(-30, 30), st.one_of(prefix_sub, prefix_sub, other_sub), max_size=14)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=subscriptions, more=subscriptions, events=st.lists(event, min_size=1, max_size=6),
       gone=st.sets(st.integers(-30, 30)))
def test_the_matcher_with_prefix_groups_agrees_with_the_oracle(algorithm, subs, more, events, gone):
    m, o = Matcher(algorithm), OracleMatcher()
    m.add_bulk(SubscriptionBatch.from_lists(subs.items()))
    for sid, sub in subs.items():
        o.add(sid, sub)
    extra = {sid + 100: s for sid, s in more.items()}
    for sid, sub in extra.items():  # single adds, buffered and filed together
        m.add(sid, sub)
        o.add(sid, sub)

    def check():
        want = [o.match(e).tolist() for e in events]
        assert [r.tolist() for r in m.match_batch(events)] == want
        assert len(m) == len(o)

    check()
    for sid in sorted(gone & set(subs)):
        m.remove(sid)
        o.remove(sid)
    check()
    assert all((sid in m) == (sid in o) for sid in list(subs) + list(extra))
    m.remove_bulk(sorted(extra)[::2])
    for sid in sorted(extra)[::2]:
        o.remove(sid)
    check()
    for sid, sub in subs.items():  # ids freed above come back, possibly on the other path
        if sid not in o:
            m.add(sid, sub)
            o.add(sid, sub)
    check()


def test_only_single_prefix_subscriptions_take_the_groups():
    m = Matcher("dynamic")
    m.add_bulk(SubscriptionBatch.from_lists([
        (1, [("t", "prefix", "ab")]), (2, [("t", "prefix", "ab"), ("x", "=", 1)]),
        (3, AnyOf([[("t", "prefix", "a")], [("t", "prefix", "b")]])), (4, [("t", "prefix", "abcdefgh")]),
    ]))
    s = m.stats()
    assert s["prefix_subscriptions"] == 2 and s["prefix_groups"] == 2
    assert m.match({"t": "abc", "x": 1}).tolist() == [1, 2, 3]
    assert m.match({"t": "a"}).tolist() == [3]  # shorter than "ab": no group reached
    assert m.match({"t": "abcdefghi"}).tolist() == [1, 3, 4]
    with pytest.raises(ValueError, match="non-empty string"):
        m.add(5, [("t", "prefix", "")])
    with pytest.raises(ValueError, match="duplicate"):
        m.add(1, [("t", "prefix", "zz")])
    m.remove_bulk([1, 4])
    assert m.stats()["prefix_subscriptions"] == 0 and m.stats()["prefix_trie_nodes"] == 1  # the root of "t"
    assert m.match({"t": "abcdefghi", "x": 1}).tolist() == [2, 3]
