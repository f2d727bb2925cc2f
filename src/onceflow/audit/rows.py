"""Row reconciliation with Spark: committed Kafka records vs bronze ∪ quarantine.

One full outer join on the Kafka coordinates `(_topic, _partition, _offset)`
between the committed source records (Kafka at read_committed, judged by the
audit's own implementation of the declared rules, schema/reference.py — not the
job's Spark validation, whose bugs it would share) and the sink rows, then one
aggregation per partition
gives every count the checks need: accounting, loss, phantoms, duplicates and
content. Offending offsets are only looked up (and turned into ranges) when a
count says there are some, so a clean audit pays for one join and one pass.

Content is compared by a 64-bit hash per row over the canonical fields —
bronze: its columns before the provenance (tables.bronze_columns: the declared fields, typed,
and for Debezium `_op` and `_sequence`, so a wrong op or sequence is a content mismatch);
quarantine: key, value, reason — summed per
partition as a decimal: order-independent, and any added, missing or changed row
(a value the job parsed differently, a reason it gave differently) changes the sum.

A Debezium tombstone (a null value after a delete, source.TOMBSTONE_REASON) is a no-op: it is
expected in neither table, is not a source record of the accounting, and is counted apart
(`RowReconciliation.tombstones`); one found in a sink is a phantom row.

What it compares comes from source.py (the committed source records, judged) and
sink_tables.py (the sink tables at the pinned version); offending offsets become ranges in
offending.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from onceflow import tables
from onceflow.audit.offending import at_keys, first_ranges, islands, ranges_text
from onceflow.audit.sink_tables import read_table
from onceflow.audit.source import TOMBSTONE_REASON, declaration_segments, read_source
from onceflow.config import Pipeline
from onceflow.reconcile import MAX_RANGES, MAX_SAMPLES, Check, CheckGroup, CheckStatus, CommittedPoint, check, jsonable
from onceflow.sink_kinds import SinkName

_COUNTS = (
    "source_records",
    "source_valid",
    "source_malformed",
    "bronze_rows",
    "quarantine_rows",
    "lost_records",
    "phantom_keys",
    "phantom_rows",
    "duplicate_keys",
    "extra_copies",
    "content_mismatches",
)
QUARANTINE_FIELDS = ("_key", "_value", "reason")
KEY = ("_topic", "_partition", "_offset")


def bronze_hash(columns: list[str]) -> Column:
    """Over bronze's own columns (tables.bronze_columns(schema, keyed): the declared fields, and
    a Debezium pipeline's `_op` and `_sequence`)."""
    return F.xxhash64(F.lit(SinkName.BRONZE.value), *[F.col(c) for c in columns])


def quarantine_hash() -> Column:
    return F.xxhash64(F.lit(SinkName.QUARANTINE.value), *[F.col(c) for c in QUARANTINE_FIELDS])


def _as_dec(c: Column) -> Column:
    return c.cast("decimal(38,0)")


@dataclass
class RowReconciliation:
    partitions: list[dict]  # one row per partition: counts and checksums
    checks: list[Check]
    totals: dict = field(default_factory=dict)
    findings: list[dict] = field(default_factory=list)  # every offending range, for the GX findings suite
    tombstones: int = 0  # Debezium tombstones in the audited ranges: no-ops, in no sink


class RowReconciler:
    """Compares the source records of the committed point with bronze ∪ quarantine."""

    def __init__(self, spark: SparkSession, pipeline: Pipeline, point: CommittedPoint):
        self.spark = spark
        self.pipeline = pipeline
        self.point = point
        self.ranges = point.ranges()
        self.topic = pipeline.source.topic
        bronze, quarantine = point.sinks.get(SinkName.BRONZE), point.sinks.get(SinkName.QUARANTINE)
        self.bronze = read_table(
            spark, pipeline.resolve(pipeline.sinks.bronze.path), bronze.version if bronze else None, self.ranges
        )
        self.quarantine = read_table(
            spark,
            pipeline.resolve(pipeline.sinks.quarantine.path),
            quarantine.version if quarantine else None,
            self.ranges,
        )
        self.segments = declaration_segments(pipeline)
        self.source = read_source(spark, pipeline, self.ranges, self.segments)
        self.schema = pipeline.schema
        # bronze's columns before the provenance: what a bronze row's content is
        self.columns = list(tables.bronze_columns(pipeline.schema, pipeline.keyed))
        self._cached: list[DataFrame] = []

    def cache(self, df: DataFrame) -> DataFrame:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._cached.append(df)
        return df

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()

    def joined(self) -> DataFrame:
        """One row per Kafka coordinate seen in the source or the sinks (one shuffle: union + group)."""
        zero, one = F.lit(0), F.lit(1)
        noop = F.coalesce(F.col("reason") == TOMBSTONE_REASON, F.lit(False))  # a tombstone: in no sink
        src = self.source.select(
            *KEY,
            F.when(noop, 0).otherwise(1).alias("s"),
            F.when(F.col("reason").isNull(), 1).otherwise(0).alias("v"),
            F.when(noop, F.lit(None))
            .when(F.col("reason").isNull(), bronze_hash(self.columns))
            .otherwise(quarantine_hash())
            .alias("h"),
            zero.alias("b"),
            zero.alias("q"),
            F.when(noop, 1).otherwise(0).alias("t"),
        )
        sink = self.bronze.select(
            *KEY,
            zero.alias("s"),
            zero.alias("v"),
            bronze_hash(self.columns).alias("h"),
            one.alias("b"),
            zero.alias("q"),
            zero.alias("t"),
        ).unionByName(
            self.quarantine.select(
                *KEY,
                zero.alias("s"),
                zero.alias("v"),
                quarantine_hash().alias("h"),
                zero.alias("b"),
                one.alias("q"),
                zero.alias("t"),
            )
        )
        is_src, is_sink = F.col("s") == 1, (F.col("b") + F.col("q")) > 0
        g = (
            src.unionByName(sink)
            .groupBy(*KEY)
            .agg(
                (F.sum("s") > 0).alias("in_source"),
                (F.sum("v") > 0).alias("valid"),
                (F.sum("t") > 0).alias("tombstone"),
                F.max(F.when(is_src, F.col("h"))).alias("src_h"),
                F.sum(F.col("b") + F.col("q")).alias("copies"),
                F.sum(F.when(is_sink, _as_dec(F.col("h")))).alias("sink_sum"),
                F.min(F.when(is_sink, F.col("h"))).alias("h_min"),
                F.max(F.when(is_sink, F.col("h"))).alias("h_max"),
                F.sum("b").alias("bronze"),
                F.sum("q").alias("quarantine"),
            )
        )
        return g.withColumn("in_sink", F.col("copies") > 0)

    def run(self) -> RowReconciliation:
        j = self.cache(self.joined())
        lost = F.col("in_source") & ~F.col("in_sink")
        phantom = F.col("in_sink") & ~F.col("in_source")
        dup = F.col("copies") > 1
        changed = (
            F.col("in_source")
            & F.col("in_sink")
            & ((F.col("h_min") != F.col("src_h")) | (F.col("h_max") != F.col("src_h")))
        )
        n = lambda cond: F.count(F.when(cond, 1))  # noqa: E731
        stats = (
            j.groupBy("_partition")
            .agg(
                n(F.col("in_source")).alias("source_records"),
                n(F.col("valid")).alias("source_valid"),
                n(F.col("in_source") & ~F.col("valid")).alias("source_malformed"),
                F.coalesce(F.sum("bronze"), F.lit(0)).alias("bronze_rows"),
                F.coalesce(F.sum("quarantine"), F.lit(0)).alias("quarantine_rows"),
                n(lost).alias("lost_records"),
                n(phantom).alias("phantom_keys"),
                F.coalesce(F.sum(F.when(phantom, F.col("copies"))), F.lit(0)).alias("phantom_rows"),
                n(dup).alias("duplicate_keys"),
                F.coalesce(F.sum(F.when(dup, F.col("copies") - 1)), F.lit(0)).alias("extra_copies"),
                n(changed).alias("content_mismatches"),
                F.coalesce(F.sum(_as_dec(F.col("src_h"))), F.lit(0)).cast("string").alias("source_checksum"),
                F.coalesce(F.sum("sink_sum"), F.lit(0)).cast("string").alias("sink_checksum"),
                n(F.col("tombstone")).alias("tombstones"),
            )
            .collect()
        )
        by_p = {r["_partition"]: r.asDict() for r in stats}
        tombstones = sum(int(r.pop("tombstones") or 0) for r in by_p.values())
        zeros = {k: 0 for k in _COUNTS} | {"source_checksum": "0", "sink_checksum": "0"}
        partitions = []
        for p in sorted(set(self.point.end) | set(by_p)):
            row = {**zeros, **by_p.get(p, {})}
            row.pop("_partition", None)
            partitions.append(
                {
                    "partition": p,
                    "start": self.point.start.get(p),
                    "end": self.point.end.get(p),
                    **row,
                    "sink_rows": row["bronze_rows"] + row["quarantine_rows"],
                }
            )
        totals = {
            k: sum(int(r[k]) for r in partitions)
            for k in (
                "source_records",
                "source_valid",
                "source_malformed",
                "bronze_rows",
                "quarantine_rows",
                "sink_rows",
                "lost_records",
                "phantom_rows",
                "duplicate_keys",
                "extra_copies",
                "content_mismatches",
            )
        }
        result = RowReconciliation(partitions=partitions, checks=[], totals=totals, tombstones=tombstones)
        result.checks = [
            self._accounting(partitions),
            self._loss(j, lost, partitions, result),
            self._phantoms(j, phantom, partitions, result),
            self._duplicates(j, dup, partitions, result),
            self._event_ids(result),
            self._content(j, changed, partitions, result),
        ]
        return result

    # -- the checks -----------------------------------------------------------------
    def _accounting(self, parts: list[dict]) -> Check:
        bad = [
            r
            for r in parts
            if not (
                r["source_records"] == r["sink_rows"]
                and r["source_valid"] == r["bronze_rows"]
                and r["source_malformed"] == r["quarantine_rows"]
            )
        ]
        t = lambda k: sum(r[k] for r in parts)  # noqa: E731
        return check(
            "accounting",
            "committed source records = bronze + quarantine, per partition",
            not bad,
            expected={"records": t("source_records"), "bronze": t("source_valid"), "quarantine": t("source_malformed")},
            observed={"records": t("sink_rows"), "bronze": t("bronze_rows"), "quarantine": t("quarantine_rows")},
            partitions=[r["partition"] for r in bad],
            detail="; ".join(
                f"partition {r['partition']}: source {r['source_records']} "
                f"({r['source_valid']} valid, {r['source_malformed']} malformed) vs sink "
                f"{r['sink_rows']} ({r['bronze_rows']} bronze, {r['quarantine_rows']} quarantine)"
                for r in bad[:20]
            ),
            group=CheckGroup.ROWS,
        )

    def _loss(self, j: DataFrame, lost: Column, parts: list[dict], result: RowReconciliation) -> Check:
        count = sum(r["lost_records"] for r in parts)
        ranges: list[dict] = []
        total, samples = 0, []
        if count:
            records = j.where(F.col("in_source"))
            ranges, total = first_ranges(islands(j, "_offset", lost, base=records))
            keys = [
                (r["_partition"], r["_offset"])
                for r in j.where(lost)
                .orderBy("_partition", "_offset")
                .select("_partition", "_offset")
                .limit(MAX_SAMPLES)
                .collect()
            ]
            samples = self.source_rows(keys)
            result.findings += [{"check": "loss", **r} for r in ranges]
        return check(
            "loss",
            "no committed source record is missing from bronze ∪ quarantine (anti-join)",
            not count,
            expected=0,
            observed=count,
            ranges=ranges,
            ranges_total=total,
            samples=samples,
            partitions=[r["partition"] for r in parts if r["lost_records"]],
            detail=ranges_text("lost", ranges, total),
            group=CheckGroup.ROWS,
        )

    def _phantoms(self, j: DataFrame, phantom: Column, parts: list[dict], result: RowReconciliation) -> Check:
        count = sum(r["phantom_rows"] for r in parts)
        ranges: list[dict] = []
        total, samples = 0, []
        if count:
            ranges, total = first_ranges(islands(j, "_offset", phantom))
            keys = [
                (r["_partition"], r["_offset"])
                for r in j.where(phantom).orderBy("_partition", "_offset").limit(MAX_SAMPLES).collect()
            ]
            samples = self.sink_rows(keys)
            result.findings += [{"check": "phantoms", **r} for r in ranges]
        return check(
            "phantoms",
            "no sink row without a committed source record (e.g. from an aborted transaction)",
            not count,
            expected=0,
            observed=count,
            ranges=ranges,
            ranges_total=total,
            samples=samples,
            partitions=[r["partition"] for r in parts if r["phantom_rows"]],
            detail=ranges_text("phantom rows at", ranges, total),
            group=CheckGroup.ROWS,
        )

    def _duplicates(self, j: DataFrame, dup: Column, parts: list[dict], result: RowReconciliation) -> Check:
        keys = sum(r["duplicate_keys"] for r in parts)
        extra = sum(r["extra_copies"] for r in parts)
        ranges: list[dict] = []
        total, samples = 0, []
        if keys:
            ranges, total = first_ranges(islands(j, "_offset", dup))
            rows = j.where(dup).orderBy("_partition", "_offset").limit(MAX_SAMPLES).collect()
            samples = self.sink_rows([(r["_partition"], r["_offset"]) for r in rows])
            result.findings += [{"check": "duplicates", **r} for r in ranges]
        return check(
            "duplicates",
            "no two sink rows share (_topic, _partition, _offset)",
            not keys,
            expected=0,
            observed={"keys": keys, "extra_rows": extra},
            ranges=ranges,
            ranges_total=total,
            samples=samples,
            partitions=[r["partition"] for r in parts if r["duplicate_keys"]],
            detail=ranges_text("duplicated offsets", ranges, total),
            group=CheckGroup.ROWS,
        )

    def _event_ids(self, result: RowReconciliation) -> Check:
        event_id = self.schema.event_id
        title = "no two bronze rows share the declared event_id"
        if event_id is None:
            return Check(
                "duplicate_event_ids",
                title,
                CheckStatus.SKIPPED,
                detail="the schema declares no event_id: uniqueness of events is not checked "
                "(uniqueness of Kafka offsets is, by the duplicates check)",
                group=CheckGroup.ROWS,
            )
        dups = (
            self.bronze.withColumnRenamed(event_id, "event_id")
            .groupBy("event_id")
            .agg(
                F.count(F.lit(1)).alias("rows"),
                F.sort_array(F.collect_list(F.struct("_partition", "_offset"))).alias("at"),
            )
            .where(F.col("rows") > 1)
        )
        found = dups.orderBy("event_id").limit(MAX_RANGES).collect()
        total = dups.count() if len(found) >= MAX_RANGES else len(found)
        samples = [
            {
                "event_id": r["event_id"],
                "rows": r["rows"],
                "offsets": [{"partition": a["_partition"], "offset": a["_offset"]} for a in r["at"]],
            }
            for r in found[:MAX_SAMPLES]
        ]
        for r in found:
            for a in r["at"]:
                result.findings.append(
                    {
                        "check": "duplicate_event_ids",
                        "partition": a["_partition"],
                        "start": a["_offset"],
                        "end": a["_offset"] + 1,
                        "count": 1,
                    }
                )
        return check(
            "duplicate_event_ids",
            title.replace("the declared event_id", event_id),
            not found,
            expected=0,
            observed=total,
            samples=samples,
            partitions=sorted({a["_partition"] for r in found for a in r["at"]}),
            detail="; ".join(
                f"event_id {s['event_id']} at "
                + ", ".join(f"partition {o['partition']} offset {o['offset']}" for o in s["offsets"])
                for s in samples
            ),
            group=CheckGroup.ROWS,
        )

    def _content(self, j: DataFrame, changed: Column, parts: list[dict], result: RowReconciliation) -> Check:
        bad = [r for r in parts if r["source_checksum"] != r["sink_checksum"]]
        ranges: list[dict] = []
        total, samples = 0, []
        rows_changed = sum(r["content_mismatches"] for r in parts)
        if rows_changed:
            ranges, total = first_ranges(islands(j, "_offset", changed))
            keys = [
                (r["_partition"], r["_offset"])
                for r in j.where(changed).orderBy("_partition", "_offset").limit(MAX_SAMPLES).collect()
            ]
            src = {(s["_partition"], s["_offset"]): s for s in self.source_rows(keys)}
            for s in self.sink_rows(keys):
                k = (s["_partition"], s["_offset"])
                samples.append({"_partition": k[0], "_offset": k[1], "source": src.get(k), "sink": s})
            result.findings += [{"check": "content", **r} for r in ranges]
        return check(
            "content",
            "order-independent payload checksum per partition equals between source and sink",
            not bad and not rows_changed,
            expected={str(r["partition"]): r["source_checksum"] for r in parts},
            observed={str(r["partition"]): r["sink_checksum"] for r in parts},
            partitions=[r["partition"] for r in bad],
            ranges=ranges,
            ranges_total=total,
            samples=samples,
            detail=(
                "checksum differs in partition(s) "
                + ", ".join(str(r["partition"]) for r in bad)
                + (
                    f"; {rows_changed} row(s) whose payload differs from its source record"
                    if rows_changed
                    else "; no single row differs: the difference comes from missing, extra or duplicated rows"
                )
                if bad or rows_changed
                else ""
            ),
            group=CheckGroup.ROWS,
        )

    # -- samples ----------------------------------------------------------------------
    def source_rows(self, keys: list[tuple[int, int]]) -> list[dict]:
        """The judged source records at these coordinates (a small targeted Kafka read)."""
        if not keys:
            return []
        spans: dict[int, tuple[int, int]] = {}
        for p, o in keys:
            s, e = spans.get(p, (o, o + 1))
            spans[p] = (min(s, o), max(e, o + 1))
        df = read_source(self.spark, self.pipeline, spans, self.segments)
        cols = ["_partition", "_offset", *self.columns, "reason"]
        return [
            jsonable(r.asDict(recursive=True))  # `_sequence`, a struct, by its names
            for r in df.where(at_keys(keys)).select(*cols).orderBy("_partition", "_offset").collect()
        ]

    def sink_rows(self, keys: list[tuple[int, int]]) -> list[dict]:
        """The sink rows at these coordinates, from bronze and quarantine, with their table."""
        if not keys:
            return []
        fields = tables.bronze_columns(self.schema, self.pipeline.keyed)
        b = self.bronze.where(at_keys(keys)).select(
            F.lit(SinkName.BRONZE.value).alias("table"),
            "_partition",
            "_offset",
            *fields,
            F.lit(None).cast("string").alias("reason"),
            "_batch_id",
        )
        q = self.quarantine.where(at_keys(keys)).select(
            F.lit(SinkName.QUARANTINE.value).alias("table"),
            "_partition",
            "_offset",
            *[F.lit(None).cast(t).alias(c) for c, t in fields.items()],
            "reason",
            "_batch_id",
        )
        rows = b.unionByName(q).orderBy("_partition", "_offset", "table").collect()
        return [jsonable(r.asDict(recursive=True)) for r in rows]
