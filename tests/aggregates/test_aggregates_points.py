"""The 2-D subscription index returns exactly the points in a message's rectangle (a scan of every point as oracle)."""

import numpy as np
from hypothesis import given, settings, strategies as st
from tests.support.oracles.aggregates import matches

from fastpubsub.aggregates.points import PointIndex

coord = st.integers(0, 20).map(float)
rect = st.tuples(st.integers(-1, 21), st.integers(-1, 21), st.integers(-1, 21), st.integers(-1, 21)).map(
    lambda t: tuple(float(v) for v in t))
op = st.one_of(st.tuples(st.just("add"), st.integers(0, 60), coord, coord),
               st.tuples(st.just("remove"), st.integers(0, 60)),
               st.tuples(st.just("query"), rect),
               st.tuples(st.just("rebuild")))


def in_rectangle(points: dict, outer_l: float, inner_l: float, inner_r: float, outer_r: float) -> list[int]:
    """The ids of ``points`` (id -> (x1, x2)) whose subscription the message selects, by checking each."""
    message = np.array([0.0, inner_l, inner_r, outer_l, outer_r])
    return sorted(sid for sid, (x1, x2) in points.items() if matches(message, x1, x2))


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=80), st.sampled_from([1, 2, 4, 128]), st.sampled_from([1, 3, 64]))
def test_index_matches_naive_scan(ops, block, max_buffer):
    idx = PointIndex(block=block, max_buffer=max_buffer)
    points = {}
    for o in ops:
        if o[0] == "add" and o[1] not in points:
            x1, x2 = min(o[2], o[3]), max(o[2], o[3])
            idx.add(o[1], x1, x2)
            points[o[1]] = (x1, x2)
        elif o[0] == "remove" and o[1] in points:
            idx.remove(o[1])
            del points[o[1]]
        elif o[0] == "query":
            assert sorted(idx.query(*o[1]).tolist()) == in_rectangle(points, *o[1])
        elif o[0] == "rebuild":
            idx.rebuild()
        assert len(idx) == len(points) and all(sid in idx for sid in points)
        assert sorted(idx.query(-np.inf, np.inf, -np.inf, np.inf).tolist()) == sorted(points)


def test_bulk_and_many_messages_with_growing_output():
    rng = np.random.default_rng(1)
    n = 20000
    a, b = rng.uniform(0, 100, n), rng.uniform(0, 100, n)
    idx = PointIndex()
    idx.add_bulk(np.arange(n), np.minimum(a, b), np.maximum(a, b))
    msgs = np.array([[0, 50, 50, -np.inf, np.inf], [0, 30, 40, 10, 60], [0, 5, 5, 4, 6]], dtype=float)
    points = {i: (x1, x2) for i, x1, x2 in zip(range(n), np.minimum(a, b).tolist(), np.maximum(a, b).tolist())}
    ids, off = idx.query_many(msgs)
    for i, m in enumerate(msgs):
        assert sorted(ids[off[i]:off[i + 1]].tolist()) == in_rectangle(points, m[3], m[1], m[2], m[4])
