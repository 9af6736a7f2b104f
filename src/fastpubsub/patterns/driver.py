"""The batch driver: a batch of one partition's events through the matcher and the kernel, into witnesses.

The matcher says which automaton nodes each event affects (one ``match_encoded`` per batch); the
events' referenced attributes become two matrices (kind, number; strings as per-engine codes); the
kernel runs until the batch is done or a bound stops it, and the arrays grow between calls.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from fastpubsub.engine import KIND_STRING, EventBatch

from . import kernel as K
from .witnesses import Witnesses

MODES = ("none", "static", "dynamic")
MODE_CODE = {"none": K.MODE_NONE, "static": K.MODE_STATIC, "dynamic": K.MODE_DYNAMIC}


class Event(NamedTuple):
    """One event of a partition: its id (the offset), its timestamp (ms, event time) and attributes."""

    id: int
    ts: int
    attributes: dict[str, Any]


class BatchDriver:
    """Processing batches of events (a part of :class:`~fastpubsub.patterns.engine.PatternEngine`)."""

    def _relist(self, size: int | None = None) -> None:
        live = int(self.st[K.ST_LIVE])
        self._alloc_hash(size or max(4 * live + 64, len(self.hk)))
        K.rebuild_lists(MODE_CODE[self.mode], self._automata(), self._instances(), self.st)

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
        mode = MODE_CODE[self.mode]
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
