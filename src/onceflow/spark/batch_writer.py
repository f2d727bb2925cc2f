"""The foreachBatch function of the streaming job: one micro-batch's bronze, quarantine and Kafka
sink, each written idempotently with its ledger entry (docs/exactly-once.md); bronze's entry then
goes to the follower, which merges the aggregates off the batch's path."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from onceflow import faults, offsets
from onceflow.checkpoint import batch_offset_range
from onceflow.config import Pipeline
from onceflow.deltars import Appender
from onceflow.errors import TableFeatureError
from onceflow.ledger import REASONS, Ledger, LedgerEntry
from onceflow.sink_kinds import FLOORED, SinkName
from onceflow.sinks import table_paths
from onceflow.spark.floors import above, raised
from onceflow.spark.follower import Follower
from onceflow.spark.parse import bronze_rows, quarantine_rows, sink_rows
from onceflow.spark.sinks import delta
from onceflow.spark.sinks.kafka_txn import KafkaTxnSink
from onceflow.spark.stop import enter_batch
from onceflow.spark.table_specs import table_ddls, table_properties
from onceflow.state.generation import CheckpointIdentity

if TYPE_CHECKING:
    import pyarrow as pa


class BatchWriter:
    """The foreachBatch function: bronze, quarantine and the Kafka sink of one micro-batch,
    idempotently; bronze's entry then goes to the follower."""

    def __init__(
        self,
        spark: SparkSession,
        pipeline: Pipeline,
        identity: CheckpointIdentity,
        follower: Follower,
        log=lambda msg: None,
    ):
        self.spark = spark
        self.log = log
        self.pipeline = pipeline
        self.generation = identity.generation
        self.floors = {sink: identity.floor(sink) for sink in FLOORED}
        self.kafka = KafkaTxnSink.for_pipeline(pipeline, self.generation) if pipeline.sinks.kafka else None
        self.paths = table_paths(pipeline)
        self.topic = pipeline.source.topic
        self.schema_json = pipeline.schema.model_dump_json()
        self.follower = follower
        # a batch of up to this many records (its offsets bound them) is committed from the driver;
        # a larger one's bronze by Spark, its quarantine from the driver if it holds up to as many rows
        self.driver_rows = pipeline.source.driver_commit_max_offsets
        self.bronze = Appender(self.paths[SinkName.BRONZE])
        self.quarantine = Appender(self.paths[SinkName.QUARANTINE])
        self.writing: dict | None = None  # the batch being written: a failed run names it (onceflow.state.poison)
        # how a batch's raw Kafka rows are parsed when the query does not parse them in its plan (Avro:
        # each batch's schema ids decide its parse, spark/avro.py); None: the batches come parsed
        self.parse: Callable[[DataFrame], DataFrame] | None = None

    def ensure_tables(self, ledgers: dict[str, Ledger], log=lambda msg: None) -> None:
        """Create missing tables; bring existing ones to the declared schema, or refuse (spark/evolve.py)."""
        from onceflow.spark.evolve import evolve_table

        ddl = table_ddls(self.pipeline)
        properties = table_properties(self.pipeline)
        optional = {f.name.lower() for f in self.pipeline.schema.fields if not f.required}
        for name, path in self.paths.items():
            if ledgers[name].exists:
                for change in evolve_table(
                    self.spark, path, name, ddl[name], optional, self.pipeline.file or self.pipeline.name
                ):
                    log(f"{self.pipeline.name}: {change}")
            else:
                delta.ensure_table(self.spark, path, ddl[name], properties.get(name))

    def entry(self, sink: SinkName, batch_id: int, start: dict, end: dict, rows: int, extra: dict | None = None):
        floor = self.floors[sink]
        if floor:  # this sink already holds everything below its floor: its range starts there
            start, end = raised(start, floor), raised(end, floor)
        return LedgerEntry(
            pipeline=self.pipeline.name,
            sink=sink,
            generation=self.generation,
            batch_id=batch_id,
            topic=self.topic,
            start=start,
            end=end,
            rows=rows,
            extra=extra or {},
        )

    def kept(self, sink: SinkName):
        """True for rows this sink does not hold yet: those at or above its floor
        (rows committed by an earlier generation; see CheckpointIdentity.sink_floors)."""
        return above(self.floors[sink])

    def above_floor(self, df: DataFrame, sink: SinkName) -> DataFrame:
        return df.where(self.kept(sink)) if self.floors[sink] else df

    def __call__(self, parsed: DataFrame, batch_id: int) -> None:
        """One micro-batch, already validated: the query parses as part of its plan (build_query),
        so the large validation expression is built and analysed once per run, not per batch."""
        enter_batch(self.pipeline.checkpoint_path, batch_id, self.spark)  # once a stop is asked: held, not written
        faults.maybe_crash("before_sink_commit", batch_id)
        if self.parse is not None:
            parsed = self.parse(parsed)
        start, end = batch_offset_range(self.pipeline.checkpoint_path, batch_id, self.topic)
        self.writing = {
            "id": batch_id,
            "generation": self.generation,
            "topic": self.topic,
            "ranges": offsets.ranges_as_json({p: (start.get(p, 0), o) for p, o in end.items() if o > start.get(p, 0)}),
        }
        # its offsets bound a batch's records: a small one is committed from the driver
        small = self._from_driver(sum(o - start.get(p, 0) for p, o in end.items()))
        reread = not small or self.kafka is not None  # read more than once: cached
        parsed = parsed.persist() if reread else parsed
        try:
            self.follower.add(*self._write_delta(parsed, batch_id, start, end, small))  # merged in a while
            self._write_kafka(parsed, batch_id, start, end)
        finally:
            if reread:
                parsed.unpersist()
        self.writing = None
        faults.maybe_crash("after_sink_commit", batch_id)

    def _write_delta(
        self, parsed: DataFrame, batch_id: int, start: dict, end: dict, small: bool
    ) -> tuple[LedgerEntry, pa.Table | None]:
        """Bronze and quarantine; bronze's entry, and its rows when they are on the driver (the
        keyed table's follower merges them from there: spark/sinks/current_rs.py). A table with
        a feature delta-rs cannot write sends this batch and the rest of the run to Spark's
        writer, which skips, through the same txn, what delta-rs already committed of this batch
        (bronze, when only quarantine refused)."""
        if small:
            try:
                return self._write_from_driver(parsed, batch_id, start, end)
            except TableFeatureError as exc:
                self.driver_rows = 0
                self.log(
                    f"{self.pipeline.name}: delta-rs cannot commit to {exc.path} ({exc.reason}): from batch "
                    f"{batch_id} on, this run commits every batch with Spark's Delta writer "
                    "(`source.driver_commit_max_offsets: 0` says so in the pipeline file)"
                )
        return self._write_with_spark(parsed, batch_id, start, end), None

    def _from_driver(self, rows: int) -> bool:
        """Whether this many rows are committed from the driver (0 in the setting: never)."""
        return self.driver_rows > 0 and rows <= self.driver_rows

    def _bronze_entry(self, batch_id: int, start: dict, end: dict, rows: int) -> LedgerEntry:
        # the declaration this batch was judged by: after a schema evolution the audit judges
        # each batch's records by the rules in force when it was written (audit/source.py)
        return self.entry(SinkName.BRONZE, batch_id, start, end, rows, {"schema": self.schema_json})

    def _write_from_driver(
        self, parsed: DataFrame, batch_id: int, start: dict, end: dict
    ) -> tuple[LedgerEntry, pa.Table]:
        """A small batch: one Spark job brings both sinks' rows to the driver, and delta-rs
        commits each table in milliseconds (a Delta-Spark commit costs the same driver work whatever
        it holds; onceflow.deltars). Same txn, same entries."""
        import pyarrow.compute as pc

        rows = sink_rows(
            parsed,
            self.pipeline.schema,
            batch_id,
            self.generation,
            self.kept(SinkName.BRONZE),
            self.kept(SinkName.QUARANTINE),
            self.pipeline.keyed,
        ).toArrow()
        to_bronze = rows.column("_to_bronze")
        bronze, quarantine = rows.filter(to_bronze), rows.filter(pc.invert(to_bronze))
        entry = self._bronze_entry(batch_id, start, end, bronze.num_rows)
        self.bronze.append(bronze, entry.to_json(), entry.app_id, entry.batch_id)
        faults.maybe_crash("between_sinks", batch_id)
        q_entry = self._quarantine_entry(batch_id, start, end, quarantine)
        self.quarantine.append(quarantine, q_entry.to_json(), q_entry.app_id, q_entry.batch_id)
        return entry, bronze

    def _quarantine_entry(self, batch_id: int, start: dict, end: dict, rows: pa.Table | DataFrame) -> LedgerEntry:
        """Its entry, with its rows per reason (ledger.REASONS: the metrics' quarantine counts)."""
        if isinstance(rows, DataFrame):  # too many rows for the driver: counted where they are
            reasons = {r["reason"]: r["count"] for r in rows.groupBy("reason").count().collect()}
        else:
            import pyarrow.compute as pc

            counts = pc.value_counts(rows.column("reason")).to_pylist() if rows.num_rows else []
            reasons = {c["values"]: c["counts"] for c in counts}
        return self.entry(SinkName.QUARANTINE, batch_id, start, end, sum(reasons.values()), {REASONS: reasons})

    def _write_with_spark(self, parsed: DataFrame, batch_id: int, start: dict, end: dict) -> LedgerEntry:
        """A large batch: Spark's Delta writer commits bronze (the rows stay in the executors);
        the quarantine, usually small, still goes through the driver."""
        valid = F.col("reason").isNull()
        stats = parsed.agg(
            F.count(F.when(self.kept(SinkName.BRONZE) & valid, 1)).alias("bronze_rows"),
            F.count(F.when(self.kept(SinkName.QUARANTINE) & ~valid, 1)).alias("quarantine_rows"),
        ).first()
        assert stats is not None  # an aggregate without groups has one row
        quarantine = self.above_floor(quarantine_rows(parsed, batch_id, self.generation), SinkName.QUARANTINE)
        entry = self._bronze_entry(batch_id, start, end, stats["bronze_rows"])
        delta.append(
            self.above_floor(self._bronze_frame(parsed, batch_id), SinkName.BRONZE), self.paths[SinkName.BRONZE], entry
        )
        faults.maybe_crash("between_sinks", batch_id)
        if self._from_driver(stats["quarantine_rows"]):  # delta-rs from the driver: milliseconds
            rows = quarantine.toArrow()
            q_entry = self._quarantine_entry(batch_id, start, end, rows)
            self.quarantine.append(rows, q_entry.to_json(), q_entry.app_id, q_entry.batch_id)
        else:  # too many rows for the driver: Spark's Delta writer, same txn, same entry
            q_entry = self._quarantine_entry(batch_id, start, end, quarantine)
            delta.append(quarantine, self.paths[SinkName.QUARANTINE], q_entry)
        return entry

    def _bronze_frame(self, parsed: DataFrame, batch_id: int) -> DataFrame:
        return bronze_rows(parsed, self.pipeline.schema, batch_id, self.generation, self.pipeline.keyed)

    def _write_kafka(self, parsed: DataFrame, batch_id: int, start: dict, end: dict) -> None:
        if self.kafka is not None:  # one Kafka transaction per task partition (docs/kafka-sink.md)
            kafka = self.entry(SinkName.KAFKA, batch_id, start, end, 0)
            self.kafka.write(
                self.above_floor(self._bronze_frame(parsed, batch_id), SinkName.KAFKA), batch_id, kafka.start, kafka.end
            )
