"""An exactly-once Kafka output sink for Spark, used from foreachBatch.

Spark's own Kafka sink is at-least-once: a replayed micro-batch writes again.
This sink closes the gap the way Flink's two-phase-commit sink does, with
Kafka transactions (docs/kafka-sink.md):

1. Deterministic split. The batch's rows are split into `partitions` task
   partitions by a pure function of the row, `pmod(hash(key), n)`, and each
   task's rows are sorted by source `(_partition, _offset)`. Spark replays batch
   N over the same offsets (offsets/N), so a replay gives every task exactly the
   rows it had the first time.
2. Fencing first. Task p uses `transactional.id = onceflow.<pipeline>.g<gen>.p<p>`;
   `init_transactions()` fences every earlier producer with that id (a failed
   attempt, a zombie worker, a killed query) and aborts what it left open.
3. Then the ledger check. The task reads its newest committed ledger record
   (read_committed); if it holds batch N the task skips: replay is a no-op. An
   old attempt can no longer commit behind the check's back: it is fenced.
4. One transaction per task: output records + one ledger record, committed
   together or not at all.

This module is the driver side (KafkaTxnSink: topics, fencing, the split, collecting
the tasks' results); steps 2-4 of each task run in the Python workers, in
onceflow.spark.sinks.kafka_task.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from confluent_kafka import KafkaException, Producer

from onceflow import offsets
from onceflow.config import KafkaSink
from onceflow.errors import KafkaSinkError
from onceflow.faults import kafka_sink as faults
from onceflow.kafka.client import Cluster, as_client, sink_client
from onceflow.kafka.ledger import (
    LEDGER_TOPIC_CONFIG,
    KafkaLedger,
    KafkaLedgerRecord,
    LedgerReader,
    default_ledger_topic,
    ledger_key,
    ledger_partition,
    read_kafka_ledger,
)
from onceflow.polling import wait_for
from onceflow.spark.sinks.kafka_carry import Carry, after_generation
from onceflow.spark.sinks.kafka_task import (
    RESULT_DDL,
    SHARD,
    TaskResult,
    TaskSpec,
    TaskWriter,
    transactional_id,
    write_task,
)

# Broker default of transaction.max.timeout.ms; a producer asking for more is refused.
BROKER_MAX_TXN_TIMEOUT_MS = 900_000
MIN_TXN_TIMEOUT_MS = 60_000
TRIGGERS_PER_TXN_TIMEOUT = 10
_ERROR_MARK = "KafkaSinkError: "


def transaction_timeout_ms(trigger_seconds: float | None) -> int:
    """transaction.timeout.ms for a trigger interval.

    A task's transaction lasts as long as the task writes, normally well under
    one trigger interval; a transaction longer than the timeout is aborted by
    the broker (the commit then fails and the task retries). A crashed writer's
    open transaction holds back read_committed consumers of the output until a
    restarted writer fences it or the timeout passes. So: 10 trigger intervals,
    at least 60 s, at most the broker's transaction.max.timeout.ms (15 min).
    """
    wanted = int((trigger_seconds or 0) * 1000 * TRIGGERS_PER_TXN_TIMEOUT)
    return min(BROKER_MAX_TXN_TIMEOUT_MS, max(MIN_TXN_TIMEOUT_MS, wanted))


@dataclass
class SinkResult:
    """What one `write` did: per task partition, written or skipped (replay)."""

    batch_id: int
    tasks: list[TaskResult]
    seconds: float

    @property
    def rows_written(self) -> int:
        return sum(t.rows for t in self.tasks if t.status == "written")

    @property
    def rows_skipped(self) -> int:
        return sum(t.rows for t in self.tasks if t.status == "skipped")

    @property
    def written(self) -> list[int]:
        return sorted(t.task for t in self.tasks if t.status == "written")

    @property
    def skipped(self) -> list[int]:
        return sorted(t.task for t in self.tasks if t.status == "skipped")

    def as_dict(self) -> dict:
        return {
            "batch_id": self.batch_id,
            "seconds": round(self.seconds, 3),
            "rows_written": self.rows_written,
            "rows_skipped": self.rows_skipped,
            "written": self.written,
            "skipped": self.skipped,
        }


# -- the driver side ------------------------------------------------------------
class KafkaTxnSink:
    """The sink the streaming job calls from foreachBatch; one instance per query run."""

    def __init__(
        self,
        pipeline_name: str,
        generation: int,
        sink_config: KafkaSink,
        cluster: Cluster,
        trigger_seconds: float | None = None,
        source_topic: str | None = None,
        producer_config: dict | None = None,
    ):
        self.pipeline = pipeline_name
        self.generation = int(generation)
        self.config = sink_config
        self.client = as_client(cluster)  # where the sink writes (kafka.client.sink_client)
        self.output_topic = sink_config.topic
        self.ledger_topic = sink_config.ledger_topic or default_ledger_topic(pipeline_name)
        self.task_partitions = sink_config.partitions
        self.txn_timeout_ms = transaction_timeout_ms(trigger_seconds)
        self.source_topic = source_topic
        self.producer_config = dict(producer_config or {})
        self._ledger_partitions: int | None = None
        self.carry: Carry | None = None
        self.fault = faults.from_env()  # a malformed fault setting fails at start, not mid-run
        if self.ledger_topic == self.output_topic:
            raise KafkaSinkError(
                f"sinks.kafka.ledger_topic equals the output topic {self.output_topic!r}; "
                "readers of the output would see ledger records. Fix: name another topic."
            )

    @classmethod
    def for_pipeline(cls, pipeline, generation: int, **kwargs) -> KafkaTxnSink:
        """The sink of `pipeline.sinks.kafka`, on its cluster (kafka.client.sink_client)."""
        if pipeline.sinks.kafka is None:
            raise KafkaSinkError(f"pipeline {pipeline.name!r} has no sinks.kafka section")
        sink = pipeline.sinks.kafka.model_copy(update={"key": pipeline.kafka_key})
        return cls(
            pipeline.name,
            generation,
            sink,
            sink_client(pipeline),  # type: ignore[arg-type]  # the pipeline has sinks.kafka: checked above
            trigger_seconds=pipeline.trigger.seconds,
            source_topic=pipeline.source.topic,
            **kwargs,
        )

    # -- setup, once per run
    def prepare(self) -> None:
        """Create the output and ledger topics if missing; check the ledger topic can serve as one."""
        if self._ledger_partitions is not None:
            return
        from confluent_kafka.admin import ConfigResource

        from onceflow.kafka.admin import admin_client, ensure_topic

        admin = admin_client(self.client)
        try:
            topics = admin.list_topics(timeout=15).topics
        except KafkaException as exc:
            raise KafkaSinkError(
                f"cannot reach Kafka at {self.client.describe()} for sinks.kafka: {exc}. Fix: check "
                "sinks.kafka.bootstrap_servers (or the source's) and that the broker runs."
            ) from None
        if self.output_topic not in topics:
            ensure_topic(self.client, self.output_topic, self.task_partitions)
        if self.ledger_topic not in topics:
            ensure_topic(self.client, self.ledger_topic, self.task_partitions, dict(LEDGER_TOPIC_CONFIG))
        else:
            resource = ConfigResource(ConfigResource.Type.TOPIC, self.ledger_topic)
            configs = admin.describe_configs([resource])[resource].result(timeout=15)
            retention = configs["retention.ms"].value
            policy = configs["cleanup.policy"].value
            if retention != "-1" or "compact" in policy:
                raise KafkaSinkError(
                    f"ledger topic {self.ledger_topic!r} has retention.ms={retention}, cleanup.policy={policy}: "
                    "ledger records may disappear, and a replay would then write its batch a second time. Fix: "
                    f"set retention.ms=-1 and cleanup.policy=delete on it, or let the sink create it."
                )
        _partition_count(admin, self.output_topic)
        self._ledger_partitions = _partition_count(admin, self.ledger_topic)
        self.carry = self._fence_and_carry()

    def _fence(self, generation: int, tasks: int) -> None:
        """init_transactions() for every task id of a generation: aborts what a crashed
        run left open (read_committed consumers of the output resume at once) and
        fences zombies of that run."""
        for task in range(tasks):
            producer = Producer(
                self.client.librdkafka(
                    **{
                        "log_level": 3,
                        "transactional.id": transactional_id(self.pipeline, generation, task),
                        "transaction.timeout.ms": self.txn_timeout_ms,
                        **self.producer_config,
                    }
                )
            )
            try:
                producer.init_transactions(60)
            except KafkaException as exc:
                raise KafkaSinkError(
                    f"fencing {transactional_id(self.pipeline, generation, task)} failed: "
                    f"{exc.args[0].str()}. Fix: check that the broker runs and allows "
                    "transactions."
                ) from None
            finally:
                producer.flush(0)

    def _fence_and_carry(self) -> Carry | None:
        """Fence this generation's task ids; if this generation has not written yet,
        fence the previous one too and work out what it already delivered."""
        self._fence(self.generation, self.task_partitions)
        ours = lambda key, r: r.pipeline == self.pipeline  # noqa: E731
        ledger_partitions = self._ledger_partitions
        assert ledger_partitions is not None  # prepare() counted them first
        with LedgerReader(self.client, timeout=self.txn_timeout_ms / 1000 + 30) as reader:
            newest = [reader.newest(self.ledger_topic, lp, ours, wait=False) for lp in range(ledger_partitions)]
            newer = sorted({r.generation for r in newest if r is not None and r.generation > self.generation})
            if newer:
                raise KafkaSinkError(
                    f"the Kafka sink ledger {self.ledger_topic!r} already holds generation {newer[-1]} of pipeline "
                    f"{self.pipeline!r}, newer than this query's generation {self.generation}: this query runs from "
                    "an outdated checkpoint. Fix: stop it; run the pipeline from its current checkpoint."
                )
            own = [
                reader.latest(
                    self.ledger_topic,
                    ledger_partition(t, ledger_partitions),
                    ledger_key(self.pipeline, self.generation, t),
                    wait=False,
                )
                for t in range(self.task_partitions)
            ]
            if any(own):
                return Carry.union(Carry.from_json(r.carry) for r in own if r is not None) or None
            older = max((r.generation for r in newest if r is not None), default=None)
            if older is None:
                return None
            n_old = max(r.task_partitions for r in newest if r is not None and r.generation == older)
            self._fence(older, n_old)
            latest = [
                reader.latest(
                    self.ledger_topic, ledger_partition(t, ledger_partitions), ledger_key(self.pipeline, older, t)
                )
                for t in range(n_old)
            ]
        return after_generation([r for r in latest if r is not None]) or None

    # -- one micro-batch
    def spec(self, batch_id: int, start: dict[int, int], end: dict[int, int], source_topic: str) -> TaskSpec:
        self.prepare()
        assert self._ledger_partitions is not None  # prepare() counted them
        start, end = offsets.from_json(start), offsets.from_json(end)
        carry = self.carry.for_batch(start) if self.carry else None
        if carry:  # rows below the floor are not this generation's: its ledger ranges start there
            start, end = carry.clip(start), carry.clip(end)
        return TaskSpec(
            pipeline=self.pipeline,
            generation=self.generation,
            client=self.client,
            output_topic=self.output_topic,
            ledger_topic=self.ledger_topic,
            ledger_partitions=self._ledger_partitions,
            task_partitions=self.task_partitions,
            key_expr=self.config.key,  # type: ignore[arg-type]  # for_pipeline sets it (Pipeline.kafka_key)
            source_topic=source_topic,
            batch_id=int(batch_id),
            start=start,
            end=end,
            txn_timeout_ms=self.txn_timeout_ms,
            producer_config=self.producer_config,
            fault=self.fault,
            carry=carry.to_json() if carry else None,
        )

    def prepared(self, batch_df):
        """The batch as (key, value) bytes, split deterministically into task partitions.

        The task of a row is `pmod(hash(key), n)`, a pure function of the row;
        `repartition(n, key)` uses the same hash, so each Spark partition holds
        exactly one task partition. Rows are sorted by (source partition, offset),
        so each key's records keep their source order.
        """
        from pyspark.sql import functions as F

        try:
            rows = batch_df.select(
                F.expr(self.config.key).cast("binary").alias("key"),  # type: ignore[arg-type]  # as in spec()
                F.expr(self.config.value).cast("binary").alias("value"),
                F.col("_partition"),
                F.col("_offset"),
            )
        except Exception as exc:  # AnalysisException / ParseException: the user's expressions
            raise KafkaSinkError(
                f"sinks.kafka.key {self.config.key!r} / value {self.config.value!r} cannot be "
                f"evaluated on the batch: {_first_line(exc)}. Fix: use SQL expressions over "
                f"the columns {batch_df.columns}."
            ) from None
        n = self.task_partitions
        return (
            rows.withColumn(SHARD, F.pmod(F.hash(F.col("key")), F.lit(n)))
            .repartition(n, F.col("key"))
            .sortWithinPartitions(SHARD, "_partition", "_offset")
        )

    def write(
        self, batch_df, batch_id: int, start: dict[int, int], end: dict[int, int], source_topic: str | None = None
    ) -> SinkResult:
        """Write one micro-batch exactly once. `batch_df`: the batch's valid events (bronze columns)."""
        started = time.monotonic()
        spec = self.spec(batch_id, start, end, source_topic or self.source_topic or self._source_topic(batch_df))
        if spec.carry:  # rows an earlier generation already delivered
            batch_df = batch_df.where(~Carry.from_json(spec.carry).delivered())
        prepared = self.prepared(batch_df)
        try:
            rows = prepared.mapInArrow(TaskWriter(spec), RESULT_DDL).collect()
        except Exception as exc:
            error = _unwrap(exc)
            if error is exc:
                raise
            raise error from None
        results = [TaskResult(r["task"], r["status"], r["rows"], r["attempts"], r["seconds"]) for r in rows]
        # Task partitions without rows still commit a ledger record, so "batch N is
        # complete" is "every task partition has a record for N".
        done = {r.task for r in results}
        for task in range(self.task_partitions):
            if task not in done:
                results.append(write_task(spec, task, [], 0))
        results.sort(key=lambda r: r.task)
        if spec.fault is not None and spec.fault.crashes_after_write(spec.batch_id):
            faults.kill_driver(spec.fault, f"batch {batch_id} written by every task; Spark has not committed it")
        return SinkResult(int(batch_id), results, time.monotonic() - started)

    @staticmethod
    def _source_topic(batch_df) -> str:
        first = batch_df.select("_topic").limit(1).collect()
        return first[0]["_topic"] if first else ""

    # -- the ledger
    def ledger(self) -> KafkaLedger:
        return read_kafka_ledger(self.client, self.ledger_topic, self.pipeline)

    def committed(self) -> dict[tuple[int, int], KafkaLedgerRecord]:
        """(batch_id, task_partition) -> ledger record, for this sink's generation."""
        return self.ledger().committed(self.generation)


def _partition_count(admin, topic: str, timeout: float = 60) -> int:
    """Partitions of a topic, waiting out the moment after creation when metadata shows none."""
    info = None

    def partitions() -> int | None:
        nonlocal info
        info = admin.list_topics(topic, timeout=15).topics.get(topic)
        return len(info.partitions) if info is not None and info.error is None and info.partitions else None

    return wait_for(
        partitions,
        timeout,
        lambda: KafkaSinkError(
            f"topic {topic!r} shows no partitions after {timeout:.0f}s "
            f"({info.error if info is not None else 'missing'}). Fix: check the broker log."
        ),
    )


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _unwrap(exc: Exception) -> Exception:
    if isinstance(exc, KafkaSinkError):
        return exc
    """A KafkaSinkError raised in a Python worker reaches the driver wrapped in
    Spark's exceptions; give the user the sink's message, not the JVM stack."""
    text = str(exc)
    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", text)
    if missing:
        return KafkaSinkError(
            f"the Spark Python workers cannot import {missing.group(1)!r}: they run another "
            "interpreter than the driver. Fix: set PYSPARK_PYTHON to the Python that has onceflow "
            "installed (build_session does so unless it is set already)."
        )
    index = text.rfind(_ERROR_MARK)
    if index < 0:
        return exc
    message = text[index + len(_ERROR_MARK) :].split("\n")[0].strip()
    return KafkaSinkError(message)


__all__ = [
    "KafkaSinkError",
    "KafkaTxnSink",
    "SinkResult",
    "TaskResult",
    "TaskSpec",
    "transaction_timeout_ms",
    "transactional_id",
    "write_task",
]
