"""The worker side of the exactly-once Kafka sink (onceflow.spark.sinks.kafka_txn is the
driver side): what runs inside a Spark Python worker for one task partition of one
micro-batch. Sent to the workers by reference, so it imports no pyspark at module level:

1. fence: `init_transactions()` with the task's transactional id;
2. check the ledger: a task whose newest committed ledger record holds this batch skips
   (a replay is a no-op);
3. one transaction: the task's output records plus one ledger record, committed together.

Failures come back as KafkaSinkError naming the topic, batch and task partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Producer

from onceflow.errors import KafkaSinkError
from onceflow.faults import kafka_sink as faults
from onceflow.kafka.client import KafkaClient
from onceflow.kafka.ledger import KafkaLedgerRecord, LedgerReader, ledger_key, ledger_partition
from onceflow.polling import retry

SHARD = "_onceflow_task"  # the column that holds a row's task partition
RESULT_DDL = "task INT, status STRING, rows LONG, attempts INT, seconds DOUBLE"  # one row per task


def transactional_id(pipeline: str, generation: int, task: int) -> str:
    """Stable per (pipeline, generation, task partition): what makes fencing work."""
    return f"onceflow.{pipeline}.g{generation}.p{task}"


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs to write one task partition of one batch (sent to Python workers)."""

    pipeline: str
    generation: int
    client: KafkaClient  # pickled to the workers with its settings: never logged (repr masks secrets)
    output_topic: str
    ledger_topic: str
    ledger_partitions: int
    task_partitions: int
    key_expr: str
    source_topic: str
    batch_id: int
    start: dict[int, int]
    end: dict[int, int]
    txn_timeout_ms: int
    max_attempts: int = 3
    retriable_retries: int = 5
    producer_config: dict = field(default_factory=dict)
    fault: faults.Fault | None = None
    carry: dict | None = None  # what older generations delivered that this batch may still contain

    def transactional_id(self, task: int) -> str:
        return transactional_id(self.pipeline, self.generation, task)


@dataclass(frozen=True)
class TaskResult:
    task: int
    status: str  # "written" | "skipped"
    rows: int
    attempts: int
    seconds: float


# -- one task partition, inside a Python worker -------------------------------
def _fail(spec: TaskSpec, task: int, what: str) -> KafkaSinkError:
    return KafkaSinkError(
        f"Kafka sink {spec.output_topic!r}, batch {spec.batch_id}, task partition {task} "
        f"(transactional.id {spec.transactional_id(task)}): {what}"
    )


def _fatal(spec: TaskSpec, task: int, err: KafkaError) -> KafkaSinkError:
    if err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        return _fail(
            spec,
            task,
            f"fenced ({err.str()}): a newer producer with the same transactional.id started "
            "(a retry of this task, a restarted query, or a second copy of the query). This attempt's "
            "transaction is aborted and nothing it wrote becomes visible; the newer writer owns this "
            "task partition. Fix: none needed for a retry or restart; otherwise make sure only one copy "
            "of the query runs (onceflow's run lock).",
        )
    return _fail(
        spec,
        task,
        f"fatal producer error {err.name()}: {err.str()}. The transaction is abandoned and "
        "the broker aborts it; the task fails so Spark can retry or the query restarts.",
    )


def _retrying(spec: TaskSpec, task: int, what: str, call):
    """Run a transactional call, retrying errors Kafka marks retriable (bounded)."""

    def retriable(exc: BaseException) -> bool:
        err: KafkaError | None = exc.args[0] if isinstance(exc, KafkaException) else None
        return err is not None and err.retriable() and not err.fatal()

    return retry(call, spec.retriable_retries, retriable)


def _produce_rows(producer: Producer, topic: str, batches: Iterable) -> int:
    rows = 0
    produce = producer.produce
    for batch in batches:
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        for key, value in zip(keys, values, strict=True):
            while True:
                try:
                    produce(topic, value, key)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.05)
        rows += len(keys)
    return rows


def _check_ledger(spec: TaskSpec, task: int, latest: KafkaLedgerRecord | None) -> bool:
    """True if this task partition already committed this batch; raise if the ledger contradicts the query."""
    if latest is None:
        return False
    if latest.task_partitions != spec.task_partitions:
        raise _fail(
            spec,
            task,
            f"generation {spec.generation} committed batch {latest.batch_id} with "
            f"{latest.task_partitions} task partitions but this query uses {spec.task_partitions}: a replay "
            "would split the batch differently and duplicate rows. Fix: set sinks.kafka.partitions back to "
            f"{latest.task_partitions}, or start a new writer generation.",
        )
    if latest.batch_id < spec.batch_id:
        return False
    if latest.batch_id > spec.batch_id:
        raise _fail(
            spec,
            task,
            f"the ledger already holds batch {latest.batch_id} for this task partition, ahead "
            f"of batch {spec.batch_id} being written: batch ids went backwards, so the checkpoint was reset "
            "or replaced without a new writer generation. Writing would duplicate, skipping would lose "
            "data. Fix: restart from a new generation (onceflow recovery) or restore the checkpoint.",
        )
    if latest.start != spec.start or latest.end != spec.end:
        raise _fail(
            spec,
            task,
            f"batch {spec.batch_id} was committed for offsets {latest.start}..{latest.end}, "
            f"but this replay covers {spec.start}..{spec.end}: the checkpoint's offsets/"
            f"{spec.batch_id} changed. Fix: restore the checkpoint, or start a new writer generation "
            "from the ledger's committed offsets.",
        )
    return True


_READERS: dict[tuple[str, float], LedgerReader] = {}


def _in_spark_task() -> bool:
    from pyspark import TaskContext

    return TaskContext.get() is not None


@contextmanager
def _ledger_reader(client: KafkaClient, timeout: float) -> Iterator[LedgerReader]:
    """In a Spark task, a ledger reader kept for the life of the (reused) Python worker:
    its consumers hold no state between look-ups (assign/unassign), so later tasks skip
    their start-up. One whose block raised is closed, never reused: its state is unknown.
    On the driver, a fresh one, closed at the end of the block."""
    if not _in_spark_task():
        with LedgerReader(client, timeout=timeout) as reader:
            yield reader
        return
    key = (client.fingerprint(), timeout)
    reader = _READERS.pop(key) if key in _READERS else LedgerReader(client, timeout=timeout)
    try:
        yield reader
    except BaseException:
        reader.close()
        raise
    _READERS[key] = reader


def write_task(spec: TaskSpec, task: int, batches: list, rows: int) -> TaskResult:
    """Write one task partition of one batch in one Kafka transaction, unless already committed."""
    started = time.monotonic()
    failed: list[KafkaError] = []  # delivery failures: the cause behind an abortable commit/_STATE error
    producer = Producer(
        spec.client.librdkafka(
            **{
                "transactional.id": spec.transactional_id(task),
                "transaction.timeout.ms": spec.txn_timeout_ms,
                "partitioner": "murmur2_random",  # key -> partition exactly as Java clients (and Spark's sink) do
                "linger.ms": 5,
                "log_level": 3,
                "delivery.report.only.error": True,
                "on_delivery": lambda err, msg: failed.append(err) if _is_cause(err) else None,
                **spec.producer_config,
            }
        )
    )
    try:
        try:
            _retrying(spec, task, "init", lambda: producer.init_transactions(60))  # fences older attempts
        except KafkaException as exc:
            err = exc.args[0]
            raise (
                _fatal(spec, task, err)
                if err.fatal()
                else _fail(
                    spec,
                    task,
                    f"init_transactions failed: {err.str()}. Fix: check that the broker runs "
                    "and allows transactions (transaction.state.log settings).",
                )
            ) from None
        with _ledger_reader(spec.client, spec.txn_timeout_ms / 1000 + 30) as reader:
            lp = ledger_partition(task, spec.ledger_partitions)
            key = ledger_key(spec.pipeline, spec.generation, task)
            if _check_ledger(spec, task, reader.latest(spec.ledger_topic, lp, key)):
                return TaskResult(task, "skipped", rows, 0, time.monotonic() - started)
            attempts = _transact(spec, task, producer, batches, lp, key, reader, failed)
        return TaskResult(task, "written", rows, attempts, time.monotonic() - started)
    finally:
        producer.flush(0)


_PURGED = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}


def _is_cause(err: KafkaError | None) -> bool:
    """A delivery error that explains an abort; purges are our own abort's echo, never the cause."""
    return err is not None and err.code() not in _PURGED


def _transact(
    spec: TaskSpec,
    task: int,
    producer: Producer,
    batches: list,
    lp: int,
    key: bytes,
    reader: LedgerReader,
    failed: list[KafkaError],
) -> int:
    """begin -> produce rows + ledger record -> commit, per confluent-kafka's transaction contract:
    retriable -> retry the call; txn_requires_abort -> abort and redo the whole write (bounded);
    fatal -> fail the task."""
    last: KafkaError | None = None
    for attempt in range(1, spec.max_attempts + 1):
        failed.clear()
        try:
            producer.begin_transaction()
            rows = _produce_rows(producer, spec.output_topic, batches)
            record = KafkaLedgerRecord(
                pipeline=spec.pipeline,
                generation=spec.generation,
                batch_id=spec.batch_id,
                task_partition=task,
                task_partitions=spec.task_partitions,
                topic=spec.source_topic,
                start=spec.start,
                end=spec.end,
                rows=rows,
                output_topic=spec.output_topic,
                key_expr=spec.key_expr,
                transactional_id=spec.transactional_id(task),
                written_at=int(time.time() * 1000),
                carry=spec.carry,
            )
            producer.produce(spec.ledger_topic, record.to_json(), key, partition=lp)
            if spec.fault is not None and spec.fault.crashes_task(spec.batch_id, task):
                _crash_before_commit(spec, task, producer, reader)
            _retrying(spec, task, "commit", lambda: producer.commit_transaction(spec.txn_timeout_ms / 1000))
            return attempt
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal():
                raise _fatal(spec, task, err) from None
            # produce() reports a transaction that already failed (a delivery error) as _STATE
            if err.txn_requires_abort() or err.code() == KafkaError._STATE:
                producer.poll(0)  # serve delivery reports: the cause
                last = failed[0] if failed else (last if last is not None else err)
                _abort(spec, task, producer)
                continue
            _abort(spec, task, producer)
            raise _fail(
                spec,
                task,
                f"{err.name()}: {err.str()} (not retriable; the transaction was aborted, nothing of it is visible).",
            ) from None
    raise _fail(
        spec,
        task,
        f"the transaction was aborted {spec.max_attempts} times; last error "
        f"{last.name() if last else '?'}: {last.str() if last else '?'}. Nothing of it is visible. Fix: "
        "check the broker log and the output topic's limits (max.message.bytes, ACLs).",
    )


def _abort(spec: TaskSpec, task: int, producer: Producer) -> None:
    try:
        _retrying(spec, task, "abort", lambda: producer.abort_transaction(spec.txn_timeout_ms / 1000))
    except KafkaException as exc:
        err = exc.args[0]
        if err.fatal():
            raise _fatal(spec, task, err) from None
        if err.code() != KafkaError._STATE:  # nothing to abort
            raise _fail(spec, task, f"abort_transaction failed: {err.str()}") from None


def _crash_before_commit(spec: TaskSpec, task: int, producer: Producer, reader: LedgerReader) -> None:
    """Fault injection: this task's rows are in the log (uncommitted) once the tasks
    below the fault's K have committed this batch; then the whole driver dies."""
    fault = spec.fault
    assert fault is not None  # called only when the fault crashes this task
    producer.flush(60)

    def lower_tasks_committed() -> bool:
        for t in range(fault.tasks):
            latest = reader.latest(
                spec.ledger_topic,
                ledger_partition(t, spec.ledger_partitions),
                ledger_key(spec.pipeline, spec.generation, t),
            )
            if latest is None or latest.batch_id < spec.batch_id:
                return False
        return True

    faults.wait_for(lower_tasks_committed, f"tasks below {fault.tasks} of batch {spec.batch_id} to commit")
    faults.kill_driver(fault, f"batch {spec.batch_id}: task {task} crashes before its commit")


class TaskWriter:
    """The mapInArrow function: each Spark partition holds whole task partitions
    (rows sorted by task, then source partition and offset); one transaction each."""

    def __init__(self, spec: TaskSpec):
        self.spec = spec

    def __call__(self, batches: Iterator) -> Iterator:
        import pyarrow as pa
        import pyarrow.compute as pc

        by_task: dict[int, list] = {}
        for batch in batches:
            if batch.num_rows == 0:
                continue
            tasks = batch.column(SHARD)
            for task in pc.unique(tasks).to_pylist():
                by_task.setdefault(task, []).append(batch.filter(pc.equal(tasks, task)))
        for task, parts in sorted(by_task.items()):
            result = write_task(self.spec, task, parts, sum(p.num_rows for p in parts))
            yield pa.RecordBatch.from_pylist(
                [result.__dict__],
                schema=pa.schema(
                    [
                        ("task", pa.int32()),
                        ("status", pa.string()),
                        ("rows", pa.int64()),
                        ("attempts", pa.int32()),
                        ("seconds", pa.float64()),
                    ]
                ),
            )
