"""Naive references of the engine's kernel stages: plain Python over the same named arrays, written for clarity.

Each function says what a stage computes, without the prefetching, staging,
unrolling or scratch-array reuse of the kernel it checks (the way stumpy
keeps a naive implementation beside every fast one).  Arrays are the named
containers of the engine (``PredicateArrays``, ``ClusterArrays``,
``RunArrays``, ``AccessArrays``).
"""

from __future__ import annotations

import numpy as np

from fastpubsub.engine.semantics import KIND_BOOL, KIND_STRING, KINDS
from fastpubsub.engine.structures.sorted_runs import DEAD, PIDS_ROW, STARTS_ROW, run_row


def cluster_entries(store, c: int) -> list[tuple[list[int], int]]:
    """(columns, handle) of every live entry of cluster ``c`` (a removed one's handle is ``DEAD``)."""
    k, base, cap = int(store.k[c]), int(store.base[c]), int(store.cap[c])
    return [([int(store.arena[base + r * cap + j]) for r in range(k)], int(store.arena[base + k * cap + j]))
            for j in range(int(store.length[c])) if store.arena[base + k * cap + j] != DEAD]


def list_clusters(store, head: int) -> list[int]:
    """The clusters of the list starting at ``head``."""
    out = []
    c = head
    while c >= 0:
        out.append(c)
        c = int(store.next[c])
    return out


def keys_reached(sat: list[int], preds, access, n_keys: int, fields: list[int] = ()) -> list[int]:
    """Access keys an event with satisfied predicates ``sat`` and fields ``fields`` reaches (stages 1 and 2 of
    engine/kernels/probing.py).

    The catch-all (key 0); the presence key of each field the event carries;
    the single-predicate key of each satisfied predicate; for each configured
    schema whose fields the event satisfies an equality on, the conjunction
    key of those equalities if it exists.
    """
    keys = [0] if n_keys > 0 else []
    for f in fields:
        if 0 <= f < len(access.field_key) and 0 <= access.field_key[f] < n_keys:
            keys.append(int(access.field_key[f]))
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


def heads_reached(sat: list[int], preds, access, store, fields: list[int] = ()) -> list[int]:
    """First clusters of the lists an event reaches (stage 3): ``key_head`` of :func:`keys_reached`, none missing."""
    n_keys = len(store.key_head)
    return sorted(int(store.key_head[q]) for q in keys_reached(sat, preds, access, n_keys, fields)
                  if store.key_head[q] >= 0)


def run_entries(sat: list[int], c: int, store, runs) -> list[tuple[int, int]]:
    """(cluster, entry) pairs of cluster ``c``'s sorted prefix whose first two columns are satisfied (stage 5).

    Read through the run rows (first predicate and start of each run), as
    :func:`engine.kernels.run_lookups.stage_runs` does through the run index.
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


def second_level(c: int, r: int, store, runs) -> dict[int, list[int]]:
    """Run ``r`` of cluster ``c``'s sorted prefix by second column: {predicate: positions of its entries} -- what the
    run's second-level index answers for each predicate an event satisfies (stage 5, engine/structures/sorted_runs.py)."""
    k, base, cap = int(store.k[c]), int(store.base[c]), int(store.cap[c])
    sr = run_row(base, cap, k, STARTS_ROW)
    nr, ns = int(runs.runs[c]), int(runs.sorted[c])
    end = int(store.arena[sr + r + 1]) if r + 1 < nr else ns
    out: dict[int, list[int]] = {}
    for j in range(int(store.arena[sr + r]), end):
        out.setdefault(int(store.arena[base + cap + j]), []).append(j)
    return out


def run_matches(sat: list[int], c: int, store, runs) -> list[tuple[int, int]]:
    """The pairs of :func:`run_entries` whose every column is satisfied (stage 5 with its later columns)."""
    k, base, cap = int(store.k[c]), int(store.base[c]), int(store.cap[c])
    s = set(sat)
    return [(c, j) for c, j in run_entries(sat, c, store, runs)
            if all(int(store.arena[base + r * cap + j]) in s for r in range(2, k))]


def scan_lists(sat: list[int], heads: list[int], store) -> list[int]:
    """Handles of the entries of every cluster of the lists starting at ``heads`` with every column satisfied."""
    s = set(sat)
    out = []
    for h in heads:
        for c in list_clusters(store, h):
            out += [handle for cols, handle in cluster_entries(store, c) if all(p in s for p in cols)]
    return sorted(out)


def scan_cluster(bits: np.ndarray, arena: np.ndarray, k: int, base: int, cap: int, n: int) -> list[int]:
    """Line entries of the live ones of the ``n`` entries of one cluster whose ``k`` columns all have their bit set."""
    return [int(arena[base + k * cap + j]) for j in range(n)
            if arena[base + k * cap + j] != DEAD and all(bits[arena[base + r * cap + j]] for r in range(k))]



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


# -- OpIndex (engine/algorithms/opindex.py) -------------------------------------------------------------------------------------

def opindex_segment(ix, d: int, segments: int, seg: int) -> list[tuple[int, float, int]]:
    """(field, value, slot) entries of segment ``seg`` of directory ``d``."""
    b = d * segments + seg
    base, n = int(ix.b_base[b]), int(ix.b_len[b])
    return [(int(ix.e_field[k]), float(ix.e_val[k]), int(ix.e_slot[k])) for k in range(base, base + n)]


def opindex_pair_holds(op: int, field: int, code: float, eqbits: int, value: float) -> bool:
    """An entry ``(field, value)`` of operator ``op`` holds for an event pair of this field (engine/algorithms/opindex.py)."""
    if op <= 1:
        x = float(eqbits) if field % 3 == 1 else code
        return (x == value) if op == 0 else (x != value)
    return {2: code < value, 3: code <= value, 4: code > value, 5: code >= value}[op]


def opindex_matches(ix, ev, segments: int) -> list[list[int]]:
    """Algorithm 2 without signatures, binary searches or epochs: handles matched by each event, ascending.

    For each pair whose field is a pivot, every entry of every operator list of
    that pivot whose field the event carries is tested; a row matches when
    all its predicates (``c_need``) were found true.
    """
    out = []
    for i in range(len(ev.offsets) - 1):
        pairs = [(int(ev.field[j]), float(ev.code[j]), int(ev.eqbits[j]))
                 for j in range(ev.offsets[i], ev.offsets[i + 1]) if ev.field[j] >= 0]
        by_field = {f: (c, e) for f, c, e in pairs}
        hits: dict[int, int] = {}
        for f, _, _ in pairs:
            lst = int(ix.list_of_field[f]) if f < len(ix.list_of_field) else -1
            if lst < 0:
                continue
            for op in range(6):
                d = int(ix.list_op[lst * 6 + op])
                if d < 0:
                    continue
                for seg in range(segments):
                    for g, value, slot in opindex_segment(ix, d, segments, seg):
                        if g in by_field and opindex_pair_holds(op, g, *by_field[g], value):
                            pos = int(ix.c_base[lst]) + slot
                            hits[pos] = hits.get(pos, 0) + 1
        out.append(sorted(int(ix.c_handle[p]) for p, k in hits.items() if k == int(ix.c_need[p])))
    return out


def opindex_pivots(off, fields, delta, subs) -> list[int]:
    """Per row (CSR ``off`` over ``fields``): the field with the least (delta, subscriptions, field id) (equation 1)."""
    return [min(fields[off[i]:off[i + 1]].tolist(), key=lambda f: (delta[f], subs[f], f)) for i in range(len(off) - 1)]


def opindex_entry_order(buckets, fields, vals, slots) -> list[int]:
    """Positions of new entries in (segment, field, value, slot) order."""
    return sorted(range(len(buckets)), key=lambda i: (buckets[i], fields[i], vals[i], slots[i]))


def opindex_assign_ids(keys, table: dict, next_id: int) -> tuple[list[int], int]:
    """The id of each key in ``table``, new keys numbered from ``next_id`` in order of appearance."""
    out = []
    for k in keys.tolist():
        if k not in table:
            table[k] = next_id
            next_id += 1
        out.append(table[k])
    return out, next_id
def holds(op: int, x: float, c: float) -> bool:
    """``x op c`` for the order operators and ``=`` (``!=`` is no bound of a cell)."""
    return {0: x == c, 1: True, 2: x < c, 3: x <= c, 4: x > c, 5: x >= c}[op]


def constant_code(bm, p: int) -> float:
    """Order code of predicate ``p``'s constant: the number, 0/1, or the string's code (engine/frontend/encoding.py)."""
    kind = int(bm.pfield[p]) % len(KINDS)
    bits = int(bm.pbits[p])
    return float(bm.scodes[bits]) if kind == KIND_STRING else float(bits) if kind == KIND_BOOL else float(bm.pnum[p])


def fold_intervals(rows: list[list[tuple[int, int, float]]]) -> list[dict[int, tuple[float, float]]]:
    """Per row of ``(field, op, value)`` order predicates, per field the least and greatest double every
    predicate on it accepts (``(inf, -inf)`` when none does): engine/algorithms/bitmaps.py's ``fold_intervals``."""
    none = (np.inf, -np.inf)

    def accepts(op: int, v: float) -> tuple[float, float]:
        if op == 5:
            return v, np.inf
        if op == 3:
            return -np.inf, v
        if op == 4:
            return none if v == np.inf else (float(np.nextafter(v, np.inf)), np.inf)
        return none if v == -np.inf else (-np.inf, float(np.nextafter(v, -np.inf)))

    out = []
    for row in rows:
        got: dict[int, tuple[float, float]] = {}
        for f, op, v in row:
            lo, hi = got.get(f, (-np.inf, np.inf))
            a, b = accepts(op, v)
            lo, hi = max(lo, a), min(hi, b)
            got[f] = (lo, hi) if lo <= hi else none
        out.append(got)
    return out


def bitmap_rows(bm, n_slots: int) -> np.ndarray:
    """The rows engine/algorithms/bitmaps.py must hold, one bool per slot.

    Row 0 marks the slots not in use; a field's missing row marks every slot
    with a predicate on the field; a (field, cell) row marks a slot when no
    double of the cell satisfies its predicates on the field.  The least such
    double, if any, is the cell's lower end or a constant or the double just
    above one, so those are the only values tried.
    """
    rows = np.zeros((bm.rows.shape[0], n_slots), dtype=bool)
    rows[0] = True
    n_cells = bm.bounds.shape[1] + 1
    for s in range(n_slots):
        if bm.slot_handle[s] < 0:
            continue
        rows[0, s] = False
        pids = [int(p) for p in bm.sub_pids[bm.slot_start[s] : bm.slot_start[s] + bm.slot_len[s]]]
        # a range-only slot's interval [lo, hi] on a field is the predicates x >= lo, x <= hi
        ivs = [(int(fa), float(lo), float(hi)) for fa, lo, hi in
               zip(*(a[bm.iv_start[s] : bm.iv_start[s] + bm.iv_len[s]] for a in (bm.iv_fa, bm.iv_lo, bm.iv_hi)))]
        for fa in sorted({int(bm.field_slot[bm.pfield[p]]) for p in pids} | {fa for fa, _, _ in ivs}):
            rows[bm.miss_row[fa], s] = True
            if bm.cell_base[fa] < 0:
                continue
            mine = [(int(bm.pop[p]), constant_code(bm, p)) for p in pids if bm.field_slot[bm.pfield[p]] == fa]
            mine += [pair for f, lo, hi in ivs if f == fa for pair in ((5, lo), (3, hi))]
            for c in range(n_cells):
                a = -np.inf if c == 0 else float(bm.bounds[fa, c - 1])
                b = np.inf if c == n_cells - 1 else float(bm.bounds[fa, c])
                tries = [a] + [x for _, v in mine for x in (v, float(np.nextafter(v, np.inf)))]
                inside = [x for x in tries if a <= x and (x < b or (c == n_cells - 1 and x <= b))]
                rows[bm.cell_base[fa] + c, s] = not any(all(holds(op, x, v) for op, v in mine) for x in inside)
    return rows


def merge_matches(off_a, ids_a, off_b, ids_b) -> tuple[np.ndarray, np.ndarray]:
    """Two CSR match lists of the same events merged, ids ascending per event."""
    lists = [sorted(list(ids_a[off_a[e] : off_a[e + 1]]) + list(ids_b[off_b[e] : off_b[e + 1]]))
             for e in range(len(off_a) - 1)]
    off = np.zeros(len(lists) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(x) for x in lists])
    return off, np.array([i for x in lists for i in x], dtype=np.int64)
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
    for p in sorted(engine.start_groups.members[g]):
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


def amkh_coordinate(pids: list[int], field, op, hpos, member_of) -> dict[int, int]:
    """A subscription's coordinate in engine/algorithms/amkh.py: hashed position -> member (its ``=`` clause first)."""
    coord: dict[int, int] = {}
    eq: set[int] = set()
    for p in pids:
        f = int(field[p])
        k = int(hpos[f]) if f < len(hpos) else -1
        if k < 0 or member_of[p] == np.iinfo(np.int64).min:
            continue
        if k not in coord or (op[p] == 0 and k not in eq):
            coord[k] = int(member_of[p])
            if op[p] == 0:
                eq.add(k)
    return coord


def amkh_candidates(sat: list[int], subs: dict[int, list[int]], field, op, hpos, member_of) -> list[int]:
    """The subscriptions an event examines in engine/algorithms/amkh.py, collisions aside: those whose every coordinate
    member is a member of one of the event's satisfied predicates on the same hashed field."""
    reached: dict[int, set[int]] = {}
    for p in sat:
        f = int(field[p])
        k = int(hpos[f]) if f < len(hpos) else -1
        if k >= 0 and member_of[p] != np.iinfo(np.int64).min:
            reached.setdefault(k, set()).add(int(member_of[p]))
    out = []
    for h, pids in subs.items():
        coord = amkh_coordinate(pids, field, op, hpos, member_of)
        if all(m in reached.get(k, ()) for k, m in coord.items()):
            out.append(h)
    return sorted(out)
def prefix_groups_content(pg) -> dict[tuple[str, str], list[int]]:
    """(attribute, prefix) -> ids of every non-empty group of a ``PrefixGroups``, spelled from its trie rows."""
    live = pg.trie.vals >= 0
    up = {int(c): (int(p), int(x)) for c, (p, x) in zip(pg.trie.vals[live], pg.trie.keys[live])}
    root_name = {r: a for a, r in pg.roots.items()}

    def spell(n: int) -> tuple[str, str]:
        if n in root_name:
            return root_name[n], ""
        p, x = up[n]
        a, s = spell(p)
        return a, s + chr(x)

    return {spell(n): pg.arena[pg.base[n]: pg.base[n] + pg.length[n]].tolist()
            for n in up if pg.length[n] > 0}


def prefix_groups_matches(pg, events: list[dict]) -> list[list[int]]:
    """What ``PrefixGroups.match`` returns, per event: the ids of the groups whose prefix starts a string value
    of the group's attribute, ascending (from the groups' content, with ``str.startswith``)."""
    content = prefix_groups_content(pg)
    return [sorted(i for (a, p), ids in content.items() if isinstance(e.get(a), str) and e[a].startswith(p)
                   for i in ids) for e in events]
def direct_entry_holds(preds, columns: list[int], pairs: dict[int, tuple[float, int]]) -> bool:
    """Every predicate id of ``columns`` holds for an event given as ``{field: (order code, eqbits)}``
    (engine/algorithms/direct.py): the field present, then ``=`` on the equality bits, the others on the order codes."""
    for p in columns:
        f, op = int(preds.field[p]), int(preds.op[p])
        if f not in pairs:
            return False
        code, eqbits = pairs[f]
        if op == 0:
            if eqbits != int(preds.bits_value[p]):
                return False
            continue
        c = float(preds._codes(np.array([f]), np.array([preds.bits_value[p]]))[0])
        if not {1: code != c, 2: code < c, 3: code <= c, 4: code > c, 5: code >= c}[op]:
            return False
    return True


def direct_scan(preds, store, head: int, pairs: dict[int, tuple[float, int]]) -> list[int]:
    """Handles of the entries of list ``head`` whose predicates all hold (:func:`direct_entry_holds`), in list order."""
    out = []
    for c in list_clusters(store, head):
        for cols, handle in cluster_entries(store, c):
            if direct_entry_holds(preds, cols, pairs):
                out.append(handle)
    return out


def finish_event(out: np.ndarray, start: int, nout: int, handle_id: np.ndarray) -> list[int]:
    """An event's matched handles ``out[start:nout]`` as subscription ids, ascending (engine/kernels/scan.py)."""
    return sorted(int(handle_id[h]) for h in out[start:nout])


def encode_batch(batch, attributes, strings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(field, code, eqbits)`` of an event batch's pairs, in numpy passes (engine/frontend/encoding.py's module docstring)."""
    from fastpubsub.engine.semantics import KIND_BOOL, KIND_STRING
    attr_map = attributes.lookup(batch.attribute_names)
    kinds = np.asarray(batch.kinds, dtype=np.int64)
    numbers = np.asarray(batch.numbers, dtype=np.float64)
    attr = attr_map[np.asarray(batch.attributes, dtype=np.int64)] if len(attr_map) else np.full(len(kinds), -1)
    field = np.where(attr >= 0, attr * 3 + kinds, -1)
    code = numbers.copy()
    eqbits = (numbers + 0.0).view(np.int64).copy()
    is_str, is_bool = kinds == KIND_STRING, kinds == KIND_BOOL
    eqbits[is_bool] = numbers[is_bool].astype(np.int64)
    if len(batch.strings):
        sid, scode = strings.encode_event_strings(batch.strings)
        code[is_str], eqbits[is_str] = scode, sid
    field[np.isnan(code) & ~is_str] = -1
    return field, code, eqbits


class DictStatisticsCollector:
    """The online statistics as dicts of Python objects (what ``StatisticsCollector`` keeps in arrays).

    Same sampling, decay and snapshot rule: per attribute a dict of value
    key -> decayed count; the top list is the ``top_k`` largest counts, the
    first inserted first among equals (a batch inserts its numbers and
    booleans by (attribute, kind, value), then its strings as they come).
    """

    def __init__(self, top_k: int = 64, half_life: int = 20_000, sample_per_batch: int = 256, min_count: float = 0.5):
        self.top_k, self.half_life, self.sample_per_batch, self.min_count = top_k, half_life, sample_per_batch, min_count
        self.events = 0.0
        self.since_decay = 0
        self.presence: dict[str, float] = {}
        self.values: dict[str, dict[tuple, float]] = {}

    def observe(self, batch) -> None:
        n = len(batch)
        if n == 0:
            return
        take = min(n, self.sample_per_batch)
        rows = np.linspace(0, n - 1, take).astype(np.int64) if take < n else np.arange(n)
        string_at = np.cumsum(batch.kinds == KIND_STRING) - 1
        pairs = [p for r in rows.tolist() for p in range(int(batch.offsets[r]), int(batch.offsets[r + 1]))]
        self.events += take
        for p in pairs:
            name = batch.attribute_names[int(batch.attributes[p])]
            self.presence[name] = self.presence.get(name, 0.0) + 1.0
        plain = sorted((int(batch.attributes[p]), int(batch.kinds[p]), float(batch.numbers[p])) for p in pairs
                       if batch.kinds[p] != KIND_STRING and not np.isnan(batch.numbers[p]))
        text = [(int(batch.attributes[p]), (1, batch.strings[int(string_at[p])])) for p in pairs
                if batch.kinds[p] == KIND_STRING]
        for a, key in [(a, (2, bool(x)) if k == KIND_BOOL else (0, x)) for a, k, x in plain] + text:
            table = self.values.setdefault(batch.attribute_names[a], {})
            table[key] = table.get(key, 0.0) + 1.0
        self.since_decay += take
        while self.since_decay >= self.half_life:
            self.since_decay -= self.half_life
            self.events *= 0.5
            self.presence = {a: c * 0.5 for a, c in self.presence.items() if c * 0.5 >= self.min_count}
            for name in list(self.values):
                table = {k: c * 0.5 for k, c in self.values[name].items() if c * 0.5 >= self.min_count}
                if table:
                    self.values[name] = table
                else:
                    del self.values[name]

    def snapshot(self):
        from fastpubsub.engine.costmodel.statistics import AttributeStats, EventStatistics

        if self.events <= 0:
            return EventStatistics.uniform()
        attributes = {}
        for name, present in self.presence.items():
            table = self.values.get(name, {})
            total = sum(table.values()) or 1.0
            top = sorted(table.items(), key=lambda kv: -kv[1])[: self.top_k]
            numeric = sorted((k[1], c) for k, c in table.items() if k[0] == 0)
            cum = np.cumsum([c for _, c in numeric])
            quantiles = [] if not numeric else [
                numeric[min(int(i), len(numeric) - 1)][0]
                for i in np.searchsorted(cum, np.linspace(0.0, cum[-1], 11), side="left")]
            attributes[name] = AttributeStats(presence=min(1.0, present / self.events), distinct=len(table),
                                              top_values={k: c / total for k, c in top}, quantiles=quantiles)
        return EventStatistics(event_count=int(round(self.events)), attributes=attributes, source="online")


def encode_event_strings(strings, values) -> tuple[np.ndarray, np.ndarray]:
    """(id or -1, order code) of event strings against a ``StringDictionary``: a dict probe and a bisect per value
    (the midpoint of the neighbours' codes for a string that is no constant)."""
    import bisect

    from fastpubsub.engine.frontend.encoding import SPACING
    ids, codes = [], []
    srt, sc = strings._sorted, strings._sorted_codes
    for s in values:
        j = strings.ids.get(s, -1)
        ids.append(j)
        if j >= 0:
            codes.append(float(strings.codes[j]))
        else:
            p = bisect.bisect_left(srt, s)
            lo = sc[p - 1] if p > 0 else 0
            hi = sc[p] if p < len(srt) else lo + 2 * SPACING
            codes.append((lo + hi) / 2.0)
    return np.array(ids, dtype=np.int64), np.array(codes, dtype=np.float64)


def event_pairs(batch) -> list[list[tuple]]:
    """Per event of ``batch``, its pairs in order as (attribute name, kind, value), a string value as ``str``."""
    strings = iter(batch.strings)
    flat = [(batch.attribute_names[a], k, next(strings) if k == KIND_STRING else x)
            for a, k, x in zip(np.asarray(batch.attributes).tolist(), np.asarray(batch.kinds).tolist(),
                               np.asarray(batch.numbers).tolist())]
    offsets = np.asarray(batch.offsets).tolist()
    return [flat[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def derived_pairs(derived, batch, known) -> list[list[tuple]]:
    """Per event, the derived pairs ``DerivedAttributes.derive_events`` adds, as sorted (name, kind, value): each
    string value's ``derived_value`` per derived attribute of its attribute (a slice taking only ``=`` kept when it
    is a constant in ``known``), ``absent`` without a non-NaN value, ``single`` with one number, ``within`` with
    several numbers of which one is in the range."""
    import math

    from fastpubsub.engine.frontend.lowering import _SLICES, _TESTS, derived_value
    from fastpubsub.engine.semantics import KIND_NUMBER
    out = []
    for pairs in event_pairs(batch):
        added = []
        for attribute, specs in derived.by_attribute.items():
            of = [(k, v) for a, k, v in pairs if a == attribute]
            texts = [v for k, v in of if k == KIND_STRING]
            nums = [v for k, v in of if k == KIND_NUMBER and not math.isnan(v)]
            present = any(k != KIND_NUMBER or not math.isnan(v) for k, v in of)
            for name, kind, arg in specs:
                if kind == "absent":
                    added += [(name, KIND_BOOL, 1.0)] if not present else []
                elif kind == "single":
                    added += [(name, KIND_BOOL, 1.0)] if len(nums) == 1 else []
                elif kind == "within":
                    inside = [x for x in nums if (x > arg[1] if arg[0] == ">" else x >= arg[1])
                              and (x < arg[3] if arg[2] == "<" else x <= arg[3])]
                    added += [(name, KIND_BOOL, 1.0)] if len(nums) >= 2 and inside else []
                else:
                    for s in texts:
                        d = derived_value(kind, arg, s)
                        if d is None:
                            continue
                        if kind in _TESTS:
                            added.append((name, KIND_BOOL, 1.0))
                        elif kind not in _SLICES or d in known:
                            added.append((name, KIND_STRING, d))
        out.append(sorted(added, key=repr))
    return out
