"""The engine's arrays and their growth: the instance store, its hash index and heap, the witness buffers.

The kernel never allocates: it stops when a bound is reached (module docstring of :mod:`.kernel`) and the
driver calls :meth:`EngineArrays._reserve`, which grows whatever stopped it, then resumes the batch.
"""

from __future__ import annotations

import numpy as np

from . import kernel as K


class EngineArrays:
    """Allocation and growth of the per-node, per-pattern, per-instance and per-witness arrays (a part of
    :class:`~fastpubsub.patterns.engine.PatternEngine`)."""

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
        heap = aligned_rows(size + K.HEAP_BASE, 2)
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

    def instance_bytes(self) -> int:
        """Bytes of one instance slot (all per-slot arrays): converts the global byte bound to a count."""
        return sum(getattr(self, n)[:1].nbytes for n in (
            "inst_alive", "inst_p", "inst_node", "inst_start", "inst_last", "inst_deadline", "inst_list", "inst_next",
            "inst_prev", "inst_changed", "bound", "iters", "iv_kind", "iv_num", "acc", "accn",
            "dirty_mark", "dirty", "affected", "cre_p", "cre_parent", "cre_key", "cre_order", "cre_tmp",
            "free")) + 2 * 8 + 4 * 8 * 2

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


def aligned_rows(rows: int, width: int, dtype=np.int64) -> np.ndarray:
    """A zeroed 8-byte matrix whose first row starts on a 64-byte cache line (numpy aligns to 16 bytes only)."""
    buf = np.zeros(rows * width + 8, dtype)
    skip = (-buf.ctypes.data % 64) // 8
    return buf[skip: skip + rows * width].reshape(rows, width)
