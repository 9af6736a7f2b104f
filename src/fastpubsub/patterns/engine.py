"""The pattern engine: compiled pattern sets, the Fabret matcher as first stage, the numba kernel.

Cayuga's three design challenges (EDBT 2006 section 3.2) map onto three parts:
static predicates go to one :class:`fastpubsub.engine.Matcher` (start, the
static part of every step's correlation, and of every post-selection; one
``match_encoded`` per batch says which automaton nodes are affected);
dynamic predicates are evaluated per instance in :mod:`.kernel`; affected
instances are found through the kernel's hash index on bound values
(``name = a.name``).  ``mode`` selects the ablations of docs/patterns.md:
"none" (no index: every instance sees every event), "static" (matcher only),
"dynamic" (matcher and the dynamic index).

The same semantics as the reference interpreter (tests/support/oracles/patterns.py), checked by
tests/patterns/test_pattern_engine.py.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from fastpubsub.engine import KIND_STRING, OPERATORS, EventBatch, Matcher, SubscriptionBatch

from . import kernel as K
from .language import MAX_STEPS, Atom, Operand, Pattern, to_json
from .witnesses import Witnesses
from ..state import KeyedStore, StateChanges

MODES = ("none", "static", "dynamic")
_MODE = {"none": K.MODE_NONE, "static": K.MODE_STATIC, "dynamic": K.MODE_DYNAMIC}
_FN = {"count": K.FN_COUNT, "sum": K.FN_SUM, "min": K.FN_MIN, "max": K.FN_MAX, "avg": K.FN_AVG}
_FN_NAME = {v: k for k, v in _FN.items()}
assert K.STRIDE == MAX_STEPS + 1
_VALUE_HEADER = struct.Struct("<B16sqqqqhhh")  # version, fingerprint, sid, node, start_ts, last_ts, steps, cols, aggs
_VERSION = 1


class Event(NamedTuple):
    """One event of a partition: its id (the offset), its timestamp (ms, event time) and attributes."""

    id: int
    ts: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Limits:
    """Bounded state (docs/patterns.md section 1.3)."""

    max_per_subscription: int = 10_000
    max_instances: int = 10_000_000


def fingerprint(pattern: Pattern) -> bytes:
    """16 bytes identifying a pattern's definition: a replaced subscription's old state is not restored."""
    return hashlib.blake2b(json.dumps(to_json(pattern), sort_keys=True).encode(), digest_size=16).digest()


class _Compiled:
    """One pattern's tables (before they are written into the engine's arrays)."""

    def __init__(self, pattern: Pattern, engine: "PatternEngine") -> None:
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


class _Groups:
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


class PatternEngine:
    """Pattern subscriptions over one partition's events, the fast path (docs/patterns.md section 3)."""

    #: Dead atom, capture and aggregate rows tolerated beyond the live ones before a compaction (see _compact_rows).
    ROW_SLACK = 1024

    def __init__(self, mode: str = "dynamic", limits: Limits | None = None, *, matcher_algorithm: str = "dynamic",
                 capacity: int = 1024, track_changes: bool = False) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        self.mode = mode
        self.track_changes = track_changes
        self.limits = limits or Limits()
        self.matcher = Matcher(matcher_algorithm)
        self.attr_cols: dict[str, int] = {}
        self.strings: dict[str, int] = {}  # string values of referenced attributes -> codes (per engine)
        self.string_list: list[str] = []
        self.sid_slot: dict[int, int] = {}
        self.compiled: list[_Compiled | None] = []
        self.free_p: list[int] = []
        self.registered: dict[int, list[int]] = {}
        # merged start states: subscriptions whose start has the same matcher part share one matcher entry
        # (a group, members pattern slots); its members' remaining threshold (price > c) is one sorted array per
        # group.  Steps with the same static-only correlation share one too (members nodes).
        self.start_groups = _Groups(K.GROUP_BASE)
        self.step_groups = _Groups(K.STEP_BASE)
        self.atom_rows: list[tuple] = []
        self.cap_rows: list[tuple[int, int]] = []
        self.agg_rows: list[tuple[int, int, int]] = []
        self._spans: dict[int, tuple[int, int, int, int, int, int]] = {}  # slot -> its atom, capture, aggregate rows
        self._live_rows = 0  # rows of the three lists that live slots own (the rest: removed ones', until compacted)
        self.n_cols = 1
        self.n_aggs = 1
        self._tables_dirty = True
        self._encoded = (0, 0, 0)  # atom, capture and aggregate rows already in the kernel's tables
        self._atom_buf = _atom_matrix([_NO_ATOM])
        self._cap_bufs: list[np.ndarray] = [_ZERO, _ZERO]
        self._agg_bufs: list[np.ndarray] = [_ZERO, _ZERO, _ZERO]
        self.st = np.zeros(K.ST_SIZE, np.int64)
        self.st[K.ST_WM] = K.EMPTY
        self.st[K.ST_BATCH] = 1
        self.st[K.ST_TRACK] = int(track_changes)
        self._alloc_patterns(16)
        self._alloc_slots(capacity)
        self._alloc_hash(4 * capacity)
        self.heap = _aligned_rows(capacity + K.HEAP_BASE, 2)
        self._alloc_witnesses(capacity)
        self.tomb_key = np.zeros((capacity, 1 + K.STRIDE), np.int64)
        self.tomb_off = np.zeros(capacity, np.int64)
        self.last_id = -1
        self._dropped = 0
        self._sync_tables()  # the kernel's tables exist from the start (a removal passes them without syncing)

    # -- allocation ----------------------------------------------------------
    # Per-node and per-pattern fields are columns of one row-major matrix each: the kernel reads a
    # node's (or pattern's) fields together, so they share cache lines (the arrays below are views).
    _NODE_FIELDS = (("node_op", 1, -1), ("node_theta_static", 1, 0), ("node_pi_static", 1, 0), ("node_rng", 14, 0),
                    ("node_idx_attr", 1, -1), ("node_idx_col", 1, 0), ("node_cap", 2, 0), ("node_agg", 2, 0))
    _PAT_FIELDS = (("pat_sid", 1, 0), ("pat_within", 1, 0), ("pat_since", 1, 0), ("pat_nsteps", 1, 0),
                   ("pat_active", 1, 0), ("pat_live", 1, 0), ("start_lo", 1, 0), ("start_hi", 1, 0),
                   ("start_res_lo", 1, 0), ("start_res_hi", 1, 0), ("cre_cnt", 1, 0), ("cre_dec", 1, 0))

    def _alloc_patterns(self, n: int) -> None:
        old_nodes = getattr(self, "NODE", None)
        old_pats = getattr(self, "PAT", None)
        nodes = n * K.STRIDE
        for attr, fields, rows, dtype in (("NODE", self._NODE_FIELDS, nodes, np.int32),
                                          ("PAT", self._PAT_FIELDS, n, np.int64)):
            width = sum(w for _, w, _ in fields)
            mat = np.zeros((rows, width), dtype)
            col = 0
            for _, w, fill in fields:
                mat[:, col: col + w] = fill
                col += w
            old = old_nodes if attr == "NODE" else old_pats
            if old is not None:
                mat[: len(old)] = old
            setattr(self, attr, mat)
            col = 0
            for name, w, _ in fields:
                setattr(self, name, mat[:, col] if w == 1 else mat[:, col: col + w])
                col += w
        mark = np.full(nodes, -1, np.int64)
        if old_nodes is not None:
            mark[: len(self.pi_mark)] = self.pi_mark
        self.pi_mark = mark
        sg = np.full(nodes, -1, np.int64)
        if old_nodes is not None:
            sg[: len(self.node_sg)] = self.node_sg
        self.node_sg = sg
        for name, dtype, fill in (("pat_group", np.int64, -1), ("pat_tdir", np.int64, 0), ("pat_tcol", np.int64, 0),
                                  ("pat_thr", np.float64, 0.0), ("pat_teq", np.bool_, False)):
            arr = np.full(n, fill, dtype)
            if old_pats is not None:
                old = getattr(self, name)
                arr[: len(old)] = old
            setattr(self, name, arr)
        self.n_pat_cap = n

    def _alloc_slots(self, cap: int) -> None:
        old_cap = getattr(self, "slot_cap", 0)
        spec = [("inst_alive", np.bool_, ()), ("inst_p", np.int64, ()), ("inst_node", np.int64, ()),
                ("inst_start", np.int64, ()), ("inst_last", np.int64, ()), ("inst_deadline", np.int64, ()),
                ("inst_list", np.int64, ()), ("inst_next", np.int64, ()), ("inst_prev", np.int64, ()),
                ("inst_changed", np.int64, ()), ("bound", np.int64, (K.STRIDE,)),
                ("iters", np.int64, (K.STRIDE,)), ("iv_kind", np.int8, (self.n_cols,)),
                ("iv_num", np.float64, (self.n_cols,)), ("acc", np.float64, (self.n_aggs,)),
                ("accn", np.int64, (self.n_aggs,)), ("dirty_mark", np.int64, ()), ("dirty", np.int64, ()),
                ("affected", np.int64, ()), ("cre_p", np.int64, ()), ("cre_parent", np.int64, ()),
                ("cre_key", np.int64, ()), ("cre_order", np.int64, ()), ("cre_tmp", np.int64, ())]
        for name, dt, shape in spec:
            arr = np.zeros((cap,) + shape, dt)
            if name == "inst_list":
                arr[:] = -1
            if name == "inst_deadline":
                arr[:] = K.EMPTY
            if old_cap:
                cur = getattr(self, name)
                if arr.ndim == 2:
                    arr[: old_cap, : cur.shape[1]] = cur
                else:
                    arr[: old_cap] = cur
            setattr(self, name, arr)
        free = np.zeros(cap, np.int64)
        if old_cap:
            n_free = int(self.st[K.ST_FREE])
            free[:n_free] = self.free[:n_free]
            add = np.arange(cap - 1, old_cap - 1, -1, dtype=np.int64)
            free[n_free: n_free + len(add)] = add
            self.st[K.ST_FREE] = n_free + len(add)
        else:
            free[:] = np.arange(cap - 1, -1, -1)
            self.st[K.ST_FREE] = cap
        self.free = free
        self.slot_cap = cap

    def _widen(self, n_cols: int, n_aggs: int) -> None:
        """More value columns or aggregate slots per instance (a pattern needing more was added)."""
        for name, width in (("iv_kind", n_cols), ("iv_num", n_cols), ("acc", n_aggs), ("accn", n_aggs)):
            cur = getattr(self, name)
            if cur.shape[1] < width:
                arr = np.zeros((cur.shape[0], width), cur.dtype)
                arr[:, : cur.shape[1]] = cur
                setattr(self, name, arr)
        if n_aggs > self.n_aggs:
            self.n_aggs = n_aggs
            self._alloc_witnesses(len(self.w_p))
        self.n_cols = max(self.n_cols, n_cols)

    def _alloc_hash(self, n: int) -> None:
        size = 1 << max(4, int(n - 1).bit_length())
        self.hk = np.zeros((size, 4), np.int64)
        self.hk[:, 0] = K.EMPTY
        self.hval = np.zeros(size, np.int64)
        self.list_head = np.full(size, -1, np.int64)

    def _alloc_witnesses(self, n: int) -> None:
        self.w_p = np.zeros(n, np.int64)
        self.w_ev = np.zeros(n, np.int64)
        self.w_bound = np.zeros((n, K.STRIDE), np.int64)
        self.w_iters = np.zeros((n, K.STRIDE), np.int64)
        self.w_acc = np.zeros((n, self.n_aggs), np.float64)
        self.w_accn = np.zeros((n, self.n_aggs), np.int64)
        self.w_start = np.zeros(n, np.int64)

    # -- dictionaries --------------------------------------------------------
    def _col(self, attr: str) -> int:
        return self.attr_cols.setdefault(attr, len(self.attr_cols))

    def _code(self, s: str) -> int:
        code = self.strings.get(s)
        if code is None:
            code = self.strings[s] = len(self.string_list)
            self.string_list.append(s)
        return code

    # -- subscriptions -------------------------------------------------------
    def subscribe(self, sid: int, pattern: Pattern, since_ms: int = 0) -> None:
        """Add or replace a pattern subscription; a replaced one loses its instances."""
        self.subscribe_many([(sid, pattern, since_ms)])

    def subscribe_many(self, items: Iterable[tuple[int, Pattern, int]]) -> None:
        """Add or replace many subscriptions; their static parts go to the matcher in one bulk insertion."""
        rows: list[tuple[int, list]] = []
        latest = {int(sid): (pattern, since) for sid, pattern, since in items}  # a repeated id: the last wins
        for sid, (pattern, since) in latest.items():
            if not isinstance(pattern, Pattern):
                raise ValueError(f"subscription {sid}: expected a compiled Pattern")
            if sid in self.sid_slot:
                self.unsubscribe(sid)
            rows.extend(self._install(int(sid), pattern, int(since)))
        if rows:
            self.matcher.add_bulk(SubscriptionBatch.from_lists(rows))
        self._tables_dirty = True

    def _install(self, sid: int, pattern: Pattern, since: int) -> list:
        if self.mode == "none" and orders_strings(pattern):
            raise ValueError(f"subscription {sid}: mode 'none' (an ablation without the matcher) cannot order strings")
        c = _Compiled(pattern, self)
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
        start_atoms = [Atom(Operand(_event_ref(a)), op, Operand(None, v)) for a, op, v in pattern.start]
        start_reg, start_res = _split_static(start_atoms)
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
            th_reg, th_res = _split_static(th_static)
            pi_reg = [a for a in pi_static if _orders_string(a)]
            pi_res = [a for a in pi_static if not _orders_string(a)]
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

    def _captures(self, c: _Compiled, k: int) -> tuple[int, int]:
        lo = len(self.cap_rows)
        for (step, attr), col in c.cols.items():
            if step == k:
                self.cap_rows.append((self._col(attr), col))
        return lo, len(self.cap_rows)

    def unsubscribe(self, sid: int) -> None:
        """Delete a subscription and drop its instances; ``KeyError`` if unknown."""
        p = self.sid_slot.pop(sid)
        self.matcher.remove_bulk(np.array(self.registered.pop(p), np.int64))
        self._leave_group(p)
        self._leave_step_groups(p)
        # freeing reads the slot's own arrays (node_op, pat_sid), never the derived tables: no sync here, or a
        # churn of single changes would rebuild them once per removal
        while True:
            dropped = int(K.drop_pattern(p, self._automata(), self._instances(), self._changes(), self.st,
                                         self.last_id))
            self._dropped += dropped if dropped >= 0 else -1 - dropped
            if dropped >= 0:
                break
            self._grow_tombstones(int(self.st[K.ST_LIVE]))
        if not self.track_changes:
            self._new_epoch()
        self.pat_active[p] = False
        self.node_op[p * K.STRIDE: (p + 1) * K.STRIDE] = -1
        self.compiled[p] = None
        self.free_p.append(p)
        a0, a1, c0, c1, g0, g1 = self._spans.pop(p)
        self._live_rows -= a1 - a0 + c1 - c0 + g1 - g0
        if len(self.atom_rows) + len(self.cap_rows) + len(self.agg_rows) > 2 * self._live_rows + self.ROW_SLACK:
            self._compact_rows()
        self._tables_dirty = True

    def _compact_rows(self) -> None:
        """Drop the atom, capture and aggregate rows of removed subscriptions, moving each live slot's ranges.

        A slot's rows are appended when it is installed and never reused, so under churn (ids created and deleted,
        never reused) the lists, and the kernel's tables built from them, would grow with every subscription ever
        seen.  Compacted once the dead rows outnumber the live ones: O(1) amortised per removal.
        """
        atoms: list[tuple] = []
        caps: list[tuple[int, int]] = []
        aggs: list[tuple[int, int, int]] = []
        for p, (a0, a1, c0, c1, g0, g1) in sorted(self._spans.items(), key=lambda x: x[1]):
            da, dc, dg = len(atoms) - a0, len(caps) - c0, len(aggs) - g0
            atoms.extend(self.atom_rows[a0:a1])
            caps.extend(self.cap_rows[c0:c1])
            aggs.extend(self.agg_rows[g0:g1])
            self._spans[p] = (a0 + da, a1 + da, c0 + dc, c1 + dc, g0 + dg, g1 + dg)
            for field in (self.start_lo, self.start_hi, self.start_res_lo, self.start_res_hi):
                field[p] += da
            base, steps = p * K.STRIDE, int(self.pat_nsteps[p])
            self.node_rng[base + 1: base + 1 + steps] += da
            self.node_cap[base: base + 1 + steps] += dc
            self.node_agg[base + 1: base + 1 + steps] += dg
        self.atom_rows, self.cap_rows, self.agg_rows = atoms, caps, aggs
        self._encoded = (0, 0, 0)  # rows moved: the tables are encoded afresh

    def __contains__(self, sid: int) -> bool:
        return sid in self.sid_slot

    # -- tables for the kernel ----------------------------------------------
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
            new = _atom_matrix(self.atom_rows[ea:])
            if ea == 0 or na > self._atom_buf.shape[0]:
                buf = _aligned_rows(max(na, 2 * ea), K.A_WIDTH, np.float64)
                buf[:ea] = self._atom_buf[:ea] if ea else 0.0
                self._atom_buf = buf
            self._atom_buf[ea:na] = new
        self.atoms = self._atom_buf[:na] if na else _atom_matrix([_NO_ATOM])
        if nc > ec:
            new_caps = np.array(self.cap_rows[ec:], np.int64).T
            self._cap_bufs = [_appended(b if ec else None, ec, col) for b, col in zip(self._cap_bufs, new_caps)]
        self.cap_ev, self.cap_col = (b[:nc] for b in self._cap_bufs) if nc else (_ZERO, _ZERO)
        if ng > eg:
            new_aggs = np.array(self.agg_rows[eg:], np.int64).T
            self._agg_bufs = [_appended(b if eg else None, eg, col) for b, col in zip(self._agg_bufs, new_aggs)]
        self.ag_fn, self.ag_ev, self.ag_slot = (b[:ng] for b in self._agg_bufs) if ng else (_ZERO,) * 3
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
    # replaced when they grow.
    def _groups(self) -> K.GroupArrays:
        return K.GroupArrays(*(getattr(self, f) for f in K.GroupArrays._fields))

    def _automata(self) -> K.AutomatonArrays:
        return K.AutomatonArrays(*(self._groups() if f == "groups" else getattr(self, f)
                                   for f in K.AutomatonArrays._fields))

    def _instances(self) -> K.InstanceArrays:
        return K.InstanceArrays(*(self.iv_num.view(np.int64) if f == "iv_bits" else getattr(self, f)
                                  for f in K.InstanceArrays._fields))

    def _scratch(self) -> K.KernelScratch:
        return K.KernelScratch(*(getattr(self, f) for f in K.KernelScratch._fields))

    def _changes(self) -> K.ChangeArrays:
        return K.ChangeArrays(self.dirty, self.dirty_mark, self.tomb_key, self.tomb_off)

    def _witness_rows(self) -> K.WitnessArrays:
        return K.WitnessArrays(self.w_p, self.w_ev, self.w_bound, self.w_iters, self.w_acc, self.w_accn, self.w_start)

    def set_mode(self, mode: str) -> None:
        """Switch the ablation mode; live instances are refiled."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        if mode == "none" and any(c is not None and orders_strings(c.pattern) for c in self.compiled):
            raise ValueError("mode 'none' (an ablation without the matcher) cannot order strings")
        self.mode = mode
        self._tables_dirty = True
        self._sync_tables()
        self._relist()

    def _relist(self, size: int | None = None) -> None:
        live = int(self.st[K.ST_LIVE])
        self._alloc_hash(size or max(4 * live + 64, len(self.hk)))
        K.rebuild_lists(_MODE[self.mode], self._automata(), self._instances(), self.st)

    # -- events --------------------------------------------------------------
    def _event_matrix(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        n = len(batch)
        a = max(1, len(self.attr_cols))
        ev_kind = np.full((n, a), -1, np.int8)
        ev_num = np.zeros((n, a), np.float64)
        names = list(batch.attribute_names)
        name_col = np.array([self.attr_cols.get(x, -1) for x in names] or [-1], np.int64)
        attrs = np.asarray(batch.attributes, np.int64)
        cols = name_col[attrs] if len(attrs) else np.zeros(0, np.int64)
        row = np.repeat(np.arange(n), np.diff(np.asarray(batch.offsets, np.int64)))
        kinds = np.asarray(batch.kinds)
        nums = np.asarray(batch.numbers, np.float64).copy()
        is_str = kinds == KIND_STRING
        if is_str.any():
            str_pos = np.flatnonzero(is_str)
            used = cols[str_pos] >= 0
            if used.any():
                strings = np.asarray(batch.strings, dtype=object)[np.flatnonzero(used)]
                uniq, inv = np.unique(strings.astype(str), return_inverse=True)
                codes = np.array([self._code(s) for s in uniq.tolist()], np.float64)
                nums[str_pos[used]] = codes[inv]
        sel = cols >= 0
        ev_kind[row[sel], cols[sel]] = kinds[sel]
        ev_num[row[sel], cols[sel]] = nums[sel] + 0.0
        return ev_kind, ev_num

    def process_events(self, events: Sequence[Event | tuple]) -> Witnesses:
        """Convenience: events as ``(id, ts, attributes)`` (builds the :class:`EventBatch`)."""
        events = [Event(*e) for e in events]
        return self.process(EventBatch.from_dicts([e.attributes for e in events]),
                            np.array([e.id for e in events], np.int64), np.array([e.ts for e in events], np.int64))

    def process(self, batch: EventBatch, ids: np.ndarray, ts: np.ndarray) -> Witnesses:
        """Process a batch of one partition's events in offset order; the witnesses it completes.

        The result is a sequence of :class:`Witness` kept as arrays until read
        (:class:`~fastpubsub.patterns.witnesses.Witnesses`).

        ``ids``: the events' ids (their offsets), ``ts``: their timestamps (ms, event time).
        """
        n = len(batch)
        ids = np.ascontiguousarray(ids, np.int64)
        ts = np.ascontiguousarray(ts, np.int64)
        if len(ids) != n or len(ts) != n:
            raise ValueError("process: ids and ts need one entry per event")
        self._sync_tables()
        self.st[K.ST_CALL] += 1
        if not self.track_changes:
            self._new_epoch()
        self._maintain()
        mode = _MODE[self.mode]
        if mode == K.MODE_NONE:
            m_off = np.zeros(n + 1, np.int64)
            m_ids = np.zeros(0, np.int64)
            n_start = np.full(n, len(self.compiled), np.int64)
        else:
            matches = self.matcher.match_encoded(batch)
            m_off, m_ids = matches.offsets.astype(np.int64), matches.ids.astype(np.int64)
            node = m_ids >> 1
            is_group = ((m_ids & 1) == 0) & (node >= K.GROUP_BASE) & (node < K.STEP_BASE)
            starts = np.zeros(len(m_ids), np.int64)
            starts[is_group] = self.grp_size[node[is_group] - K.GROUP_BASE]
            cs = np.concatenate([[0], np.cumsum(starts)])
            n_start = (cs[m_off[1:]] - cs[m_off[:-1]]).astype(np.int64)
        ev_kind, ev_num = self._event_matrix(batch)
        events = K.BatchArrays(ts, ids, ev_kind, ev_num, ev_num.view(np.int64), m_off, m_ids, n_start)
        automata = self._automata()
        parts = []
        i = 0
        while True:
            i = K.process_kernel(i, mode, self.limits.max_per_subscription, self.limits.max_instances, events,
                                 automata, self._instances(), self._scratch(), self._changes(), self._witness_rows(),
                                 self.st)
            parts.append(self._drain(ts))
            if i >= n:
                break
            self._reserve(int(n_start[i]))
        if n:
            self.last_id = int(ids[-1])
        return Witnesses.concat(parts)

    def _reserve(self, starts: int) -> None:
        """Grow whatever bound stopped the kernel (module docstring of :mod:`.kernel`)."""
        st = self.st
        live = int(st[K.ST_LIVE])
        need = starts + int(st[K.ST_FOLDLIVE])
        if st[K.ST_FREE] < need or len(self.affected) < live or len(self.cre_p) < need:
            self._alloc_slots(max(2 * self.slot_cap, live + 2 * need + 64))
        if self._heap_room() - st[K.ST_HEAP] < need:
            self._compact_heap(max(2 * self._heap_room(), int(st[K.ST_HEAP]) + 2 * need + 64))
        if len(self.w_p) - st[K.ST_WIT] < live + starts:
            self._alloc_witnesses(max(2 * len(self.w_p), 2 * (live + starts) + 64))
        if 10 * (st[K.ST_KEYS] + live + need) > 7 * len(self.hk) or len(self.list_head) - st[K.ST_LISTS] < live + need:
            self._relist(4 * (live + need) + 64)
        if len(self.tomb_key) - st[K.ST_TOMB] < live + need:
            self._grow_tombstones(live + need)

    def _grow_tombstones(self, need: int) -> None:
        grow = max(2 * len(self.tomb_key), int(self.st[K.ST_TOMB]) + 2 * need + 64)
        tk = np.zeros((grow, 1 + K.STRIDE), np.int64)
        to = np.zeros(grow, np.int64)
        tk[: len(self.tomb_key)] = self.tomb_key
        to[: len(self.tomb_off)] = self.tomb_off
        self.tomb_key, self.tomb_off = tk, to

    def _heap_room(self) -> int:
        return len(self.heap) - K.HEAP_BASE

    def _compact_heap(self, size: int) -> None:
        """Drop the stale entries (ended instances) and resize; a sorted array is a heap."""
        n = int(self.st[K.ST_HEAP])
        d, s = self.heap[K.HEAP_BASE: K.HEAP_BASE + n, 0], self.heap[K.HEAP_BASE: K.HEAP_BASE + n, 1]
        keep = self.inst_deadline[s] == d
        d, s = d[keep], s[keep]
        order = np.argsort(d, kind="stable")
        size = max(size, 2 * len(order) + 64)
        heap = _aligned_rows(size + K.HEAP_BASE, 2)
        heap[K.HEAP_BASE: K.HEAP_BASE + len(order), 0] = d[order]
        heap[K.HEAP_BASE: K.HEAP_BASE + len(order), 1] = s[order]
        self.heap = heap
        self.st[K.ST_HEAP] = len(order)

    def _maintain(self) -> None:
        """Between batches: drop stale heap entries and empty index keys when they dominate."""
        live = int(self.st[K.ST_LIVE])
        if self.st[K.ST_HEAP] > 4 * live + 4096:
            self._compact_heap(self._heap_room())
        if self.st[K.ST_KEYS] > 4 * live + 4096:
            self._relist(4 * live + 64)

    def _drain(self, ts: np.ndarray) -> Witnesses:
        """The kernel's witness rows as a :class:`Witnesses` (copied: the buffers are reused)."""
        n = int(self.st[K.ST_WIT])
        self.st[K.ST_WIT] = 0
        slot = self.w_p[:n].copy()
        labels = {}
        if n:
            for p in np.unique(slot).tolist():
                lab = self.compiled[p].labels
                if lab:
                    labels[p] = lab
        return Witnesses(self.pat_sid[slot], self.pat_nsteps[slot] + 1, self.w_bound[:n].copy(),
                         self.w_iters[:n].copy(), self.w_start[:n].copy(), ts[self.w_ev[:n]], self.w_acc[:n].copy(),
                         self.w_accn[:n].copy(), slot, labels)

    # -- state: changes, export, restore (docs/patterns.md section 4) ---------
    def _new_epoch(self) -> None:
        self.st[K.ST_BATCH] += 1
        self.st[K.ST_DIRTY] = 0
        self.st[K.ST_TOMB] = 0

    def _key_rows(self, slots: np.ndarray) -> np.ndarray:
        """Instance keys: subscription id, start event id, and the exit event of every fold already left."""
        p = self.inst_p[slots]
        keys = np.full((len(slots), 1 + K.STRIDE), -1, np.int64)
        keys[:, 0] = self.pat_sid[p]
        keys[:, 1] = self.bound[slots, 0]
        for k in range(1, K.STRIDE):
            left = (k < self.inst_node[slots]) & (self.node_op[p * K.STRIDE + k] == K.OP_FOLD)
            keys[left, 1 + k] = self.bound[slots[left], k]
        return keys

    def _value(self, s: int) -> bytes:
        p = int(self.inst_p[s])
        c = self.compiled[p]
        ns, nc, na = len(c.pattern.steps) + 1, len(c.cols), len(c.aggs)
        head = _VALUE_HEADER.pack(_VERSION, c.fp, int(self.pat_sid[p]), int(self.inst_node[s]), int(self.inst_start[s]),
                                  int(self.inst_last[s]), ns, nc, na)
        kinds, nums = self.iv_kind[s, :nc], self.iv_num[s, :nc].copy()
        strings = []  # codes are per engine: strings travel as text
        for j in np.flatnonzero(kinds == KIND_STRING):
            strings.append(self.string_list[int(nums[j])].encode())
            nums[j] = len(strings) - 1
        tail = b"".join(struct.pack("<I", len(b)) + b for b in strings)
        return b"".join((head, self.bound[s, :ns].tobytes(), self.iters[s, :ns].tobytes(), kinds.tobytes(),
                         nums.tobytes(), self.acc[s, :na].tobytes(), self.accn[s, :na].tobytes(), tail))

    def changes(self) -> StateChanges:
        """The state changes since the last call (needs ``track_changes=True``), each tagged with its source offset.

        Tombstones for instances that ended, then one put per instance that
        changed; plus the partition's event time under the key ``b"meta"``.
        """
        if not self.track_changes:
            raise ValueError("changes() needs PatternEngine(track_changes=True)")
        nt = int(self.st[K.ST_TOMB])
        keys = [row.tobytes() for row in self.tomb_key[:nt]]
        values: list[bytes | None] = [None] * nt
        offsets = [self.tomb_off[:nt]]
        dirty = self.dirty[: int(self.st[K.ST_DIRTY])]
        dirty = dirty[self.inst_alive[dirty]]
        keys += [row.tobytes() for row in self._key_rows(dirty)]
        values += [self._value(int(s)) for s in dirty]
        offsets.append(self.inst_changed[dirty])
        if self.last_id >= 0:
            keys.append(b"meta")
            values.append(struct.pack("<qq", int(self.st[K.ST_WM]), self.last_id))
            offsets.append(np.array([self.last_id], np.int64))
        self._new_epoch()
        return StateChanges(keys, values, np.concatenate(offsets))

    def export_state(self) -> StateChanges:
        """Every live instance as a put (a full snapshot in the changelog's format)."""
        slots = np.flatnonzero(self.inst_alive)
        keys = [row.tobytes() for row in self._key_rows(slots)]
        values: list[bytes | None] = [self._value(int(s)) for s in slots]
        offsets = [self.inst_changed[slots]]
        if self.last_id >= 0:
            keys.append(b"meta")
            values.append(struct.pack("<qq", int(self.st[K.ST_WM]), self.last_id))
            offsets.append(np.array([self.last_id], np.int64))
        return StateChanges(keys, values, np.concatenate(offsets))

    def restore(self, store: "KeyedStore") -> int:
        """Load the instances of a restored :class:`~fastpubsub.state.KeyedStore` into an engine without instances.

        Instances of subscriptions that are gone or whose pattern changed are
        skipped (counted as dropped).  Returns the number restored.
        """
        if self.live():
            raise ValueError("restore needs an engine without live instances")
        self._sync_tables()
        restored = 0
        for key, (value, _off, _part) in store.data.items():
            if key == b"meta":
                wm, last = struct.unpack("<qq", value)
                self.st[K.ST_WM] = wm
                self.last_id = last
                continue
            ver, fp, sid, node, start, last, ns, nc, na = _VALUE_HEADER.unpack_from(value)
            p = self.sid_slot.get(sid)
            if ver != _VERSION or p is None or self.compiled[p].fp != fp:
                self._dropped += 1
                continue
            if self.st[K.ST_FREE] == 0:
                self._alloc_slots(2 * self.slot_cap)
            self.st[K.ST_FREE] -= 1
            s = int(self.free[self.st[K.ST_FREE]])
            pos = _VALUE_HEADER.size
            def take(dtype, count):
                nonlocal pos
                arr = np.frombuffer(value, dtype, count, pos)
                pos += arr.nbytes
                return arr
            self.bound[s] = -1
            self.iters[s] = 0
            self.bound[s, :ns] = take(np.int64, ns)
            self.iters[s, :ns] = take(np.int64, ns)
            self.iv_kind[s, :nc] = take(np.int8, nc)
            self.iv_num[s, :nc] = take(np.float64, nc)
            self.acc[s, :na] = take(np.float64, na)
            self.accn[s, :na] = take(np.int64, na)
            strings = []
            while pos < len(value):
                (length,) = struct.unpack_from("<I", value, pos)
                strings.append(value[pos + 4: pos + 4 + length].decode())
                pos += 4 + length
            for j in np.flatnonzero(self.iv_kind[s, :nc] == KIND_STRING):
                self.iv_num[s, j] = self._code(strings[int(self.iv_num[s, j])])
            self.inst_alive[s] = True
            self.inst_p[s] = p
            self.inst_node[s] = node
            self.inst_start[s] = start
            self.inst_last[s] = last
            self.inst_changed[s] = _off
            self.pat_live[p] += 1
            self.st[K.ST_LIVE] += 1
            if self.node_op[p * K.STRIDE + node] == K.OP_FOLD:
                self.st[K.ST_FOLDLIVE] += 1
            if self.st[K.ST_HEAP] >= self._heap_room():
                self._compact_heap(2 * self._heap_room())
            self.inst_deadline[s] = start + int(self.pat_within[p])
            K._heap_push(self.heap, self.st, int(self.inst_deadline[s]), s)
            restored += 1
        self._relist()
        return restored

    # -- observation ---------------------------------------------------------
    def live(self) -> int:
        return int(self.st[K.ST_LIVE])

    def bound_event_ids(self) -> np.ndarray:
        """The ids of the events that live instances have bound (sorted, unique): the events whose contents a
        later witness may carry (``patterns.contents``)."""
        ids = self.bound[self.inst_alive]
        return np.unique(ids[ids >= 0])

    @property
    def counters(self) -> dict[str, int]:
        st = self.st
        return {"started": int(st[K.ST_STARTED]), "completed": int(st[K.ST_COMPLETED]), "killed": int(st[K.ST_KILLED]),
                "expired": int(st[K.ST_EXPIRED]), "refused": int(st[K.ST_REFUSED]), "dropped": self._dropped,
                "affected": int(st[K.ST_AFFECTED]), "probes": int(st[K.ST_PROBES])}

    def instance_bytes(self) -> int:
        """Bytes of one instance slot (all per-slot arrays): converts the global byte bound to a count."""
        return sum(getattr(self, n)[:1].nbytes for n in (
            "inst_alive", "inst_p", "inst_node", "inst_start", "inst_last", "inst_deadline", "inst_list", "inst_next",
            "inst_prev", "inst_changed", "bound", "iters", "iv_kind", "iv_num", "acc", "accn",
            "dirty_mark", "dirty", "affected", "cre_p", "cre_parent", "cre_key", "cre_order", "cre_tmp",
            "free")) + 2 * 8 + 4 * 8 * 2

    def memory_by_structure(self) -> dict[str, int]:
        """Bytes by structure (the instance store and its indexes, the matcher of its atoms) and the rows the
        pattern tables hold: what ``/metrics`` shows, so that growth under subscription churn is seen early."""
        return {"instances": self.memory_bytes(), "matcher": self.matcher.memory_bytes()}

    def rows(self) -> int:
        """Rows of atoms, captures and aggregates the installed patterns hold (compacted once dead ones dominate)."""
        return len(self.atom_rows) + len(self.cap_rows) + len(self.agg_rows)

    def memory_bytes(self) -> int:
        """Bytes held by the instance store, indexes and buffers (not the matcher): each array's own buffer once,
        views (the node and pattern fields, the cache-aligned heap and atoms) counted through it."""
        buffers = {}
        for v in vars(self).values():
            if isinstance(v, np.ndarray):
                while isinstance(v.base, np.ndarray):
                    v = v.base
                buffers[id(v)] = v.nbytes
        return sum(buffers.values())


def _aligned_rows(rows: int, width: int, dtype=np.int64) -> np.ndarray:
    """A zeroed 8-byte matrix whose first row starts on a 64-byte cache line (numpy aligns to 16 bytes only)."""
    buf = np.zeros(rows * width + 8, dtype)
    skip = (-buf.ctypes.data % 64) // 8
    return buf[skip: skip + rows * width].reshape(rows, width)


def _appended(buf: np.ndarray | None, n: int, new: np.ndarray) -> np.ndarray:
    """``buf``'s first ``n`` values followed by ``new``, in ``buf`` when it has room, else in one twice the size."""
    if buf is None or n + len(new) > buf.shape[0]:
        grown = np.zeros(max(n + len(new), 2 * n), new.dtype)
        if n:
            grown[:n] = buf[:n]
        buf = grown
    buf[n: n + len(new)] = new
    return buf


#: the kernel's tables of an engine without rows: one inert row each (the kernel never reads them)
_NO_ATOM = (0, False, (0, 0, 0, 1.0, 0.0, False, 0, 0.0), (0, 0, 0, 1.0, 0.0, False, 0, 0.0))
_ZERO = np.zeros(1, np.int64)


def _atom_matrix(rows: list[tuple]) -> np.ndarray:
    """Atom rows (op, static, left side, right side) in the kernel's 64-byte layout (:mod:`.kernel`, A_WIDTH)."""
    def head(side: tuple) -> int:
        src, idx, aux, _mul, _add, arith, kind, _value = side
        if not 0 <= idx < 1 << 40:
            raise ValueError(f"atom operand index {idx} out of range")
        return src | aux << K.H_AUX | int(arith) << K.H_ARITH | kind << K.H_KIND | idx << K.H_IDX

    flat = np.array([(head(left) | op << K.H_OP | int(static) << K.H_STATIC, left[3], left[4], left[7],
                      head(right), right[3], right[4], right[7]) for op, static, left, right in rows], np.float64)
    at = _aligned_rows(len(rows), K.A_WIDTH, np.float64)
    at[:] = flat.reshape(len(rows), K.A_WIDTH)
    return at


def limits_from_bytes(max_bytes: int, per_subscription: int, instance_bytes: int) -> Limits:
    """The global byte bound as a number of instances (docs/patterns.md 1.3)."""
    return Limits(max_per_subscription=per_subscription, max_instances=max(1, max_bytes // instance_bytes))


def _orders_string(a: Atom) -> bool:
    t = a.static_triple
    return t is not None and isinstance(t[2], str) and t[1] not in ("=", "!=")


def _split_static(atoms: list[Atom]) -> tuple[list[Atom], list[Atom]]:
    """(registered in the matcher, evaluated by the kernel): equalities and string orderings go to the matcher
    when there is an equality; otherwise everything does."""
    reg = [a for a in atoms if a.op == "=" or _orders_string(a)]
    if not any(a.op == "=" for a in reg):
        return list(atoms), []
    return reg, [a for a in atoms if not (a.op == "=" or _orders_string(a))]


def orders_strings(pattern: Pattern) -> bool:
    """Whether a static predicate orders strings (only the matcher evaluates those; the kernel compares codes)."""
    triples = list(pattern.start) + [a.static_triple for s in pattern.steps for a in s.correlate + s.where + s.until
                                     if a.static_triple is not None]
    return any(isinstance(v, str) and op not in ("=", "!=") for _, op, v in triples)


def _event_ref(attr: str):
    from .language import Ref
    return Ref("event", -1, attr)
