"""The exactly-once streaming job: Kafka → Delta bronze and quarantine, aggregates behind them.

One micro-batch = one idempotent Delta commit each to bronze and quarantine, each
holding the batch's ledger entry (docs/exactly-once.md); the follower
(spark/follower.py) merges bronze's batches into the aggregates and compacts the
tables on its own schedule, off the batch's path. The same job runs continuously (processingTime
trigger) or as a scheduled batch (availableNow).

    run_ingest(pipeline, mode="available-now")

Its parts: the tables' DDL and properties (table_specs.py), the generation guard
(generation_guard.py), the batch writer (batch_writer.py), SIGTERM's stop request (signals.py);
here, the query and the run that supervises it.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from onceflow import faults
from onceflow.config import DEFAULT_STOP_TIMEOUT, Pipeline
from onceflow.errors import IngestError, OnceflowError, StorageError
from onceflow.kafka.client import source_client
from onceflow.lineage import run_observer
from onceflow.polling import wait_until
from onceflow.sinks import driver_lease, read_ledgers, table_paths
from onceflow.spark.batch_writer import BatchWriter
from onceflow.spark.follower import Follower
from onceflow.spark.generation_guard import prepare_checkpoint
from onceflow.spark.kafka_read import kafka_options
from onceflow.spark.listener import StatusListener
from onceflow.spark.parse import parse_events
from onceflow.spark.signals import StopRequest
from onceflow.spark.stop import (
    StopGate,
    StopOutcome,
    discard_held_batch,
    planned_before,
    register,
    stop_at_batch_boundary,
    unregister,
)
from onceflow.spark.table_specs import table_property_hints
from onceflow.state.control import Wanted, require_no_recovery
from onceflow.state.generation import CheckpointIdentity
from onceflow.state.status import IngestMode, RunEvent, RunLock, RunStatus, StatusLog
from onceflow.state.unprocessable import Unprocessable

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
        .options(**kafka_options(source_client(pipeline), source.topic, _starting_offsets(pipeline, identity), **extra))
        .load()
    )
    unprocessable = Unprocessable.load(pipeline.state_path)
    if pipeline.schema.framing is not None:
        # a batch may hold schema ids the registry gave after the query started: each batch's ids are
        # read first and its records made readable then, so the parse is the batch's own
        from onceflow.spark.registry_parse import registry_parser

        writer.parse = registry_parser(pipeline, unprocessable)
        frame = stream
    else:
        frame = parse_events(stream, pipeline.schema, unprocessable=unprocessable, keyed=pipeline.keyed)
    query = (
        frame.writeStream.queryName(f"onceflow-{pipeline.name}")
        .option("checkpointLocation", pipeline.checkpoint_path)
        .foreachBatch(writer)
    )
    if mode == IngestMode.AVAILABLE_NOW:
        return query.trigger(availableNow=True)
    # Spark's interval parser knows "milliseconds" but not every unit the config accepts ("ms")
    millis = round(pipeline.trigger.seconds * 1000)
    return query.trigger(processingTime=f"{millis} milliseconds")


_STOP_JOIN_MS = 30_000  # spark.sql.streaming.stopTimeout: how long query.stop() waits for the stream thread


def run_ingest(
    pipeline: Pipeline,
    mode: str = IngestMode.AVAILABLE_NOW,
    until_idle: float | None = None,
    max_seconds: float | None = None,
    spark: SparkSession | None = None,
    log=lambda msg: None,
    stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    leased: bool = False,
    recovery_run: str | None = None,
    app_log: str | None = None,
    standby: bool = False,
) -> IngestResult:
    """Run the pipeline's query until it finishes (available-now), is idle for
    `until_idle` seconds, has run `max_seconds`, is no longer wanted (`leased`: onceflow.state.control),
    or receives SIGTERM. The others stop it at a batch boundary (onceflow.spark.stop) within
    `stop_timeout` seconds, or the run fails saying it could not (IngestError). It does not start
    while a recovery other than `recovery_run` works on the pipeline (RecoveryInProgressError).
    `app_log`: the file its launcher sends its output to, recorded in run.json for whoever adopts it.
    `standby`: build and warm the session first, then wait as the pipeline's warm standby until the
    running query dies and take over (onceflow.spark.standby); a standby that is not needed after all
    returns a `stopped` result with no run logged."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if standby and mode != IngestMode.CONTINUOUS:
        raise ValueError("a standby takes over a continuous stream: use it with mode continuous")
    if stop_timeout <= 0:
        raise ValueError(f"stop_timeout must be positive, not {stop_timeout!r}")
    faults.parse(os.environ.get("ONCEFLOW_FAULT"))  # a typo fails now, not mid-run
    run_id = str(uuid.uuid4())
    # the run's OpenLineage events follow its status events, when OpenLineage is configured
    status = StatusLog(pipeline.state_path, pipeline.name, observe=run_observer(pipeline, log))
    lock = RunLock(pipeline.state_path)
    lock_info = {
        "run_id": run_id,
        "mode": mode,
        "pipeline": pipeline.name,
        "stop_timeout": stop_timeout,
        **({"log": str(app_log)} if app_log else {}),
    }
    if standby:
        from onceflow.spark import standby as standing

        spark = spark or _session(pipeline)
        standing.warm(spark, pipeline, log)
        if not standing.wait_for_turn(pipeline, lock, lock_info, _jvm_pid(spark), leased, recovery_run, log):
            return IngestResult(pipeline.name, run_id, RunStatus.STOPPED, -1, 0, 0, 0.0)
    else:
        lock.acquire(**lock_info)
        try:  # under the run lock: a recovery that begins after this look finds the query and stops it
            require_no_recovery(pipeline.state_path, allowed_run=recovery_run)
        except BaseException:
            lock.release()
            raise
    wanted = Wanted(pipeline.state_path) if leased else None
    started = time.monotonic()
    writer: BatchWriter | None = None
    store_lease = contextlib.ExitStack()
    try:
        # on an object store: the pipeline's lease there, against drivers on other machines (docs/storage.md)
        lease = store_lease.enter_context(driver_lease(pipeline, log))
        ledgers = read_ledgers(pipeline, kafka=False)  # each Delta sink's, once per run, under the run lock
        identity = prepare_checkpoint(pipeline, ledgers)
        spark = spark or _session(pipeline)
        # the driver's JVM: once it is gone the run is dead, though this process holds the run lock for
        # the seconds it takes to notice (health reads a lock holder whose JVM is gone as `dead`)
        lock.note(jvm_pid=_jvm_pid(spark))
        # an idle query reports a heartbeat this often (health: `dead` needs a recent one)
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "5000")
        # query.stop() fails after this long instead of waiting forever for the stream thread
        spark.conf.set("spark.sql.streaming.stopTimeout", str(_STOP_JOIN_MS))
        follower = Follower(spark, pipeline, ledgers, continuous=mode == IngestMode.CONTINUOUS, log=log)
        listener = StatusListener(
            status,
            run_id,
            pipeline.source.topic,
            log=log,
            max_lag=pipeline.health.max_lag,
            trigger_seconds=pipeline.trigger.seconds if mode == IngestMode.CONTINUOUS else None,
        )
        spark.streams.addListener(listener)
        request = StopRequest()
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
                query,
                listener,
                request,
                gate,
                mode,
                until_idle,
                max_seconds,
                trigger,
                stop_timeout,
                log,
                follower,
                wanted,
                lease.check if lease is not None else None,
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
        store_lease.close()
        lock.release()


def _jvm_pid(spark: SparkSession) -> int:
    """The driver JVM's pid: health tells a holder whose JVM is gone by it."""
    jvm: Any = spark.sparkContext._jvm
    return int(jvm.java.lang.ProcessHandle.current().pid())


def _session(pipeline: Pipeline) -> SparkSession:
    from onceflow.spark.session import build_session

    return build_session(f"onceflow-ingest-{pipeline.name}", master=pipeline.spark_master)


def _supervise(
    query,
    listener: StatusListener,
    request: StopRequest,
    gate: StopGate,
    mode: str,
    until_idle: float | None,
    max_seconds: float | None,
    trigger: float | None,
    stop_timeout: float,
    log,
    follower: Follower,
    wanted: Wanted | None = None,
    fence=None,
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
            if reason is None and wanted is not None and wanted.current() is None:
                reason = f"no longer wanted: nobody renewed {wanted.path.name}"
            if reason is None and follower.error is not None:
                reason = "the follower failed"  # the run fails with its error (follower.finish)
            lost = None
            if reason is None and fence is not None:
                try:
                    fence()
                except StorageError as exc:
                    lost, reason = str(exc), "the driver lease is lost"
            if lost:  # no clean stop: every commit already refuses (storage/commit_lock.set_fence)
                log(f"stopping now: {lost}")
                query.stop()
                return RunStatus.FAILED, lost, None
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


_CAUSE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception): ")


def _short(exc) -> str:
    """The error's own message, for status files, the health verdict and logs: without Spark's
    query description and Java stack frames (the driver's log has those). An error raised in the
    batch function carries a Python traceback: its last exception line is the cause, kept whole."""
    text = str(getattr(exc, "desc", None) or exc)
    for cut in ("\n=== Streaming Query ===", "\nJVM stacktrace:", "\n\tat "):
        text = text.split(cut)[0]
    lines = [
        line.rstrip() for line in text.strip().splitlines() if line.strip() and not line.lstrip().startswith("at ")
    ]
    causes = [line for line in lines if _CAUSE.match(line)]
    if "Traceback (most recent call last)" in text and causes:
        head = lines[0].split(" Return Message:")[0]
        return f"{head[:600]} Cause: {causes[-1][:1400]}"
    return "\n".join(lines)[:2000]
