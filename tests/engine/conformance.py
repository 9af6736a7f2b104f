"""The workloads the conformance suite (test_conformance.py) draws, one family per kind of index, and its check.

A family is what an algorithm is built for: ``GENERAL`` small subscription sets over few attributes and values so that
matches, near-misses, mixed kinds and shared predicates are all common (every algorithm); ``RANGES_KEYED`` range-heavy
subscriptions with a key attribute ``k``, events on the bucket bounds and next to them, reconfigurations mid-run
(AMKH's configurations, engine/algorithms/amkh.py); ``RANGES`` range-heavy subscriptions, values on the cell
boundaries, forced rebuilds, and the bit rows against tests/support/naive.py (the bit-parallel path,
engine/algorithms/bitmaps.py, and the catch-all on it).

The changes made to a matcher and the oracle alike (:func:`bulk_load`, :func:`add_each`, :func:`bulk_remove`,
:func:`remove_each`, :class:`Interleaving`) serve every test that holds a matcher against the oracle, and
:func:`refuses_options` every algorithm's test of the options it refuses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from fastpubsub.engine import Matcher
from fastpubsub.engine.algorithms.bitmaps import RangeBitmaps
from fastpubsub.engine.columnar import EventBatch, SubscriptionBatch
from fastpubsub.engine.frontend.encoding import encode_batch
from fastpubsub.engine.semantics import OPERATORS
from tests.support.naive import bitmap_rows
from tests.support.oracles.engine import OracleMatcher


def agree(m: Matcher, o: OracleMatcher, events: list[dict]) -> None:
    """The matcher's matches are the oracle's, per event and on the encoded batch, as int64 ids."""
    want = [o.match(e).tolist() for e in events]
    got = m.match_batch(events)
    assert [r.tolist() for r in got] == want
    assert all(r.dtype == np.int64 for r in got)
    assert [r.tolist() for r in m.match_encoded(EventBatch.from_dicts(events)).split()] == want


def refuses_options(algorithm: str, cases: list[tuple[dict, str]]) -> None:
    """``Matcher(algorithm, **options)`` raises a ValueError matching ``reason``, for each ``(options, reason)``."""
    for options, reason in cases:
        with pytest.raises(ValueError, match=reason):
            Matcher(algorithm, **options)


def _items(subs) -> list:
    return subs.to_lists() if isinstance(subs, SubscriptionBatch) else list(subs.items() if isinstance(subs, dict) else subs)


def bulk_load(m: Matcher, o: OracleMatcher, subs) -> None:
    """``subs`` (a SubscriptionBatch, ``(id, predicates)`` pairs or a dict of them) into the matcher by one
    ``add_bulk`` and into the oracle one by one."""
    m.add_bulk(subs if isinstance(subs, SubscriptionBatch) else SubscriptionBatch.from_lists(_items(subs)))
    for sid, preds in _items(subs):
        o.add(sid, preds)


def add_each(m: Matcher, o: OracleMatcher, subs) -> None:
    """``subs`` (pairs or a dict) into the matcher and the oracle by single adds, in order."""
    for sid, preds in _items(subs):
        m.add(sid, preds)
        o.add(sid, preds)


def bulk_remove(m: Matcher, o: OracleMatcher, ids) -> None:
    """These ids out of the matcher by one ``remove_bulk`` (given as they are) and out of the oracle one by one."""
    m.remove_bulk(ids)
    for sid in np.asarray(ids, dtype=np.int64).tolist():
        o.remove(sid)


def remove_each(m: Matcher, o: OracleMatcher, ids: Iterable[int]) -> None:
    """These ids out of the matcher and the oracle by single removes, in order."""
    for sid in ids:
        m.remove(sid)
        o.remove(sid)


class Interleaving:
    """Random adds and removes of generated subscriptions, made to a matcher and the oracle alike (ids from 0 up).

    ``step("add", rng)`` bulk-loads ``generate(n, seed=..., first_id=...)`` of ``n`` in ``sizes`` (drawn from
    ``rng``), ``step("remove", rng)`` bulk-removes a random ``1 / share`` of the live subscriptions (at least one);
    any other step, or a remove with none live, changes nothing.
    """

    def __init__(self, m: Matcher, o: OracleMatcher, generate: Callable[..., SubscriptionBatch],
                 sizes: tuple[int, int], share: int) -> None:
        self.m, self.o, self.generate, self.sizes, self.share = m, o, generate, sizes, share
        self.next_id = 0

    def step(self, step: str, rng: np.random.Generator) -> None:
        if step == "add":
            batch = self.generate(int(rng.integers(*self.sizes)), seed=int(rng.integers(1 << 30)), first_id=self.next_id)
            self.next_id += batch.n_subscriptions
            bulk_load(self.m, self.o, batch)
        elif step == "remove" and len(self.o):
            live = np.array([s for s in range(self.next_id) if s in self.o], dtype=np.int64)
            bulk_remove(self.m, self.o, rng.choice(live, size=max(1, len(live) // self.share), replace=False))


def strings_that_renumber(first_id: int = 10) -> tuple[list[str], list[tuple[int, list]]]:
    """Some hundred distinct short words over "amz5" (sorted) and, from ``first_id``, a subscription of one order or
    equality predicate on each: loaded in bulk after a few strings, they renumber every string code already in
    predicates (engine/frontend/encoding.py)."""
    rng = np.random.default_rng(5)
    words = sorted({"".join(rng.choice(list("amz5"), size=int(rng.integers(1, 5)))) for _ in range(400)})
    return words, [(first_id + i, [("s", ["<", ">", "=", "!=", "<=", ">="][i % 6], w)]) for i, w in enumerate(words)]


@dataclass(frozen=True)
class Family:
    """Subscriptions and events drawn for one kind of index, and what it checks beyond the matches."""

    name: str
    subscription: st.SearchStrategy
    event: st.SearchStrategy
    sub_ids: st.SearchStrategy
    settings: settings
    bulk: bool  # subscription sets loaded by add_bulk (else one add each)
    last_events: list[dict]  # matched after every interleaving
    edges: Callable[[Matcher], list[dict]] = lambda m: []  # events on the index's own bounds
    reorganize: Callable[[Matcher, dict], None] | None = None  # an operation of the interleavings
    extra_check: Callable[[Matcher], None] = lambda m: None
    set_ids: st.SearchStrategy | None = None  # ids of a subscription set (default sub_ids)
    set_size: int = 25  # subscriptions in a set at most

    def check(self, m: Matcher, o: OracleMatcher, events: list[dict]) -> None:
        agree(m, o, events)
        self.extra_check(m)

    def subscription_sets(self) -> st.SearchStrategy:
        return st.dictionaries(self.set_ids or self.sub_ids, self.subscription, max_size=self.set_size)

    def event_lists(self) -> st.SearchStrategy:
        return st.lists(self.event, min_size=1, max_size=8)

    def operations(self) -> st.SearchStrategy:
        kinds = [st.tuples(st.just("add"), self.sub_ids, self.subscription), st.tuples(st.just("remove"), self.sub_ids),
                 st.tuples(st.just("match"), st.lists(self.event, min_size=1, max_size=3))]
        if self.reorganize is not None:
            kinds.append(st.tuples(st.just("reorganize")))
        return st.lists(st.one_of(*kinds), max_size=40)


# -- GENERAL: every algorithm ---------------------------------------------------------------------------------------

_ATTRS = ["a", "b", "c", "d"]
LONG = "x" * 5000
_values = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.5, -0.0, 2.5, 1e300, float(2**53), 2**53 + 1, -(2**63)]),
    st.sampled_from(["", "a", "ab", "b", "zz", LONG, "é"]),
    st.booleans(),
)
_event_values = st.one_of(_values, st.just(math.nan), st.sampled_from(["aa", "abc", "y", LONG + "y"]))

GENERAL = Family(
    name="general",
    subscription=st.lists(st.tuples(st.sampled_from(_ATTRS), st.sampled_from(OPERATORS), _values), min_size=1, max_size=4),
    event=st.dictionaries(st.sampled_from(_ATTRS + ["zzz"]), _event_values, max_size=5),
    sub_ids=st.one_of(st.integers(-50, 50), st.sampled_from([2**63 - 1, -(2**63), 2**40])),
    settings=settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
    bulk=False,
    last_events=[{"a": 1, "b": "a", "c": True, "d": -0.0}, {}],
)


# -- RANGES_KEYED and RANGES: range-heavy subscriptions ---------------------------------------------------------------

numbers = st.one_of(st.integers(-4, 4), st.sampled_from([0.5, -2.5, 1e300, -math.inf, math.inf, -0.0]))
range_values = st.one_of(numbers, numbers, numbers, st.sampled_from(["", "a", "b", "zz"]), st.booleans())


def _range_event(attrs: list[str]) -> st.SearchStrategy:
    return st.dictionaries(st.sampled_from(attrs + ["w"]),
                           st.one_of(numbers, numbers, st.just(math.nan), st.sampled_from(["a", "ab", "zz"]),
                                     st.booleans()),
                           max_size=5)


def _between(attrs: list[str]) -> st.SearchStrategy:
    return st.tuples(st.sampled_from(attrs), st.sampled_from(["between", "not between"]),
                     st.tuples(numbers, numbers).map(sorted).map(list))


def _on_and_next_to(bounds, attrs: list[str]) -> list[dict]:
    """Events whose first three attributes sit on each of the first six finite bounds, and just below and above."""
    out = []
    for b in sorted({float(v) for v in bounds if np.isfinite(v)})[:6]:
        out += [{a: v for a in attrs[:3]} for v in (b, float(np.nextafter(b, -np.inf)), float(np.nextafter(b, np.inf)))]
    return out


KEYED_ATTRS = ["k", "x", "y", "s"]


def _amkh_reorganize(m: Matcher, options: dict) -> None:
    m.flush()
    if options.get("general") == "auto":  # price on a sample: the configuration may key inequalities from here on
        sample = [{"k": v, "x": v, "y": -v, "s": "a"} for v in (-3, -0.0, 0.5, 1, 2.5, 4)]
        m.index.set_sample(encode_batch(EventBatch.from_dicts(sample), m.attributes, m.strings).arrays())
    m.index.reorganize()


RANGES_KEYED = Family(
    name="ranges-keyed",
    subscription=st.lists(st.one_of(st.tuples(st.sampled_from(KEYED_ATTRS),
                                              st.sampled_from(["<", "<=", ">", ">=", "=", "=", "!="]), range_values),
                                    _between(KEYED_ATTRS[1:])), min_size=1, max_size=5),
    event=_range_event(KEYED_ATTRS),
    sub_ids=st.integers(0, 30),
    set_ids=st.integers(0, 60),
    set_size=20,
    settings=settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
    bulk=True,
    last_events=[{"k": 0, "x": 0, "y": 0.5, "s": "a"}, {}],
    edges=lambda m: _on_and_next_to([v for bounds in m.index.bounds.values() for v in bounds], KEYED_ATTRS),
    reorganize=_amkh_reorganize,
)

RANGE_ATTRS = ["x", "y", "z", "s"]


def bitmaps_of(m: Matcher) -> RangeBitmaps | None:
    """The bit-parallel structure of a bitmaps matcher, or of a matcher's catch-all (None when it has none)."""
    ix = m.index
    return ix.bitmaps if hasattr(ix, "bitmaps") else ix.catch_all.bitmaps


def bit_rows_are_naive(m: Matcher) -> None:
    """The bit rows are tests/support/naive.py's, in an odd number of 64-byte lines (no power-of-two stride)."""
    bm = bitmaps_of(m)
    if bm is not None and bm.slots.high:
        n = bm.slots.high
        a = bm.arrays()
        got = np.unpackbits(a.rows[:, : (n + 63) // 64].view(np.uint8), axis=1, bitorder="little")[:, :n]
        assert np.array_equal(got.astype(bool), bitmap_rows(a, n))
        assert a.rows.shape[1] % 16 == 8


def _rebuild(m: Matcher, options: dict) -> None:
    m.flush()
    bm = bitmaps_of(m)
    if bm is not None:
        bm.rebuild()


def _cell_bounds(m: Matcher) -> list[dict]:
    bm = bitmaps_of(m)
    return _on_and_next_to(np.unique(bm.bounds), RANGE_ATTRS) if bm is not None and len(bm.bounds) else []


RANGES = Family(
    name="ranges",
    subscription=st.lists(st.one_of(st.tuples(st.sampled_from(RANGE_ATTRS),
                                              st.sampled_from(["<", "<=", ">", ">=", "<", "<=", ">", ">=", "=", "!="]),
                                              range_values),
                                    _between(RANGE_ATTRS)), min_size=1, max_size=6),
    event=_range_event(RANGE_ATTRS),
    sub_ids=st.integers(0, 30),
    set_ids=st.integers(0, 60),
    set_size=20,
    settings=settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
    bulk=True,
    last_events=[{"x": 0, "y": 0.5, "z": -1, "s": "a"}, {}],
    edges=_cell_bounds,
    reorganize=_rebuild,
    extra_check=bit_rows_are_naive,
)
