"""Expiry (``within``): a 4-ary heap of (deadline, slot) with lazy deletion (an ended instance's entry stays
until popped, and is skipped when its deadline no longer matches)."""

from __future__ import annotations

from numba import njit

from .layout import ST_HEAP

HEAP_BASE = 3  # the heap's element j sits in row j + 3: the four children of j (4j+1..4j+4) share one cache line


@njit(cache=True, inline="always")
def heap_push(heap, st, d, s):
    """Push (deadline, slot) into the 4-ary min-heap of rows ``heap`` (16 bytes each, the children of an entry in
    one 64-byte line: a pop reads one line per level, of half as many levels as a binary heap has)."""
    i = st[ST_HEAP]
    st[ST_HEAP] += 1
    while i > 0:
        parent = (i - 1) >> 2
        if heap[parent + HEAP_BASE, 0] <= d:
            break
        heap[i + HEAP_BASE, 0] = heap[parent + HEAP_BASE, 0]
        heap[i + HEAP_BASE, 1] = heap[parent + HEAP_BASE, 1]
        i = parent
    heap[i + HEAP_BASE, 0] = d
    heap[i + HEAP_BASE, 1] = s


@njit(cache=True, _nrt=False)
def _heap_pop(heap, st):
    n = st[ST_HEAP] - 1
    st[ST_HEAP] = n
    d = heap[n + HEAP_BASE, 0]
    s = heap[n + HEAP_BASE, 1]
    i = 0
    while True:
        c = 4 * i + 1
        if c >= n:
            break
        best = c
        bd = heap[c + HEAP_BASE, 0]
        for k in range(c + 1, min(c + 4, n)):
            if heap[k + HEAP_BASE, 0] < bd:
                bd = heap[k + HEAP_BASE, 0]
                best = k
        if bd >= d:
            break
        heap[i + HEAP_BASE, 0] = bd
        heap[i + HEAP_BASE, 1] = heap[best + HEAP_BASE, 1]
        i = best
    if n > 0:
        heap[i + HEAP_BASE, 0] = d
        heap[i + HEAP_BASE, 1] = s
