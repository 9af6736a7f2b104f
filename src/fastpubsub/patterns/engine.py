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

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from fastpubsub.engine import Matcher, SubscriptionBatch

from . import kernel as K
from .compile import NO_ATOM, ZERO, Compiled, Groups, PatternTables, atom_matrix, orders_strings
from .driver import MODES, BatchDriver, Event
from .growth import EngineArrays, aligned_rows
from .language import Pattern
from .snapshot import Snapshots

__all__ = ["MODES", "Event", "Limits", "PatternEngine", "limits_from_bytes", "orders_strings"]


@dataclass(frozen=True)
class Limits:
    """Bounded state (docs/patterns.md section 1.3)."""

    max_per_subscription: int = 10_000
    max_instances: int = 10_000_000


class PatternEngine(PatternTables, EngineArrays, BatchDriver, Snapshots):
    """Pattern subscriptions over one partition's events, the fast path (docs/patterns.md section 3)."""

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
        self.compiled: list[Compiled | None] = []
        self.free_p: list[int] = []
        self.registered: dict[int, list[int]] = {}
        # merged start states: subscriptions whose start has the same matcher part share one matcher entry
        # (a group, members pattern slots); its members' remaining threshold (price > c) is one sorted array per
        # group.  Steps with the same static-only correlation share one too (members nodes).
        self.start_groups = Groups(K.GROUP_BASE)
        self.step_groups = Groups(K.STEP_BASE)
        self.atom_rows: list[tuple] = []
        self.cap_rows: list[tuple[int, int]] = []
        self.agg_rows: list[tuple[int, int, int]] = []
        self._spans: dict[int, tuple[int, int, int, int, int, int]] = {}  # slot -> its atom, capture, aggregate rows
        self._live_rows = 0  # rows of the three lists that live slots own (the rest: removed ones', until compacted)
        self.n_cols = 1
        self.n_aggs = 1
        self._tables_dirty = True
        self._encoded = (0, 0, 0)  # atom, capture and aggregate rows already in the kernel's tables
        self._atom_buf = atom_matrix([NO_ATOM])
        self._cap_bufs: list[np.ndarray] = [ZERO, ZERO]
        self._agg_bufs: list[np.ndarray] = [ZERO, ZERO, ZERO]
        self.st = np.zeros(K.ST_SIZE, np.int64)
        self.st[K.ST_WM] = K.EMPTY
        self.st[K.ST_BATCH] = 1
        self.st[K.ST_TRACK] = int(track_changes)
        self._alloc_patterns(16)
        self._alloc_slots(capacity)
        self._alloc_hash(4 * capacity)
        self.heap = aligned_rows(capacity + K.HEAP_BASE, 2)
        self._alloc_witnesses(capacity)
        self.tomb_key = np.zeros((capacity, 1 + K.STRIDE), np.int64)
        self.tomb_off = np.zeros(capacity, np.int64)
        self.last_id = -1
        self._dropped = 0
        self._sync_tables()  # the kernel's tables exist from the start (a removal passes them without syncing)

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
        dead = len(self.atom_rows) + len(self.cap_rows) + len(self.agg_rows) - self._live_rows
        if dead > self._live_rows // 8 + self.ROW_SLACK:
            self._compact_rows()
        self._tables_dirty = True

    def __contains__(self, sid: int) -> bool:
        return sid in self.sid_slot

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

    def memory_by_structure(self) -> dict[str, int]:
        """Bytes by structure (the instance store and its indexes, the matcher of its atoms) and the rows the
        pattern tables hold: what ``/metrics`` shows, so that growth under subscription churn is seen early."""
        return {"instances": self.memory_bytes(), "matcher": self.matcher.memory_bytes()}

    def rows(self) -> int:
        """Rows of atoms, captures and aggregates the installed patterns hold (compacted once dead ones pass an eighth)."""
        return len(self.atom_rows) + len(self.cap_rows) + len(self.agg_rows)


def limits_from_bytes(max_bytes: int, per_subscription: int, instance_bytes: int) -> Limits:
    """The global byte bound as a number of instances (docs/patterns.md 1.3)."""
    return Limits(max_per_subscription=per_subscription, max_instances=max(1, max_bytes // instance_bytes))
