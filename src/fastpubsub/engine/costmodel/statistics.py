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
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..columnar import EventBatch
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
    attributes: dict[str, AttributeStats] = field(default_factory=dict)
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
        st = self.attributes.get(attribute)
        if st is None:
            return 1.0 if self.source == "uniform" else 0.0
        return st.presence

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


def _weighted_quantiles(values_and_weights: list[tuple[float, float]], n: int = 11) -> list[float]:
    """Deciles (``n`` evenly spaced ranks) of a weighted sorted sample."""
    if not values_and_weights:
        return []
    values = np.array([v for v, _ in values_and_weights])
    cum = np.cumsum([w for _, w in values_and_weights])
    ranks = np.linspace(0.0, cum[-1], n)
    idx = np.minimum(np.searchsorted(cum, ranks, side="left"), len(values) - 1)
    return [float(x) for x in values[idx]]


class StatisticsCollector:
    """Online statistics over a sample of the event stream, with decay.

    ``observe`` takes encoded batches (at most ``sample_per_batch`` events of
    each are counted, so the cost per batch is bounded).  Counts are halved
    every ``half_life`` observed events, so a shift in the stream (Fabret et
    al., section 6.2.2) shows in the snapshot after a few half-lives, and the
    per-value tables stay bounded: entries whose decayed count falls under
    ``min_count`` are dropped.
    """

    def __init__(self, top_k: int = 64, half_life: int = 20_000, sample_per_batch: int = 256, min_count: float = 0.5):
        self.top_k = top_k
        self.half_life = half_life
        self.sample_per_batch = sample_per_batch
        self.min_count = min_count
        self._events = 0.0
        self._since_decay = 0
        self._presence: dict[str, float] = {}
        self._values: dict[str, dict[tuple[int, Any], float]] = {}

    @property
    def observed(self) -> float:
        return self._events

    def observe(self, batch: EventBatch) -> None:
        n = len(batch)
        if n == 0:
            return
        take = min(n, self.sample_per_batch)
        rows = np.linspace(0, n - 1, take).astype(np.int64) if take < n else np.arange(n)
        starts, ends = batch.offsets[rows], batch.offsets[rows + 1]
        lengths = ends - starts
        pos = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        names = batch.attribute_names
        attrs = batch.attributes[pos]
        kinds = batch.kinds[pos]
        numbers = batch.numbers[pos]
        self._events += take
        for code, count in zip(*np.unique(attrs, return_counts=True)):
            name = names[int(code)]
            self._presence[name] = self._presence.get(name, 0.0) + float(count)
        # numbers and booleans, grouped by (attribute, kind, value)
        plain = (kinds != KIND_STRING) & ~np.isnan(numbers)
        if plain.any():
            # distinct (attribute, kind, value) rows by one lexsort (np.unique(axis=0) sorts rows as objects)
            a, k, x = attrs[plain], kinds[plain], numbers[plain]
            order = np.lexsort((x, k, a))
            a, k, x = a[order], k[order], x[order]
            first = np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (k[1:] != k[:-1]) | (x[1:] != x[:-1])])
            counts = np.diff(np.r_[first, len(a)])
            for ai, ki, xi, c in zip(a[first].tolist(), k[first].tolist(), x[first].tolist(), counts.tolist()):
                key = (2, bool(xi)) if ki == KIND_BOOL else (0, float(xi))
                table = self._values.setdefault(names[ai], {})
                table[key] = table.get(key, 0.0) + c
        sampled_strings = np.flatnonzero(kinds == KIND_STRING).tolist()
        # each pair's index among the batch's strings, for the sampled ones only (a pass over the whole batch)
        string_index = np.cumsum(batch.kinds == KIND_STRING) - 1 if sampled_strings else None
        for p in sampled_strings:
            name = names[int(attrs[p])]
            key = (1, batch.strings[int(string_index[pos[p]])])
            table = self._values.setdefault(name, {})
            table[key] = table.get(key, 0.0) + 1.0
        self._since_decay += take
        while self._since_decay >= self.half_life:
            self._since_decay -= self.half_life
            self._decay()

    def _decay(self) -> None:
        self._events *= 0.5
        self._presence = {a: c * 0.5 for a, c in self._presence.items() if c * 0.5 >= self.min_count}
        for name in list(self._values):
            table = {k: c * 0.5 for k, c in self._values[name].items() if c * 0.5 >= self.min_count}
            if table:
                self._values[name] = table
            else:
                del self._values[name]

    def snapshot(self) -> EventStatistics:
        if self._events <= 0:
            return EventStatistics.uniform()
        attributes: dict[str, AttributeStats] = {}
        for name, present in self._presence.items():
            table = self._values.get(name, {})
            total = sum(table.values()) or 1.0
            top = sorted(table.items(), key=lambda kv: -kv[1])[: self.top_k]
            numeric = sorted((k[1], c) for k, c in table.items() if k[0] == 0)
            attributes[name] = AttributeStats(
                presence=min(1.0, present / self._events),
                distinct=len(table),
                top_values={k: c / total for k, c in top},
                quantiles=_weighted_quantiles(numeric),
            )
        return EventStatistics(event_count=int(round(self._events)), attributes=attributes, source="online")


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
