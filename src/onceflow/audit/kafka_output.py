"""Audit of the Kafka output topic, the same promise as for the Delta sinks.

The output is read at read_committed by Spark's batch Kafka source and mapped
back to the source records it came from through the provenance the records
carry (`_topic`, `_partition`, `_offset` in the JSON value, as the default
`value: to_json(struct(*))` writes them). Then, against the committed source
records (read_committed, judged by the audit's own judge, schema/reference.py):

- loss: a valid source record inside the ledger's complete batches with no
  output record;
- phantoms: an output record that is not a committed valid source record
  (this is where records of aborted input transactions would show);
- duplicates: a source record with more than one output record;
- values: every declared field an output record carries (under its bronze name) equals the
  source record's value exactly: timestamps to the microsecond, decimals to their scale;
- the ledger itself: contiguous batches, agreeing task partitions.

Output records of a batch only some task partitions committed (the in-doubt
state after a crash, until the replay) are not counted as loss or phantoms.
The checks are `onceflow.reconcile.Check`s, so the audit report shows them
beside the Delta sinks' checks.
"""

from __future__ import annotations

import json

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from onceflow.config import Pipeline
from onceflow.kafka.client import KafkaClient, sink_client
from onceflow.kafka.ledger import KafkaLedger, default_ledger_topic, read_kafka_ledger
from onceflow.reconcile import MAX_SAMPLES, Check, CheckGroup, CheckStatus, check
from onceflow.spark.kafka_read import kafka_options

KEY = ("_topic", "_partition", "_offset")
PROVENANCE_SCHEMA = "_topic STRING, _partition INT, _offset BIGINT"


def output_topic_and_cluster(pipeline: Pipeline) -> tuple[str, KafkaClient, str]:
    sink, client = pipeline.sinks.kafka, sink_client(pipeline)
    if sink is None or client is None:
        raise ValueError(f"pipeline {pipeline.name!r} has no sinks.kafka")
    return sink.topic, client, sink.ledger_topic or default_ledger_topic(pipeline.name)


def read_output(spark: SparkSession, cluster: KafkaClient, topic: str) -> DataFrame:
    """The output topic's committed records with their provenance parsed from the value."""
    opts = kafka_options(cluster, topic, "earliest", endingOffsets="latest")
    raw = spark.read.format("kafka").options(**opts).load()
    parsed = F.from_json(F.col("value").cast("string"), PROVENANCE_SCHEMA)
    return raw.select(
        F.col("partition").alias("out_partition"),
        F.col("offset").alias("out_offset"),
        *[parsed[c].alias(c) for c in KEY],
        F.col("value").cast("string").alias("out_value"),
    )


def _value_differs(name: str, sql_type: str) -> Column:
    """The output value carries field `name` and it is not the source record's value. Read back
    with Spark's default JSON reading, which takes any fraction of a second: a timestamp the
    value cut to milliseconds differs from the microseconds the source holds."""
    carried = F.get_json_object("out_value", f"$.{name}").isNotNull()
    read = F.from_json("out_value", f"`{name}` {sql_type}")[name]
    return carried & ~read.eqNullSafe(F.col(name))


def _span(ledger: KafkaLedger, complete_only: bool) -> dict[int, tuple[int, int]]:
    records = [e for e in ledger.entries] if complete_only else ledger.records
    out: dict[int, tuple[int, int]] = {}
    for r in records:
        for p, start in r.start.items():
            end = r.end.get(p, start)
            lo, hi = out.get(p, (start, end))
            out[p] = (min(lo, start), max(hi, end))
    return {p: span for p, span in out.items() if span[0] < span[1]}


def _in(ranges: dict[int, tuple[int, int]]):
    cond = F.lit(False)
    for p, (start, end) in sorted(ranges.items()):
        cond = cond | ((F.col("_partition") == p) & (F.col("_offset") >= start) & (F.col("_offset") < end))
    return cond


def output_checks(spark: SparkSession, pipeline: Pipeline, ledger: KafkaLedger | None = None) -> list[Check]:
    """Reconcile the Kafka output with the committed source records; one Check per promise."""
    from onceflow.audit.source import read_source

    topic, cluster, ledger_topic = output_topic_and_cluster(pipeline)
    ledger = ledger or read_kafka_ledger(cluster, ledger_topic, pipeline.name)
    checks = [
        check(
            "kafka_ledger",
            f"Kafka sink ledger {ledger_topic} is contiguous",
            not ledger.problems(),
            expected="no problems",
            observed=ledger.problems() or "none",
            detail=f"{len(ledger.entries)} complete batches, {len(ledger.partial)} in doubt",
            group=CheckGroup.KAFKA_OUTPUT,
        )
    ]
    complete, seen = _span(ledger, True), _span(ledger, False)
    if not seen:
        checks.append(
            Check(
                "kafka_output",
                f"Kafka output {topic} holds each committed event once",
                CheckStatus.SKIPPED,
                detail="the Kafka sink has committed nothing yet",
                group=CheckGroup.KAFKA_OUTPUT,
            )
        )
        return checks

    output = read_output(spark, cluster, topic).where(F.col("_topic") == pipeline.source.topic)
    unmapped = read_output(spark, cluster, topic).where(F.col("_partition").isNull()).count()
    fields = {f.name: f.ftype.sql for f in pipeline.schema.fields}
    source = (
        spark.createDataFrame(read_source(pipeline, seen).drop_columns(["_key", "_value"]))
        .where(F.col("reason").isNull())
        .select(*KEY, *fields, F.lit(True).alias("in_source"), _in(complete).alias("complete"))
        .cache()
    )
    copies = output.groupBy(*KEY).agg(F.count(F.lit(1)).alias("copies"))
    j = source.join(copies, list(KEY), "full_outer").cache()
    try:
        stats = j.agg(
            F.count(F.when(F.col("in_source"), 1)).alias("source_valid"),
            F.count(F.when(F.col("complete") & F.col("copies").isNull(), 1)).alias("lost"),
            F.count(F.when(F.col("in_source").isNull(), 1)).alias("phantom_keys"),
            F.count(F.when(F.col("copies") > 1, 1)).alias("duplicate_keys"),
            F.sum(F.when(F.col("copies") > 1, F.col("copies") - 1)).alias("extra_copies"),
            F.sum("copies").alias("output_records"),
        ).first()
        assert stats is not None  # an aggregate without groups has one row

        def samples(cond) -> list[dict]:
            return [r.asDict() for r in j.where(cond).select(*KEY, "copies").limit(MAX_SAMPLES).collect()]

        lost, phantom, dup = stats["lost"], stats["phantom_keys"], stats["duplicate_keys"]
        checks.append(
            check(
                "kafka_output_loss",
                "every committed valid source record is in the Kafka output",
                lost == 0,
                expected=0,
                observed=lost,
                samples=samples(F.col("complete") & F.col("copies").isNull()) if lost else [],
                detail=f"{stats['source_valid']} valid source records in {json.dumps(seen)}",
                group=CheckGroup.KAFKA_OUTPUT,
            )
        )
        checks.append(
            check(
                "kafka_output_phantoms",
                "no Kafka output record without a committed valid source record (aborted input)",
                phantom == 0 and unmapped == 0,
                expected=0,
                observed=phantom + unmapped,
                samples=samples(F.col("in_source").isNull()) if phantom else [],
                detail=(
                    f"{unmapped} output records carry no _topic/_partition/_offset; keep them in "
                    "sinks.kafka.value (the default to_json(struct(*)) does)"
                )
                if unmapped
                else "",
                group=CheckGroup.KAFKA_OUTPUT,
            )
        )
        checks.append(
            check(
                "kafka_output_duplicates",
                "no source record twice in the Kafka output (read_committed)",
                dup == 0,
                expected=0,
                observed={"duplicate_keys": dup, "extra_copies": stats["extra_copies"] or 0},
                samples=samples(F.col("copies") > 1) if dup else [],
                group=CheckGroup.KAFKA_OUTPUT,
            )
        )
        checks.append(_values_check(output, source, fields))
    finally:
        j.unpersist()
        source.unpersist()
    return checks


def _values_check(output: DataFrame, source: DataFrame, fields: dict[str, str]) -> Check:
    """Each declared field the output carries, against the committed source record's value."""
    pairs = output.join(source.drop("in_source", "complete"), list(KEY), "inner")
    differs = {name: _value_differs(name, sql_type) for name, sql_type in fields.items()}
    counts = pairs.agg(
        F.count(F.lit(1)).alias("compared"),
        *[F.count(F.when(cond, 1)).alias(name) for name, cond in differs.items()],
    ).first()
    assert counts is not None  # an aggregate without groups has one row
    wrong = {name: counts[name] for name in fields if counts[name]}
    any_wrong = F.lit(False)
    for cond in differs.values():
        any_wrong = any_wrong | cond
    samples = []
    if wrong:
        rows = pairs.where(any_wrong).select(*KEY, F.substring("out_value", 1, 300).alias("output"), *fields)
        samples = [{k: str(v) for k, v in r.asDict().items()} for r in rows.limit(MAX_SAMPLES).collect()]
    return check(
        "kafka_output_values",
        "every declared field the Kafka output carries is the source record's value, exactly",
        not wrong,
        expected="no field differs",
        observed=wrong or "none",
        samples=samples,
        detail=f"{counts['compared']} output records compared field by field ({', '.join(fields)}); a timestamp "
        "cut to milliseconds or a decimal rounded shows here: keep sinks.kafka.value's default, or its "
        "timestampFormat option",
        group=CheckGroup.KAFKA_OUTPUT,
    )
