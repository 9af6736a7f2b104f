"""Naive references of the engine's kernel stages: plain Python over the same named arrays, written for clarity.

Each function says what a stage computes, without the prefetching, staging,
unrolling or scratch-array reuse of the kernel it checks (the way stumpy
keeps a naive implementation beside every fast one).  Arrays are the named
containers of the engine (``PredicateArrays``, ``ClusterArrays``,
``RunArrays``, ``AccessArrays``).
"""

from __future__ import annotations

import numpy as np

from fastpubsub.engine.cluster_store import PIDS_ROW, STARTS_ROW, run_row


def cluster_entries(store, c: int) -> list[tuple[list[int], int]]:
    """(columns, handle) of every entry of cluster ``c``."""
    k, base, cap = int(store.k[c]), int(store.base[c]), int(store.cap[c])
    return [([int(store.arena[base + r * cap + j]) for r in range(k)], int(store.arena[base + k * cap + j]))
            for j in range(int(store.length[c]))]


def list_clusters(store, head: int) -> list[int]:
    """The clusters of the list starting at ``head``."""
    out = []
    c = head
    while c >= 0:
        out.append(c)
        c = int(store.next[c])
    return out


def keys_reached(sat: list[int], preds, access, n_keys: int) -> list[int]:
    """Access keys an event with satisfied predicates ``sat`` reaches (stages 1 and 2 of engine/probing.py).

    The catch-all (key 0); the single-predicate key of each satisfied
    predicate; for each configured schema whose fields the event satisfies an
    equality on, the conjunction key of those equalities if it exists.
    """
    keys = [0] if n_keys > 0 else []
    for p in sat:
        if p < len(access.pred_key) and 0 <= access.pred_key[p] < n_keys:
            keys.append(int(access.pred_key[p]))
    eq_on = {int(preds.field[p]): int(p) for p in sat if preds.op[p] == 0}
    conj = {}
    for slot in range(len(access.conj_vals)):
        if access.conj_vals[slot] >= 0:
            conj[tuple(int(x) for x in access.conj_keys[slot])] = int(access.conj_vals[slot])
    for fields in access.schema_fields:
        fs = [int(f) for f in fields if f >= 0]
        if all(f in eq_on for f in fs):
            members = tuple([eq_on[f] for f in fs] + [-1] * (len(fields) - len(fs)))
            q = conj.get(members, -1)
            if 0 <= q < n_keys:
                keys.append(q)
    return keys


def heads_reached(sat: list[int], preds, access, store) -> list[int]:
    """First clusters of the lists an event reaches (stage 3): ``key_head`` of :func:`keys_reached`, none missing."""
    n_keys = len(store.key_head)
    return sorted(int(store.key_head[q]) for q in keys_reached(sat, preds, access, n_keys) if store.key_head[q] >= 0)


def run_entries(sat: list[int], c: int, store, runs) -> list[tuple[int, int]]:
    """(cluster, entry) pairs of cluster ``c``'s sorted prefix whose first two columns are satisfied (stage 5).

    Read through the run rows (first predicate and start of each run), as
    :func:`engine.probing.stage_runs` does through the run index.
    """
    k, base, cap = int(store.k[c]), int(store.base[c]), int(store.cap[c])
    pr, sr = run_row(base, cap, k, PIDS_ROW), run_row(base, cap, k, STARTS_ROW)
    nr, ns = int(runs.runs[c]), int(runs.sorted[c])
    s = set(sat)
    out = []
    for r in range(nr):
        if int(store.arena[pr + r]) not in s:
            continue
        end = int(store.arena[sr + r + 1]) if r + 1 < nr else ns
        for j in range(int(store.arena[sr + r]), end):
            if k < 2 or int(store.arena[base + cap + j]) in s:
                out.append((c, j))
    return out


def scan_lists(sat: list[int], heads: list[int], store) -> list[int]:
    """Handles of the entries of every cluster of the lists starting at ``heads`` with every column satisfied."""
    s = set(sat)
    out = []
    for h in heads:
        for c in list_clusters(store, h):
            out += [handle for cols, handle in cluster_entries(store, c) if all(p in s for p in cols)]
    return sorted(out)


def scan_cluster(bits: np.ndarray, arena: np.ndarray, k: int, base: int, cap: int, n: int) -> list[int]:
    """Line entries of the ``n`` entries of one cluster whose ``k`` columns all have their bit set."""
    return [int(arena[base + k * cap + j]) for j in range(n) if all(bits[arena[base + r * cap + j]] for r in range(k))]



def runs_found(sat: list[int], c: int, store, runs) -> list[int]:
    """Runs of cluster ``c``'s sorted prefix whose first predicate is satisfied (stage 5b), read off the run rows."""
    k, base, cap = int(store.k[c]), int(store.base[c]), int(store.cap[c])
    pr = run_row(base, cap, k, PIDS_ROW)
    s = set(sat)
    return [r for r in range(int(runs.runs[c])) if int(store.arena[pr + r]) in s]


def distinct_per_event(offsets, ids) -> tuple[np.ndarray, np.ndarray]:
    """The CSR result with each event's ids made distinct (sorted already, so first occurrences in order)."""
    groups = [sorted(set(ids[offsets[i]:offsets[i + 1]].tolist())) for i in range(len(offsets) - 1)]
    off = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([len(g) for g in groups], out=off[1:])
    return off, np.array([x for g in groups for x in g], dtype=np.int64)


def pattern_group_starts(engine, g: int, attributes: dict) -> list[tuple[int, int]]:
    """(pattern slot, parent) of start group ``g`` for an event with ``attributes``, member by member.

    A member whose remaining start predicate is one ``attr <op> number`` is listed with parent -2 when
    the event satisfies it (a number, not NaN, the comparison true); every other member is listed with
    parent -1 (its remaining start atoms are checked later).  ``engine``: a ``PatternEngine``.
    """
    import math
    import operator

    ops = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
    out = []
    for p in sorted(engine.group_members[g]):
        c = engine.compiled[p]
        reg, res = _pattern_start_split(c.pattern)
        if len(res) == 1 and res[0][1] in ops and isinstance(res[0][2], (int, float)) and not isinstance(res[0][2], bool):
            attr, op, v = res[0]
            x = attributes.get(attr)
            if isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x) and ops[op](float(x), float(v)):
                out.append((p, -2))
        else:
            out.append((p, -1))
    return sorted(out)


def _pattern_start_split(pattern) -> tuple[list, list]:
    """The start triples the matcher checks (equalities, string orderings; all of them without an equality), and the rest."""
    def matcher_part(t):
        return t[1] == "=" or (isinstance(t[2], str) and t[1] not in ("=", "!="))
    reg = [t for t in pattern.start if matcher_part(t)]
    if not any(t[1] == "=" for t in reg):
        return list(pattern.start), []
    return reg, [t for t in pattern.start if not matcher_part(t)]
