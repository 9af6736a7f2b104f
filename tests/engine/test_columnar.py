"""engine/columnar.py's array helpers against a naive Python statement of what they compute."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fastpubsub.engine.columnar import csr_positions

pairs = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 12)), max_size=30)


@given(pairs=pairs, dtype=st.sampled_from([np.int32, np.int64]))
def test_csr_positions_lists_each_range_in_turn_with_its_offsets(pairs, dtype):
    """The positions ``start:start + length`` of every pair one after another (empty ranges add nothing), and the
    offsets where each pair's positions begin, whatever the integer width of the inputs."""
    starts = np.array([s for s, _ in pairs], dtype=dtype)
    lengths = np.array([n for _, n in pairs], dtype=dtype)
    pos, off = csr_positions(starts, lengths)
    want = [p for s, n in pairs for p in range(s, s + n)]
    want_off = [0]
    for _, n in pairs:
        want_off.append(want_off[-1] + n)
    assert pos.tolist() == want and off.tolist() == want_off
    assert pos.dtype == np.int64 and off.dtype == np.int64
