"""The per-event sort of matched ids (engine/kernels/sorting.py) and the kernel step that uses it, against naive ones."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from tests.support import naive

from fastpubsub.engine.kernels.scan import finish_event
from fastpubsub.engine.kernels.sorting import INSERTION_MAX, RADIX_IDS_PER_PASS, sort_slice, sort_slice_into


@njit  # not cached: a cached wrapper would keep an edited sort_slice (numba checks only this file)
def _sort(a, start, stop):
    sort_slice(a, start, stop)


@njit  # not cached: a cached wrapper would keep an edited sort_slice (numba checks only this file)
def _finish(out, start, nout, handle_id):
    finish_event(out, start, nout, handle_id)


# lengths around the switch from insertion sort to quicksort, and repeated values (ids repeat across rows of a
# subscription of several rows; distinct_per_event removes them after the sort)
ids = st.lists(st.integers(-2**62, 2**62) | st.integers(0, 5), max_size=3 * INSERTION_MAX)


@settings(max_examples=150, deadline=None)
@given(ids, st.integers(0, 4), st.integers(0, 4))
def test_sort_slice_sorts_exactly_the_slice(values, before, after):
    """Only ``a[start:stop]`` moves, and it ends up as ``sorted``; the neighbours are untouched."""
    rng = np.random.default_rng(len(values))
    head, tail = rng.integers(-9, 9, before), rng.integers(-9, 9, after)
    a = np.concatenate([head, np.array(values, dtype=np.int64), tail]).astype(np.int64)
    _sort(a, before, before + len(values))
    assert a[:before].tolist() == head.tolist()
    assert a[before:before + len(values)].tolist() == sorted(values)
    assert a[before + len(values):].tolist() == tail.tolist()


def test_sort_slice_at_the_switch_and_on_ordered_input():
    for n in (0, 1, 2, INSERTION_MAX - 1, INSERTION_MAX, INSERTION_MAX + 1, 200):
        for a in (np.arange(n, dtype=np.int64)[::-1].copy(), np.arange(n, dtype=np.int64),
                  np.zeros(n, dtype=np.int64), np.random.default_rng(n).integers(0, 10**9, n)):
            want = sorted(a.tolist())
            _sort(a, 0, n)
            assert a.tolist() == want


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 199), max_size=80), st.integers(0, 3))
def test_finish_event_maps_handles_to_ids_ascending(handles, start):
    handle_id = np.random.default_rng(7).permutation(10**6)[:200].astype(np.int64)
    out = np.array([5] * start + handles, dtype=np.int64)
    want = naive.finish_event(out, start, len(out), handle_id)
    _finish(out, start, len(out), handle_id)
    assert out[start:].tolist() == want
    assert out[:start].tolist() == [5] * start


@settings(max_examples=120, deadline=None)
@given(st.integers(INSERTION_MAX + 1, 400), st.sampled_from([1, 2, 255, 256, 2**24, 2**40, 2**63 - 1]),
       st.integers(-2**62, 2**62), st.integers(0, 2**32))
def test_sort_slice_radix_regime_against_sorted(n, span, low, seed):
    """Past ``INSERTION_MAX`` ids: the radix sort (or, for a wide span and few ids, the quicksort), ids of any
    sign and span, repeats included, every byte boundary of the span."""
    rng = np.random.default_rng(seed)
    low = min(low, 2**63 - 1 - span)
    values = (low + rng.integers(0, span, n, endpoint=True)).astype(np.int64)
    values[rng.integers(0, n, n // 4)] = values[0]  # repeats
    a = np.concatenate([[7], values, [-7]]).astype(np.int64)
    _sort(a, 1, n + 1)
    assert a[1:n + 1].tolist() == sorted(values.tolist())
    assert a[0] == 7 and a[-1] == -7


def test_sort_slice_extremes_of_int64():
    """The span from the smallest to the largest int64 is computed unsigned (it overflows a signed one)."""
    n = RADIX_IDS_PER_PASS * 8  # radix over all eight bytes
    a = np.random.default_rng(3).integers(-2**63, 2**63 - 1, n, endpoint=True).astype(np.int64)
    a[0], a[1] = -2**63, 2**63 - 1
    want = sorted(a.tolist())
    _sort(a, 0, n)
    assert a.tolist() == want


@njit  # not cached (see above)
def _sort_free(a, start, stop, free):
    sort_slice(a, start, stop, free)


@njit(cache=False, _nrt=False)  # (without the reference-counting runtime: it allocates nothing)
def _sort_into(a, start, stop, buf):
    sort_slice_into(a, start, stop, buf)


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 400), st.sampled_from([1, 255, 2**24, 2**40, 2**63 - 1]), st.integers(-2**62, 2**62),
       st.integers(0, 2**32))
def test_sort_slice_into_sorts_with_the_buffer_it_is_given(n, span, low, seed):
    """Every regime of :func:`sort_slice` without allocating (33 to 55 ids of a wide span: an insertion sort)."""
    rng = np.random.default_rng(seed)
    low = min(low, 2**63 - 1 - span)
    values = (low + rng.integers(0, span, n, endpoint=True)).astype(np.int64)
    a = np.concatenate([[7], values, [-7]]).astype(np.int64)
    _sort_into(a, 1, n + 1, np.full(n + 256, 5, dtype=np.int64))
    assert a[1:n + 1].tolist() == sorted(values.tolist())
    assert a[0] == 7 and a[-1] == -7


@settings(max_examples=60, deadline=None)
@given(st.integers(INSERTION_MAX + 1, 200), st.integers(0, 600), st.integers(0, 2**32))
def test_sort_slice_with_a_free_tail_or_without_room(n, room, seed):
    """The radix sort in the array's free tail when it has room, in a buffer of its own when not: same order,
    and nothing before ``free`` touched but the slice."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 10**7, n).astype(np.int64)
    a = np.concatenate([[1, 2], values, [3], np.full(room, 9)]).astype(np.int64)
    _sort_free(a, 2, n + 2, n + 3)
    assert a[2:n + 2].tolist() == sorted(values.tolist())
    assert a[:2].tolist() == [1, 2] and a[n + 2] == 3


def test_sort_slice_bunched_ids_and_one_outlier():
    """Ids bunched in one byte-bucket of the span (one far outlier): the bucket sort gives way to the radix sort."""
    rng = np.random.default_rng(11)
    for n in (40, 100, 256):
        a = np.concatenate([rng.integers(0, 1000, n - 1), [10**15]]).astype(np.int64)
        rng.shuffle(a)
        want = sorted(a.tolist())
        _sort(a, 0, n)
        assert a.tolist() == want
