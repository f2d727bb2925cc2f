"""The committed source records of the audited ranges, each judged by the audit's own judge.

Kafka's committed records are read with Spark's batch Kafka source at read_committed and judged in
Python workers by schema/reference.Judge (not the job's Spark validation, whose bugs it would
share), by the declaration in force when each batch was written: what the sinks should hold.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession

from onceflow import offsets, tables
from onceflow.config import Pipeline
from onceflow.kafka.client import source_client
from onceflow.spark.kafka_read import kafka_options
from onceflow.unprocessable import Unprocessable


def read_kafka(spark: SparkSession, pipeline: Pipeline, ranges: dict[int, tuple[int, int]]) -> DataFrame:
    """The committed records of the ranges: Spark's batch Kafka source at read_committed."""
    topic = pipeline.source.topic
    opts = kafka_options(
        source_client(pipeline),
        topic,
        starting=offsets.spark_json(topic, {p: s for p, (s, _) in ranges.items()}),
        endingOffsets=offsets.spark_json(topic, {p: e for p, (_, e) in ranges.items()}),
    )
    opts.pop("subscribe")
    opts["assign"] = json.dumps({topic: sorted(ranges)})
    return spark.read.format("kafka").options(**opts).load()


_ARROW = {
    "string": "string",
    "int": "int32",
    "long": "int64",
    "double": "float64",
    "boolean": "bool_",
    "date": "date32",
}
SOURCE_DDL = "_key BINARY, _value BINARY, _topic STRING, _partition INT, _offset BIGINT, reason STRING"


def _arrow_type(ftype):
    import pyarrow as pa

    if ftype.base == "decimal":
        return pa.decimal128(ftype.precision, ftype.scale)
    if ftype.base == "timestamp":
        return pa.timestamp("us", tz="UTC")
    return getattr(pa, _ARROW[ftype.base])()


Segments = list[tuple[str, dict[int, tuple[int, int]]]]


def _judged(schema_json: str, segments: Segments, unprocessable: dict[int, list[tuple[int, int]]]):
    """mapInArrow: each Kafka record judged in a Python worker by schema/reference.Judge, by the
    declaration in force when its batch was written (`segments`: declaration → offset ranges;
    records outside them: the current one). Values come out in the current bronze types.
    A record an operator moved to quarantine by hand (`unprocessable`: per partition, offset
    ranges) is not judged: it belongs in quarantine as `unprocessable`."""

    def run(batches):
        import pyarrow as pa

        from onceflow.schema import reasons as R
        from onceflow.schema.model import Schema
        from onceflow.schema.reference import Judge, Verdict

        schema = Schema.model_validate_json(schema_json)
        judges = {schema_json: Judge(schema)}
        for declared, _ in segments:
            if declared not in judges:
                judges[declared] = Judge(Schema.model_validate_json(declared))
        current = judges[schema_json]

        def judge_for(p: int, o: int) -> Judge:
            for declared, spans in segments:
                span = spans.get(p)
                if span and span[0] <= o < span[1]:
                    return judges[declared]
            return current

        moved = Verdict(R.UNPROCESSABLE, {f.name: None for f in schema.fields})

        def by_hand(p: int, o: int) -> bool:
            return any(a <= o < b for a, b in unprocessable.get(p, ()))

        for batch in batches:
            values = batch.column("value").to_pylist()
            if len(judges) == 1 and not unprocessable:
                verdicts = [current.judge(v) for v in values]
            else:
                where = zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(), strict=True)
                verdicts = [
                    moved if by_hand(p, o) else judge_for(p, o).judge(v)
                    for (p, o), v in zip(where, values, strict=True)
                ]
            arrays = [
                pa.array([v.values.get(f.name) for v in verdicts], type=_arrow_type(f.ftype)) for f in schema.fields
            ]
            arrays += [batch.column(c) for c in ("key", "value", "topic", "partition", "offset")]
            arrays.append(pa.array([v.reason for v in verdicts], type=pa.string()))
            yield pa.RecordBatch.from_arrays(
                arrays, names=[*schema.names, "_key", "_value", "_topic", "_partition", "_offset", "reason"]
            )

    return run


def declaration_segments(pipeline: Pipeline) -> Segments:
    """Where an earlier declaration was in force: from the bronze ledger's entries, which
    record the declaration each batch was judged by (only those that differ from today's)."""
    from onceflow.ledger import read_ledger

    current = pipeline.schema.model_dump_json()
    out: Segments = []
    for e in read_ledger(pipeline.resolve(pipeline.sinks.bronze.path)).entries:
        declared = (e.extra or {}).get("schema")
        if not declared or declared == current:
            continue
        spans = {p: (s, e.end.get(p, s)) for p, s in e.start.items() if s < e.end.get(p, s)}
        if out and out[-1][0] == declared:
            merged = dict(out[-1][1])
            for p, (s, end) in spans.items():
                lo, hi = merged.get(p, (s, end))
                merged[p] = (min(lo, s), max(hi, end))
            out[-1] = (declared, merged)
        else:
            out.append((declared, spans))
    return out


def read_source(
    spark: SparkSession, pipeline: Pipeline, ranges: dict[int, tuple[int, int]], segments: Segments | None = None
) -> DataFrame:
    """The committed source records of the ranges, each judged by the audit's own judge:
    the declared fields (typed) and `reason` (NULL when valid) — what the sinks should hold."""
    schema = pipeline.schema
    segments = declaration_segments(pipeline) if segments is None else segments
    if not ranges:  # nothing new to audit: the same columns, no rows
        raw = spark.createDataFrame([], "key binary, value binary, topic string, partition int, offset long")
    else:
        raw = read_kafka(spark, pipeline, ranges).select("key", "value", "topic", "partition", "offset")
    ddl = ", ".join(f"`{n}` {t}" for n, t in tables.bronze_columns(schema).items()) + ", " + SOURCE_DDL
    by_hand = Unprocessable.load(pipeline.state_path).ranges(pipeline.source.topic)
    return raw.mapInArrow(_judged(schema.model_dump_json(), segments, by_hand), ddl)
