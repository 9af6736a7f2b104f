"""Sorting one event's matched ids in place: the last step of every matching kernel (``scan.finish_event``).

An event's ids come from scattered clusters, so they arrive in random
order, and a comparison sort mispredicts about one branch per comparison.
Three regimes, by the slice's length ``n``:

* ``n <= INSERTION_MAX``: an insertion sort.  numba's ``ndarray.sort`` (a
  quicksort) has a fixed cost per call, about 50 ns for an empty slice and
  210 ns for two ids, where most events of a large equality workload match
  nothing or one subscription (W0 at 6M: 0.12 matches per event).
* longer slices: a least-significant-digit radix sort over bytes of
  ``id - min``, one counting pass and one scatter per byte the slice's span
  needs (three for ids under 16.7M).  It does no comparison, so nothing to
  mispredict: 8.1 ns per id at 72 random ids under 6M against 23.2 for the
  quicksort, 6.4 against 25.4 at 140 (``python -m benchmarks.sorting``).
  W1 at 6M matches 71.7 subscriptions per event.
* a span so wide that the passes would cost more than the quicksort
  (``n < RADIX_IDS_PER_PASS`` per pass): the quicksort.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Slices of at most this many ids are insertion-sorted.  Measured on random int64 ids: insertion 306 / 468 /
#: 878 ns against quicksort 535 / 698 / 1,045 ns for 24 / 32 / 48 ids.
INSERTION_MAX = 32
#: A longer slice is radix-sorted when it holds at least this many ids per byte pass its span needs: each pass
#: clears, sums and reads a 256-entry count, so at 33 ids spanning 40 bits (5-6 passes) the quicksort still wins
#: (723 against 792 ns), and from 48 ids the radix sort does (895 against 1,080).
RADIX_IDS_PER_PASS = 7
#: Digits per pass: one byte (a 2 KB count array that stays in L1).
RADIX_BITS = 8


@njit(cache=True, inline="always")
def sort_slice(a, start, stop, free=-1):
    """Sort ``a[start:stop]`` ascending in place.

    ``free >= stop``: ``a[free:]`` holds nothing, and the radix sort may use it
    as its buffer if it has room (else it allocates one: about 60 ns).
    """
    n = stop - start
    if n < 2:
        return
    if n <= INSERTION_MAX:
        for i in range(start + 1, stop):
            x = a[i]
            j = i - 1
            while j >= start and a[j] > x:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = x
        return
    lo = a[start]
    hi = a[start]
    for i in range(start + 1, stop):
        x = a[i]
        lo = min(lo, x)
        hi = max(hi, x)
    span = np.uint64(hi) - np.uint64(lo)  # (unsigned: ids of both signs fit)
    passes = 0
    while span != 0:
        passes += 1
        span >>= np.uint64(RADIX_BITS)
    if passes == 0:
        return  # all equal
    if n < RADIX_IDS_PER_PASS * passes:
        a[start:stop].sort()
        return
    need = n + (1 << RADIX_BITS)
    if stop <= free and a.shape[0] - free >= need:
        radix_sort(a, start, stop, lo, passes, a[free:free + need])
    else:
        radix_sort(a, start, stop, lo, passes, np.empty(need, dtype=np.int64))


@njit(cache=True)
def radix_sort(a, start, stop, lo, passes, buf):
    """LSD radix sort of ``a[start:stop]`` by the ``passes`` low bytes of ``a[i] - lo`` (each ``a[i] >= lo``);
    ``buf``: ``stop - start + 256`` free entries, the other copy then the counts."""
    n = stop - start
    count = buf[n:]
    ulo = np.uint64(lo)
    digit = np.uint64((1 << RADIX_BITS) - 1)
    in_a = True
    for p in range(passes):
        shift = np.uint64(RADIX_BITS * p)
        count[:] = 0
        if in_a:
            for i in range(start, stop):
                count[((np.uint64(a[i]) - ulo) >> shift) & digit] += 1
        else:
            for i in range(n):
                count[((np.uint64(buf[i]) - ulo) >> shift) & digit] += 1
        total = 0
        for d in range(1 << RADIX_BITS):
            c = count[d]
            count[d] = total
            total += c
        if in_a:
            for i in range(start, stop):
                x = a[i]
                d = ((np.uint64(x) - ulo) >> shift) & digit
                buf[count[d]] = x
                count[d] += 1
        else:
            for i in range(n):
                x = buf[i]
                d = ((np.uint64(x) - ulo) >> shift) & digit
                a[start + count[d]] = x
                count[d] += 1
        in_a = not in_a
    if not in_a:
        for i in range(n):
            a[start + i] = buf[i]
