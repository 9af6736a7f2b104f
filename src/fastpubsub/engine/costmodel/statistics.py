"""Event statistics that feed the cost model (Fabret et al., section 3.1).

The cost model needs, per event: mu(H), the probability that an event's schema
contains the attribute set H, and nu(p), the probability that an event
satisfies an access predicate p (a conjunction of equality predicates).
:class:`EventStatistics` answers both from a snapshot of

* per attribute: presence probability, distinct-value count, the most frequent
  values with their probabilities (given presence), numeric quantiles;
* per measured attribute set: the probability that an event contains it, and
  joint frequencies of its most frequent value combinations.

Anything not measured falls back to independence (mu = product of presences,
nu = product of value probabilities) and, for values outside the top list, to
a uniform share of the remaining mass.  With no statistics at all,
:meth:`EventStatistics.uniform` assumes every attribute present and values
uniform over a caller-given number of distinct values.

Snapshots come from the Spark job (``fastpubsub/stats_job/``, as the Avro record
``wire/schemas/statistics.avsc``) or from :class:`StatisticsCollector`, which keeps
exponentially decayed counts over a sample of the live event stream so that
the engine adapts before any batch job has run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..columnar import EventBatch, csr_positions
from ..frontend.utf8 import picked
from ..semantics import KIND_BOOL, KIND_STRING

Value = Any  # int | float | str | bool


def _value_key(v: Value) -> tuple[int, Any]:
    """Hashable key that keeps 1, 1.0 equal and True apart from 1 (our semantics)."""
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, str):
        return (1, v)
    return (0, float(v))


@dataclass
class AttributeStats:
    presence: float  # P(event carries the attribute)
    distinct: int  # distinct values seen (>= len(top_values))
    top_values: dict[tuple[int, Any], float] = field(default_factory=dict)  # value key -> P(value | present)
    quantiles: list[float] = field(default_factory=list)  # numeric values, evenly spaced ranks
    value_types: dict[str, float] = field(default_factory=dict)  # type name (semantics.KINDS) -> P(type | present)

    def value_probability(self, v: Value) -> float:
        """P(event value == v | attribute present)."""
        key = _value_key(v)
        if key in self.top_values:
            return self.top_values[key]
        rest = max(0.0, 1.0 - sum(self.top_values.values()))
        unseen = self.distinct - len(self.top_values)
        return rest / unseen if unseen > 0 else 0.0


@dataclass(frozen=True)
class PartitionOffsets:
    partition: int
    start: int  # inclusive
    end: int  # exclusive: where the next run starts


@dataclass
class SourceWindow:
    """What a batch snapshot was computed over: the records of ``offsets`` on ``topic``."""

    topic: str
    offsets: list[PartitionOffsets]
    computed_at_ms: int
    first_timestamp_ms: int | None = None
    last_timestamp_ms: int | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "offsets": [{"partition": o.partition, "start": o.start, "end": o.end} for o in self.offsets],
            "first_timestamp_ms": self.first_timestamp_ms,
            "last_timestamp_ms": self.last_timestamp_ms,
            "computed_at_ms": self.computed_at_ms,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "SourceWindow":
        return cls(
            topic=record["topic"],
            offsets=[PartitionOffsets(int(o["partition"]), int(o["start"]), int(o["end"])) for o in record["offsets"]],
            computed_at_ms=int(record["computed_at_ms"]),
            first_timestamp_ms=record.get("first_timestamp_ms"),
            last_timestamp_ms=record.get("last_timestamp_ms"),
        )


@dataclass
class EventStatistics:
    """An immutable-by-convention snapshot of event statistics."""

    event_count: int = 0
    attributes: Mapping[str, AttributeStats] = field(default_factory=dict)  # online: an AttributeTable
    schemas: dict[frozenset[str], float] = field(default_factory=dict)  # measured mu
    joint: dict[tuple[str, ...], dict[tuple, float]] = field(default_factory=dict)  # sorted attrs -> value keys -> P
    source: str = "uniform"
    default_distinct: int = 35  # used for attributes the snapshot has never seen
    bad_records: int = 0  # undecodable records skipped by the batch job
    window: SourceWindow | None = None  # batch snapshots: the source records it covers

    @classmethod
    def uniform(cls, default_distinct: int = 35) -> "EventStatistics":
        return cls(default_distinct=default_distinct)

    def presence(self, attribute: str) -> float:
        if isinstance(self.attributes, AttributeTable):
            return float(self.attributes.presences([attribute])[0])
        st = self.attributes.get(attribute)
        if st is None:
            return 1.0 if self.source == "uniform" else 0.0
        return st.presence

    def presences(self, names: Sequence[str]) -> np.ndarray:
        """:meth:`presence` of each name (an online snapshot: without a Python loop)."""
        if isinstance(self.attributes, AttributeTable):
            return self.attributes.presences(names)
        return np.array([self.presence(name) for name in names], dtype=np.float64)

    def value_probabilities(self, names: Sequence[str], attr: np.ndarray, kinds: np.ndarray, numbers: np.ndarray,
                            strings: Sequence[str]) -> np.ndarray:
        """:meth:`value_probability` of many (attribute, value) queries, columnar.

        See :meth:`AttributeTable.value_probabilities` for the columns.

        An online snapshot answers all at once from its arrays; other
        snapshots (dicts of :class:`AttributeStats`) one query at a time.
        """
        if isinstance(self.attributes, AttributeTable):
            return self.attributes.value_probabilities(names, attr, kinds, numbers, strings)
        out = np.empty(len(attr), dtype=np.float64)
        for i, (a, k, x) in enumerate(zip(np.asarray(attr).tolist(), np.asarray(kinds).tolist(),
                                          np.asarray(numbers).tolist())):
            value = strings[int(x)] if k == KIND_STRING else bool(x) if k == KIND_BOOL else float(x)
            out[i] = self.value_probability(names[a], value)
        return out

    def mu(self, schema: Iterable[str]) -> float:
        """Probability that an event's schema contains ``schema``."""
        attrs = frozenset(schema)
        if attrs in self.schemas:
            return self.schemas[attrs]
        return math.prod(self.presence(a) for a in attrs)

    def value_probability(self, attribute: str, value: Value) -> float:
        """Unconditional P(event carries attribute with this value)."""
        st = self.attributes.get(attribute)
        if st is None:
            return (1.0 / self.default_distinct) if self.source == "uniform" else 0.0
        return st.presence * st.value_probability(value)

    def nu(self, equalities: Sequence[tuple[str, Value]]) -> float:
        """Probability that an event satisfies every ``attribute = value``.

        Uses a measured joint frequency when the snapshot has the attribute set
        and the combination is listed; independence otherwise.
        """
        if not equalities:
            return 1.0
        pairs = sorted(equalities, key=lambda p: p[0])
        attrs = tuple(a for a, _ in pairs)
        table = self.joint.get(attrs)
        if table is not None:
            key = tuple(_value_key(v) for _, v in pairs)
            if key in table:
                return table[key]
        return math.prod(self.value_probability(a, v) for a, v in pairs)

    # --- (de)serialisation: the Avro record of wire/schemas/statistics.avsc -------------
    def to_record(self) -> dict[str, Any]:
        def enc(key: tuple[int, Any]) -> Any:
            return key[1] if key[0] != 0 or not float(key[1]).is_integer() else int(key[1])

        return {
            "event_count": int(self.event_count),
            "source": self.source,
            "attributes": [
                {
                    "name": name,
                    "presence": float(st.presence),
                    "distinct": int(st.distinct),
                    "top_values": [{"value": enc(k), "probability": float(p)} for k, p in st.top_values.items()],
                    "quantiles": [float(q) for q in st.quantiles],
                    "value_types": {k: float(p) for k, p in sorted(st.value_types.items())},
                }
                for name, st in sorted(self.attributes.items())
            ],
            "schemas": [
                {
                    "attributes": sorted(attrs),
                    "probability": float(self.schemas.get(frozenset(attrs), self.mu(attrs))),
                    "joint": [
                        {"values": [enc(k) for k in combo], "probability": float(p)}
                        for combo, p in self.joint.get(tuple(sorted(attrs)), {}).items()
                    ],
                }
                for attrs in sorted({tuple(sorted(s)) for s in self.schemas} | set(self.joint))
            ],
            "bad_records": int(self.bad_records),
            "window": None if self.window is None else self.window.to_record(),
            "part": None,  # the whole snapshot (split_record makes parts)
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "EventStatistics":
        attributes = {
            a["name"]: AttributeStats(
                presence=float(a["presence"]),
                distinct=int(a["distinct"]),
                top_values={_value_key(t["value"]): float(t["probability"]) for t in a["top_values"]},
                quantiles=[float(q) for q in a.get("quantiles") or []],
                value_types={k: float(p) for k, p in (a.get("value_types") or {}).items()},
            )
            for a in record["attributes"]
        }
        schemas: dict[frozenset[str], float] = {}
        joint: dict[tuple[str, ...], dict[tuple, float]] = {}
        for s in record.get("schemas") or []:
            attrs = tuple(sorted(s["attributes"]))
            schemas[frozenset(attrs)] = float(s["probability"])
            if s.get("joint"):
                joint[attrs] = {
                    tuple(_value_key(v) for v in j["values"]): float(j["probability"]) for j in s["joint"]
                }
        return cls(
            event_count=int(record["event_count"]),
            attributes=attributes,
            schemas=schemas,
            joint=joint,
            source=str(record.get("source") or "snapshot"),
            bad_records=int(record.get("bad_records") or 0),
            window=None if record.get("window") is None else SourceWindow.from_record(record["window"]),
        )


def _weighted_quantiles(values: np.ndarray, weights: np.ndarray, n: int = 11) -> list[float]:
    """Deciles (``n`` evenly spaced ranks) of a weighted sample sorted by value."""
    if len(values) == 0:
        return []
    cum = np.cumsum(weights)
    ranks = np.linspace(0.0, cum[-1], n)
    idx = np.minimum(np.searchsorted(cum, ranks, side="left"), len(values) - 1)
    return [float(x) for x in values[idx]]


#: Value classes of the online table, in the order of :func:`_value_key`'s first element.
CLASS_NUMBER, CLASS_STRING, CLASS_BOOL = 0, 1, 2
N_CLASSES = 3
#: Rows observed since the last merge that make ``observe`` merge them into the sorted table.
MERGE_ROWS = 1 << 16


def _frozen(*arrays: np.ndarray) -> None:
    """Snapshots share the collector's table arrays: the collector replaces them, never writes into them."""
    for a in arrays:
        a.flags.writeable = False


def _lookup(ids: Mapping[str, int], keys: Sequence[str], limit: int) -> np.ndarray:
    """Ids of ``keys`` in ``ids`` (-1 when absent or not below ``limit``), by one C-level pass."""
    out = np.fromiter(map(ids.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
    out[out >= limit] = -1
    return out


class AttributeTable(Mapping[str, AttributeStats]):
    """The per-attribute statistics of an online snapshot, kept as the collector's sorted arrays.

    One row per (attribute, value) seen: ``key = code * N_CLASSES + class``,
    the value (a number, 0/1 for booleans, a string's id), its decayed count
    and the order it was first seen in (ties of the top list go to the older
    value).  A row costs 32 bytes; an :class:`AttributeStats` (dicts of
    tuples) is built only for the attributes asked for by name, and the cost
    model asks :meth:`value_probabilities` for all its predicates at once.
    """

    def __init__(self, names: Sequence[str], codes: Mapping[str, int], presence: np.ndarray, key: np.ndarray,
                 value: np.ndarray, count: np.ndarray, seq: np.ndarray, strings: Sequence[str],
                 string_ids: Mapping[str, int], top_k: int) -> None:
        # names, codes, strings and string_ids may grow after the snapshot: codes and ids past ours are newer
        self._names, self._codes, self._presence = names, codes, presence
        self._key, self._value, self._count, self._seq = key, value, count, seq
        self._strings, self._string_ids, self._n_strings = strings, string_ids, len(strings)
        self.top_k = top_k
        self._n = len(presence)
        self._built: dict[str, AttributeStats] = {}
        self._summary: tuple[np.ndarray, ...] | None = None

    # --- Mapping -------------------------------------------------------------------------
    def _code(self, name: str) -> int:
        c = self._codes.get(name, -1)
        return c if 0 <= c < self._n and self._presence[c] > 0 else -1

    def __getitem__(self, name: str) -> AttributeStats:
        st = self._built.get(name)
        if st is None:
            c = self._code(name)
            if c < 0:
                raise KeyError(name)
            st = self._built[name] = self._build(c)
        return st

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._code(name) >= 0

    def __iter__(self):
        return (self._names[c] for c in np.flatnonzero(self._presence > 0).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(self._presence > 0))

    def __repr__(self) -> str:
        return f"AttributeTable({len(self)} attributes, {len(self._key)} values)"

    # --- per attribute, all at once ------------------------------------------------------
    def _summaries(self) -> tuple[np.ndarray, ...]:
        """(starts, total, top sum, top count by code; in-top by row), computed once per snapshot.

        ``total`` is the attribute's decayed count (1 if none), the top list its
        ``top_k`` rows by count (older first among equals); the top sum adds the
        top rows' shares in row order, the order :meth:`_build` lists them in,
        so that :meth:`AttributeStats.value_probability` gives the same floats.
        """
        if self._summary is None:
            attr = self._key // N_CLASSES
            starts = np.searchsorted(attr, np.arange(self._n + 1))
            distinct = np.diff(starts)
            total = np.bincount(attr, weights=self._count, minlength=self._n)
            total[total == 0] = 1.0
            in_top = np.ones(len(attr), dtype=bool)
            big = distinct > self.top_k
            if big.any():
                rows = np.flatnonzero(big[attr])
                order = rows[np.lexsort((self._seq[rows], -self._count[rows], attr[rows]))]
                first = np.searchsorted(attr[order], attr[order], side="left")
                in_top[order[np.arange(len(order)) - first >= self.top_k]] = False
            share = self._count / total[attr]
            top_sum = np.bincount(attr[in_top], weights=share[in_top], minlength=self._n)
            n_top = np.minimum(distinct, self.top_k)
            self._summary = (starts, total, top_sum, n_top, in_top)
        return self._summary

    def _build(self, c: int) -> AttributeStats:
        starts, total, _, _, in_top = self._summaries()
        lo, hi = int(starts[c]), int(starts[c + 1])
        cls = self._key[lo:hi] % N_CLASSES
        value, count = self._value[lo:hi], self._count[lo:hi]
        top, tc = {}, float(total[c])
        for k, v, n in zip(cls[in_top[lo:hi]].tolist(), value[in_top[lo:hi]].tolist(), count[in_top[lo:hi]].tolist()):
            key = (0, v) if k == CLASS_NUMBER else (1, self._strings[int(v)]) if k == CLASS_STRING else (2, bool(v))
            top[key] = n / tc
        numeric = cls == CLASS_NUMBER
        return AttributeStats(presence=float(self._presence[c]), distinct=hi - lo, top_values=top,
                              quantiles=_weighted_quantiles(value[numeric], count[numeric]))

    def presences(self, names: Sequence[str]) -> np.ndarray:
        """P(event carries the attribute) of each name (0 for an unseen one)."""
        if self._n == 0:
            return np.zeros(len(names))
        codes = _lookup(self._codes, names, self._n)
        return np.where(codes >= 0, self._presence[np.maximum(codes, 0)], 0.0)

    def _find(self, group: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Row of each (key, value) (-1 if absent): a bisection on the values within each key's rows, all at once."""
        lo = np.searchsorted(self._key, group, side="left")
        hi = np.searchsorted(self._key, group, side="right")
        end = hi.copy()
        while True:
            open_ = lo < hi
            if not open_.any():
                break
            mid = (lo + hi) // 2
            below = open_ & (self._value[np.minimum(mid, len(self._value) - 1)] < value)
            lo = np.where(below, mid + 1, lo)
            hi = np.where(open_ & ~below, mid, hi)
        found = (lo < end) & (self._value[np.minimum(lo, max(len(self._value) - 1, 0))] == value) if len(self._value) \
            else np.zeros(len(group), dtype=bool)
        return np.where(found, lo, -1)

    def value_probabilities(self, names: Sequence[str], attr: np.ndarray, kinds: np.ndarray, numbers: np.ndarray,
                            strings: Sequence[str]) -> np.ndarray:
        """P(event carries attribute ``names[attr[i]]`` with the value of query i), for all queries at once.

        A query's value is ``numbers[i]`` (booleans 0 / 1) or, for a string
        kind, ``strings[int(numbers[i])]``.  The same floats as
        ``presence * AttributeStats.value_probability``: a top value's share,
        else what the top list leaves spread over the other distinct values.
        """
        attr, kinds, numbers = np.asarray(attr, np.int64), np.asarray(kinds), np.asarray(numbers, np.float64)
        if len(attr) == 0 or self._n == 0:
            return np.zeros(len(attr))
        starts, total, top_sum, n_top, in_top = self._summaries()
        codes = _lookup(self._codes, names, self._n)[attr]
        codes[self._presence[np.maximum(codes, 0)] <= 0] = -1
        cls = np.where(kinds == KIND_STRING, CLASS_STRING, np.where(kinds == KIND_BOOL, CLASS_BOOL, CLASS_NUMBER))
        value = np.where(kinds == KIND_BOOL, (numbers != 0).astype(np.float64), numbers)
        text = kinds == KIND_STRING
        if text.any():
            sids = _lookup(self._string_ids, strings, self._n_strings)
            value[text] = sids[numbers[text].astype(np.int64)]
        known = codes >= 0
        c = np.maximum(codes, 0)
        row = np.full(len(attr), -1, dtype=np.int64)
        ask = known & ~(text & (value < 0))
        row[ask] = self._find(codes[ask] * N_CLASSES + cls[ask], value[ask])
        rest = np.maximum(0.0, 1.0 - top_sum[c])
        unseen = np.diff(starts)[c] - n_top[c]
        spread = np.divide(rest, unseen, out=np.zeros(len(attr)), where=unseen > 0)
        hit = row >= 0
        hit[hit] = in_top[row[hit]]
        given = spread.copy()
        given[hit] = self._count[row[hit]] / total[c[hit]]
        return np.where(known, self._presence[c] * given, 0.0)


class StatisticsCollector:
    """Online statistics over a sample of the event stream, with decay.

    ``observe`` takes encoded batches (at most ``sample_per_batch`` events of
    each are counted, so the cost per batch is bounded).  Counts are halved
    every ``half_life`` observed events, so a shift in the stream (Fabret et
    al., section 6.2.2) shows in the snapshot after a few half-lives, and the
    per-value tables stay bounded: entries whose decayed count falls under
    ``min_count`` are dropped.

    Counts live in arrays, not Python objects: a presence count per attribute
    code and one sorted table of (attribute, value class, value) rows with
    their decayed counts, strings by id in a dictionary of their own.  A batch
    appends its rows to a pending buffer, merged into the table at
    ``MERGE_ROWS``, at decay and at snapshot.  Attribute names and strings
    that decay dropped leave their dictionaries once more than
    ``compact_after`` and more than half of them are dead.
    """

    def __init__(self, top_k: int = 64, half_life: int = 20_000, sample_per_batch: int = 256, min_count: float = 0.5,
                 compact_after: int = 1024):
        self.top_k = top_k
        self.half_life = half_life
        self.sample_per_batch = sample_per_batch
        self.min_count = min_count
        self.compact_after = compact_after
        self._events = 0.0
        self._since_decay = 0
        self._codes: dict[str, int] = {}  # attribute name -> code
        self._names: list[str] = []  # by code
        self._presence = np.zeros(0, dtype=np.float64)  # decayed count of pairs by code; 0: dropped
        self._string_ids: dict[str, int] = {}
        self._strings: list[str] = []  # by id
        self._key = np.zeros(0, dtype=np.int64)  # code * N_CLASSES + class, sorted with value
        self._value = np.zeros(0, dtype=np.float64)  # number, 0 / 1, or string id
        self._count = np.zeros(0, dtype=np.float64)
        self._seq = np.zeros(0, dtype=np.int64)  # when the row was first seen (ties of the top list)
        self._next_seq = 0
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    @property
    def observed(self) -> float:
        return self._events

    def memory_bytes(self) -> int:
        """Bytes of the count arrays (the dictionaries of names and strings not included)."""
        return int(self._presence.nbytes + self._key.nbytes + self._value.nbytes + self._count.nbytes
                   + self._seq.nbytes + sum(a.nbytes for p in self._pending for a in p))

    def _intern_names(self, names: list[str]) -> np.ndarray:
        codes = self._codes
        for name in names:
            if name not in codes:
                codes[name] = len(self._names)
                self._names.append(name)
        if len(self._names) > len(self._presence):
            self._presence = np.concatenate([self._presence, np.zeros(len(self._names) - len(self._presence))])
        return np.fromiter(map(codes.__getitem__, names), dtype=np.int64, count=len(names))

    def _intern_strings(self, strings: list[str]) -> np.ndarray:
        ids = self._string_ids
        for s in dict.fromkeys(strings):
            if s not in ids:
                ids[s] = len(self._strings)
                self._strings.append(s)
        return np.fromiter(map(ids.__getitem__, strings), dtype=np.int64, count=len(strings))

    def _push(self, key: np.ndarray, value: np.ndarray, count: np.ndarray) -> None:
        """Rows to add, in the order they are first seen."""
        seq = np.arange(self._next_seq, self._next_seq + len(key), dtype=np.int64)
        self._next_seq += len(key)
        self._pending.append((key, value, count, seq))
        self._pending_rows += len(key)

    def observe(self, batch: EventBatch) -> None:
        n = len(batch)
        if n == 0:
            return
        take = min(n, self.sample_per_batch)
        rows = np.linspace(0, n - 1, take).astype(np.int64) if take < n else np.arange(n)
        starts, ends = batch.offsets[rows], batch.offsets[rows + 1]
        pos, _ = csr_positions(starts, ends - starts)
        attrs = batch.attributes[pos]
        kinds = batch.kinds[pos]
        numbers = batch.numbers[pos]
        self._events += take
        used, inverse = np.unique(attrs, return_inverse=True)
        codes = self._intern_names([batch.attribute_names[a] for a in used.tolist()])
        np.add.at(self._presence, codes, np.bincount(inverse, minlength=len(used)).astype(np.float64))
        code = codes[inverse.reshape(-1)]
        # numbers and booleans: distinct (attribute, class, value) rows of the batch by one lexsort
        plain = (kinds != KIND_STRING) & ~np.isnan(numbers)
        if plain.any():
            boolean = kinds[plain] == KIND_BOOL
            key = code[plain] * N_CLASSES + np.where(boolean, CLASS_BOOL, CLASS_NUMBER)
            x = np.where(boolean, (numbers[plain] != 0).astype(np.float64), numbers[plain] + 0.0)  # -0.0 is 0.0
            order = np.lexsort((x, key))
            key, x = key[order], x[order]
            first = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]) | (x[1:] != x[:-1])])
            self._push(key[first], x[first], np.diff(np.r_[first, len(key)]).astype(np.float64))
        sampled = np.flatnonzero(kinds == KIND_STRING)
        if len(sampled):
            # each sampled string's index among the batch's strings (a pass over the whole batch)
            index = (np.cumsum(batch.kinds == KIND_STRING) - 1)[pos[sampled]]
            sids = self._intern_strings(picked(batch.strings, index))
            key = code[sampled] * N_CLASSES + CLASS_STRING
            order = np.lexsort((sids, key))  # stable: equal rows keep the batch's order
            key, sid = key[order], sids[order]
            first = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]) | (sid[1:] != sid[:-1])])
            counts = np.diff(np.r_[first, len(key)]).astype(np.float64)
            seen = np.argsort(order[first], kind="stable")  # rows in the order of their first occurrence
            self._push(key[first][seen], sid[first][seen].astype(np.float64), counts[seen])
        if self._pending_rows >= MERGE_ROWS:
            self._merge()
        self._since_decay += take
        while self._since_decay >= self.half_life:
            self._since_decay -= self.half_life
            self._decay()

    def _merge(self) -> None:
        """The pending rows into the sorted table: one row per (key, value), counts added, the first sighting kept."""
        if not self._pending:
            return
        parts = [(self._key, self._value, self._count, self._seq), *self._pending]
        key, value, count, seq = (np.concatenate([p[i] for p in parts]) for i in range(4))
        self._pending, self._pending_rows = [], 0
        order = np.lexsort((value, key))  # stable: the table's row first, then the pending ones as they came
        key, value, count, seq = key[order], value[order], count[order], seq[order]
        first = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]) | (value[1:] != value[:-1])])
        self._key, self._value = key[first], value[first]
        self._count, self._seq = np.add.reduceat(count, first), np.minimum.reduceat(seq, first)
        _frozen(self._key, self._value, self._count, self._seq)

    def _decay(self) -> None:
        self._merge()
        self._events *= 0.5
        presence = self._presence * 0.5
        presence[presence < self.min_count] = 0.0
        self._presence = presence
        count = self._count * 0.5
        keep = count >= self.min_count
        self._key, self._value, self._count, self._seq = self._key[keep], self._value[keep], count[keep], self._seq[keep]
        self._compact()
        _frozen(self._key, self._value, self._count, self._seq)

    def _compact(self) -> None:
        """New dictionaries without the names and strings decay dropped, once these are most of them.

        New objects, not edits: snapshots keep reading the ones they were made with.
        """
        alive = self._presence > 0
        live = int(alive.sum())
        if len(self._names) - live > max(self.compact_after, live):
            attr = self._key // N_CLASSES
            keep = alive[attr]
            renumber = np.cumsum(alive) - 1
            self._key = renumber[attr[keep]] * N_CLASSES + self._key[keep] % N_CLASSES
            self._value, self._count, self._seq = self._value[keep], self._count[keep], self._seq[keep]
            self._names = [name for name, a in zip(self._names, alive.tolist()) if a]
            self._codes = {name: i for i, name in enumerate(self._names)}
            self._presence = self._presence[alive]
        text = self._key % N_CLASSES == CLASS_STRING
        used = np.zeros(len(self._strings), dtype=bool)
        used[self._value[text].astype(np.int64)] = True
        live = int(used.sum())
        if len(self._strings) - live > max(self.compact_after, live):
            renumber = np.cumsum(used) - 1
            value = self._value.copy()
            value[text] = renumber[value[text].astype(np.int64)]
            self._value = value
            self._strings = [s for s, u in zip(self._strings, used.tolist()) if u]
            self._string_ids = {s: i for i, s in enumerate(self._strings)}

    def snapshot(self) -> EventStatistics:
        if self._events <= 0:
            return EventStatistics.uniform()
        self._merge()
        presence = np.minimum(1.0, self._presence / self._events)
        _frozen(presence)
        table = AttributeTable(self._names, self._codes, presence, self._key, self._value, self._count, self._seq,
                               self._strings, self._string_ids, self.top_k)
        return EventStatistics(event_count=int(round(self._events)), attributes=table, source="online")


# --- snapshots larger than one record --------------------------------------------------

#: Default bound on one encoded part: under Kafka's default 1 MB record (and batch) limit, with room for headers.
MAX_PART_BYTES = 900_000
#: Attributes sized together when splitting (runs over the bound are halved).
SIZE_RUN = 512


def split_record(record: Mapping[str, Any], size_of: Callable[[Mapping[str, Any]], int],
                 max_bytes: int = MAX_PART_BYTES) -> list[dict[str, Any]]:
    """Split a snapshot record (``EventStatistics.to_record()``) into parts that each encode under ``max_bytes``.

    A snapshot of tens of thousands of attributes is tens of MB with its top
    values and quantiles; Kafka refuses records over 1 MB by default.  Nothing
    is dropped: attributes are split in name order, the attribute sets go in
    part 0, every part carries the counts and the window, and
    ``part = {snapshot, index, count}`` lets a reader put them back together
    (:class:`SnapshotParts`).  ``size_of``: the encoded size of a record (the
    wire codec's).  A record that fits is returned whole (``part`` null).
    """
    whole = dict(record, part=None)
    attributes = list(record["attributes"])
    window = record.get("window") or {}
    snapshot = int(window.get("computed_at_ms") or 0) or int(record.get("event_count") or 0)
    # the part's numbers at their largest (at most one part per attribute): sizes measured with them are upper bounds
    most = max(len(attributes), 1)
    bare = dict(record, attributes=[], schemas=[], part={"snapshot": snapshot, "index": most, "count": most})
    base = size_of(bare)
    head = size_of(dict(bare, schemas=record["schemas"]))
    if head > max_bytes:
        raise ValueError(f"the attribute sets of the snapshot alone encode to {head} bytes, over {max_bytes}: "
                         "measure fewer joint sets (--max-sets, --joint-top-k)")
    # sizes of runs of attributes (each run encoded once: the whole snapshot is encoded about once in all)
    runs: list[tuple[int, int, int]] = []  # (start, end, bytes beyond the bare record)
    todo = [(lo, min(lo + SIZE_RUN, len(attributes))) for lo in range(0, len(attributes), SIZE_RUN)][::-1]
    while todo:
        lo, hi = todo.pop()
        extra = size_of(dict(bare, attributes=attributes[lo:hi])) - base
        if base + extra > max_bytes and hi - lo > 1:
            mid = (lo + hi) // 2
            todo += [(mid, hi), (lo, mid)]
            continue
        if base + extra > max_bytes:
            raise ValueError(f"one attribute's statistics encode to {base + extra} bytes, over {max_bytes}")
        runs.append((lo, hi, extra + 16))  # +16: the array block header of a run joined to others
    if head + sum(r[2] for r in runs) <= max_bytes:
        return [whole]
    groups: list[list[dict]] = [[]]
    used = head
    for lo, hi, extra in runs:
        if used + extra > max_bytes and groups[-1]:
            groups.append([])
            used = base
        groups[-1].extend(attributes[lo:hi])
        used += extra

    def parts(groups: list[list[dict]]) -> list[dict[str, Any]]:
        return [dict(record, attributes=g, schemas=record["schemas"] if i == 0 else [],
                     part={"snapshot": snapshot, "index": i, "count": len(groups)}) for i, g in enumerate(groups)]

    # the run sizes add up to an estimate (block headers joined); a part over the bound is halved until none is
    while True:
        over = [i for i, p in enumerate(parts(groups)) if len(groups[i]) > 1 and size_of(p) > max_bytes]
        if not over:
            return parts(groups)
        for i in reversed(over):
            g = groups[i]
            groups[i:i + 1] = [g[:len(g) // 2], g[len(g) // 2:]]


class SnapshotParts:
    """Puts split snapshots back together: ``add`` each record as it is read; a whole record comes out when complete.

    Parts of a snapshot are kept until all arrived; a part of a newer snapshot
    drops the incomplete older ones (compaction may leave stale parts of any
    snapshot behind, and a snapshot with fewer parts leaves the older extra ones).
    """

    def __init__(self) -> None:
        self._parts: dict[int, dict[int, Mapping[str, Any]]] = {}

    def add(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        part = record.get("part")
        if part is None:
            return dict(record)
        snapshot, index, count = int(part["snapshot"]), int(part["index"]), int(part["count"])
        if not 0 <= index < count:
            raise ValueError(f"snapshot part {index} of {count}")
        newest = max(self._parts, default=snapshot)
        if snapshot < newest:
            return None  # a stale part of an older snapshot
        for s in [s for s in self._parts if s < snapshot]:
            del self._parts[s]
        got = self._parts.setdefault(snapshot, {})
        got[index] = record
        if len(got) < count or any(int(r["part"]["count"]) != count for r in got.values()):
            return None
        del self._parts[snapshot]
        ordered = [got[i] for i in range(count)]
        return dict(ordered[0], part=None, attributes=[a for r in ordered for a in r["attributes"]],
                    schemas=[s for r in ordered for s in r["schemas"]])
