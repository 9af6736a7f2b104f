"""New instances: the members of a start group an event starts, and their order when the global bound bites."""

from __future__ import annotations

from numba import njit


@njit(cache=True, _nrt=False)
def group_starts(groups, g, i, ev_kind, ev_num, cre_p, cre_parent, ncre):
    """The members of start group ``g`` that event ``i`` may start, appended to ``cre_p`` from ``ncre``.

    A band of threshold members (``attr > c`` / ``>=``, ascending ``c``; ``<`` / ``<=``, descending) is
    walked only while the event passes: those get parent -2 (their start is fully checked); the other
    members (parent -1) still have their remaining start atoms evaluated.  Returns the new ``ncre``.
    """
    for b in range(groups.grp_blo[g], groups.grp_bhi[g]):
        d = groups.band_dir[b]
        if d == 0:
            for k in range(groups.band_lo[b], groups.band_hi[b]):
                cre_p[ncre] = groups.mem_p[k]
                cre_parent[ncre] = -1
                ncre += 1
            continue
        col = groups.band_col[b]
        x = ev_num[i, col]
        if ev_kind[i, col] != 0 or x != x:
            continue  # missing, not a number, NaN: every comparison fails
        for k in range(groups.band_lo[b], groups.band_hi[b]):
            t = groups.mem_thr[k]
            if d == 1:
                if t > x:
                    break
                ok = t < x or (groups.mem_eq[k] and t == x)
            else:
                if t < x:
                    break
                ok = t > x or (groups.mem_eq[k] and t == x)
            if ok:
                cre_p[ncre] = groups.mem_p[k]
                cre_parent[ncre] = -2
                ncre += 1
    return ncre


@njit(cache=True, inline="always")
def argsort_stable(keys, m, order, tmp):
    """``order[:m]``: the indices of ``keys[:m]`` in ascending order, ties in index order (a bottom-up merge sort
    into the caller's buffers: the kernel allocates nothing)."""
    for q in range(m):
        order[q] = q
    width = 1
    while width < m:
        lo = 0
        while lo < m:
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                if keys[order[b]] < keys[order[a]]:
                    tmp[k] = order[b]
                    b += 1
                else:
                    tmp[k] = order[a]
                    a += 1
                k += 1
            while a < mid:
                tmp[k] = order[a]
                a += 1
                k += 1
            while b < hi:
                tmp[k] = order[b]
                b += 1
                k += 1
            lo = hi
        for q in range(m):
            order[q] = tmp[q]
        width *= 2
