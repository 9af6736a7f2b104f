"""Events encoded for the kernels (engine/frontend/encoding.py): the one-pass kernel against numpy passes."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import naive

from fastpubsub.engine import Matcher
from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.frontend import encoding
from fastpubsub.engine.frontend.encoding import StringDictionary, encode_batch, predicate_fields
from fastpubsub.engine.semantics import KIND_BOOL, KIND_NUMBER, KIND_STRING, KINDS

values = st.one_of(st.integers(-5, 5), st.sampled_from([0.0, -0.0, 1.5, math.nan, math.inf, -math.inf]), st.booleans(),
                   st.sampled_from(["a", "b", "zz", ""]))
events = st.lists(st.dictionaries(st.sampled_from(["x", "y", "s", "unknown"]), values, max_size=4), max_size=12)


@settings(max_examples=120, deadline=None)
@given(events, st.booleans())
def test_encode_batch_equals_numpy_passes(evs, subscribed):
    """Known and unknown attributes, every kind, NaN (no field), -0.0 (the bits of 0.0), strings seen or not."""
    m = Matcher("dynamic")
    if subscribed:
        m.add(1, [("x", "=", 1), ("y", ">=", 0.5), ("s", "=", "b")])
    batch = EventBatch.from_dicts(evs)
    got = encode_batch(batch, m.attributes, m.strings)
    want_field, want_code, want_eqbits = naive.encode_batch(batch, m.attributes, m.strings)
    assert got.field.tolist() == want_field.tolist()
    assert np.array_equal(got.code, want_code, equal_nan=True)
    assert got.eqbits.tolist() == want_eqbits.tolist()
    assert got.offsets.tolist() == np.asarray(batch.offsets).tolist()


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.0, -0.0, 1.5, -7.0, 1e300, math.inf, -math.inf, 2.0**60]),
                          st.sampled_from([KIND_NUMBER, KIND_BOOL, KIND_STRING])), max_size=30),
       st.lists(st.integers(0, 50), min_size=4, max_size=4))
def test_predicate_fields_equal_numpy_passes(preds, attr_ids):
    """A subscription batch's fields and equality bits: doubles' bits with -0.0 folded, booleans 0 / 1, strings 0."""
    attributes = np.array([a for a, _, _ in preds], dtype=np.int32)
    numbers = np.array([1.0 if k == KIND_BOOL and x else 0.0 if k == KIND_BOOL else x for _, x, k in preds],
                       dtype=np.float64)
    kinds = np.array([k for _, _, k in preds], dtype=np.int8)
    ids = np.array(attr_ids, dtype=np.int64)
    field, eqbits = predicate_fields(ids, attributes, kinds, numbers)
    k64 = kinds.astype(np.int64)
    want = (np.where(k64 == KIND_STRING, 0.0, numbers) + 0.0).view(np.int64)
    want[k64 == KIND_BOOL] = numbers[k64 == KIND_BOOL].astype(np.int64)
    assert field.tolist() == (ids[attributes.astype(np.int64)] * len(KINDS) + k64).tolist()
    assert eqbits.tolist() == want.tolist()
    assert not (np.asarray(eqbits) == np.float64(-0.0).view(np.int64)).any()


texts = st.text(alphabet=st.sampled_from(["a", "b", "z", "\x00", "é", "\U0001f600", "\ud800", "B"]), max_size=5)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(texts, max_size=80), max_size=4),
       st.one_of(st.lists(texts, max_size=10), st.lists(texts, min_size=40, max_size=120)), st.booleans(), st.booleans())
def test_encode_event_strings_equals_bisect_per_value(constants, values, small, nul):
    """Ids and order codes of event strings as a dict probe and a bisect per value would give them: constants
    interned in steps (codes slotted in or renumbered), unseen strings few (bisect) or many (``searchsorted``),
    with NULs (numpy's U type drops trailing ones), surrogates, astral and empty strings; ``small``: the U array's
    size limit so low that the bisect path takes over."""
    if not nul:  # (a NUL anywhere sends the whole batch to bisect)
        constants = [[c.replace("\x00", "") for c in batch] for batch in constants]
        values = [v.replace("\x00", "") for v in values]
    strings = StringDictionary()
    for batch in constants:
        strings.intern(batch)
        values = values + batch[: len(batch) // 2]  # some event strings are constants
    saved = encoding.SEARCH_CHARS
    encoding.SEARCH_CHARS = 8 if small else saved
    try:
        got = strings.encode_event_strings(tuple(values))
        again = strings.encode_event_strings(tuple(values))  # the cached search arrays
    finally:
        encoding.SEARCH_CHARS = saved
    want = naive.encode_event_strings(strings, values)
    for ids, codes in (got, again):
        assert ids.tolist() == want[0].tolist()
        assert codes.tolist() == want[1].tolist()


def test_many_unseen_strings_are_placed_by_searchsorted():
    """Past ``SEARCH_FROM`` unseen strings the sorted constants are searched as a numpy array (cached until the
    dictionary changes), with the codes a bisect gives."""
    strings = StringDictionary()
    strings.intern(["b", "d", "f"])
    values = tuple(f"{c}{i}" for i in range(20) for c in "aceg")
    ids, codes = strings.encode_event_strings(values)
    assert strings._search is not None and strings._search[0] is not None
    assert ids.tolist() == [-1] * len(values)
    assert codes.tolist() == naive.encode_event_strings(strings, values)[1].tolist()
    strings.intern(["c5"])
    assert strings._search is None
    assert strings.encode_event_strings(values)[1].tolist() == naive.encode_event_strings(strings, values)[1].tolist()


def test_the_search_array_waits_until_bisecting_has_cost_as_much():
    """A large dictionary changed between batches (churn) is not copied into a numpy array for every batch: bisect
    places the unseen strings until they add up to a quarter of the constants, with the same codes."""
    strings = StringDictionary()
    strings.intern([f"c{i:05d}" for i in range(400)])
    values = tuple(f"c{i:05d}x" for i in range(0, 400, 10))  # 40 unseen strings a batch
    for batch in range(2):
        strings.encode_event_strings(values)
        assert strings._search is None  # 40, then 80 placed: fewer than 100
    assert strings.encode_event_strings(values)[1].tolist() == naive.encode_event_strings(strings, values)[1].tolist()
    assert strings._search is not None  # 120: built
    strings.intern(["new"])
    assert strings._search is None
