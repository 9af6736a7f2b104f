"""Static and dynamic's catch-all list on the bit-parallel path, when its price says so.

Subscriptions with nothing to key on are filed under the catch-all key and
scanned for every event; when they are range-heavy, phase 1 also lists
every range constant each event value satisfies.  :class:`CatchAllPath`
puts them on a :class:`~engine.algorithms.bitmaps.RangeBitmaps` when
``engine.costmodel.bitmaps`` prices it below the scan, in two ways:

* *range-only* subscriptions (every predicate ``< <= > >=`` a number) in a
  batch being filed are taken before their predicates are interned
  (:meth:`take_ranges`): the bit-parallel structure holds them as one closed
  interval per field, their only copy (no predicate ids, no cluster entry);
  they stay there until removed (:meth:`remove_ranges`);
* the other catch-all subscriptions are *mirrored*: they stay filed in the
  cluster store (so moving, removing and statistics are unchanged), the scan
  kernel skips the catch-all list (its head hidden for the call), and their
  predicates leave phase 1; when the price turns they go back to the scan.

The bitmap kernel's matches are merged with the scan's.  The hooks are calls
in engine/algorithms/conjunction_index.py: :meth:`take_ranges`,
:meth:`remove_ranges`, :meth:`filed`, :meth:`unfiled`, :meth:`match`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import njit

from ..structures.access_keys import CATCH_ALL
from .bitmaps import RangeBitmaps, intervals_of_rows, range_only
from ..columnar import csr_positions
from ..costmodel.bitmaps import BITMAP_COST, BitmapCost, prefer_bitmaps
from ..structures.idpool import grow
from ..kernels.sorting import merge_matches
from ..structures.predicates import PredicateTable
from ..semantics import OP_EQ


#: ``Matcher("static" | "dynamic", catch_all=...)``.
MODES = ("auto", "scan", "bitmaps")


@njit(cache=True)
def count_fields(off, fields, sign, field_refs):
    """Add ``sign`` to ``field_refs`` of each distinct field of each row (CSR of field ids; rows are short)."""
    for i in range(off.shape[0] - 1):
        for q in range(off[i], off[i + 1]):
            f = fields[q]
            dup = False
            for q2 in range(off[i], q):
                if fields[q2] == f:
                    dup = True
                    break
            if not dup:
                field_refs[f] += sign


class CatchAllPath:
    """The catch-all's subscriptions on a :class:`RangeBitmaps` while the price prefers it (module docstring).

    ``owner.catch_all_members()`` returns the handles filed under the
    catch-all and their predicate ids in CSR (``ClusteredIndex``'s
    ``members_of`` and ``predicates_of``); the owner is kept rather than a
    bound method so that the index pickles as plain objects
    (engine/structure.py loads no callables).  ``mode``: ``"auto"`` (the price decides), ``"scan"``
    or ``"bitmaps"`` (forced, e.g. to compare them).
    """

    def __init__(self, preds: PredicateTable, K_c: float, owner: Any,
                 mode: str = "auto", cost: BitmapCost = BITMAP_COST, **bitmap_options) -> None:
        if mode not in MODES:
            raise ValueError(f"catch_all must be one of {', '.join(MODES)}, not {mode!r}")
        self.preds = preds
        self.K_c = K_c
        self.owner = owner
        self.cost = cost
        self.mode = mode
        self.bitmap_options = bitmap_options
        self.bitmaps: RangeBitmaps | None = None
        self.mirrored = False  # the cluster store's catch-all subscriptions are on the bitmaps too
        self.n = 0  # subscriptions in the catch-all (the cluster store's and the range-only ones held as intervals)
        self.ranges = 0  # of which range-only ones held as intervals
        self.range_predicates = 0  # their non-equality predicates
        self.field_refs = np.zeros(0, dtype=np.int64)  # per field: catch-all subscriptions constraining it
        self.switches = 0

    @property
    def active(self) -> bool:
        """The catch-all is on the bit-parallel path (the price's hysteresis reads this)."""
        return self.mirrored

    def _count(self, off: np.ndarray, fields: np.ndarray, range_predicates: int, sign: int) -> None:
        self.field_refs = grow(self.field_refs, int(fields.max()) + 1 if len(fields) else 0, 0)
        count_fields(off, fields, sign, self.field_refs)
        self.range_predicates += sign * range_predicates
        self.n += sign * (len(off) - 1)

    def _count_pids(self, off: np.ndarray, pids: np.ndarray, sign: int) -> None:
        self._count(off, self.preds.field[pids], int(np.count_nonzero(self.preds.op[pids] != OP_EQ)), sign)

    def _count_intervals(self, off: np.ndarray, field: np.ndarray, lo: np.ndarray, hi: np.ndarray, sign: int) -> None:
        """Count range-only subscriptions: a bounded end of an interval as one range predicate."""
        self._count(off, field, int(np.count_nonzero(lo > -np.inf) + np.count_nonzero(hi < np.inf)), sign)
        self.ranges += sign * (len(off) - 1)

    def take_ranges(self, handles: np.ndarray, off: np.ndarray, field: np.ndarray, op: np.ndarray,
                    value: np.ndarray) -> np.ndarray:
        """Hold the range-only rows of a batch being filed (CSR predicates: field ids, operator codes, numbers)
        as intervals when the price, counting them in the catch-all, prefers the bit-parallel path; returns which
        rows were taken (the owner files the rest)."""
        rows = np.flatnonzero(range_only(off, field, op)) if self.mode != "scan" else np.zeros(0, dtype=np.int64)
        taken = np.zeros(len(handles), dtype=bool)
        if len(rows) == 0:
            return taken
        ioff, ifield, lo, hi = intervals_of_rows(off, field, op, value, rows)
        if self.mode == "auto":
            new = np.flatnonzero(np.bincount(ifield))
            held = new[new < len(self.field_refs)]
            fields = int(np.count_nonzero(self.field_refs)) + len(new) - int(np.count_nonzero(self.field_refs[held]))
            ranges = self.range_predicates + int(np.count_nonzero(lo > -np.inf) + np.count_nonzero(hi < np.inf))
            if not prefer_bitmaps(self.cost, self.K_c, self.n + len(rows), fields, ranges, self.bitmaps is not None):
                return taken
        if self.bitmaps is None:
            self.bitmaps = RangeBitmaps(self.preds, **self.bitmap_options)
        self.bitmaps.add_ranges(handles[rows], ioff, ifield, lo, hi)
        self._count_intervals(ioff, ifield, lo, hi, 1)
        taken[rows] = True
        self.decide()
        return taken

    def remove_ranges(self, handles: np.ndarray) -> np.ndarray:
        """Remove the range-only subscriptions among ``handles`` held as intervals; returns the others."""
        if self.ranges == 0 or len(handles) == 0:
            return handles
        mine = self.bitmaps.holds_ranges(handles)
        if not mine.any():
            return handles
        self._count_intervals(*self.bitmaps.ranges_of(handles[mine]), -1)
        self.bitmaps.remove(handles[mine])
        self.decide()
        return handles[~mine]

    def filed(self, handles: np.ndarray, keys: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """Subscriptions were filed under ``keys``: mirror the catch-all's, then reconsider the path."""
        ca = np.flatnonzero(keys == CATCH_ALL)
        if len(ca) == 0:
            return
        soff, spids = _subset(off, pids, ca)
        self._count_pids(soff, spids, 1)
        if self.mirrored:
            self.bitmaps.add(handles[ca], soff, spids)
        self.decide()

    def unfiled(self, handles: np.ndarray, keys: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """Subscriptions left their clusters (``keys``, predicate ids in CSR): forget the catch-all's."""
        ca = np.flatnonzero(keys == CATCH_ALL)
        if len(ca) == 0:
            return
        soff, spids = _subset(off, pids, ca)
        self._count_pids(soff, spids, -1)
        if self.mirrored:
            self.bitmaps.remove(handles[ca])
        self.decide()

    def would_take(self, off: np.ndarray, pids: np.ndarray, rows: np.ndarray) -> bool:
        """Whether the catch-all, with ``rows`` of a CSR of predicate ids added, would be on the bit-parallel path.

        Static and dynamic ask this before filing a subscription with no
        equality under a presence key that prunes nothing (P(present) = 1 on
        the statistics in use): such a key is scanned for every event, exactly
        like the catch-all, so the catch-all is the better home whenever its
        bit-parallel path is priced cheaper.
        """
        if self.mode != "auto":
            return self.mode == "bitmaps"
        n = len(rows)
        if n == 0:
            return self.active
        off, pids = _subset(off, pids, rows)
        # fields the catch-all would constrain: those it does, plus the new ones among these rows' (no copy of field_refs)
        added = self.preds.fields_of(pids)
        held = added[added < len(self.field_refs)]
        fields = int(np.count_nonzero(self.field_refs)) + len(added) - int(np.count_nonzero(self.field_refs[held]))
        ranges = self.range_predicates + int(np.count_nonzero(self.preds.op[pids] != OP_EQ))
        return prefer_bitmaps(self.cost, self.K_c, self.n + n, fields, ranges, self.active)

    def decide(self) -> None:
        """Mirror the cluster store's catch-all onto the bit-parallel path or take it back, as the price says
        (the range-only subscriptions held as intervals stay)."""
        fields = int(np.count_nonzero(self.field_refs))
        if self.mode == "auto":
            want = prefer_bitmaps(self.cost, self.K_c, self.n, fields, self.range_predicates, self.active)
        else:
            want = self.mode == "bitmaps" and self.n > 0
        if want and not self.mirrored:
            if self.bitmaps is None:
                self.bitmaps = RangeBitmaps(self.preds, **self.bitmap_options)
            handles, off, pids = self.owner.catch_all_members()
            self.bitmaps.add(handles, off, pids)
            self.mirrored = True
            self.switches += 1
        elif not want and self.mirrored:
            held = self.bitmaps
            slots = held.live_slots()
            slots = slots[held.iv_len[slots] == 0]
            if len(slots):
                held.remove(held.slot_handle[slots])
            self.mirrored = False
            self.switches += 1
        if not self.mirrored and self.ranges == 0:
            self.bitmaps = None

    def match(self, scan: Callable[[], tuple[np.ndarray, np.ndarray]], key_head: np.ndarray, events,
              handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``scan()`` (the clustered kernel) with the catch-all list hidden, plus the bit-parallel matches."""
        if self.bitmaps is None or len(self.bitmaps) == 0:
            return scan()
        if self.mirrored and len(key_head) > CATCH_ALL:
            head = key_head[CATCH_ALL]
            key_head[CATCH_ALL] = -1
            try:
                off_a, ids_a = scan()
            finally:
                key_head[CATCH_ALL] = head
        else:
            off_a, ids_a = scan()
        off_b, ids_b = self.bitmaps.match(events, handle_id)
        return merge_matches(off_a, ids_a, off_b, ids_b)

    def stats(self) -> dict:
        out = {"mode": self.mode, "active": self.active, "subscriptions": self.n, "range_only": self.ranges,
               "switches": self.switches,
               "price_ns": {"bitmaps": round(self.cost.bitmaps(self.n, int(np.count_nonzero(self.field_refs))), 1),
                            "scan": round(self.cost.scan(self.K_c, self.n, self.range_predicates), 1)}}
        if self.bitmaps is not None:
            out["bitmaps"] = self.bitmaps.stats()
        return out

    def memory_bytes(self) -> int:
        return int(self.field_refs.nbytes) + (self.bitmaps.stats()["memory_bytes"] if self.bitmaps is not None else 0)


def _subset(off: np.ndarray, pids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` of a CSR (offsets, values)."""
    idx, soff = csr_positions(off[rows], off[rows + 1] - off[rows])
    return soff, pids[idx]
