"""Backfill: re-read an offset range of the source and write what the tables lack, exactly once.

The range is read as one batch at read_committed (aborted transactions never
enter) and validated exactly as the stream does (parse_events). Each record is
looked up in the tables by (topic, partition, offset): a record already in
bronze or quarantine is never written again, so a backfill over an ingested
range adds nothing, and a repeated or retried backfill adds nothing more.

Only the range the stream has committed is backfilled — from where the pipeline
started reading to the sink ledgers' committed end. Beyond that end the stream
itself will ingest the records (a backfill there would make it write them a
second time); before the start they were never part of the pipeline. Records
the tables lack inside the range (deleted rows, a table restored from an older
copy) are re-written to bronze or quarantine, one commit per table, each with a
BACKFILL ledger entry (txnAppId `onceflow:<p>:<sink>:backfill`, txnVersion =
the sink's backfill count) that the audit lists. The aggregates are not touched:
the stream counted these records when it first committed them.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import asdict, dataclass, field

from onceflow import offsets
from onceflow.config import Pipeline
from onceflow.errors import BackfillError
from onceflow.sink_kinds import BACKFILLED, SinkName

BACKFILL_BATCH_ID = -1  # the _batch_id of re-written rows: no micro-batch wrote them


@dataclass(frozen=True)
class BackfillResult:
    pipeline: str
    start: dict[str, int]  # the range searched (clipped to the committed range)
    end: dict[str, int]
    records: int  # committed records Kafka holds in that range
    present: int  # of those, already in bronze or quarantine
    added: int  # rows written by this backfill (bronze + quarantine)
    added_by_sink: dict[str, int] = field(default_factory=dict)
    left_to_stream: dict[str, list[int]] = field(default_factory=dict)  # past the committed end: [start, end)

    def as_dict(self) -> dict:
        return asdict(self)


def clip_to_committed(
    start: dict[int, int], end: dict[int, int], first: dict[int, int], committed: dict[int, int]
) -> tuple[dict[int, int], dict[int, int], dict[int, tuple[int, int]]]:
    """Split [start, end) into the part inside [first, committed) and the part past `committed`.

    Raises BackfillError for offsets below where the pipeline started reading.
    """
    before = {
        p: (start[p], min(end[p], first[p])) for p in sorted(start) if p in first and start[p] < min(end[p], first[p])
    }
    if before:
        ranges = ", ".join(f"partition {p}: [{s}, {e})" for p, (s, e) in before.items())
        raise BackfillError(
            f"the range reaches below where the pipeline started reading ({ranges}; it starts at "
            f"{ {p: first[p] for p in before} }). Those records were never part of "
            "this pipeline. Fix: start the range at the pipeline's first offsets, or ingest that history with a "
            "pipeline whose source.starting_offsets covers it."
        )
    inside_start, inside_end, beyond = {}, {}, {}
    for p in sorted(start):
        hi = min(end[p], committed.get(p, start[p]))
        if start[p] < hi:
            inside_start[p], inside_end[p] = start[p], hi
        if max(start[p], hi) < end[p]:
            beyond[p] = (max(start[p], hi), end[p])
    return inside_start, inside_end, beyond


def run_backfill(
    pipeline: Pipeline, start: dict[int, int], end: dict[int, int], spark=None, log=lambda msg: None
) -> BackfillResult:
    """Write the records of [start, end) the tables lack; see the module doc."""
    from onceflow.ledger import read_ledger
    from onceflow.reconcile import first_offsets
    from onceflow.sinks import driver_lease, table_paths
    from onceflow.state.status import AlreadyRunningError, LockWork, RunLock

    lock = RunLock(pipeline.state_path)  # the tables must not move under the comparison
    try:
        lock.acquire(mode=LockWork.BACKFILL, pipeline=pipeline.name)
    except AlreadyRunningError as exc:
        raise BackfillError(
            f"{pipeline.name}: {exc} A backfill compares the range with the tables, so it runs "
            "between stream runs (the stream DAG's bounded windows leave such gaps)."
        ) from None
    lease = contextlib.ExitStack()
    try:
        lease.enter_context(driver_lease(pipeline, log))  # on an object store: no driver elsewhere writes
        paths = table_paths(pipeline)
        ledgers = {sink: read_ledger(paths[sink]) for sink in BACKFILLED}
        committed = _min_offsets([ledgers[s].committed_offsets() for s in ledgers])
        first = first_offsets(ledgers[SinkName.BRONZE].entries)
        inside_start, inside_end, beyond = clip_to_committed(start, end, first, committed)
        left = offsets.ranges_as_json(beyond)
        if beyond:
            log(
                f"{pipeline.name}: not backfilled, past the stream's committed end (the stream ingests them): "
                + ", ".join(f"partition {p} [{s}, {e})" for p, (s, e) in beyond.items())
            )
        keyed = {"start": offsets.as_json(inside_start), "end": offsets.as_json(inside_end)}
        if not inside_start:
            return BackfillResult(pipeline.name, keyed["start"], keyed["end"], 0, 0, 0, {}, left)
        if spark is None:
            from onceflow.spark.session import build_session

            spark = build_session(f"onceflow-backfill-{pipeline.name}", master=pipeline.spark_master)
        records, added = _write_missing(spark, pipeline, ledgers, inside_start, inside_end, log)
    finally:
        lease.close()
        lock.release()
    total = sum(added.values())
    log(
        f"{pipeline.name}: backfill {keyed}: {records} committed records, {records - total} already in the "
        f"tables, {total} re-written ({', '.join(f'{s} {n}' for s, n in added.items())})"
    )
    return BackfillResult(pipeline.name, keyed["start"], keyed["end"], records, records - total, total, added, left)


def _min_offsets(offsets: list[dict[int, int]]) -> dict[int, int]:
    """Per partition, the end every sink reached (a partition some sink never saw is absent)."""
    common = set.intersection(*(set(o) for o in offsets)) if offsets else set()
    return {p: min(o[p] for o in offsets) for p in sorted(common)}


def _write_missing(
    spark, pipeline: Pipeline, ledgers: dict, start: dict[int, int], end: dict[int, int], log
) -> tuple[int, dict[str, int]]:
    """Anti-join the range with the re-written sinks' rows (bronze ∪ quarantine); append what is
    missing, one commit per table. `ledgers` were read under the run lock, so they are still each table's newest."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from onceflow.ledger import backfill_entry
    from onceflow.spark.kafka_read import read_committed_batch
    from onceflow.spark.parse import bronze_rows, parse_events, quarantine_rows
    from onceflow.spark.sinks import delta

    topic = pipeline.source.topic
    from onceflow.kafka.client import source_client

    raw = read_committed_batch(
        spark,
        source_client(pipeline),
        topic,
        starting=offsets.spark_json(topic, start),
        ending=offsets.spark_json(topic, end),
    )
    if pipeline.schema.registry is not None:  # framed records: as the stream parses them
        from onceflow.spark.registry_parse import registry_parser

        parsed = registry_parser(pipeline)(raw).persist()
    else:
        parsed = parse_events(raw, pipeline.schema, keyed=pipeline.keyed).persist()
    try:
        records = parsed.count()
        held = functools.reduce(
            DataFrame.unionByName,
            (
                spark.read.format("delta").load(ledgers[sink].table).select("_topic", "_partition", "_offset")
                for sink in BACKFILLED
            ),
        )
        missing = parsed.join(
            held.where(F.col("_topic") == topic).distinct(), ["_topic", "_partition", "_offset"], "left_anti"
        ).persist()
        try:
            added: dict[str, int] = {}
            selects = {  # each re-written sink's rows of the missing records (sink_kinds.BACKFILLED)
                SinkName.BRONZE: lambda df, b, g: bronze_rows(df, pipeline.schema, b, g, pipeline.keyed),
                SinkName.QUARANTINE: quarantine_rows,
            }
            for sink in BACKFILLED:
                select = selects[sink]
                ledger = ledgers[sink]
                generation = ledger.generation or 1
                rows = select(missing, BACKFILL_BATCH_ID, generation).persist()
                try:
                    spans = (
                        rows.groupBy("_partition")
                        .agg(
                            F.min("_offset").alias("first"), F.max("_offset").alias("last"), F.count("*").alias("rows")
                        )
                        .orderBy("_partition")
                        .collect()
                    )
                    count = sum(r["rows"] for r in spans)
                    reasons = None
                    if count and sink == SinkName.QUARANTINE:  # its rows per reason (ledger.REASONS)
                        reasons = {r["reason"]: r["count"] for r in rows.groupBy("reason").count().collect()}
                    if count:
                        entry = backfill_entry(
                            pipeline.name,
                            sink,
                            generation,
                            len(ledger.backfills),
                            topic,
                            start,
                            end,
                            count,
                            [r.asDict() for r in spans],
                            reasons,
                        )
                        delta.append(rows, ledger.table, entry)  # txn (backfill app id, sequence)
                        log(
                            f"{pipeline.name}: {sink}: re-wrote {count} row(s): "
                            + ", ".join(
                                f"partition {r['_partition']} offsets {r['first']}..{r['last']} ({r['rows']})"
                                for r in spans
                            )
                        )
                    added[sink] = count
                finally:
                    rows.unpersist()
        finally:
            missing.unpersist()
    finally:
        parsed.unpersist()
    return records, added
