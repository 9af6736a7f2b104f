"""The probabilities of equation 3.1 from the event statistics: nu of equality predicates, mu of field sets.

Uniform statistics (before any are known) give each equality predicate
``1 / distinct constants of its field`` and every field set ``mu = 1``.
Given statistics (:meth:`EventProbabilities.use`, e.g. a Spark snapshot) win
over the online ones the dynamic algorithm collects; online statistics are
adopted only when they disagree with the ones in use (:meth:`adopt_online`).
"""

from __future__ import annotations

import numpy as np

from ..frontend.encoding import N_KINDS, AttributeDictionary, StringDictionary
from ..structures.predicates import PredicateTable
from ..frontend.lowering import parse_derived
from ..semantics import KIND_BOOL, KIND_STRING, KINDS, OP_EQ, RESERVED_PREFIX
from .statistics import AttributeTable, EventStatistics, StatisticsCollector

#: Online statistics are adopted when some live equality predicate's nu differs this much (dynamic).
ADOPT_RATIO = 1.5
#: Events the online statistics must have seen before they can be adopted.
ADOPT_MIN_EVENTS = 2000


class EventProbabilities:
    """nu and mu under the statistics in use, over one matcher's dictionaries and predicate table."""

    def __init__(self, attributes: AttributeDictionary, strings: StringDictionary, preds: PredicateTable) -> None:
        self.attributes = attributes
        self.strings = strings
        self.preds = preds
        self.statistics = EventStatistics.uniform()
        self.external = False  # statistics given by the user: online ones are never adopted
        self._names_cache: list[str] = []
        self._strings_cache: list[str] = []

    def _names(self) -> list[str]:
        """Attribute names by id (the dictionary only grows: the list is rebuilt when it did)."""
        if len(self._names_cache) != len(self.attributes.ids):
            self._names_cache = list(self.attributes.ids)
        return self._names_cache

    def _strings(self) -> list[str]:
        """String constants by id (grows like the names)."""
        if len(self._strings_cache) != len(self.strings.ids):
            self._strings_cache = list(self.strings.ids)
        return self._strings_cache

    def use(self, statistics: EventStatistics) -> None:
        """Use these statistics from now on; they win over online ones."""
        self.statistics = statistics
        self.external = True

    def nu(self, pids: np.ndarray) -> np.ndarray:
        """nu of equality predicates (uniform: 1 / distinct constants of the field)."""
        field = self.preds.field[pids]
        if self.statistics.source == "uniform":
            top = self.preds.n_ids
            live = (self.preds.refcount[:top] > 0) & (self.preds.op[:top] == OP_EQ)
            distinct = np.bincount(self.preds.field[:top][live], minlength=int(field.max()) + 1)
            return 1.0 / np.maximum(distinct[field], 1)
        kinds = field % N_KINDS
        attrs, attr = np.unique(field // N_KINDS, return_inverse=True)
        bits = self.preds.bits_value[pids]
        numbers = bits.view(np.float64).copy()
        numbers[kinds == KIND_BOOL] = bits[kinds == KIND_BOOL] != 0
        text = kinds == KIND_STRING
        constants, numbers[text] = np.unique(bits[text], return_inverse=True)
        out = self.statistics.value_probabilities(list(map(self._names().__getitem__, attrs.tolist())), attr, kinds,
                                                  numbers, list(map(self._strings().__getitem__, constants.tolist())))
        return np.maximum(out, 1e-12)

    def presence(self, fields: np.ndarray) -> np.ndarray:
        """P(event carries the field): presence of the attribute times the share of its values of the field's kind.

        Uniform statistics: 1 for every field (every attribute present).  A
        kind the statistics give no share for counts as the attribute's only one.
        """
        fields = np.asarray(fields, dtype=np.int64)
        if self.statistics.source == "uniform":
            return np.ones(len(fields), dtype=np.float64)
        attrs, attr = np.unique(fields // N_KINDS, return_inverse=True)
        names = self._names()
        bases, shares = [], np.ones((len(attrs), N_KINDS), dtype=np.float64)
        typed = not isinstance(self.statistics.attributes, AttributeTable)  # online snapshots measure no value types
        for j, a in enumerate(attrs.tolist()):  # per attribute, not per field
            name = names[a]
            derived = parse_derived(name) if name[0] == RESERVED_PREFIX else None
            if derived is not None:  # a prefix / suffix / contains slice: at most where its attribute has a string
                name = derived[1]
            bases.append(name)
            st = self.statistics.attributes.get(name) if typed else None
            if st is not None and st.value_types:
                shares[j] = [st.value_types.get(kind, 0.0) for kind in KINDS]
            if derived is not None:
                shares[j] = shares[j, KIND_STRING]
        out = self.statistics.presences(bases)[attr] * shares[attr, fields % N_KINDS]
        return np.maximum(out, 1e-12)

    def mu(self, fields: tuple[int, ...]) -> float:
        """Probability that an event carries all of ``fields`` (uniform: 1)."""
        if self.statistics.source == "uniform":
            return 1.0
        names = self._names()
        return self.statistics.mu([names[f // N_KINDS] for f in fields])

    def adopt_online(self, collector: StatisticsCollector) -> bool:
        """Switch to the ``collector``'s statistics if they disagree with the ones in use (a shifted stream); True if adopted.

        Disagreement is ``ADOPT_RATIO`` for some live equality predicate, on
        probabilities plus a tenth of the uniform one of their field (1 / its
        distinct constants): a value far rarer than uniform becoming rarer
        still changes no cost worth re-planning for, and each adoption
        restarts the potential tables' votes (engine/costmodel/maintenance.py).
        """
        if self.external or collector.observed < ADOPT_MIN_EVENTS:
            return False
        top = self.preds.n_ids
        live = np.flatnonzero((self.preds.refcount[:top] > 0) & (self.preds.op[:top] == OP_EQ))
        if len(live) == 0:
            return False
        old = self.nu(live)
        current, self.statistics = self.statistics, collector.snapshot()
        new = self.nu(live)
        field = self.preds.field[live]
        floor = 0.1 / np.bincount(field)[field]
        if np.max(np.abs(np.log((new + floor) / (old + floor)))) > np.log(ADOPT_RATIO):
            return True
        self.statistics = current
        return False
