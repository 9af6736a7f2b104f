"""Sorting one event's matched ids in place: the last step of every matching kernel (``scan.finish_event``).

numba's ``ndarray.sort`` is a quicksort with a fixed cost per call: about
50 ns for an empty or one-element slice and 210 ns for two elements, where most events of a large equality workload match nothing or
one subscription (W0 at 6M: 0.12 matches per event).  Below
``INSERTION_MAX`` ids an insertion sort is cheaper (it moves no more than
the few ids out of place); above it the quicksort's n log n wins.
"""

from __future__ import annotations

from numba import njit

#: Slices of at most this many ids are insertion-sorted; longer ones go to numba's quicksort.  Measured on
#: random int64 ids: insertion 306 / 468 / 878 ns against quicksort 535 / 698 / 1,045 ns for 24 / 32 / 48
#: ids, and 1,708 against 1,595 for 72 (docs/benchmarks.md, "Other workloads: W1 and W2").
INSERTION_MAX = 32


@njit(cache=True, inline="always")
def sort_slice(a, start, stop):
    """Sort ``a[start:stop]`` ascending in place."""
    n = stop - start
    if n < 2:
        return
    if n > INSERTION_MAX:
        a[start:stop].sort()
        return
    for i in range(start + 1, stop):
        x = a[i]
        j = i - 1
        while j >= start and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x
