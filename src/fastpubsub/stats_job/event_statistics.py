"""The statistics the cost model needs, computed with Spark from partial counts.

Input: DataFrames of :data:`fastpubsub.stats_job.partial_counts.SCHEMA` (counts per
decoded batch, made in the executors).  Spark merges them across batches and
splits in one job and hands the merged tables to the driver as Arrow; they are
small (a row per distinct attribute value, per distinct schema, per distinct
value combination of a guessed joint set), and the driver derives the snapshot,
an :class:`engine.costmodel.statistics.EventStatistics` with ``source="spark"``, with
numpy.  A group of more than ``driver_rows`` merged rows (a high-cardinality
attribute, very many distinct schemas, a joint set with many combinations)
stays in Spark: only its row count reaches the driver and Spark derives its
statistics, as the driver would (the ``_spark`` functions below), in a few
more jobs.  The statistics:

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
  over the window (``fastpubsub.stats_job.partial_counts``).

NaN values count towards presence, value types and distinct values but are
left out of top values, joint values and quantiles: no predicate matches them.
"""

from __future__ import annotations

import heapq
import logging
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from fastpubsub.engine import KIND_BOOL, KIND_NUMBER, KIND_STRING, KINDS
from fastpubsub.engine import AttributeStats, EventStatistics

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
    driver_rows: int = 10_000  # merged rows per attribute / schema table / joint set derived on the driver

    def __post_init__(self) -> None:
        if self.top_k < 0 or self.joint_top_k < 0 or self.joint_sets < 0 or self.max_sets < 0:
            raise ValueError("top-k, joint-top-k, joint-sets and max-sets must be >= 0")
        if self.driver_rows < 1:
            raise ValueError(f"driver-rows must be >= 1, got {self.driver_rows}")
        if self.quantiles == 1 or self.quantiles < 0:
            raise ValueError("quantiles must be 0 (none) or at least 2 (min and max)")
        if not 0.0 < self.min_support <= 1.0:
            raise ValueError(f"min-support must be in (0, 1], got {self.min_support}")
        for s in self.joint_attributes:
            if len(s) < 2 or len(set(s)) != len(s):
                raise ValueError(f"a joint attribute set needs at least 2 distinct attributes, got {s}")


def value_key(kind: int, number: float, string: str | None) -> tuple:
    """A Spark value (kind, number, string) as the key ``engine.costmodel.statistics`` uses."""
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


def _attribute_statistics_spark(values: DataFrame, n_events: int, opts: StatisticsOptions) -> dict[str, AttributeStats]:
    """From the merged (attribute, kind, number, string, count) table, in Spark (3 jobs)."""
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


def _schema_statistics_spark(partials: DataFrame, attributes: dict[str, AttributeStats], n_events: int,
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
    return _reported_sets([(tuple(r["attributes"]), int(r["support"])) for r in pairs],
                          [(tuple(r["attributes"]), int(r["support"])) for r in triples], len(f1), opts)


def _reported_sets(pairs: list[tuple[tuple[str, ...], int]], triples: list[tuple[tuple[str, ...], int]],
                   n_frequent: int, opts: StatisticsOptions) -> list[tuple[tuple[str, ...], int]]:
    found = sorted(pairs + triples, key=lambda x: set_order(*x))
    log.info("%d frequent attributes, %d frequent pairs, %d frequent triples (min support %g)",
             n_frequent, len(pairs), len(triples), opts.min_support)
    if len(found) > opts.max_sets:
        log.warning("reporting the %d most frequent of %d frequent sets (--max-sets)", opts.max_sets, len(found))
    return found[: opts.max_sets]


def _joint_frequencies_spark(joint_rows: DataFrame, sets: list[tuple[str, ...]], n_events: int,
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


def _merged_small_tables(partials: DataFrame, limit: int) -> pa.Table:
    """One Spark job: the value, schema, joint and cover tables merged across batches, as Arrow on the driver.

    A group (an attribute's values, the schemas, a joint set's combinations) of more than ``limit``
    rows arrives as one row with ``rows`` > ``limit``: the caller derives that group in Spark instead.
    """
    group = (F.when(F.col("table") == "value", F.array("attribute"))
             .when(F.col("table").isin("joint", "cover"), F.col("schema"))
             .otherwise(F.array().cast("array<string>")))
    by_group = Window.partitionBy("table", "group")
    return (
        partials.where(F.col("table").isin("value", "schema", "joint", "cover"))
        .groupBy("table", "attribute", "kind", "number", "string", "schema", "values").agg(F.sum("count").alias("count"))
        .withColumn("group", group)
        .withColumn("rows", F.count(F.lit(1)).over(by_group))
        .withColumn("i", F.row_number().over(by_group.orderBy(F.desc("count"))))
        .where((F.col("rows") <= limit) | (F.col("i") == 1))
        .drop("group", "i")
        .toArrow()
    )


def _groups(merged: pa.Table, table: str, limit: int) -> tuple[pa.Table, pa.Table]:
    """The rows of ``table`` whose group came whole, and the marker rows of those that stayed in Spark."""
    rows = merged.filter(pc.equal(merged["table"], table))
    small = pc.less_equal(rows["rows"], limit)
    return rows.filter(small), rows.filter(pc.invert(small))


def _top(items, k: int, order) -> list:
    """The ``k`` first of ``items`` by ``order`` (a sort key), in that order."""
    return heapq.nsmallest(k, items, key=order) if k else []


def _attribute_statistics_local(values: pa.Table, n_events: int, opts: StatisticsOptions) -> dict[str, AttributeStats]:
    """The same as :func:`_attribute_statistics_spark`, on the driver, from the merged value rows."""
    by_attr: dict[str, list[tuple[int, float, str | None, int]]] = {}
    for row in zip(*(values[c].to_pylist() for c in ("attribute", "kind", "number", "string", "count"))):
        by_attr.setdefault(row[0], []).append(row[1:])
    q = opts.quantiles
    out = {}
    for attribute, rows in by_attr.items():
        present = sum(r[3] for r in rows)
        kinds = [0] * len(KINDS)
        for kind, _, _, count in rows:
            kinds[kind] += count
        usable = [r for r in rows if not (r[0] == KIND_NUMBER and math.isnan(r[1]))]
        # Spark's order: count descending, then kind, number, string (strings only of kind string)
        top = _top(usable, opts.top_k, lambda r: (-r[3], r[0], r[1], r[2] or ""))
        quantiles: list[float] = []
        numeric = sorted((r[1], r[3]) for r in usable if r[0] == KIND_NUMBER)
        if q and numeric:
            numbers = np.array([x for x, _ in numeric])
            ends = np.cumsum([c for _, c in numeric])  # this value occupies sorted positions ends[i-1]..ends[i]-1
            positions = [j * (int(ends[-1]) - 1) // (q - 1) for j in range(q)]
            quantiles = numbers[np.searchsorted(ends, positions, side="right")].tolist()
        out[attribute] = AttributeStats(
            presence=present / n_events,
            distinct=len(rows),
            top_values={value_key(kind, number, string): count / present for kind, number, string, count in top},
            quantiles=quantiles,
            value_types={KINDS[k]: kinds[k] / present for k in range(len(KINDS)) if kinds[k]},
        )
    return out


def _schema_statistics_local(schemas: pa.Table, attributes: dict[str, AttributeStats], n_events: int,
                             opts: StatisticsOptions) -> list[tuple[tuple[str, ...], int]]:
    """The same as :func:`_schema_statistics_spark`, on the driver, from the merged schema rows.

    Schemas x attributes 0/1 matrices: a pair's support is an entry of M^T diag(counts) M, a
    triple's of M^T diag(counts * M[:, i]) M (float64 sums of integer counts: exact below 2^53).
    """
    min_count = opts.min_support * n_events
    f1 = sorted(a for a, st in attributes.items() if st.presence * n_events >= min_count)
    column = {a: i for i, a in enumerate(f1)}
    counts = np.asarray(schemas["count"].to_numpy(zero_copy_only=False), np.float64)
    m = np.zeros((len(counts), len(f1)))
    for r, schema in enumerate(schemas["schema"].to_pylist()):
        m[r, [column[a] for a in schema if a in column]] = 1.0

    def frequent(cols: list[str], names: list[str], support: np.ndarray) -> list:
        j, k = np.triu_indices(len(names), 1)
        keep = np.flatnonzero(support[j, k] >= min_count)
        return [((*cols, names[j[x]], names[k[x]]), int(support[j[x], k[x]])) for x in keep]

    pairs = frequent([], f1, (m * counts[:, None]).T @ m) if len(f1) >= 2 else []
    f2 = sorted({a for s, _ in pairs for a in s})
    m2 = m[:, [column[a] for a in f2]]
    triples = []
    for i in range(len(f2) - 2):
        rest = m2[:, i + 1:]
        triples += frequent([f2[i]], f2[i + 1:], (rest * (counts * m2[:, i])[:, None]).T @ rest)
    return _reported_sets(pairs, triples, len(f1), opts)


def _joint_frequencies_local(joint: pa.Table, sets: list[tuple[str, ...]], n_events: int, opts: StatisticsOptions
                             ) -> tuple[dict[tuple[str, ...], dict[tuple, float]], dict[tuple[str, ...], int]]:
    """The same as :func:`_joint_frequencies_spark`, on the driver, from the merged joint rows of ``sets``."""
    joint_top: dict[tuple[str, ...], dict[tuple, float]] = {}
    support: dict[tuple[str, ...], int] = {}
    if not sets or not joint.num_rows:
        return joint_top, support
    where: dict[tuple[str, ...], list[int]] = {}
    for i, s in enumerate(joint["schema"].to_pylist()):
        where.setdefault(tuple(s), []).append(i)
    for s in sets:
        if s not in where:
            continue
        rows = joint.take(pa.array(where[s]))
        counts = rows["count"].to_numpy(zero_copy_only=False)
        support[s] = int(counts.sum())
        flat = pc.list_flatten(rows["values"].combine_chunks())
        kind = flat.field("kind").to_numpy(zero_copy_only=False).reshape(-1, len(s))
        number = flat.field("number").to_numpy(zero_copy_only=False).reshape(-1, len(s))
        usable = ~np.any((kind == KIND_NUMBER) & np.isnan(number), axis=1)
        if not opts.joint_top_k or not usable.any():
            continue
        # candidates: rows counted at least as often as the k-th most frequent; ties ranked by the values
        ranked = np.sort(counts[usable])[::-1]
        floor = ranked[min(opts.joint_top_k, len(ranked)) - 1]
        candidates = np.flatnonzero(usable & (counts >= floor))
        combos = rows["values"].take(pa.array(candidates)).to_pylist()
        items = [(int(counts[c]), tuple((v["kind"], v["number"], v["string"] or "") for v in vs), vs)
                 for c, vs in zip(candidates, combos)]
        top = _top(items, opts.joint_top_k, lambda x: (-x[0], x[1]))
        joint_top[s] = {tuple(value_key(v["kind"], v["number"], v["string"]) for v in vs): c / n_events
                        for c, _, vs in top}
    return joint_top, support


def _joint_rows_spark(partials: DataFrame, covered: list[tuple[str, ...]], missing: list[tuple[str, ...]],
                      joint_partials: Callable[[list[tuple[str, ...]]], DataFrame]) -> DataFrame:
    """Joint rows of sets: the first pass's for ``covered``, a second pass for ``missing``."""
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


def _merge_joint(into: tuple[dict, dict], more: tuple[dict, dict]) -> None:
    into[0].update(more[0])
    into[1].update(more[1])


def compute_statistics(partials: DataFrame, opts: StatisticsOptions, summary: WindowSummary,
                       joint_partials: Callable[[list[tuple[str, ...]]], DataFrame]) -> EventStatistics:
    """The snapshot from the first pass's ``partials`` (``summary`` from :func:`summarize` on them);
    ``joint_partials(sets)`` runs the joint pass."""
    n = summary.events
    if n == 0:
        return EventStatistics(event_count=0, source="spark", bad_records=summary.bad)
    limit = opts.driver_rows
    merged = _merged_small_tables(partials, limit)
    log.info("merged partial counts: %d rows on the driver (at most %d per group)", merged.num_rows, limit)

    log.info("per-attribute statistics (top %d values, %d quantiles)", opts.top_k, opts.quantiles)
    values, big = _groups(merged, "value", limit)
    attributes = _attribute_statistics_local(values, n, opts)
    if big.num_rows:
        wide = big["attribute"].to_pylist()
        log.info("%d attribute(s) with more than %d distinct values derived in Spark: %s", len(wide), limit,
                 ", ".join(wide[:10]))
        spark_values = (partials.where((F.col("table") == "value") & F.col("attribute").isin(*wide))
                        .groupBy("attribute", "kind", "number", "string").agg(F.sum("count").alias("count")))
        attributes.update(_attribute_statistics_spark(spark_values, n, opts))

    log.info("%d attributes; frequent attribute sets", len(attributes))
    schemas, many = _groups(merged, "schema", limit)
    if many.num_rows:
        log.info("more than %d distinct schemas: frequent sets in Spark", limit)
        found = _schema_statistics_spark(partials, attributes, n, opts)
    else:
        found = _schema_statistics_local(schemas, attributes, n, opts)

    sets = [tuple(sorted(s)) for s in opts.joint_attributes] or [s for s, _ in found[: opts.joint_sets]]
    joint: tuple[dict, dict] = ({}, {})
    if sets and (opts.joint_top_k or opts.joint_attributes):
        cover, _ = _groups(merged, "cover", limit)
        covered_by = dict(zip(map(tuple, cover["schema"].to_pylist()), cover["count"].to_pylist()))
        joint_rows, wide = _groups(merged, "joint", limit)
        wide_sets = {tuple(s) for s in wide["schema"].to_pylist()}
        covered = [s for s in sets if covered_by.get(s) == n]
        missing = [s for s in sets if covered_by.get(s) != n]
        log.info("joint value frequencies of %d sets: %d counted in the first pass%s", len(sets), len(covered),
                 f", a second pass for {len(missing)}" if missing else "")
        local = [s for s in covered if s not in wide_sets]
        _merge_joint(joint, _joint_frequencies_local(joint_rows, local, n, opts))
        in_spark = [s for s in covered if s in wide_sets]
        if in_spark or missing:
            if in_spark:
                log.info("%d joint set(s) with more than %d value combinations ranked in Spark", len(in_spark), limit)
            rows = _joint_rows_spark(partials, in_spark, missing, joint_partials)
            _merge_joint(joint, _joint_frequencies_spark(rows, in_spark + missing, n, opts))
    joint_top, joint_support = joint
    schema_support = {frozenset(s): c / n for s, c in found}
    for s in sets:  # explicitly requested sets are reported even below the support threshold
        schema_support.setdefault(frozenset(s), joint_support.get(s, 0) / n)
    return EventStatistics(event_count=n, attributes=attributes, schemas=schema_support, joint=joint_top,
                           source="spark", bad_records=summary.bad)
