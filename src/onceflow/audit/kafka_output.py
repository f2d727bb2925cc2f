"""Audit of the Kafka output topic, the same promise as for the Delta sinks.

The output is read at read_committed by a plain consumer (kafka/consume.py) and mapped
back to the source records it came from, in DuckDB, through the provenance the records
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
from typing import TYPE_CHECKING

from onceflow.audit.duck import connect, ident, sql_type
from onceflow.config import Pipeline
from onceflow.kafka.client import KafkaClient, sink_client
from onceflow.kafka.ledger import KafkaLedger, default_ledger_topic, read_kafka_ledger
from onceflow.reconcile import MAX_SAMPLES, Check, CheckGroup, CheckStatus, check, jsonable

if TYPE_CHECKING:
    import duckdb

KEY = ("_topic", "_partition", "_offset")


def output_topic_and_cluster(pipeline: Pipeline) -> tuple[str, KafkaClient, str]:
    sink, client = pipeline.sinks.kafka, sink_client(pipeline)
    if sink is None or client is None:
        raise ValueError(f"pipeline {pipeline.name!r} has no sinks.kafka")
    return sink.topic, client, sink.ledger_topic or default_ledger_topic(pipeline.name)


def _json(path_of: str) -> str:
    """A JSON path to a top-level field, quoted."""
    return "'$.\"" + path_of.replace("'", "''").replace('"', '\\"') + "\"'"


def _read_output(db: duckdb.DuckDBPyConnection, cluster: KafkaClient, topic: str) -> None:
    """Table `output`: the output topic's committed records with their provenance parsed from the
    value (NULL where the value is no JSON object carrying it)."""
    import pyarrow as pa

    from onceflow.kafka.consume import topic_batches

    db.register("raw_output", pa.Table.from_batches(list(topic_batches(cluster, topic))))
    v = "out_value"
    db.execute(
        f"""
        CREATE TEMP TABLE output AS
        SELECT out_partition, out_offset, out_value,
               CASE WHEN json_valid({v}) THEN json_extract_string({v}, '$._topic') END AS _topic,
               CASE WHEN json_valid({v}) THEN TRY_CAST(json_extract_string({v}, '$._partition') AS INTEGER) END
                 AS _partition,
               CASE WHEN json_valid({v}) THEN TRY_CAST(json_extract_string({v}, '$._offset') AS BIGINT) END
                 AS _offset
        FROM (SELECT "partition" AS out_partition, "offset" AS out_offset, TRY(decode(value)) AS out_value
              FROM raw_output)
        """
    )


def _value_differs(name: str, declared: str) -> str:
    """The output value carries field `name` and, read as its declared type, it is not the source
    record's value: a timestamp the value cut to milliseconds differs from the microseconds the
    source holds, a decimal rounded from its scale."""
    field = f"json_extract_string(out_value, {_json(name)})"
    return f"({field} IS NOT NULL AND TRY_CAST({field} AS {sql_type(declared)}) IS DISTINCT FROM {ident(name)})"


def _span(ledger: KafkaLedger, complete_only: bool) -> dict[int, tuple[int, int]]:
    records = [e for e in ledger.entries] if complete_only else ledger.records
    out: dict[int, tuple[int, int]] = {}
    for r in records:
        for p, start in r.start.items():
            end = r.end.get(p, start)
            lo, hi = out.get(p, (start, end))
            out[p] = (min(lo, start), max(hi, end))
    return {p: span for p, span in out.items() if span[0] < span[1]}


def _in(ranges: dict[int, tuple[int, int]]) -> str:
    return (
        " OR ".join(
            f"(_partition = {int(p)} AND _offset >= {int(s)} AND _offset < {int(e)})"
            for p, (s, e) in sorted(ranges.items())
        )
        or "FALSE"
    )


def output_checks(pipeline: Pipeline, ledger: KafkaLedger | None = None) -> list[Check]:
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

    fields = {f.name: f.ftype.sql for f in pipeline.schema.fields}
    db = connect()
    try:
        _read_output(db, cluster, topic)
        db.register(
            "judged", read_source(pipeline, seen, columnar=False).table.drop_columns(["_key", "_value", "_columnar"])
        )
        cols = ", ".join(ident(c) for c in [*KEY, *fields])
        db.execute(
            f"CREATE TEMP TABLE source AS SELECT {cols}, true AS in_source, ({_in(complete)}) AS complete "
            "FROM judged WHERE reason IS NULL"
        )
        unmapped = _one(db, "SELECT count(*) FROM output WHERE _partition IS NULL")
        db.execute(
            f"""
            CREATE TEMP TABLE j AS
            WITH copies AS (
              SELECT _topic, _partition, _offset, count(*) AS copies FROM output
              WHERE _topic = '{pipeline.source.topic.replace("'", "''")}' GROUP BY ALL
            )
            SELECT coalesce(s._topic, c._topic) AS _topic, coalesce(s._partition, c._partition) AS _partition,
                   coalesce(s._offset, c._offset) AS _offset, s.in_source, s.complete, c.copies
            FROM source s FULL OUTER JOIN copies c USING (_topic, _partition, _offset)
            """
        )
        row = db.execute(
            """
            SELECT count(*) FILTER (WHERE in_source), count(*) FILTER (WHERE complete AND copies IS NULL),
                   count(*) FILTER (WHERE in_source IS NULL), count(*) FILTER (WHERE copies > 1),
                   coalesce(sum(copies - 1) FILTER (WHERE copies > 1), 0), coalesce(sum(copies), 0)
            FROM j
            """
        ).fetchall()[0]  # an aggregate without groups has one row
        source_valid, lost, phantom, dup, extra, _records = (int(v) for v in row)

        def samples(cond: str) -> list[dict]:
            found = db.sql(
                f"SELECT _topic, _partition, _offset, copies FROM j WHERE {cond} "
                f"ORDER BY _partition, _offset LIMIT {MAX_SAMPLES}"
            )
            return [jsonable(r) for r in found.to_arrow_table().to_pylist()]

        checks.append(
            check(
                "kafka_output_loss",
                "every committed valid source record is in the Kafka output",
                lost == 0,
                expected=0,
                observed=lost,
                samples=samples("complete AND copies IS NULL") if lost else [],
                detail=f"{source_valid} valid source records in {json.dumps(seen)}",
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
                samples=samples("in_source IS NULL") if phantom else [],
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
                observed={"duplicate_keys": dup, "extra_copies": extra},
                samples=samples("copies > 1") if dup else [],
                group=CheckGroup.KAFKA_OUTPUT,
            )
        )
        checks.append(_values_check(db, fields))
    finally:
        db.close()
    return checks


def _one(db: duckdb.DuckDBPyConnection, sql: str) -> int:
    return int(db.execute(sql).fetchall()[0][0])


def _values_check(db: duckdb.DuckDBPyConnection, fields: dict[str, str]) -> Check:
    """Each declared field the output carries, against the committed source record's value."""
    differs = {name: _value_differs(name, declared) for name, declared in fields.items()}
    pairs = "output JOIN source USING (_topic, _partition, _offset)"
    counted = ", ".join(f"count(*) FILTER (WHERE {cond})" for cond in differs.values())
    row = db.execute(f"SELECT count(*), {counted} FROM {pairs}").fetchall()[0]  # one row, as any aggregate
    compared, per_field = int(row[0]), dict(zip(fields, (int(v) for v in row[1:]), strict=True))
    wrong = {name: n for name, n in per_field.items() if n}
    samples = []
    if wrong:
        cols = ", ".join(ident(c) for c in [*KEY, *fields])
        rows = db.sql(
            f"SELECT {cols}, substr(out_value, 1, 300) AS output FROM {pairs} "
            f"WHERE {' OR '.join(differs.values())} ORDER BY _partition, _offset LIMIT {MAX_SAMPLES}"
        )
        samples = [{k: str(v) for k, v in r.items()} for r in rows.to_arrow_table().to_pylist()]
    return check(
        "kafka_output_values",
        "every declared field the Kafka output carries is the source record's value, exactly",
        not wrong,
        expected="no field differs",
        observed=wrong or "none",
        samples=samples,
        detail=f"{compared} output records compared field by field ({', '.join(fields)}); a timestamp "
        "cut to milliseconds or a decimal rounded shows here: keep sinks.kafka.value's default, or its "
        "timestampFormat option",
        group=CheckGroup.KAFKA_OUTPUT,
    )
