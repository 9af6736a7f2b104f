"""What a matching algorithm implements (:class:`Index`), and the registry :class:`~engine.matcher.Matcher` chooses from.

The :class:`~engine.matcher.Matcher` is a facade: it validates and encodes
subscriptions and events, interns predicates (engine/structures/predicates.py) and
hands out subscription handles; an *index* -- one per algorithm -- owns the
structure subscriptions are filed in and matches encoded events against it.

An algorithm plugs in by registering a factory under its name::

    from fastpubsub.engine import IndexContext, register

    def make_opindex(ctx: IndexContext, **options) -> OpIndex:
        return OpIndex(ctx.preds, **options)

    register("opindex", make_opindex)   # Matcher("opindex", ...) now builds it

The factory receives the shared :class:`IndexContext` and the keyword
options the user passed to ``Matcher(...)`` (and rejects the ones it does not
take with ``ValueError``).  Nothing else in the engine changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

import numpy as np

from ..columnar import EventBatch
from ..costmodel.maintenance import Thresholds
from ..costmodel.model import CostModel, calibrated_model
from ..costmodel.probabilities import EventProbabilities
from ..frontend.encoding import EventArrays
from ..structures.predicates import PredicateTable


@runtime_checkable
class Index(Protocol):
    """The structure one algorithm files subscriptions in (the methods the :class:`Matcher` calls).

    Subscriptions arrive as handles (dense int32 ids the matcher hands out)
    with their *distinct* predicate ids in CSR (``pids[off[i]:off[i+1]]``
    for ``handles[i]``).  The index takes one reference to each of those
    predicates when it files a subscription (``preds.refcount``) and drops
    them when it removes it (``preds.decref``), releasing whatever it kept
    for predicates that die.

    An index may also define ``take_ranges(handles, off, field, op, value)``
    (engine/algorithms/catchall.py, bitmaps.py): the matcher offers it each
    batch's rows before interning their predicates (CSR of field ids,
    operator codes and numbers), and files through ``add_bulk`` only the rows
    it did not take.
    """

    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """File new subscriptions (validated by the matcher: never fails half-way)."""

    def remove_bulk(self, handles: np.ndarray) -> None:
        """Unfile live subscriptions (distinct handles)."""

    def match_encoded(self, events: EventArrays, batch: EventBatch, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Matches of encoded events as CSR ``(offsets, ids)``, ids ascending per event.

        ``batch`` is the events as given (for online statistics); ``handle_id``
        maps handles to subscription ids.
        """

    def stats(self) -> dict[str, Any]:
        """Sizes of the index's structures; ``memory_bytes`` among them."""


@runtime_checkable
class Clustering(Protocol):
    """What an index whose configuration follows the event statistics adds (static, dynamic)."""

    def statistics_changed(self) -> None:
        """The probabilities in use changed (:class:`~engine.costmodel.probabilities.EventProbabilities`)."""

    def refresh_probabilities(self) -> None:
        """Re-read nu of every live equality predicate from the statistics in use."""

    def reorganize(self) -> dict:
        """Configure from scratch with the current statistics (section 3.2); returns what was chosen."""


@dataclass
class IndexContext:
    """What the matcher shares with the index it builds."""

    preds: PredicateTable
    probabilities: EventProbabilities
    model: CostModel | None = None  # None: this machine's calibration (engine.costmodel.model.calibrated_model)
    thresholds: Thresholds | None = None  # dynamic maintenance thresholds
    max_space: float | None = None  # static greedy's space limit

    def cost_model(self) -> CostModel:
        return self.model or calibrated_model()


Factory = Callable[..., Index]


class AlgorithmRegistry(Sequence):
    """Algorithm names, in registration order, with their index factories (a read-only sequence of names)."""

    def __init__(self) -> None:
        self._factories: dict[str, Factory] = {}

    def register(self, name: str, factory: Factory) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"algorithm names are non-empty strings, not {name!r}")
        if name in self._factories:
            raise ValueError(f"algorithm {name!r} is already registered")
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        """Forget an algorithm (``KeyError`` if unknown); matchers already built keep their index."""
        del self._factories[name]

    def build(self, name: str, ctx: IndexContext, **options: Any) -> Index:
        if name not in self._factories:
            raise ValueError(f"unknown algorithm {name!r}; expected one of {', '.join(self._factories)}")
        return self._factories[name](ctx, **options)

    def __getitem__(self, i):  # type: ignore[override]
        return tuple(self._factories)[i]

    def __len__(self) -> int:
        return len(self._factories)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._factories))

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __repr__(self) -> str:
        return f"AlgorithmRegistry({tuple(self._factories)!r})"


#: Every registered algorithm (``fastpubsub.engine.ALGORITHMS`` is this registry).
REGISTRY = AlgorithmRegistry()


def register(name: str, factory: Factory) -> None:
    """Make ``Matcher(name, **options)`` build ``factory(ctx, **options)``."""
    REGISTRY.register(name, factory)


def reject_options(algorithm: str, options: dict[str, Any]) -> None:
    """``ValueError`` naming options an algorithm does not take."""
    if options:
        raise ValueError(f"{algorithm} takes no option {', '.join(sorted(options))}")
