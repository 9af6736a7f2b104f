"""Sorting one event's matched ids in place: the last step of every matching kernel (``scan.finish_event``).

An event's ids come from scattered clusters, so they arrive in random
order, and a comparison sort mispredicts about one branch per comparison.
Three regimes, by the slice's length ``n``:

* ``n <= INSERTION_MAX``: an insertion sort.  numba's ``ndarray.sort`` (a
  quicksort) has a fixed cost per call, even for an empty slice or two ids,
  where most events of a large equality workload match nothing or one
  subscription (W0 at 6M: 0.12 matches per event).
* longer slices: up to ``BUCKET_MAX`` ids, one counting pass on the top
  byte of the span and an insertion sort of the nearly sorted result; else
  (or when the ids bunch) a least-significant-digit radix sort over bytes
  of ``id - min``, one counting pass and one scatter per byte the slice's
  span needs (three for ids under 16.7M).  Neither compares ids at random,
  so there is little to mispredict (``python -m benchmarks.engine.sorting``).  W1
  at 6M matches 71.7 subscriptions per event.
* a span so wide that the radix passes would cost more than the quicksort
  (``n < RADIX_IDS_PER_PASS`` per pass), after the bucket sort gave up: the
  quicksort.

Ids already ascending are merged, not sorted again: :func:`merge_into` for
two slices, :func:`merge_matches` for two CSR match lists of the same events
(the prefix groups' and the index's, the catch-all's bitmaps and its scan).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Slices of at most this many ids are insertion-sorted: on random int64 ids the insertion sort beats the quicksort
#: up to about this length (``python -m benchmarks.engine.sorting``; docs/benchmarks.md, "Tuned constants").
INSERTION_MAX = 32
#: A longer slice is radix-sorted when it holds at least this many ids per byte pass its span needs: each pass
#: clears, sums and reads a 256-entry count, so at 33 ids spanning 40 bits (5-6 passes) the quicksort still wins,
#: and from 48 ids the radix sort does.
RADIX_IDS_PER_PASS = 7
#: Digits per pass: one byte (a 2 KB count array that stays in L1).
RADIX_BITS = 8
#: Up to this many ids, :func:`bucket_sort` first (one pass on the top byte, then an insertion sort): with a buffer
#: at hand it beats the radix sort up to a few hundred ids.
BUCKET_MAX = 256
#: :func:`bucket_sort` gives up when a bucket holds more ids than this (ids bunched in a small part of the span, say
#: one far outlier): the insertion sort would be quadratic in the bucket.
BUCKET_LIMIT = 16


@njit(cache=True, inline="always")
def sort_slice(a, start, stop, free=-1):
    """Sort ``a[start:stop]`` ascending in place.

    ``free >= stop``: ``a[free:]`` holds nothing, and the radix sort may use it
    as its buffer if it has room (else it allocates one).
    """
    n = stop - start
    if n <= INSERTION_MAX:
        insertion_sort(a, start, stop)
        return
    need = n + (1 << RADIX_BITS)
    if stop <= free and a.shape[0] - free >= need:
        buf = a[free:free + need]
    else:
        buf = np.empty(need, dtype=np.int64)
    if not sort_spread(a, start, stop, buf):
        a[start:stop].sort()


@njit(cache=True, inline="always")
def sort_slice_into(a, start, stop, buf):
    """:func:`sort_slice` without allocating, so callable without numba's reference-counting runtime: ``buf``
    has room for ``stop - start + 256`` entries; where :func:`sort_slice` takes numba's quicksort (33 to 55 ids
    whose span needs more radix passes than they pay for), an insertion sort."""
    if stop - start <= INSERTION_MAX or not sort_spread(a, start, stop, buf):
        insertion_sort(a, start, stop)


@njit(cache=True, inline="always")
def insertion_sort(a, start, stop):
    """Sort ``a[start:stop]`` by insertion (the short slices, where a comparison sort's fixed cost dominates)."""
    for i in range(start + 1, stop):
        x = a[i]
        j = i - 1
        while j >= start and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


@njit(cache=True, inline="always")
def sort_spread(a, start, stop, buf):
    """Sort ``a[start:stop]`` (longer than ``INSERTION_MAX``) by :func:`bucket_sort` or :func:`radix_sort` with
    ``buf`` (``stop - start + 256`` entries); False, ``a`` untouched, when neither suits the slice (a few ids
    of a very wide span)."""
    n = stop - start
    lo = a[start]
    hi = a[start]
    for i in range(start + 1, stop):
        x = a[i]
        lo = min(lo, x)
        hi = max(hi, x)
    span = np.uint64(hi) - np.uint64(lo)  # (unsigned: ids of both signs fit)
    if span == 0:
        return True  # all equal
    bits = 0
    while span != 0:
        bits += 1
        span >>= np.uint64(1)
    passes = (bits + RADIX_BITS - 1) // RADIX_BITS
    if n <= BUCKET_MAX and bucket_sort(a, start, stop, lo, max(bits - RADIX_BITS, 0), buf):
        return True
    if n >= RADIX_IDS_PER_PASS * passes:
        radix_sort(a, start, stop, lo, passes, buf)
        return True
    return False


@njit(cache=True)
def bucket_sort(a, start, stop, lo, shift, buf):
    """Sort ``a[start:stop]`` by one counting pass on ``(a[i] - lo) >> shift`` (the top byte of the span) and an
    insertion sort of the buckets, unless a bucket would hold more than ``BUCKET_LIMIT`` ids (then return False,
    ``a`` untouched).

    Up to a few hundred ids spread over the span, the 256 buckets hold one or two each: after the scatter every
    id is within a few places of its own, and the insertion sort moves it there, in one pass where
    :func:`radix_sort` takes three (``python -m benchmarks.engine.sorting``).
    """
    n = stop - start
    count = buf[n:]
    ulo = np.uint64(lo)
    ushift = np.uint64(shift)
    count[:] = 0
    for i in range(start, stop):
        count[(np.uint64(a[i]) - ulo) >> ushift] += 1
    total = 0
    for d in range(1 << RADIX_BITS):
        c = count[d]
        if c > BUCKET_LIMIT:
            return False
        count[d] = total
        total += c
    for i in range(start, stop):
        x = a[i]
        d = (np.uint64(x) - ulo) >> ushift
        buf[count[d]] = x
        count[d] += 1
    a[start] = buf[0]
    for i in range(1, n):
        x = buf[i]
        j = start + i - 1
        while j >= start and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x
    return True


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


@njit(cache=True, inline="always")
def merge_into(a, a0, a1, b, b0, b1, out, w):
    """Merge ascending ``a[a0:a1]`` and ``b[b0:b1]`` into ``out[w:]``; returns the new end."""
    i, j = a0, b0
    while i < a1 or j < b1:
        if j >= b1 or (i < a1 and a[i] <= b[j]):
            out[w] = a[i]
            i += 1
        else:
            out[w] = b[j]
            j += 1
        w += 1
    return w


@njit(cache=True, nogil=True)
def merge_matches(off_a, ids_a, off_b, ids_b):
    """Two CSR match lists of the same events, ids ascending per event, merged (ascending per event)."""
    n = off_a.shape[0] - 1
    off = np.zeros(n + 1, dtype=np.int64)
    ids = np.empty(ids_a.shape[0] + ids_b.shape[0], dtype=np.int64)
    w = 0
    for e in range(n):
        w = merge_into(ids_a, off_a[e], off_a[e + 1], ids_b, off_b[e], off_b[e + 1], ids, w)
        off[e + 1] = w
    return off, ids
