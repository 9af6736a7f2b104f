"""Events encoded for the kernels (engine/frontend/encoding.py): the one-pass kernel against numpy passes."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import naive

from fastpubsub.engine import Matcher
from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.frontend.encoding import encode_batch

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
