"""Subscriptions that are one ``a prefix p`` predicate: sorted id groups on a trie of prefixes.

Lowered like every other operator (engine/frontend/lowering.py), ``a prefix p`` is an
equality on the derived attribute "first len(p) characters of a": correct,
and the only way for a prefix inside a conjunction or an OR.  A subscription
that is *only* that predicate needs none of it, and its matches are the
expensive part: with short prefixes an event matches many of them (669 per
event on the prefix benchmark), and the general path spends per match a
handle-to-id lookup and a share of a per-event sort, after slicing and
encoding each event value once per prefix length in Python.

Here those subscriptions are grouped by (attribute, prefix): every group is
one trie node (a child is found through the width-2 hash table
``(node, code point) -> child``, one root per attribute), and holds its
subscription ids ascending in a contiguous slice of one arena.  An event
value walks the trie along its own code points (at most as many probes as its
longest known prefix), collects the non-empty groups it passes, and merges
them (few, sorted, pairwise from the smallest): every match is one copy, no
sort, no dedup (each subscription is in one group).  :class:`~engine.matcher.Matcher`
merges this CSR result with its index's (``kernels.sorting.merge_matches``).

Groups grow by relocation to the arena's end with doubled capacity; the
arena is compacted when more than half of it is garbage.  A node left with
no ids and no children is unlinked and its id reused (so is its parent, up
the trie), so the trie holds the live prefixes and their ancestors only.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit

from .hashtable import HashTable, ht_delete, ht_find2
from .idpool import IdPool, grow, lookup
from ..kernels.sorting import merge_into
from ..semantics import KIND_STRING


def code_points(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The strings' code points concatenated (int64) and their offsets (lone surrogates included)."""
    off = np.zeros(len(strings) + 1, dtype=np.int64)
    if not len(strings):
        return np.zeros(0, dtype=np.int64), off
    np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)), out=off[1:])
    cps = np.frombuffer("".join(strings).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return cps.astype(np.int64), off


@njit(cache=True, inline="always")
def _copy(src, s0, n, out, w):
    for i in range(n):
        out[w + i] = src[s0 + i]


@njit(cache=True)
def _merge_runs(small, s0, s1, big, b0, b1, out, w):
    """Merge ascending ``small[s0:s1]`` into ascending ``big[b0:b1]`` at ``out[w:]``: each small entry is
    placed by binary search and the big entries before it are copied as one run.  Returns the new end."""
    j = b0
    for i in range(s0, s1):
        x = small[i]
        # first big entry above x, in [j, b1]: halving without a data-dependent branch (a select)
        lo = j
        n = b1 - j
        while n > 1:
            half = n >> 1
            lo = lo + half if big[lo + half - 1] < x else lo
            n -= half
        if n == 1 and big[lo] < x:
            lo += 1
        _copy(big, j, lo - j, out, w)
        w += lo - j
        j = lo
        out[w] = x
        w += 1
    _copy(big, j, b1 - j, out, w)
    return w + b1 - j


def prefix_events(n_events, value_event, value_root, cps, cp_off, tkeys, tvals, base, length, arena):
    """Ids of the prefix groups each event's string values pass through, ascending per event (CSR).

    ``value_event`` (ascending), ``value_root``: event and attribute root of each string value whose
    attribute has a trie; ``cps[cp_off[v]:cp_off[v+1]]``: its code points.  ``(tkeys, tvals)``: the trie's
    ``(node, code point) -> child`` table; ``arena[base[g]:base[g]+length[g]]``: group ``g``'s ids, ascending.

    Two kernels: :func:`prefix_walk` lists each event's groups and sizes its output, :func:`prefix_fill`
    copies or merges them.  The output is allocated in between by numpy, which asks the kernel for huge
    pages on large arrays, so the first touch of a large output faults far fewer pages than a numba-allocated
    one would.
    """
    off, groups, goff = prefix_walk(n_events, value_event, value_root, cps, cp_off, tkeys, tvals, length)
    out = np.empty(int(off[n_events]), dtype=np.int64)
    prefix_fill(off, groups, goff, base, length, arena, out)
    return off, out


@njit(cache=True, nogil=True)
def prefix_walk(n_events, value_event, value_root, cps, cp_off, tkeys, tvals, length):
    """Each event's non-empty groups (``groups[goff[e]:goff[e+1]]``) and output offsets (CSR ``off``)."""
    off = np.zeros(n_events + 1, dtype=np.int64)
    groups = np.empty(max(16, cps.shape[0]), dtype=np.int64)  # a group per code point at most
    goff = np.zeros(n_events + 1, dtype=np.int64)
    ng = 0
    v = 0
    n_values = value_event.shape[0]
    for e in range(n_events):
        total = 0
        while v < n_values and value_event[v] == e:
            node = value_root[v]
            for t in range(cp_off[v], cp_off[v + 1]):
                node = ht_find2(tkeys, tvals, node, cps[t])
                if node < 0:
                    break
                if length[node] > 0:
                    groups[ng] = node
                    ng += 1
                    total += length[node]
            v += 1
        goff[e + 1] = ng
        off[e + 1] = off[e] + total
    return off, groups[:ng], goff


@njit(cache=True, nogil=True)
def prefix_fill(off, groups, goff, base, length, arena, out):
    """Write each event's groups into ``out[off[e]:off[e+1]]``, ascending: one group is copied; several are
    merged, the smaller ones pairwise first and the largest (the shortest prefix: most of the matches) last,
    by runs (:func:`_merge_runs`).  No allocation per event."""
    n_events = off.shape[0] - 1
    tmp = np.empty(16, dtype=np.int64)
    for e in range(n_events):
        g0, g1 = goff[e], goff[e + 1]
        w = off[e]
        if g1 - g0 == 1:
            g = groups[g0]
            _copy(arena, base[g], length[g], out, w)
            continue
        if g1 == g0:
            continue
        largest = g0
        for i in range(g0 + 1, g1):
            if length[groups[i]] > length[groups[largest]]:
                largest = i
        small = off[e + 1] - off[e] - length[groups[largest]]
        if tmp.shape[0] < 2 * small:
            tmp = np.empty(2 * small, dtype=np.int64)
        n = 0
        src = 0  # the small groups merged so far: tmp[src:src+n]
        for i in range(g0, g1):
            if i == largest:
                continue
            g = groups[i]
            dst = small if src == 0 else 0
            n = merge_into(tmp, src, src + n, arena, base[g], base[g] + length[g], tmp, dst) - dst
            src = dst
        g = groups[largest]
        _merge_runs(tmp, src, src + n, arena, base[g], base[g] + length[g], out, w)


@njit(cache=True)
def groups_add(arena, base, length, nodes, starts, ids):
    """Merge ``ids[starts[i]:starts[i+1]]`` (ascending) into group ``nodes[i]`` (room made by the caller)."""
    for i in range(nodes.shape[0]):
        g = nodes[i]
        k = starts[i + 1] - starts[i]
        # merge backwards in place: old entries and new ones, the largest first
        a = base[g] + length[g] - 1
        b = starts[i + 1] - 1
        w = base[g] + length[g] + k - 1
        while b >= starts[i]:
            if a >= base[g] and arena[a] > ids[b]:
                arena[w] = arena[a]
                a -= 1
            else:
                arena[w] = ids[b]
                b -= 1
            w -= 1
        length[g] += k


@njit(cache=True)
def groups_remove(arena, base, length, nodes, starts, ids):
    """Take ``ids[starts[i]:starts[i+1]]`` (ascending, present) out of group ``nodes[i]``, keeping order."""
    for i in range(nodes.shape[0]):
        g = nodes[i]
        j = starts[i]
        w = base[g]
        for r in range(base[g], base[g] + length[g]):
            if j < starts[i + 1] and arena[r] == ids[j]:
                j += 1
            else:
                arena[w] = arena[r]
                w += 1
        length[g] = w - base[g]


@njit(cache=True)
def groups_relocate(arena, new_arena, base, cap, length, nodes, new_base, new_cap):
    """Copy groups ``nodes`` from ``arena`` to ``new_arena`` at ``new_base`` (capacity ``new_cap``)."""
    for i in range(nodes.shape[0]):
        g = nodes[i]
        n = length[g]
        new_arena[new_base[i]:new_base[i] + n] = arena[base[g]:base[g] + n]
        base[g] = new_base[i]
        cap[g] = new_cap[i]


@njit(cache=True)
def prune(tkeys, tvals, parent, cp_of, children, length, cap, candidates, freed):
    """Free the nodes among ``candidates`` (and then their ancestors) that hold no ids and lead nowhere.

    Unlinks each from the trie table; ``parent[n] = -1`` marks roots and freed nodes (never freed twice).
    Returns (nodes written to ``freed``, arena room they held).
    """
    key = np.empty((1, 2), dtype=np.int64)
    nf = 0
    room = 0
    for i in range(candidates.shape[0]):
        n = candidates[i]
        while parent[n] >= 0 and length[n] == 0 and children[n] == 0:
            p = parent[n]
            key[0, 0] = p
            key[0, 1] = cp_of[n]
            ht_delete(tkeys, tvals, key)
            freed[nf] = n
            nf += 1
            room += cap[n]
            cap[n] = 0
            parent[n] = -1
            children[p] -= 1
            n = p
    return nf, room


class PrefixGroups:
    """Subscriptions ``[(a, "prefix", p)]`` grouped by ``(a, p)``: trie nodes with ascending id slices."""

    #: The arena is compacted once its garbage exceeds both this and half of what it has handed out.
    compact_min = 4096

    def __init__(self) -> None:
        self.roots: dict[str, int] = {}  # attribute -> its trie's root node
        self.trie = HashTable(width=2)  # (node, code point) -> child node
        self.pool = IdPool()  # node ids (freed ones are reused)
        self.base = np.zeros(0, dtype=np.int64)  # node -> start of its ids in the arena
        self.cap = np.zeros(0, dtype=np.int64)  # node -> room reserved there
        self.length = np.zeros(0, dtype=np.int64)  # node -> ids filed (0: no group)
        self.parent = np.zeros(0, dtype=np.int64)  # node -> parent (-1: a root, or free)
        self.cp_of = np.zeros(0, dtype=np.int64)  # node -> the code point that leads to it
        self.children = np.zeros(0, dtype=np.int64)  # node -> children in the trie
        self.arena = np.zeros(1024, dtype=np.int64)
        self.used = 0  # arena entries handed out (live room + garbage)
        self.garbage = 0
        self.node_of = np.zeros(0, dtype=np.int64)  # handle -> its group (-1: not here)
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def owns(self, handles: np.ndarray) -> np.ndarray:
        """Which of ``handles`` are filed here."""
        return lookup(self.node_of, handles, -1) >= 0

    # -- the trie ---------------------------------------------------------
    def _alloc(self, n: int) -> np.ndarray:
        nodes = self.pool.take(n)
        high = self.pool.high
        for name in ("base", "cap", "length", "children", "cp_of"):
            setattr(self, name, grow(getattr(self, name), high, 0))
        self.parent = grow(self.parent, high, -1)
        for arr in (self.base, self.cap, self.length, self.children, self.cp_of):
            arr[nodes] = 0
        self.parent[nodes] = -1
        return nodes

    def _nodes_of(self, attributes: Sequence[str], prefixes: Sequence[str]) -> np.ndarray:
        """The trie node of each (attribute, prefix), created where missing."""
        for a in set(attributes) - self.roots.keys():
            self.roots[a] = int(self._alloc(1)[0])
        roots = np.fromiter(map(self.roots.__getitem__, attributes), dtype=np.int64, count=len(attributes))
        cps, off = code_points(prefixes)
        node = roots
        lens = np.diff(off)
        for d in range(int(lens.max()) if len(lens) else 0):
            live = np.flatnonzero(lens > d)
            keys = np.stack([node[live], cps[off[live] + d]], axis=1)

            def assign(first: np.ndarray, keys: np.ndarray = keys) -> np.ndarray:
                new = self._alloc(len(first))
                self.parent[new] = keys[first, 0]
                self.cp_of[new] = keys[first, 1]
                np.add.at(self.children, keys[first, 0], 1)
                return new

            node[live] = self.trie.get_or_add(keys, assign)
        return node

    # -- subscriptions ------------------------------------------------------
    def add(self, handles: np.ndarray, ids: np.ndarray, attributes: Sequence[str], prefixes: Sequence[str]) -> None:
        """File new subscriptions (distinct ids, non-empty prefixes)."""
        if not len(handles):
            return
        node = self._nodes_of(attributes, prefixes)
        handles = np.asarray(handles, dtype=np.int64)
        ids = np.asarray(ids, dtype=np.int64)
        self.node_of = grow(self.node_of, int(handles.max()) + 1, -1)
        self.node_of[handles] = node
        order = np.lexsort((ids, node))
        node, ids = node[order], ids[order]
        nodes, starts = np.unique(node, return_index=True)
        starts = np.append(starts, len(node)).astype(np.int64)
        need = self.length[nodes] + np.diff(starts)
        move = need > self.cap[nodes]
        if move.any():
            moved = nodes[move]
            new_cap = np.maximum(2 * need[move], 4)
            new_base = self.used + np.concatenate([[0], np.cumsum(new_cap)[:-1]]).astype(np.int64)
            self.garbage += int(self.cap[moved].sum())
            self.used += int(new_cap.sum())
            if self.used > len(self.arena):
                bigger = np.zeros(max(self.used, 2 * len(self.arena)), dtype=np.int64)
                bigger[: len(self.arena)] = self.arena
                self.arena = bigger
            groups_relocate(self.arena, self.arena, self.base, self.cap, self.length, moved, new_base, new_cap)
        groups_add(self.arena, self.base, self.length, nodes, starts, ids)
        self.count += len(ids)
        if self.garbage > max(self.compact_min, self.used // 2):
            self._compact()

    def remove(self, handles: np.ndarray, ids: np.ndarray) -> None:
        """Take out filed subscriptions (their handles and ids); nodes left empty and childless are freed."""
        if not len(handles):
            return
        handles = np.asarray(handles, dtype=np.int64)
        node = self.node_of[handles]
        self.node_of[handles] = -1
        ids = np.asarray(ids, dtype=np.int64)
        order = np.lexsort((ids, node))
        node, ids = node[order], ids[order]
        nodes, starts = np.unique(node, return_index=True)
        starts = np.append(starts, len(node)).astype(np.int64)
        groups_remove(self.arena, self.base, self.length, nodes, starts, ids)
        self.count -= len(ids)
        empty = nodes[self.length[nodes] == 0]
        if len(empty):
            freed = np.empty(int(self.cp_of.shape[0]), dtype=np.int64)
            nf, room = prune(self.trie.keys, self.trie.vals, self.parent, self.cp_of, self.children, self.length,
                             self.cap, empty, freed)
            self.trie.count -= int(nf)
            self.garbage += int(room)
            self.pool.release(freed[:nf].copy())
        if self.garbage > max(self.compact_min, self.used // 2):
            self._compact()

    def _compact(self) -> None:
        """Move every group to a fresh arena, each with its own size as room (no garbage)."""
        high = self.pool.high
        live = np.flatnonzero(self.length[:high] > 0)
        new_cap = self.length[live].copy()
        new_base = np.concatenate([[0], np.cumsum(new_cap)[:-1]]).astype(np.int64)
        arena = np.zeros(max(1024, int(new_cap.sum()) * 2), dtype=np.int64)
        groups_relocate(self.arena, arena, self.base, self.cap, self.length, live, new_base, new_cap)
        dead = self.length[:high] <= 0
        self.base[:high][dead] = 0
        self.cap[:high][dead] = 0
        self.arena, self.used, self.garbage = arena, int(new_cap.sum()), 0

    # -- events -------------------------------------------------------------
    def match(self, batch) -> tuple[np.ndarray, np.ndarray]:
        """CSR ids of the groups each event of ``batch`` (an ``EventBatch``) reaches, ascending per event."""
        offsets = np.asarray(batch.offsets, dtype=np.int64)
        n = len(offsets) - 1
        names = batch.attribute_names
        root_of = np.array([self.roots.get(a, -1) for a in names], dtype=np.int64) if len(names) else \
            np.zeros(0, dtype=np.int64)
        kinds = np.asarray(batch.kinds)
        strings = batch.strings
        if not self.count or not len(strings) or not (root_of >= 0).any():
            return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        is_str = kinds == KIND_STRING
        str_pos = np.flatnonzero(is_str)
        roots = root_of[np.asarray(batch.attributes, dtype=np.int64)[str_pos]]
        keep = roots >= 0
        if keep.all():
            values = list(strings)
        else:
            values = [strings[k] for k in np.flatnonzero(keep).tolist()]
            str_pos, roots = str_pos[keep], roots[keep]
        value_event = np.searchsorted(offsets, str_pos, side="right") - 1
        cps, cp_off = code_points(values)
        return prefix_events(n, value_event, roots, cps, cp_off, self.trie.keys, self.trie.vals, self.base,
                             self.length, self.arena)

    def stats(self) -> dict:
        return {"prefix_groups": int((self.length[: self.pool.high] > 0).sum()), "prefix_subscriptions": self.count,
                "prefix_trie_nodes": len(self.pool),
                "memory_bytes": int(self.trie.nbytes + self.arena.nbytes + self.node_of.nbytes + sum(
                    a.nbytes for a in (self.base, self.cap, self.length, self.parent, self.cp_of, self.children)))}
