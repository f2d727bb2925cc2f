"""The exactly-once streaming job: Kafka → Delta bronze and quarantine, aggregates behind them.

One micro-batch = one idempotent Delta commit each to bronze and quarantine, each
holding the batch's ledger entry (docs/exactly-once.md); the follower
(spark/follower.py) merges bronze's batches into the aggregates and compacts the
tables on its own schedule, off the batch's path. The same job runs continuously (processingTime
trigger) or as a scheduled batch (availableNow).

    run_ingest(pipeline, mode="available-now")
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from onceflow import faults, offsets, tables
from onceflow.checkpoint import batch_offset_range
from onceflow.config import DEFAULT_STOP_TIMEOUT, AggregateSink, Pipeline
from onceflow.deltars import Appender
from onceflow.errors import IngestError, OnceflowError, RecoveryError, TableFeatureError
from onceflow.generation import CheckpointIdentity, has_spark_state, new_identity, read_identity, write_identity
from onceflow.ledger import Ledger, LedgerEntry
from onceflow.polling import wait_until
from onceflow.sinks import delta_sinks, read_ledgers, table_paths
from onceflow.spark.floors import above, raised
from onceflow.spark.follower import Follower
from onceflow.spark.kafka_read import kafka_options
from onceflow.spark.listener import StatusListener
from onceflow.spark.parse import bronze_rows, parse_events, quarantine_rows, sink_rows
from onceflow.spark.sinks import delta
from onceflow.spark.sinks.kafka_txn import KafkaTxnSink
from onceflow.spark.stop import (
    StopGate,
    StopOutcome,
    discard_held_batch,
    enter_batch,
    planned_before,
    register,
    stop_at_batch_boundary,
    unregister,
)
from onceflow.status import IngestMode, RunEvent, RunLock, RunStatus, StatusLog
from onceflow.unprocessable import Unprocessable

MODES = tuple(m.value for m in IngestMode)


@dataclass
class IngestResult:
    pipeline: str
    run_id: str
    status: str  # finished | stopped | failed
    generation: int
    batches: int
    input_rows: int
    seconds: float
    error: str | None = None
    stop: dict | None = None  # how a stop went: reason, requested_epoch, seconds, clean, held_batch


def table_ddls(pipeline: Pipeline) -> dict[str, str]:
    """Sink name → the DDL its Delta table is created with, derived from the declaration."""
    out = {"bronze": tables.bronze_ddl(pipeline.schema), "quarantine": tables.QUARANTINE_DDL}
    if pipeline.sinks.aggregates is not None:
        out["aggregates"] = tables.aggregates_ddl(pipeline.schema, pipeline.sinks.aggregates)
    return out


def table_properties(pipeline: Pipeline) -> dict[str, dict[str, str]]:
    """Sink name → the Delta table properties its table is created with (only when created)."""
    out: dict[str, dict[str, str]] = {}
    for name, sink in delta_sinks(pipeline).items():
        out[name] = {tables.AUTO_COMPACT: "true"} if sink.auto_compact else {}
        if isinstance(sink, AggregateSink) and sink.deletion_vectors:
            out[name][tables.DELETION_VECTORS] = "true"
    return out


# why a table wants each property, and the pipeline setting that declines it
_WHY = {
    tables.DELETION_VECTORS: (
        "each MERGE copies every file it touches, so batches slow down as the table grows",
        "deletion_vectors",
    ),
    tables.AUTO_COMPACT: (
        "nothing merges the small files each batch adds, so reads and audits slow down as the table grows",
        "auto_compact",
    ),
}


def table_property_hints(pipeline: Pipeline, ledgers: dict[str, Ledger]) -> list[str]:
    """What to do where the pipeline wants a table property but its existing table was
    created without it (by an older onceflow, or by hand): a line per table and property.
    A table that does not exist yet is created with them."""
    hints = []
    for sink, wanted in table_properties(pipeline).items():
        ledger = ledgers[sink]
        for key in wanted if ledger.exists else ():
            if str(ledger.properties.get(key, "false")).lower() != "false":
                continue
            why, setting = _WHY[key]
            hints.append(
                f"the {sink} table {ledger.table} lacks {key}: {why}. To turn it on, stop the stream and "
                f"run ALTER TABLE delta.`{ledger.table}` SET TBLPROPERTIES ('{key}' = true) (the audit "
                f"lists that commit as one without a ledger entry); or set sinks.{sink}.{setting}: "
                f"false to silence this."
            )
    return hints


def prepare_checkpoint(pipeline: Pipeline, ledgers: dict[str, Ledger]) -> CheckpointIdentity:
    """Decide the writer generation and starting offsets, or refuse with the fix.

    A fresh checkpoint beside sinks that already hold batches would restart batch
    ids at 0 under an app id Delta has seen: every write would be skipped.
    """
    cp = pipeline.checkpoint_path
    identity = read_identity(cp)
    written = {name: led for name, led in ledgers.items() if led.entries}
    newest = max((led.entries[-1].generation for led in written.values()), default=None)
    fix = f"Fix: run `onceflow recover --pipeline {pipeline.file or pipeline.name}`."
    if identity is None:
        if written:
            state = "has no onceflow identity" if has_spark_state(cp) else "is missing"
            held = ", ".join(
                f"{n}: generation {led.generation} batch {led.entries[-1].batch_id}" for n, led in written.items()
            )
            raise RecoveryError(
                f"the checkpoint {cp} {state}, but the sinks already hold batches ({held}). "
                f"Starting over would re-read or skip data. {fix}"
            )
        identity = new_identity(pipeline.name, 0, None, "new pipeline")
        write_identity(cp, identity)
    elif newest is not None and newest > identity.generation:
        raise RecoveryError(
            f"the checkpoint {cp} is generation {identity.generation}, but the sinks were already written by "
            f"generation {newest}: this checkpoint is older than the tables (restored from a copy?). {fix}"
        )
    return identity


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
        self.floors = {sink: identity.floor(sink) for sink in ("bronze", "quarantine", "kafka")}
        self.kafka = KafkaTxnSink.for_pipeline(pipeline, self.generation) if pipeline.sinks.kafka else None
        self.paths = table_paths(pipeline)
        self.topic = pipeline.source.topic
        self.schema_json = pipeline.schema.model_dump_json()
        self.follower = follower
        # a batch of up to this many records (its offsets bound them) is committed from the driver;
        # a larger one's bronze by Spark, its quarantine from the driver if it holds up to as many rows
        self.driver_rows = pipeline.source.driver_commit_max_offsets
        self.bronze = Appender(self.paths["bronze"])
        self.quarantine = Appender(self.paths["quarantine"])
        self.writing: dict | None = None  # the batch being written: a failed run names it (onceflow.poison)

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

    def entry(self, sink: str, batch_id: int, start: dict, end: dict, rows: int, extra: dict | None = None):
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

    def kept(self, sink: str):
        """True for rows this sink does not hold yet: those at or above its floor
        (rows committed by an earlier generation; see CheckpointIdentity.sink_floors)."""
        return above(self.floors[sink])

    def above_floor(self, df: DataFrame, sink: str) -> DataFrame:
        return df.where(self.kept(sink)) if self.floors[sink] else df

    def __call__(self, parsed: DataFrame, batch_id: int) -> None:
        """One micro-batch, already validated: the query parses as part of its plan (build_query),
        so the large validation expression is built and analysed once per run, not per batch."""
        enter_batch(self.pipeline.checkpoint_path, batch_id, self.spark)  # once a stop is asked: held, not written
        faults.maybe_crash("before_sink_commit", batch_id)
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
            self.follower.add(self._write_delta(parsed, batch_id, start, end, small))  # merged in a while
            self._write_kafka(parsed, batch_id, start, end)
        finally:
            if reread:
                parsed.unpersist()
        self.writing = None
        faults.maybe_crash("after_sink_commit", batch_id)

    def _write_delta(self, parsed: DataFrame, batch_id: int, start: dict, end: dict, small: bool) -> LedgerEntry:
        """Bronze and quarantine; bronze's entry. A table with a feature delta-rs cannot write sends
        this batch and the rest of the run to Spark's writer, which skips, through the same txn,
        what delta-rs already committed of this batch (bronze, when only quarantine refused)."""
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
        return self._write_with_spark(parsed, batch_id, start, end)

    def _from_driver(self, rows: int) -> bool:
        """Whether this many rows are committed from the driver (0 in the setting: never)."""
        return self.driver_rows > 0 and rows <= self.driver_rows

    def _bronze_entry(self, batch_id: int, start: dict, end: dict, rows: int) -> LedgerEntry:
        # the declaration this batch was judged by: after a schema evolution the audit judges
        # each batch's records by the rules in force when it was written (audit/rows.py)
        return self.entry("bronze", batch_id, start, end, rows, {"schema": self.schema_json})

    def _write_from_driver(self, parsed: DataFrame, batch_id: int, start: dict, end: dict) -> LedgerEntry:
        """A small batch: one Spark job brings both sinks' rows to the driver, and delta-rs
        commits each table in milliseconds (a Delta-Spark commit costs about half a second of
        driver work whatever it holds; docs/benchmarks.md). Same txn, same entries."""
        import pyarrow.compute as pc

        rows = sink_rows(
            parsed, self.pipeline.schema, batch_id, self.generation, self.kept("bronze"), self.kept("quarantine")
        ).toArrow()
        to_bronze = rows.column("_to_bronze")
        bronze, quarantine = rows.filter(to_bronze), rows.filter(pc.invert(to_bronze))
        entry = self._bronze_entry(batch_id, start, end, bronze.num_rows)
        self.bronze.append(bronze, entry.to_json(), entry.app_id, entry.batch_id)
        faults.maybe_crash("between_sinks", batch_id)
        q_entry = self.entry("quarantine", batch_id, start, end, quarantine.num_rows)
        self.quarantine.append(quarantine, q_entry.to_json(), q_entry.app_id, q_entry.batch_id)
        return entry

    def _write_with_spark(self, parsed: DataFrame, batch_id: int, start: dict, end: dict) -> LedgerEntry:
        """A large batch: Spark's Delta writer commits bronze (the rows stay in the executors);
        the quarantine, usually small, still goes through the driver."""
        valid = F.col("reason").isNull()
        stats = parsed.agg(
            F.count(F.when(self.kept("bronze") & valid, 1)).alias("bronze"),
            F.count(F.when(self.kept("quarantine") & ~valid, 1)).alias("quarantine"),
        ).first()
        assert stats is not None  # an aggregate without groups has one row
        quarantine = self.above_floor(quarantine_rows(parsed, batch_id, self.generation), "quarantine")
        entry = self._bronze_entry(batch_id, start, end, stats["bronze"])
        delta.append(self.above_floor(self._bronze_frame(parsed, batch_id), "bronze"), self.paths["bronze"], entry)
        faults.maybe_crash("between_sinks", batch_id)
        q_entry = self.entry("quarantine", batch_id, start, end, stats["quarantine"])
        if self._from_driver(stats["quarantine"]):  # delta-rs from the driver: milliseconds
            self.quarantine.append(quarantine.toArrow(), q_entry.to_json(), q_entry.app_id, q_entry.batch_id)
        else:  # too many rows for the driver: Spark's Delta writer, same txn, same entry
            delta.append(quarantine, self.paths["quarantine"], q_entry)
        return entry

    def _bronze_frame(self, parsed: DataFrame, batch_id: int) -> DataFrame:
        return bronze_rows(parsed, self.pipeline.schema, batch_id, self.generation)

    def _write_kafka(self, parsed: DataFrame, batch_id: int, start: dict, end: dict) -> None:
        if self.kafka is not None:  # one Kafka transaction per task partition (docs/kafka-sink.md)
            kafka = self.entry("kafka", batch_id, start, end, 0)
            self.kafka.write(
                self.above_floor(self._bronze_frame(parsed, batch_id), "kafka"), batch_id, kafka.start, kafka.end
            )


def _starting_offsets(pipeline: Pipeline, identity: CheckpointIdentity) -> str:
    return identity.starting_offsets or pipeline.source.starting_offsets


def build_query(
    spark: SparkSession,
    pipeline: Pipeline,
    identity: CheckpointIdentity,
    mode: str,
    writer: BatchWriter,
    log=lambda msg: None,
):
    """The streaming query, not yet started; `writer` writes its batches."""
    source = pipeline.source
    extra = {}
    max_offsets = source.max_offsets(available_now=mode == IngestMode.AVAILABLE_NOW)
    if max_offsets:
        extra["maxOffsetsPerTrigger"] = str(max_offsets)
    if source.min_partitions:
        extra["minPartitions"] = str(source.min_partitions)
    stream = (
        spark.readStream.format("kafka")
        .options(
            **kafka_options(source.bootstrap_servers, source.topic, _starting_offsets(pipeline, identity), **extra)
        )
        .load()
    )
    query = (
        parse_events(stream, pipeline.schema, unprocessable=Unprocessable.load(pipeline.state_path))
        .writeStream.queryName(f"onceflow-{pipeline.name}")
        .option("checkpointLocation", pipeline.checkpoint_path)
        .foreachBatch(writer)
    )
    if mode == IngestMode.AVAILABLE_NOW:
        return query.trigger(availableNow=True)
    # Spark's interval parser knows "milliseconds" but not every unit the config accepts ("ms")
    millis = round(pipeline.trigger.seconds * 1000)
    return query.trigger(processingTime=f"{millis} milliseconds")


class _StopRequest:
    """SIGTERM/SIGINT → stop at the next batch boundary instead of mid-batch."""

    def __init__(self):
        self.reason: str | None = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: setattr(self, "reason", signal.Signals(signum).name))


_STOP_JOIN_MS = 30_000  # spark.sql.streaming.stopTimeout: how long query.stop() waits for the stream thread


def run_ingest(
    pipeline: Pipeline,
    mode: str = IngestMode.AVAILABLE_NOW,
    until_idle: float | None = None,
    max_seconds: float | None = None,
    spark: SparkSession | None = None,
    log=lambda msg: None,
    stop_timeout: float = DEFAULT_STOP_TIMEOUT,
) -> IngestResult:
    """Run the pipeline's query until it finishes (available-now), is idle for
    `until_idle` seconds, has run `max_seconds`, or receives SIGTERM. The last three
    stop it at a batch boundary (onceflow.spark.stop) within `stop_timeout` seconds,
    or the run fails saying it could not (IngestError)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if stop_timeout <= 0:
        raise ValueError(f"stop_timeout must be positive, not {stop_timeout!r}")
    faults.parse(os.environ.get("ONCEFLOW_FAULT"))  # a typo fails now, not mid-run
    run_id = str(uuid.uuid4())
    status = StatusLog(pipeline.state_path, pipeline.name)
    lock = RunLock(pipeline.state_path)
    lock.acquire(run_id=run_id, mode=mode, pipeline=pipeline.name, stop_timeout=stop_timeout)
    started = time.monotonic()
    writer: BatchWriter | None = None
    try:
        ledgers = read_ledgers(pipeline, kafka=False)  # each Delta sink's, once per run, under the run lock
        identity = prepare_checkpoint(pipeline, ledgers)
        if spark is None:
            from onceflow.spark.session import build_session

            spark = build_session(f"onceflow-ingest-{pipeline.name}", master=pipeline.spark_master)
        # an idle query reports a heartbeat this often (health: `dead` needs a recent one)
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "5000")
        # query.stop() fails after this long instead of waiting forever for the stream thread
        spark.conf.set("spark.sql.streaming.stopTimeout", str(_STOP_JOIN_MS))
        follower = Follower(spark, pipeline, ledgers, continuous=mode == IngestMode.CONTINUOUS, log=log)
        listener = StatusListener(status, run_id, pipeline.source.topic, log=log, max_lag=pipeline.health.max_lag)
        spark.streams.addListener(listener)
        request = _StopRequest()
        request.install()
        gate = StopGate(
            pipeline.checkpoint_path,
            planned_before(pipeline.checkpoint_path),
            hold_limit=stop_timeout + _STOP_JOIN_MS / 1000 + 30,
        )
        register(gate)
        query = None
        try:
            writer = BatchWriter(spark, pipeline, identity, follower, log)
            writer.ensure_tables(ledgers, log)
            query = build_query(spark, pipeline, identity, mode, writer, log).start()
            gate.query = query
            follower.start()
            status.append(
                RunEvent.STARTED,
                run_id=run_id,
                query_id=str(query.id),
                pid=os.getpid(),
                mode=mode,
                generation=identity.generation,
                trigger_seconds=pipeline.trigger.seconds,
            )
            log(f"{pipeline.name}: query {query.id} started ({mode}, generation {identity.generation})")
            for hint in table_property_hints(pipeline, ledgers):
                log(f"{pipeline.name}: {hint}")
            trigger = pipeline.trigger.seconds if mode == IngestMode.CONTINUOUS else None
            final, error, stopped = _supervise(
                query, listener, request, gate, mode, until_idle, max_seconds, trigger, stop_timeout, log, follower
            )
            if final == RunStatus.STOPPED and gate.held is not None and not query.isActive:
                log(
                    f"{pipeline.name}: "
                    + discard_held_batch(
                        pipeline.checkpoint_path, gate.held, identity.generation, table_paths(pipeline).values()
                    )
                )
            _drain(gate, listener)
            if not query.isActive:
                try:  # the aggregates catch up with every batch bronze committed in this run
                    follower.finish()
                except Exception as exc:
                    if final != RunStatus.FAILED:  # a failed query's own error is the one to tell
                        final, stopped = RunStatus.FAILED, None
                        error = f"the follower failed (aggregates, compaction): {type(exc).__name__}: {_short(exc)}"
        finally:
            if query is None or not query.isActive:  # a query that could not stop keeps its gate closed
                unregister(gate)
            spark.streams.removeListener(listener)
            listener.close()  # prints the last batches' line (the terminated event may come after removal)
        stop_info = stopped.as_dict() if stopped else None
        result = IngestResult(
            pipeline.name,
            run_id,
            final,
            identity.generation,
            listener.batches,
            listener.rows,
            round(time.monotonic() - started, 3),
            error,
            stop_info,
        )
        status.append(
            RunEvent.FINAL,
            run_id=run_id,
            status=final,
            error=error,
            batches=listener.batches,
            input_rows=listener.rows,
            **({"stop": stop_info} if stop_info else {}),
            **(
                {"batch": writer.writing}
                if final == RunStatus.FAILED and writer and writer.writing and stopped is None
                else {}
            ),
        )
        if final == RunStatus.FAILED:
            what = (
                ""
                if (stopped and not stopped.clean) or (error or "").startswith("the follower")
                else "the streaming query failed: "
            )
            raise IngestError(f"{pipeline.name}: {what}{error}")
        return result
    except IngestError:
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {_short(exc)}"
        batch = writer.writing if writer is not None else None
        if _jvm_gone(exc):
            where = f" while batch {batch['id']} was being written" if batch else ""
            error = (
                f"the Spark driver JVM exited{where} ({error}); its own log (this process's stderr) "
                "names the cause, e.g. an OutOfMemoryError or StackOverflowError"
            )
        status.append(
            RunEvent.FINAL, run_id=run_id, status=RunStatus.FAILED, error=error, **({"batch": batch} if batch else {})
        )
        if isinstance(exc, OnceflowError):
            raise
        raise IngestError(f"{pipeline.name}: the streaming job could not run: {error}") from exc
    finally:
        lock.release()


def _supervise(
    query,
    listener: StatusListener,
    request: _StopRequest,
    gate: StopGate,
    mode: str,
    until_idle: float | None,
    max_seconds: float | None,
    trigger: float | None,
    stop_timeout: float,
    log,
    follower: Follower,
) -> tuple[str, str | None, StopOutcome | None]:
    """Wait for the query's end or a reason to stop it: (final status, error, how a stop went)."""
    from pyspark.errors import StreamingQueryException

    started = time.monotonic()
    # --until-idle counts from the query's start, not from building the session and tables
    listener.last_data_at = max(listener.last_data_at, started)
    try:
        while query.isActive:
            if query.awaitTermination(1.0):
                break
            reason = request.reason
            if (
                reason is None
                and until_idle is not None
                and time.monotonic() - listener.last_data_at >= until_idle
                and gate.writing() is None  # a batch still writing is not idle
                and listener.last_empty_at > listener.last_data_at
            ):  # Spark looked and found nothing new
                reason = f"idle for {until_idle:g}s"
            if reason is None and max_seconds is not None and time.monotonic() - started >= max_seconds:
                reason = f"ran its {max_seconds:g}s window"
            if reason is None and follower.error is not None:
                reason = "the follower failed"  # the run fails with its error (follower.finish)
            if reason:
                log(f"stopping at a batch boundary ({reason})")
                outcome = stop_at_batch_boundary(query, gate, reason, trigger, stop_timeout, log)
                if not outcome.clean:
                    return RunStatus.FAILED, outcome.message, outcome
                if outcome.stopped:
                    log(f"{outcome.message}, {outcome.seconds:.1f}s after the request")
                    return RunStatus.STOPPED, None, outcome
                break  # it ended by itself meanwhile
        query.awaitTermination()
    except StreamingQueryException as exc:
        return RunStatus.FAILED, _short(exc), None
    failure = query.exception()
    if failure is not None:
        return RunStatus.FAILED, _short(failure), None
    return (RunStatus.FINISHED if mode == IngestMode.AVAILABLE_NOW else RunStatus.STOPPED), None, None


def _drain(gate: StopGate, listener: StatusListener, timeout: float = 10) -> None:
    """Progress events reach the listener asynchronously: wait for the last committed
    batch's, so `final` is the last line of a run. (Not `query.lastProgress`: after
    idle triggers it names the next batch id, which never gets a progress event.)"""
    wanted = gate.passed if gate.passed is not None and gate.writing() is None else None
    if wanted is not None:
        wait_until(lambda: listener.last_batch_id >= wanted, timeout, interval=0.05)


def _jvm_gone(exc: BaseException) -> bool:
    """The exception says the Python driver lost its JVM (py4j's connection refused or reset)."""
    names = {type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None}
    return bool(names & {"Py4JNetworkError", "ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError"})


def _short(exc) -> str:
    """The error's own message, for status files, the health verdict and logs: without Spark's
    query description and Java stack frames (the driver's log has those)."""
    text = str(getattr(exc, "desc", None) or exc)
    for cut in ("\n=== Streaming Query ===", "\nJVM stacktrace:", "\n\tat "):
        text = text.split(cut)[0]
    lines = [line for line in text.strip().splitlines() if not line.lstrip().startswith("at ")]
    return "\n".join(lines)[:2000]
