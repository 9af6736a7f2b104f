"""Adaptive multiple key hashing (engine/algorithms/amkh.py): its kernels against the naive references, its options,
its compaction, and Wu & Yu's claim.

Every configuration -- MKH (every clause exact in the key), AMKH(0,-) (equality-only attributes), AMKH(1,2) (mod-2
folding), value-range buckets, and the one ``general="auto"`` prices -- gives the oracle's matches on range-heavy
subscriptions in the conformance suite (test_conformance.py); here the workloads are its own.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from tests.support.naive import amkh_candidates, amkh_coordinate

from fastpubsub.engine import Matcher
from tests.engine.conformance import RANGES_KEYED, agree, refuses_options
from tests.engine.test_conformance import AMKH as CONFIGS
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.algorithms.amkh import coordinates, event_members
from fastpubsub.engine.columnar import EventBatch, SubscriptionBatch
from fastpubsub.engine.frontend.encoding import encode_batch
from fastpubsub.workloads.intervals import WuYuSpec, wuyu_events, wuyu_subscriptions
from fastpubsub.engine.structures.predicates import satisfied_predicates

subscription, event = RANGES_KEYED.subscription, RANGES_KEYED.event
SETTINGS = RANGES_KEYED.settings


@SETTINGS
@given(subs=st.dictionaries(st.integers(0, 40), subscription, min_size=1, max_size=20),
       events=st.lists(event, min_size=1, max_size=6),
       name=st.sampled_from(["MKH", "AMKH(1,2)", "AMKH(2,3)", "range2", "range3-equality-k"]))
def test_kernels_agree_with_the_naive_references(subs, events, name):
    """coordinates and event_members, and the examined count, against tests/support/naive.py."""
    m = Matcher("amkh", **CONFIGS[name])
    m.add_bulk(SubscriptionBatch.from_lists(subs.items()))
    ix = m.index
    handles = np.flatnonzero(ix.live)
    off, pids = ix._pids_of(handles)
    ksum, shape = coordinates(off, pids, m.preds.field, m.preds.op, ix.hpos, ix.member_of, ix.weights)
    rows = {int(h): pids[off[i]:off[i + 1]].tolist() for i, h in enumerate(handles)}
    for i, h in enumerate(handles):
        coord = amkh_coordinate(rows[int(h)], m.preds.field, m.preds.op, ix.hpos, ix.member_of)
        assert shape[i] == sum(1 << k for k in coord)
        want = sum(int(ix.weights[k]) * mem for k, mem in coord.items()) % 2**64
        assert ksum[i] == (want - 2**64 if want >= 2**63 else want)
        assert ix.ksum[h] == ksum[i]
    m.match_encoded(EventBatch.from_dicts(events))  # prepares the predicate phase
    ev = encode_batch(EventBatch.from_dicts(events), m.attributes, m.strings).arrays()
    pa = m.preds.arrays()
    sat = np.empty(max(len(pa.bits), 1), dtype=np.int64)
    nh = len(ix.weights)
    for i in range(len(ev.offsets) - 1):
        ns = satisfied_predicates(ev.offsets[i], ev.offsets[i + 1], ev.field, ev.code, ev.eqbits, pa.table_keys,
                                  pa.table_vals, pa.group_of, pa.g_start, pa.g_end, pa.g_vals, pa.g_pids, sat,
                                  ev.repeats[i], pa.bits)
        s = sat[:ns].tolist()
        cnt, mem_off, mem = (np.zeros(nh + 1, dtype=np.int64), np.zeros(nh + 1, dtype=np.int64),
                             np.empty(max(ns, 1), dtype=np.int64))
        event_members(sat, ns, m.preds.field, ix.hpos, ix.member_of, nh, cnt, mem_off, mem,
                      np.empty(ns + 256, dtype=np.int64))
        for k in range(nh):
            want = sorted({int(ix.member_of[p]) for p in s if m.preds.field[p] < len(ix.hpos)
                           and ix.hpos[m.preds.field[p]] == k and ix.member_of[p] != np.iinfo(np.int64).min})
            assert mem[mem_off[k]: mem_off[k] + cnt[k]].tolist() == want
        ix.reset_counters()
        one = EventBatch.from_dicts([events[i]])
        m.match_encoded(one)
        assert ix.counters[2] == len(amkh_candidates(s, rows, m.preds.field, m.preds.op, ix.hpos, ix.member_of))


def test_forced_configurations_match_the_chosen_one_on_wu_and_yu():
    spec = WuYuSpec(x=75)
    subs, events = wuyu_subscriptions(spec, 3000, seed=2), wuyu_events(spec, 300, seed=3)
    ref = Matcher("counting")
    ref.add_bulk(subs)
    want = ref.match_encoded(events)
    for opts in (*CONFIGS.values(), {"general": ("g0",), "bucketing": "range", "buckets": 8}):
        opts = {k: v for k, v in opts.items() if k not in ("equality",)}
        opts["general"] = tuple(g.replace("x", "g0") for g in opts["general"]) if opts["general"] != "auto" else "auto"
        m = Matcher("amkh", **opts)
        m.add_bulk(subs)
        got = m.match_encoded(events)
        assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.ids, want.ids), opts


def _unmatched(opts: dict, subs, events) -> float:
    m = Matcher("amkh", **opts)
    m.add_bulk(subs)
    m.match_encoded(events)
    return m.stats()["amkh"]["unmatched_examined_per_event"]


def test_wu_and_yu_amkh_1_2_examines_at_least_half_fewer_unmatched_than_amkh_0():
    """The paper's section 3 result, on its metric (a count, deterministic by seed)."""
    for x in (35, 75):
        spec = WuYuSpec(x=x)
        subs, events = wuyu_subscriptions(spec, 20_000, seed=1), wuyu_events(spec, 400, seed=2)
        amkh0 = _unmatched({"general": ()}, subs, events)
        amkh12 = _unmatched({"general": ("g0",), "bucketing": "fold", "buckets": 2}, subs, events)
        mkh = _unmatched({"general": ("g0",), "bucketing": "exact"}, subs, events)
        assert amkh12 * 2 <= amkh0, (x, amkh0, amkh12)
        assert mkh == 0.0  # exact keys: every subscription with the probed coordinate matches


def test_options_are_checked_and_the_configuration_is_reported():
    refuses_options("amkh", [({"bucketing": "modulo"}, "bucketing"), ({"buckets": 0}, "buckets"),
                             ({"table_size": 0}, "table_size"), ({"runs": 8}, "runs"),
                             ({"cells": 8}, "no option cells"), ({"general": [("x", "range")]}, "general attribute")])
    m = Matcher("amkh", general="x", bucketing="range", buckets=4)
    m.add(1, [("k", "=", 1), ("x", "<", 3)])
    m.add(2, [("k", "=", 2), ("x", ">=", 3), ("y", "=", "a")])
    assert m.match({"k": 1, "x": 2}).tolist() == [1] and m.match({"k": 2, "x": 3, "y": "a"}).tolist() == [2]
    s = m.stats()
    assert s["configuration"]["general"] == [["x", "range", 4]] and s["configuration"]["equality"] == ["k", "y"]
    assert s["amkh"]["events"] == 2 and s["amkh"]["matched"] == 2


def test_auto_keys_a_general_attribute_only_where_its_price_is_lower():
    """Priced on counts (probes, examined), not timings: g0 keyed when selective (x = 15), not at x = 95."""
    chosen = {}
    for x in (15, 95):
        spec = WuYuSpec(x=x)
        m = Matcher("amkh", general="auto")
        m.add_bulk(wuyu_subscriptions(spec, 20_000, seed=1))
        m.match_encoded(wuyu_events(spec, 300, seed=2))
        chosen[x] = m.stats()["configuration"]["general"]
        assert min(m.index.prices.values()) == round(m.index.chosen_price, 1)
    assert [g[0] for g in chosen[15]] == ["g0"] and chosen[95] == []


def test_removing_most_subscriptions_compacts_the_arena_and_keeps_matching_exact():
    """Subscriptions of more than ``INLINE`` predicates live in the arena; removals compact it."""
    rng = np.random.default_rng(5)
    m, o = Matcher("amkh", general={"x": ("range", 4)}, table_size=64), OracleMatcher()
    subs = {}
    for sid in range(600):
        preds = [("k", "=", int(rng.integers(0, 4))), ("x", rng.choice(["<", ">="]), float(rng.integers(-5, 6)))]
        preds += [(f"a{j}", ">=", int(rng.integers(-3, 3))) for j in range(int(rng.integers(0, 6)))]
        subs[sid] = preds
        o.add(sid, preds)
    m.add_bulk(SubscriptionBatch.from_lists(subs.items()))
    events = [{"k": int(rng.integers(0, 4)), "x": float(rng.integers(-6, 7)), **{f"a{j}": int(rng.integers(-4, 4))
              for j in range(5)}} for _ in range(40)]
    agree(m, o, events)
    used = m.index.arena_used
    gone = [sid for sid in subs if sid % 10]
    m.remove_bulk(gone)
    for sid in gone:
        o.remove(sid)
    assert m.index.arena_used < used / 4  # compacted
    agree(m, o, events)
    m.add(10_001, [("k", "=", 1), ("x", "<", 0.5)] + [(f"a{j}", ">=", -9) for j in range(5)])
    o.add(10_001, [("k", "=", 1), ("x", "<", 0.5)] + [(f"a{j}", ">=", -9) for j in range(5)])
    agree(m, o, events + [{"k": 1, "x": 0, **{f"a{j}": 0 for j in range(5)}}])


def test_more_equality_attributes_than_a_shape_holds_key_the_most_used_ones():
    m, o = Matcher("amkh"), OracleMatcher()
    subs = {i: [(f"a{i % 80}", "=", i % 3), ("b", "=", i % 2)] + ([("c", ">", 0)] if i % 5 == 0 else [])
            for i in range(400)}
    m.add_bulk(SubscriptionBatch.from_lists(subs.items()))
    for sid, preds in subs.items():
        o.add(sid, preds)
    assert "b" in m.stats()["configuration"]["equality"] and len(m.index.weights) == 63
    agree(m, o, [{f"a{j}": j % 3 for j in range(0, 80, 3)} | {"b": 1, "c": 2}, {"a7": 1, "b": 1}, {"b": 0}])
    wide = Matcher("amkh", general=[f"a{j}" for j in range(70)])
    wide.add_bulk(SubscriptionBatch.from_lists(subs.items()))
    assert [g[0] for g in wide.stats()["configuration"]["general"]] == [f"a{j}" for j in range(63)]
    agree(wide, o, [{f"a{j}": j % 3 for j in range(0, 80, 3)} | {"b": 1, "c": 2}, {"a77": 2, "b": 1}])
