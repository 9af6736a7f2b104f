"""Compiling a pattern subscription into the kernel's tables (Cayuga, EDBT 2006 section 3.2).

A pattern's static predicates are split between the Fabret matcher (equalities and string orderings,
registered once per group of equal parts) and the kernel (the rest, as atom rows); its bound values get
instance columns and its aggregates slots.  :class:`PatternTables` writes the rows of every installed
pattern into the engine's node and pattern fields and turns them into the kernel's arrays.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from fastpubsub.engine import OPERATORS
from fastpubsub.engine.columnar import csr_positions

from . import kernel as K
from .growth import aligned_rows
from .language import MAX_STEPS, Atom, Operand, Pattern, Ref, to_json

_FN = {"count": K.FN_COUNT, "sum": K.FN_SUM, "min": K.FN_MIN, "max": K.FN_MAX, "avg": K.FN_AVG}
assert K.STRIDE == MAX_STEPS + 1


def fingerprint(pattern: Pattern) -> bytes:
    """16 bytes identifying a pattern's definition: a replaced subscription's old state is not restored."""
    return hashlib.blake2b(json.dumps(to_json(pattern), sort_keys=True).encode(), digest_size=16).digest()


class Compiled:
    """One pattern's tables (before they are written into the engine's arrays)."""

    def __init__(self, pattern: Pattern, engine: "PatternTables") -> None:
        self.pattern = pattern
        self.cols: dict[tuple[int, str], int] = {}
        self.aggs: dict[tuple[int, str], tuple[int, int]] = {}  # (step, name) -> (slot, fn)
        for k, s in enumerate(pattern.steps, start=1):
            for a in s.aggregates:
                self.aggs[(k, a.name)] = (len(self.aggs), _FN[a.fn])
        for atom in self._atoms():
            for o in (atom.left, atom.right):
                if o.ref is not None and o.ref.kind == "bound":
                    self.cols.setdefault((o.ref.step, o.ref.attr), len(self.cols))
        self.e = engine
        self.fp = fingerprint(pattern)
        self.sid = 0
        self.labels = [(f"{s.bind}.{a.name}", self.aggs[(k, a.name)][0], a.fn)
                       for k, s in enumerate(pattern.steps, start=1) for a in s.aggregates]

    def _atoms(self):
        for s in self.pattern.steps:
            yield from s.correlate
            yield from s.where
            yield from s.until

    def side(self, o: Operand) -> tuple:
        """(src, idx, aux, mul, add, arith, const kind, const value)."""
        if o.ref is None:
            v = o.const
            if isinstance(v, bool):
                return (K.SRC_CONST, 0, 0, 1.0, 0.0, False, 2, float(v))
            if isinstance(v, str):
                return (K.SRC_CONST, 0, 0, 1.0, 0.0, False, 1, float(self.e._code(v)))
            return (K.SRC_CONST, 0, 0, 1.0, 0.0, False, 0, float(v))
        r = o.ref
        if r.kind == "event":
            src, idx, aux = K.SRC_EVENT, self.e._col(r.attr), 0
        elif r.kind == "bound":
            src, idx, aux = K.SRC_INST, self.cols[(r.step, r.attr)], 0
        elif r.kind == "agg":
            src, (idx, aux) = K.SRC_AGG, self.aggs[(r.step, r.attr)]
        else:
            src, idx, aux = K.SRC_DUR, 0, 0
        return (src, idx, aux, float(o.mul), float(o.add), bool(o.arith), 0, 0.0)

    def atom_row(self, a: Atom) -> tuple:
        return (OPERATORS.index(a.op), a.static_triple is not None, self.side(a.left), self.side(a.right))


class Groups:
    """Parts of subscriptions with equal static predicates, sharing one matcher entry: ``2 * (base + g)`` for
    group ``g``.  An event the matcher reports for it reaches every member at once (docs/patterns.md 3)."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.of: dict[tuple, int] = {}  # the triples, as a key -> group
        self.keys: list[tuple | None] = []  # group -> its key (None: free)
        self.members: list[set[int]] = []
        self.free: list[int] = []

    def join(self, member: int, triples: list[tuple]) -> tuple[int, list]:
        """The group of ``member``, whose predicates are ``triples``; and the matcher row of a new group."""
        key = tuple(sorted((a, op, type(v).__name__, repr(v)) for a, op, v in triples))
        g = self.of.get(key)
        rows = []
        if g is None:
            g = self.free.pop() if self.free else len(self.keys)
            if g == len(self.keys):
                self.keys.append(None)
                self.members.append(set())
            self.of[key] = g
            self.keys[g] = key
            rows.append((2 * (self.base + g), triples))
        self.members[g].add(member)
        return g, rows

    def leave(self, g: int, member: int) -> int | None:
        """Take ``member`` out of group ``g``; the matcher id to remove if the group is now empty."""
        members = self.members[g]
        members.discard(member)
        if members:
            return None
        del self.of[self.keys[g]]
        self.keys[g] = None
        self.free.append(g)
        return 2 * (self.base + g)


class PatternTables:
    """The installed patterns' rows and the kernel's tables built from them (a part of
    :class:`~fastpubsub.patterns.engine.PatternEngine`)."""

    #: Dead atom, capture and aggregate rows tolerated beyond the live ones before a compaction (see _compact_rows).
    ROW_SLACK = 1024

    # -- dictionaries --------------------------------------------------------
    def _col(self, attr: str) -> int:
        return self.attr_cols.setdefault(attr, len(self.attr_cols))

    def _code(self, s: str) -> int:
        code = self.strings.get(s)
        if code is None:
            code = self.strings[s] = len(self.string_list)
            self.string_list.append(s)
        return code

    def _install(self, sid: int, pattern: Pattern, since: int) -> list:
        if self.mode == "none" and orders_strings(pattern):
            raise ValueError(f"subscription {sid}: mode 'none' (an ablation without the matcher) cannot order strings")
        c = Compiled(pattern, self)
        if self.free_p:
            p = self.free_p.pop()
        else:
            p = len(self.compiled)
            self.compiled.append(None)
            if p >= self.n_pat_cap:
                self._alloc_patterns(2 * self.n_pat_cap)
        self.compiled[p] = c
        c.sid = sid
        self.sid_slot[sid] = p
        self._widen(max(1, len(c.cols)), max(1, len(c.aggs)))
        base = p * K.STRIDE
        self.pat_sid[p] = sid
        self.pat_within[p] = pattern.within_ms
        self.pat_since[p] = since
        self.pat_nsteps[p] = len(pattern.steps)
        self.pat_active[p] = True
        self.pat_live[p] = 0
        spans = len(self.atom_rows), len(self.cap_rows), len(self.agg_rows)
        start_atoms = [Atom(Operand(event_ref(a)), op, Operand(None, v)) for a, op, v in pattern.start]
        start_reg, start_res = split_static(start_atoms)
        rows = []
        rows_sg: list = []
        group_row = self._join_group(p, start_reg, start_res)
        self.start_lo[p] = len(self.atom_rows)
        self.atom_rows.extend(c.atom_row(a) for a in start_atoms)
        self.start_hi[p] = len(self.atom_rows)
        self.start_res_lo[p] = len(self.atom_rows)
        self.atom_rows.extend(c.atom_row(a) for a in start_res)
        self.start_res_hi[p] = len(self.atom_rows)
        self.node_op[base: base + K.STRIDE] = -1
        self.node_op[base] = K.OP_START
        self.node_cap[base] = self._captures(c, 0)
        for k, s in enumerate(pattern.steps, start=1):
            node = base + k
            self.node_op[node] = K.OP_NEXT if s.op == "next" else K.OP_FOLD
            rng = []
            th_static = [a for a in s.correlate if a.static_triple is not None]
            th_dyn = [a for a in s.correlate if a.static_triple is None]
            pi_static = [a for a in s.where if a.static_triple is not None]
            pi_dyn = [a for a in s.where if a.static_triple is None]
            # The matcher gets the equality atoms of the static correlation (all of it if it has none),
            # the kernel the rest for the few candidates, as Cayuga's FR index hashes equality specs
            # only: registering "price > c" for every subscription makes the matcher's phase 1 mark
            # every satisfied constant of every event.  The static post-selection is evaluated by the
            # kernel, except its string orderings, which only the matcher can evaluate: they are
            # registered together with the correlation's part.
            th_reg, th_res = split_static(th_static)
            pi_reg = [a for a in pi_static if orders_string(a)]
            pi_res = [a for a in pi_static if not orders_string(a)]
            for group in (th_dyn, th_static, pi_dyn, pi_static, list(s.until), th_res, pi_res):
                lo = len(self.atom_rows)
                self.atom_rows.extend(c.atom_row(a) for a in group)
                rng += [lo, len(self.atom_rows)]
            self.node_rng[node] = rng
            self.node_theta_static[node] = bool(th_static)
            self.node_pi_static[node] = bool(pi_reg)
            if pi_reg:
                rows.append((2 * node + 1, [a.static_triple for a in th_reg + pi_reg]))
            self.node_idx_attr[node] = -1
            for a in th_dyn:
                lo_, ro_ = a.left, a.right
                if (a.op == "=" and lo_.ref is not None and lo_.ref.kind == "event" and not lo_.arith
                        and ro_.ref is not None and ro_.ref.kind == "bound" and not ro_.arith):
                    self.node_idx_attr[node] = self._col(lo_.ref.attr)
                    self.node_idx_col[node] = c.cols[(ro_.ref.step, ro_.ref.attr)]
                    break
            self.node_sg[node] = -1
            if th_static and not pi_reg and self.node_idx_attr[node] < 0:
                rows_sg.extend(self._join_step_group(node, th_reg))
            elif th_static:
                rows.append((2 * node, [a.static_triple for a in th_reg]))
            self.node_cap[node] = self._captures(c, k)
            lo = len(self.agg_rows)
            for a in s.aggregates:
                slot, fn = c.aggs[(k, a.name)]
                self.agg_rows.append((fn, self._col(a.attr) if a.attr else 0, slot))
            self.node_agg[node] = (lo, len(self.agg_rows))
        self.registered[p] = [r[0] for r in rows]
        self._spans[p] = (spans[0], len(self.atom_rows), spans[1], len(self.cap_rows), spans[2], len(self.agg_rows))
        self._live_rows += len(self.atom_rows) - spans[0] + len(self.cap_rows) - spans[1] + len(self.agg_rows) - spans[2]
        self._col("")  # column 0 always exists
        return rows + group_row + rows_sg

    def _join_step_group(self, node: int, th_reg: list[Atom]) -> list:
        """Steps whose correlation is static only (``name = "MSFT"``) and equal share one matcher entry and one
        instance list: an event probes the list once, not once per subscription."""
        self.node_sg[node], rows = self.step_groups.join(node, [a.static_triple for a in th_reg])
        return rows

    def _leave_step_groups(self, p: int) -> None:
        for node in range(p * K.STRIDE, (p + 1) * K.STRIDE):
            g = int(self.node_sg[node])
            if g >= 0:
                self.node_sg[node] = -1
                self._unregister(self.step_groups.leave(g, node))

    def _join_group(self, p: int, start_reg: list[Atom], start_res: list[Atom]) -> list:
        """File pattern slot ``p`` under its start group; the group's matcher row if the group is new.

        Members whose remaining start predicate is one ``attr <op> number`` (op one of < <= > >=) sit in
        the group's sorted threshold array: an event walks only the members it satisfies (plus one).
        """
        self.pat_group[p], rows = self.start_groups.join(p, [a.static_triple for a in start_reg])
        self.pat_tdir[p], self.pat_tcol[p], self.pat_thr[p], self.pat_teq[p] = 0, 0, 0.0, False
        if len(start_res) == 1:
            attr, op, v = start_res[0].static_triple
            if op in ("<", "<=", ">", ">=") and isinstance(v, (int, float)) and not isinstance(v, bool):
                self.pat_tdir[p] = 1 if op[0] == ">" else 2
                self.pat_tcol[p] = self._col(attr)
                self.pat_thr[p] = float(v)
                self.pat_teq[p] = op.endswith("=")
        return rows

    def _leave_group(self, p: int) -> None:
        g = int(self.pat_group[p])
        self.pat_group[p] = -1
        self._unregister(self.start_groups.leave(g, p))

    def _unregister(self, matcher_id: int | None) -> None:
        if matcher_id is not None:
            self.matcher.remove_bulk(np.array([matcher_id], np.int64))

    def _captures(self, c: Compiled, k: int) -> tuple[int, int]:
        lo = len(self.cap_rows)
        for (step, attr), col in c.cols.items():
            if step == k:
                self.cap_rows.append((self._col(attr), col))
        return lo, len(self.cap_rows)

    def _compact_rows(self) -> None:
        """Drop the atom, capture and aggregate rows of removed subscriptions, moving each live slot's ranges.

        A slot's rows are appended when it is installed and never reused, so under churn (ids created and deleted,
        never reused) the lists, and the kernel's tables built from them, would grow with every subscription ever
        seen.  Compacted once the dead rows pass an eighth of the live ones: O(1) amortised per removal (a
        compaction's pass over the live rows is paid by the eighth as many removals before it), and what churn
        adds before it is reclaimed stays within an eighth of what the live subscriptions hold.  The kernel's
        tables are compacted with the lists (the same rows gathered), not encoded again.
        """
        self._sync_rows()  # every row encoded: the tables keep the rows the lists keep
        atoms: list[tuple] = []
        caps: list[tuple[int, int]] = []
        aggs: list[tuple[int, int, int]] = []
        kept: list[tuple[int, int, int, int, int, int]] = []
        for p, (a0, a1, c0, c1, g0, g1) in sorted(self._spans.items(), key=lambda x: x[1]):
            da, dc, dg = len(atoms) - a0, len(caps) - c0, len(aggs) - g0
            atoms.extend(self.atom_rows[a0:a1])
            caps.extend(self.cap_rows[c0:c1])
            aggs.extend(self.agg_rows[g0:g1])
            kept.append((a0, a1, c0, c1, g0, g1))
            self._spans[p] = (a0 + da, a1 + da, c0 + dc, c1 + dc, g0 + dg, g1 + dg)
            for field in (self.start_lo, self.start_hi, self.start_res_lo, self.start_res_hi):
                field[p] += da
            base, steps = p * K.STRIDE, int(self.pat_nsteps[p])
            self.node_rng[base + 1: base + 1 + steps] += da
            self.node_cap[base: base + 1 + steps] += dc
            self.node_agg[base + 1: base + 1 + steps] += dg
        self.atom_rows, self.cap_rows, self.agg_rows = atoms, caps, aggs
        spans = np.array(kept, np.int64).reshape(-1, 6)
        first, rows = spans[:, 0::2], spans[:, 1::2] - spans[:, 0::2]  # (atoms, captures, aggregates) kept
        take, _ = csr_positions(first[:, 0], rows[:, 0])
        buf = aligned_rows(max(len(take), 1), K.A_WIDTH, np.float64)
        buf[: len(take)] = self._atom_buf[take]
        self._atom_buf = buf
        take, _ = csr_positions(first[:, 1], rows[:, 1])
        self._cap_bufs = [b[take] for b in self._cap_bufs]
        take, _ = csr_positions(first[:, 2], rows[:, 2])
        self._agg_bufs = [b[take] for b in self._agg_bufs]
        self._encoded = (len(atoms), len(caps), len(aggs))

    def _sync_tables(self) -> None:
        if not self._tables_dirty:
            return
        self._sync_rows()
        n = len(self.compiled)
        active = self.pat_active[:n] != 0
        nodes = np.arange(n * K.STRIDE)
        glob = (self.node_idx_attr[: n * K.STRIDE] >= 0) & (self.node_theta_static[: n * K.STRIDE] == 0)
        glob &= np.repeat(active, K.STRIDE)
        self.gcols = np.unique(self.node_idx_attr[nodes[glob]]).astype(np.int64)
        if self.mode != "dynamic":
            self.gcols = np.zeros(0, np.int64)
        self._sync_groups(n)
        self._tables_dirty = False

    def _sync_rows(self) -> None:
        """The atom, capture and aggregate rows as the kernel's arrays.  Rows are only appended between two
        compactions, so only the new ones are encoded, into arrays grown by doubling (the live tables are views of
        their first rows): a subscription change costs its own rows, not every row's."""
        ea, ec, eg = self._encoded
        na, nc, ng = len(self.atom_rows), len(self.cap_rows), len(self.agg_rows)
        if na > ea:
            self._atom_buf = appended(self._atom_buf if ea else None, ea, atom_matrix(self.atom_rows[ea:]),
                                      lambda rows: aligned_rows(rows, K.A_WIDTH, np.float64))
        self.atoms = self._atom_buf[:na] if na else atom_matrix([NO_ATOM])
        if nc > ec:
            new_caps = np.array(self.cap_rows[ec:], np.int64).T
            self._cap_bufs = [appended(b if ec else None, ec, col) for b, col in zip(self._cap_bufs, new_caps)]
        self.cap_ev, self.cap_col = (b[:nc] for b in self._cap_bufs) if nc else (ZERO, ZERO)
        if ng > eg:
            new_aggs = np.array(self.agg_rows[eg:], np.int64).T
            self._agg_bufs = [appended(b if eg else None, eg, col) for b, col in zip(self._agg_bufs, new_aggs)]
        self.ag_fn, self.ag_ev, self.ag_slot = (b[:ng] for b in self._agg_bufs) if ng else (ZERO,) * 3
        self._encoded = (na, nc, ng)

    def _sync_groups(self, n: int) -> None:
        """The start groups as arrays: per group a range of bands (threshold direction, attribute), per band a
        range of members sorted by threshold (ascending for > and >=, descending for < and <=)."""
        ps = np.flatnonzero(self.pat_group[:n] >= 0)
        g, d, col, thr = self.pat_group[ps], self.pat_tdir[ps], self.pat_tcol[ps], self.pat_thr[ps]
        col = np.where(d == 0, 0, col)
        skey = np.where(d == 1, thr, np.where(d == 2, -thr, 0.0))
        order = np.lexsort((ps, skey, col, d, g))
        ps, g, d, col, thr = ps[order], g[order], d[order], col[order], thr[order]
        self.mem_p = ps.astype(np.int64)
        self.mem_thr = thr.astype(np.float64)
        self.mem_eq = self.pat_teq[ps].astype(np.bool_)
        if len(ps):
            cut = np.flatnonzero((g[1:] != g[:-1]) | (d[1:] != d[:-1]) | (col[1:] != col[:-1])) + 1
            lo = np.concatenate([[0], cut]).astype(np.int64)
            hi = np.concatenate([cut, [len(ps)]]).astype(np.int64)
        else:
            lo = hi = np.zeros(0, np.int64)
        band_g = g[lo]
        ng = len(self.start_groups.keys)
        self.band_lo, self.band_hi, self.band_dir, self.band_col = lo, hi, d[lo].astype(np.int64), col[lo].astype(np.int64)
        self.grp_blo = np.searchsorted(band_g, np.arange(ng), "left").astype(np.int64)
        self.grp_bhi = np.searchsorted(band_g, np.arange(ng), "right").astype(np.int64)
        self.grp_size = np.bincount(g, minlength=ng).astype(np.int64) if ng else np.zeros(1, np.int64)

    # The kernel's named containers (:mod:`.kernel`), made afresh for each call: the arrays they hold are


def appended(buf: np.ndarray | None, n: int, new: np.ndarray, alloc=None) -> np.ndarray:
    """``buf``'s first ``n`` rows followed by ``new``, in ``buf`` when it has room, else in one twice the size
    (``alloc(rows)``: a zeroed buffer of that many rows; by default a plain array of ``new``'s dtype)."""
    if buf is None or n + len(new) > buf.shape[0]:
        rows = max(n + len(new), 2 * n)
        grown = alloc(rows) if alloc is not None else np.zeros(rows, new.dtype)
        if n:
            grown[:n] = buf[:n]
        buf = grown
    buf[n: n + len(new)] = new
    return buf


#: the kernel's tables of an engine without rows: one inert row each (the kernel never reads them)
NO_ATOM = (0, False, (0, 0, 0, 1.0, 0.0, False, 0, 0.0), (0, 0, 0, 1.0, 0.0, False, 0, 0.0))
ZERO = np.zeros(1, np.int64)


def atom_matrix(rows: list[tuple]) -> np.ndarray:
    """Atom rows (op, static, left side, right side) in the kernel's 64-byte layout (:mod:`.kernel`, A_WIDTH)."""
    def head(side: tuple) -> int:
        src, idx, aux, _mul, _add, arith, kind, _value = side
        if not 0 <= idx < 1 << 40:
            raise ValueError(f"atom operand index {idx} out of range")
        return src | aux << K.H_AUX | int(arith) << K.H_ARITH | kind << K.H_KIND | idx << K.H_IDX

    flat = np.array([(head(left) | op << K.H_OP | int(static) << K.H_STATIC, left[3], left[4], left[7],
                      head(right), right[3], right[4], right[7]) for op, static, left, right in rows], np.float64)
    at = aligned_rows(len(rows), K.A_WIDTH, np.float64)
    at[:] = flat.reshape(len(rows), K.A_WIDTH)
    return at


def orders_string(a: Atom) -> bool:
    t = a.static_triple
    return t is not None and isinstance(t[2], str) and t[1] not in ("=", "!=")


def split_static(atoms: list[Atom]) -> tuple[list[Atom], list[Atom]]:
    """(registered in the matcher, evaluated by the kernel): equalities and string orderings go to the matcher
    when there is an equality; otherwise everything does."""
    reg = [a for a in atoms if a.op == "=" or orders_string(a)]
    if not any(a.op == "=" for a in reg):
        return list(atoms), []
    return reg, [a for a in atoms if not (a.op == "=" or orders_string(a))]


def orders_strings(pattern: Pattern) -> bool:
    """Whether a static predicate orders strings (only the matcher evaluates those; the kernel compares codes)."""
    triples = list(pattern.start) + [a.static_triple for s in pattern.steps for a in s.correlate + s.where + s.until
                                     if a.static_triple is not None]
    return any(isinstance(v, str) and op not in ("=", "!=") for _, op, v in triples)


def event_ref(attr: str) -> Ref:
    return Ref("event", -1, attr)
