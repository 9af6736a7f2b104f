"""The statistics the cost model needs, computed with Spark from partial counts.

Input: DataFrames of :data:`spark_jobs.partial_counts.SCHEMA` (counts per
decoded batch, made in the executors); Spark merges them across batches and
splits and derives the snapshot, an :class:`engine.statistics.EventStatistics`
with ``source="spark"``:

* Per attribute, from the merged (attribute, value) counts: presence, value
  types, distinct values, top-K values, and quantiles of the numeric values,
  exact: the value at rank ``floor(j * (n - 1) / (q - 1))`` of the sorted
  values, j = 0..q-1.
* Per attribute set: events with dense schemas (32 attributes) would make
  pair/triple self-joins explode, so each event's schema (its sorted attribute
  names) is counted once; pairs and triples of frequent attributes are
  enumerated per *distinct* schema, weighted by its count, and kept when
  their support reaches ``min_support``.  At most ``max_sets`` sets are
  reported, most frequent first.
* Joint value frequencies (top-K combinations) for the ``joint_sets`` most
  frequent of those sets (or the sets named in ``joint_attributes``): counted
  in the first pass where every batch guessed the set, else in a second pass
  over the window (``spark_jobs.partial_counts``).

NaN values count towards presence, value types and distinct values but are
left out of top values, joint values and quantiles: no predicate matches them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from engine.semantics import KIND_BOOL, KIND_NUMBER, KIND_STRING, KINDS
from engine.statistics import AttributeStats, EventStatistics

from .partial_counts import set_order

log = logging.getLogger(__name__)


@dataclass
class StatisticsOptions:
    top_k: int = 20  # most frequent values per attribute
    quantiles: int = 11  # numeric histogram points, min to max (11: deciles)
    min_support: float = 0.01  # minimal P(event contains the set) of a reported pair or triple
    max_sets: int = 10_000  # reported pairs and triples, most frequent first
    joint_sets: int = 16  # sets (the most frequent) that get joint value frequencies
    joint_top_k: int = 20  # value combinations per set
    joint_attributes: list[tuple[str, ...]] = field(default_factory=list)  # explicit joint sets instead

    def __post_init__(self) -> None:
        if self.top_k < 0 or self.joint_top_k < 0 or self.joint_sets < 0 or self.max_sets < 0:
            raise ValueError("top-k, joint-top-k, joint-sets and max-sets must be >= 0")
        if self.quantiles == 1 or self.quantiles < 0:
            raise ValueError("quantiles must be 0 (none) or at least 2 (min and max)")
        if not 0.0 < self.min_support <= 1.0:
            raise ValueError(f"min-support must be in (0, 1], got {self.min_support}")
        for s in self.joint_attributes:
            if len(s) < 2 or len(set(s)) != len(s):
                raise ValueError(f"a joint attribute set needs at least 2 distinct attributes, got {s}")


def value_key(kind: int, number: float, string: str | None) -> tuple:
    """A Spark value (kind, number, string) as the key ``engine.statistics`` uses."""
    if kind == KIND_STRING:
        return (1, string)
    if kind == KIND_BOOL:
        return (2, bool(number))
    return (0, float(number))


@dataclass
class WindowSummary:
    records: int
    events: int
    bad: int
    first_timestamp_ms: int | None
    last_timestamp_ms: int | None
    bad_reasons: list[tuple[str, int]]


def summarize(partials: DataFrame) -> WindowSummary:
    """Counts and time range of the records (one Spark job; one more for the reasons if any are bad)."""
    r = partials.where(F.col("table") == "records").agg(
        F.sum("count").alias("records"), F.sum("bad").alias("bad"), F.min("min_ts").alias("first"), F.max("max_ts").alias("last"),
    ).first()
    records, bad = int(r["records"] or 0), int(r["bad"] or 0)
    reasons = []
    if bad:
        reasons = [(x["reason"], int(x["count"])) for x in
                   partials.where(F.col("table") == "bad").groupBy("reason").agg(F.sum("count").alias("count"))
                   .orderBy(F.desc("count"), "reason").limit(5).collect()]
    return WindowSummary(records, records - bad, bad, r["first"], r["last"], reasons)


def _attribute_statistics(values: DataFrame, n_events: int, opts: StatisticsOptions) -> dict[str, AttributeStats]:
    """From the (attribute, kind, number, string, count) table."""
    per_attr = values.groupBy("attribute").agg(
        F.sum("count").alias("present"),
        F.count(F.lit(1)).alias("distinct"),
        *[F.sum(F.when(F.col("kind") == k, F.col("count")).otherwise(0)).alias(f"kind{k}") for k in range(len(KINDS))],
    ).collect()
    usable = values.where(~((F.col("kind") == KIND_NUMBER) & F.isnan("number")))
    rank = Window.partitionBy("attribute").orderBy(F.desc("count"), "kind", "number", "string")
    top = (usable.withColumn("rank", F.row_number().over(rank)).where(F.col("rank") <= opts.top_k).collect()
           if opts.top_k else [])
    quantiles: dict[str, list[tuple[int, float]]] = {}
    if opts.quantiles:
        q = opts.quantiles
        numeric = usable.where(F.col("kind") == KIND_NUMBER)
        by_attr = Window.partitionBy("attribute")
        running = by_attr.orderBy("number").rowsBetween(Window.unboundedPreceding, Window.currentRow)
        # this value occupies sorted positions lo..hi; quantile j is at position floor(j * (n - 1) / (q - 1))
        points = (
            numeric.withColumn("n", F.sum("count").over(by_attr))
            .withColumn("hi", F.sum("count").over(running) - 1)
            .withColumn("lo", F.col("hi") - F.col("count") + 1)
            .withColumn("j", F.explode(F.filter(
                F.sequence(F.lit(0), F.lit(q - 1)),
                lambda j: ((j * (F.col("n") - 1)).cast("long") / (q - 1)).cast("long").between(F.col("lo"), F.col("hi")),
            )))
            .select("attribute", "j", "number")
            .collect()
        )
        for p in points:
            quantiles.setdefault(p["attribute"], []).append((p["j"], p["number"]))
    tops: dict[str, dict[tuple, float]] = {}
    present = {r["attribute"]: r["present"] for r in per_attr}
    for t in sorted(top, key=lambda t: (t["attribute"], t["rank"])):
        tops.setdefault(t["attribute"], {})[value_key(t["kind"], t["number"], t["string"])] = t["count"] / present[t["attribute"]]
    return {
        r["attribute"]: AttributeStats(
            presence=r["present"] / n_events,
            distinct=int(r["distinct"]),
            top_values=tops.get(r["attribute"], {}),
            quantiles=[x for _, x in sorted(quantiles.get(r["attribute"], []))],
            value_types={KINDS[k]: r[f"kind{k}"] / r["present"] for k in range(len(KINDS)) if r[f"kind{k}"]},
        )
        for r in per_attr
    }


def _pairs(s):
    n = F.size(s)
    return F.flatten(F.transform(
        F.sequence(F.lit(0), n - 2),
        lambda i: F.transform(F.sequence(i + 1, n - 1), lambda j: F.array(s[i], s[j])),
    ))


def _triples(s):
    n = F.size(s)
    return F.flatten(F.flatten(F.transform(
        F.sequence(F.lit(0), n - 3),
        lambda i: F.transform(
            F.sequence(i + 1, n - 2),
            lambda j: F.transform(F.sequence(j + 1, n - 1), lambda k: F.array(s[i], s[j], s[k])),
        ),
    )))


def _frequent_sets(schemas: DataFrame, frequent: list[str], size: int, min_count: float) -> DataFrame:
    """Attribute sets of ``size`` (2 or 3) of ``frequent`` attributes with support >= ``min_count``."""
    allowed = F.array(*[F.lit(a) for a in frequent]) if frequent else F.array().cast("array<string>")
    kept = schemas.select(F.filter("schema", lambda a: F.array_contains(allowed, a)).alias("s"), "count")
    combos = _pairs(F.col("s")) if size == 2 else _triples(F.col("s"))
    return (
        kept.where(F.size("s") >= size)
        .select(F.explode(combos).alias("attributes"), "count")
        .groupBy("attributes").agg(F.sum("count").alias("support"))
        .where(F.col("support") >= min_count)
    )


def _schema_statistics(partials: DataFrame, attributes: dict[str, AttributeStats], n_events: int,
                       opts: StatisticsOptions) -> list[tuple[tuple[str, ...], int]]:
    """Frequent pairs and triples with their support, most frequent first (at most ``max_sets``)."""
    min_count = opts.min_support * n_events
    schemas = (partials.where(F.col("table") == "schema").groupBy("schema").agg(F.sum("count").alias("count")).cache())
    try:
        f1 = sorted(a for a, st in attributes.items() if st.presence * n_events >= min_count)
        pairs = _frequent_sets(schemas, f1, 2, min_count).collect()
        f2 = sorted({a for p in pairs for a in p["attributes"]})
        triples = _frequent_sets(schemas, f2, 3, min_count).collect() if len(f2) >= 3 else []
    finally:
        schemas.unpersist()
    found = sorted(((tuple(r["attributes"]), int(r["support"])) for r in pairs + triples), key=lambda x: set_order(*x))
    log.info("%d frequent attributes, %d frequent pairs, %d frequent triples (min support %g)",
             len(f1), len(pairs), len(triples), opts.min_support)
    if len(found) > opts.max_sets:
        log.warning("reporting the %d most frequent of %d frequent sets (--max-sets)", opts.max_sets, len(found))
    return found[: opts.max_sets]


def _joint_frequencies(joint_rows: DataFrame, sets: list[tuple[str, ...]], n_events: int,
                       opts: StatisticsOptions) -> tuple[dict[tuple[str, ...], dict[tuple, float]], dict[tuple[str, ...], int]]:
    """Top value combinations of each set (probabilities over all events) and each set's support."""
    # one Spark job: each set's support (NaN combinations included) travels with its ranked rows, and
    # one row per set is kept even if none ranks (all NaN, or joint_top_k 0) so that the support arrives
    ranked = (
        joint_rows.groupBy("schema", "values").agg(F.sum("count").alias("count"))
        .withColumn("support", F.sum("count").over(Window.partitionBy("schema")))
        .withColumn("nan", F.exists("values", lambda v: (v["kind"] == KIND_NUMBER) & F.isnan(v["number"])))
        .withColumn("rank", F.row_number().over(Window.partitionBy("schema", "nan").orderBy(F.desc("count"), "values")))
        .withColumn("first", F.row_number().over(Window.partitionBy("schema").orderBy("nan", F.desc("count"), "values")))
        .where((~F.col("nan") & (F.col("rank") <= opts.joint_top_k)) | (F.col("first") == 1))
        .collect()
    )
    support = {tuple(r["schema"]): int(r["support"]) for r in ranked}
    top = [r for r in ranked if not r["nan"] and r["rank"] <= opts.joint_top_k]
    joint: dict[tuple[str, ...], dict[tuple, float]] = {}
    for r in sorted(top, key=lambda r: (tuple(r["schema"]), r["rank"])):
        key = tuple(value_key(v["kind"], v["number"], v["string"]) for v in r["values"])
        joint.setdefault(tuple(r["schema"]), {})[key] = r["count"] / n_events
    return joint, support


def _joint_rows(partials: DataFrame, sets: list[tuple[str, ...]], n_events: int,
                joint_partials: Callable[[list[tuple[str, ...]]], DataFrame]) -> DataFrame:
    """Joint rows of ``sets``: the first pass's where every batch covered the set, a second pass for the rest."""
    covered_by = {tuple(r["schema"]): int(r["count"]) for r in
                  partials.where(F.col("table") == "cover").groupBy("schema").agg(F.sum("count").alias("count")).collect()}
    covered = [s for s in sets if covered_by.get(s) == n_events]
    missing = [s for s in sets if covered_by.get(s) != n_events]
    log.info("joint value frequencies of %d sets: %d counted in the first pass%s", len(sets), len(covered),
             f", a second pass for {len(missing)}" if missing else "")
    spark = partials.sparkSession
    frames = []
    if covered:
        keep = spark.createDataFrame([(list(s),) for s in covered], "schema array<string>")
        frames.append(partials.where(F.col("table") == "joint").join(F.broadcast(keep), "schema"))
    if missing:
        frames.append(joint_partials(missing).where(F.col("table") == "joint"))
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def compute_statistics(partials: DataFrame, opts: StatisticsOptions, summary: WindowSummary,
                       joint_partials: Callable[[list[tuple[str, ...]]], DataFrame]) -> EventStatistics:
    """The snapshot from the first pass's ``partials`` (``summary`` from :func:`summarize` on them);
    ``joint_partials(sets)`` runs the joint pass."""
    n = summary.events
    if n == 0:
        return EventStatistics(event_count=0, source="spark", bad_records=summary.bad)
    values = (
        partials.where(F.col("table") == "value")
        .groupBy("attribute", "kind", "number", "string").agg(F.sum("count").alias("count"))
        .cache()
    )
    try:
        log.info("per-attribute statistics (top %d values, %d quantiles)", opts.top_k, opts.quantiles)
        attributes = _attribute_statistics(values, n, opts)
    finally:
        values.unpersist()
    log.info("%d attributes; frequent attribute sets", len(attributes))
    found = _schema_statistics(partials, attributes, n, opts)
    sets = [tuple(sorted(s)) for s in opts.joint_attributes] or [s for s, _ in found[: opts.joint_sets]]
    joint: dict[tuple[str, ...], dict[tuple, float]] = {}
    joint_support: dict[tuple[str, ...], int] = {}
    if sets and (opts.joint_top_k or opts.joint_attributes):
        joint, joint_support = _joint_frequencies(_joint_rows(partials, sets, n, joint_partials), sets, n, opts)
    schemas = {frozenset(s): c / n for s, c in found}
    for s in sets:  # explicitly requested sets are reported even below the support threshold
        schemas.setdefault(frozenset(s), joint_support.get(s, 0) / n)
    return EventStatistics(event_count=n, attributes=attributes, schemas=schemas, joint=joint, source="spark",
                           bad_records=summary.bad)
