"""Min segment tree over the distinct range values of a table (the in-memory A2B-tree, §3).

Leaf ``i`` holds the minimum aggregated value of column ``i`` (all rows whose range attribute
equals the ``i``-th distinct value); each inner node holds the minimum of its subtree, the
A2B-tree's ``min`` field.  Mar ends (Definition 1) are "nearest column left/right of ``i`` whose
minimum is below a bound", found by climbing then descending the tree in O(log N); the upper
hull (Definition 2) is a chain of such searches, one per hull point: O(k log N) per update.
Unused leaves hold +inf and never satisfy a search.
"""

from __future__ import annotations

import numpy as np
from numba import njit

INF = np.inf


@njit(cache=True)
def build(tree, cap):
    """Fill the inner nodes from the leaves ``tree[cap:2*cap]``."""
    for node in range(cap - 1, 0, -1):
        a = tree[2 * node]
        b = tree[2 * node + 1]
        tree[node] = a if a < b else b


@njit(cache=True)
def set_leaf(tree, cap, slot, value):
    """Set column ``slot``'s minimum and repair its ancestors."""
    node = slot + cap
    tree[node] = value
    node >>= 1
    while node >= 1:
        a = tree[2 * node]
        b = tree[2 * node + 1]
        m = a if a < b else b
        if tree[node] == m:
            break
        tree[node] = m
        node >>= 1


@njit(cache=True)
def _ok(value, bound, strict):
    return value < bound if strict else value <= bound


@njit(cache=True)
def find_left(tree, cap, slot, bound, strict):
    """Largest column index ``j < slot`` with minimum ``< bound`` (``<=`` unless strict), or -1."""
    node = slot + cap
    while node > 1:
        if node & 1:
            sib = node - 1
            if _ok(tree[sib], bound, strict):
                node = sib
                while node < cap:
                    right = 2 * node + 1
                    node = right if _ok(tree[right], bound, strict) else 2 * node
                return node - cap
        node >>= 1
    return -1


@njit(cache=True)
def find_right(tree, cap, slot, bound, strict):
    """Smallest column index ``j > slot`` with minimum ``< bound`` (``<=`` unless strict), or -1."""
    node = slot + cap
    while node > 1:
        if not node & 1:
            sib = node + 1
            if _ok(tree[sib], bound, strict):
                node = sib
                while node < cap:
                    left = 2 * node
                    node = left if _ok(tree[left], bound, strict) else left + 1
                return node - cap
        node >>= 1
    return -1


@njit(cache=True)
def range_min(tree, cap, lo, hi):
    """Minimum over columns ``lo <= j < hi`` (+inf if empty)."""
    res = INF
    lo += cap
    hi += cap
    while lo < hi:
        if lo & 1:
            if tree[lo] < res:
                res = tree[lo]
            lo += 1
        if hi & 1:
            hi -= 1
            if tree[hi] < res:
                res = tree[hi]
        lo >>= 1
        hi >>= 1
    return res


@njit(cache=True)
def range_min_many(tree, cap, lo, hi, out):
    """``range_min`` for many column ranges at once (initial answers of many subscriptions)."""
    for i in range(lo.shape[0]):
        out[i] = range_min(tree, cap, lo[i], hi[i])


@njit(cache=True)
def _pos(xs, slot, missing):
    return missing if slot < 0 else xs[slot]


@njit(cache=True)
def _skyline(tree, cap, xs, j, c_old, leftward, vals, pos):
    """The skyline seen from column ``j`` walking away from the updated column: levels strictly decreasing,
    down to ``c_old`` (excluded), into ``vals`` and their positions into ``pos``.  Returns (levels, the
    column the walk stopped at, -1 past the end)."""
    n = 0
    while j >= 0 and tree[j + cap] > c_old:
        v = tree[j + cap]
        vals[n] = v
        pos[n] = xs[j]
        n += 1
        j = find_left(tree, cap, j, v, True) if leftward else find_right(tree, cap, j, v, True)
    return n, j


@njit(cache=True)
def reformulate(tree, cap, xs, slot, c_old, c_new, out, scratch):
    """Messages ⟨NEW_MIN, INNER_L, INNER_R, OUTER_L, OUTER_R⟩ for column ``slot``'s minimum
    moving from ``c_old`` to ``c_new`` (tree already holds ``c_new`` or not: the column itself is
    never searched).  Returns the number of rows written to ``out``.

    Decrease (§2.3.1 good update): one message bounded by the nearest columns ``<= c_new``.
    Increase: the peak message bounded by the nearest columns ``< c_new``, then the upper hull
    (Definition 2) restricted to levels ``c_old < v < c_new`` (higher hull points would make empty
    rectangles), each level's rectangle bounded by its EMar (Theorem 2); a level present on both
    sides is split into two disjoint rectangles.  ``scratch`` is a (6, cap) work array.
    """
    x = xs[slot]
    if c_new == c_old:
        return 0
    decrease = c_new < c_old
    jl = find_left(tree, cap, slot, c_new, not decrease)
    jr = find_right(tree, cap, slot, c_new, not decrease)
    out[0, 0] = c_new
    out[0, 1] = x
    out[0, 2] = x
    out[0, 3] = _pos(xs, jl, -INF)
    out[0, 4] = _pos(xs, jr, INF)
    if decrease:
        return 1
    lv, lp, rv, rp = scratch[0], scratch[1], scratch[2], scratch[3]
    nl, j = _skyline(tree, cap, xs, jl, c_old, True, lv, lp)
    lstop = _pos(xs, j, -INF)
    nr, j = _skyline(tree, cap, xs, jr, c_old, False, rv, rp)
    rstop = _pos(xs, j, INF)
    # merge the two skylines from the highest level down (the O(k) EMar pass, §3)
    k = 1
    a = 0
    b = 0
    while a < nl or b < nr:
        if b >= nr or (a < nl and lv[a] > rv[b]):
            out[k, 0] = lv[a]
            out[k, 1] = lp[a]
            out[k, 2] = x
            out[k, 3] = lp[a + 1] if a + 1 < nl else lstop
            out[k, 4] = rp[b] if b < nr else rstop
            k += 1
            a += 1
        elif a >= nl or rv[b] > lv[a]:
            out[k, 0] = rv[b]
            out[k, 1] = x
            out[k, 2] = rp[b]
            out[k, 3] = lp[a] if a < nl else lstop
            out[k, 4] = rp[b + 1] if b + 1 < nr else rstop
            k += 1
            b += 1
        else:
            rb = rp[b + 1] if b + 1 < nr else rstop
            out[k, 0] = lv[a]
            out[k, 1] = lp[a]
            out[k, 2] = x
            out[k, 3] = lp[a + 1] if a + 1 < nl else lstop
            out[k, 4] = rb
            out[k + 1, 0] = rv[b]
            out[k + 1, 1] = x
            out[k + 1, 2] = rp[b]
            out[k + 1, 3] = lp[a]
            out[k + 1, 4] = rb
            k += 2
            a += 1
            b += 1
    return k


@njit(cache=True)
def _repair(tree, cap, lo, hi):
    """Recompute the ancestors of leaves ``lo..hi`` (inclusive), level by level: O(hi - lo + log N)."""
    lo += cap
    hi += cap
    while lo > 1:
        lo >>= 1
        hi >>= 1
        for node in range(lo, hi + 1):
            a = tree[2 * node]
            b = tree[2 * node + 1]
            tree[node] = a if a < b else b


@njit(cache=True)
def open_slot(tree, cap, xs, free, hole, gap, x):
    """Make room for a new column ``x`` at ``hole`` by moving the columns between ``hole`` and the
    free slot ``gap`` one step towards ``gap`` (a packed-memory-array insert), keeping ``xs``
    sorted.  The new column starts empty (+inf)."""
    if gap > hole:
        for j in range(gap - 1, hole - 1, -1):
            xs[j + 1] = xs[j]
            free[j + 1] = free[j]
            tree[j + 1 + cap] = tree[j + cap]
        lo, hi = hole, gap
    else:
        for j in range(gap + 1, hole + 1):
            xs[j - 1] = xs[j]
            free[j - 1] = free[j]
            tree[j - 1 + cap] = tree[j + cap]
        lo, hi = gap, hole
    xs[hole] = x
    free[hole] = False
    tree[hole + cap] = INF
    _repair(tree, cap, lo, hi)
