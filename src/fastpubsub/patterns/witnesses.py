"""The witnesses of one ``PatternEngine.process`` call, kept as arrays until a caller reads them.

Turning every witness into Python objects cost more than the kernel that found
them at 100,000 subscriptions (docs/patterns.md section 5); a caller that only
counts them, or reads one column (``sid``, ``end_ts``), never pays for it.
Iterating or indexing gives :class:`Witness` objects, made once and cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np


@dataclass(frozen=True)
class Witness:
    """A completed pattern: per binding ``(event id, iterations)``, the aggregates and the time span."""

    sid: int
    bound: tuple[tuple[int, int], ...]
    aggregates: tuple[tuple[str, float | None], ...]
    start_ts: int
    end_ts: int

    @property
    def notification_id(self) -> str:
        """Deterministic: the subscription id and the ids of the bound events (docs/patterns.md 1.4)."""
        return notification_id(self.sid, self.bound)


def notification_id(sid: int, bound: Iterable[tuple[int, int]]) -> str:
    """A witness's id (docs/patterns.md 1.4): its subscription and bound events, a fold's with its iterations."""
    parts = [f"{i}#{n}" if n else f"{i}" for i, n in bound]
    return f"{sid}/" + "|".join(parts)


def aggregate_value(fn: str, acc: float, n: int) -> float | None:
    """The finaliser g3 (EDBT section 2.2): ``avg`` divides, the others read the accumulator."""
    if fn == "count":
        return acc
    if n == 0:
        return None
    return acc / n if fn == "avg" else acc


class Witnesses(Sequence[Witness]):
    """A sequence of :class:`Witness`, stored as columns.

    ``sid``, ``start_ts``, ``end_ts``: one entry per witness; ``bound`` and
    ``iterations``: one row per witness, one column per binding (``-1``/``0``
    past the pattern's own ``steps``); ``aggregates[i]`` is computed on access.
    """

    __slots__ = ("sid", "steps", "bound", "iterations", "start_ts", "end_ts", "_acc", "_accn", "_slot", "_labels",
                 "_objects")

    def __init__(self, sid: np.ndarray, steps: np.ndarray, bound: np.ndarray, iterations: np.ndarray,
                 start_ts: np.ndarray, end_ts: np.ndarray, acc: np.ndarray, accn: np.ndarray, slot: np.ndarray,
                 labels: dict[int, list]) -> None:
        self.sid = sid
        self.steps = steps  # bindings per witness: 1 + the pattern's steps
        self.bound = bound
        self.iterations = iterations
        self.start_ts = start_ts
        self.end_ts = end_ts
        self._acc = acc
        self._accn = accn
        self._slot = slot  # the engine's pattern slot, the key of ``labels``
        self._labels = labels  # slot -> [(label, aggregate slot, function)] for patterns with aggregates
        self._objects: list[Witness] | None = None

    @classmethod
    def concat(cls, parts: Sequence["Witnesses"]) -> "Witnesses":
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if len(parts) == 1:
            return parts[0]
        labels: dict[int, list] = {}
        for p in parts:
            labels.update(p._labels)
        width = max(p._acc.shape[1] for p in parts)

        def pad(a: np.ndarray) -> np.ndarray:
            return a if a.shape[1] == width else np.pad(a, ((0, 0), (0, width - a.shape[1])))

        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                     ("sid", "steps", "bound", "iterations", "start_ts", "end_ts")),
                   np.concatenate([pad(p._acc) for p in parts]), np.concatenate([pad(p._accn) for p in parts]),
                   np.concatenate([p._slot for p in parts]), labels)

    def __len__(self) -> int:
        return len(self.sid)

    def _all(self) -> list[Witness]:
        if self._objects is None:
            sids, steps = self.sid.tolist(), self.steps.tolist()
            bounds, iters = self.bound.tolist(), self.iterations.tolist()
            starts, ends, slots = self.start_ts.tolist(), self.end_ts.tolist(), self._slot.tolist()
            labels, acc, accn = self._labels, self._acc, self._accn
            out = []
            for w in range(len(sids)):
                ns = steps[w]
                lab = labels.get(slots[w])
                aggs = () if not lab else tuple(
                    (name, aggregate_value(fn, float(acc[w, k]), int(accn[w, k]))) for name, k, fn in lab)
                out.append(Witness(sids[w], tuple(zip(bounds[w][:ns], iters[w][:ns])), aggs, starts[w], ends[w]))
            self._objects = out
        return self._objects

    def __getitem__(self, i):  # type: ignore[override]
        return self._all()[i]

    def __iter__(self) -> Iterator[Witness]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Witnesses, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def __add__(self, other: Sequence[Witness]) -> list[Witness]:
        return list(self) + list(other)

    def __radd__(self, other: Sequence[Witness]) -> list[Witness]:
        return list(other) + list(self)

    def __repr__(self) -> str:
        return f"Witnesses({len(self)})"

    def notification_ids(self) -> list[str]:
        """The deterministic notification ids (docs/patterns.md 1.4), without making Witness objects."""
        bounds, iters, steps = self.bound.tolist(), self.iterations.tolist(), self.steps.tolist()
        return [notification_id(s, zip(b[:n], it[:n])) for s, b, it, n in zip(self.sid.tolist(), bounds, iters, steps)]
