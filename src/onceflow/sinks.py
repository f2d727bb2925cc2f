"""One answer to "which sinks does a pipeline have, where, and what do their ledgers say".

The streaming job, the audit, health, recovery, backfill and the Airflow hook all ask it
here, so a new sink kind is added in one place (docs/architecture.md). No Spark: the
Delta ledgers are read with delta-rs (onceflow.ledger), the Kafka sink's with
confluent-kafka (onceflow.kafka.ledger).

Orders matter: the job writes bronze, quarantine, aggregates (then the Kafka sink, in
the same batch); the audit reads them in reverse, so a table read later holds at least
the batches of a table read earlier, even while the job runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.config import Pipeline, TableSink
from onceflow.errors import LedgerReadError, OnceflowError, SinkError
from onceflow.ledger import Ledger, read_ledger

if TYPE_CHECKING:
    from onceflow.kafka.ledger import KafkaLedger
    from onceflow.reconcile import CommittedPoint

KAFKA = "kafka"  # the Kafka sink's name, beside the Delta sinks' (bronze, quarantine, aggregates)


def delta_sinks(pipeline: Pipeline) -> dict[str, TableSink]:
    """Sink name → its settings, for every Delta sink the pipeline has, in the job's write order."""
    sinks = pipeline.sinks
    out: dict[str, TableSink] = {"bronze": sinks.bronze, "quarantine": sinks.quarantine}
    if sinks.aggregates is not None:
        out["aggregates"] = sinks.aggregates
    return out


def table_paths(pipeline: Pipeline, audit_order: bool = False) -> dict[str, str]:
    """Sink name → resolved Delta table path, in write order (or the audit's: the reverse)."""
    paths = {name: pipeline.resolve(sink.path) for name, sink in delta_sinks(pipeline).items()}
    return dict(reversed(paths.items())) if audit_order else paths


def table_path(pipeline: Pipeline, sink: str) -> str:
    """The resolved table path of one Delta sink; ValueError when the pipeline has no such sink."""
    table = delta_sinks(pipeline).get(sink)
    if table is None:
        raise ValueError(f"pipeline {pipeline.name} has no Delta sink {sink!r}")
    return pipeline.resolve(table.path)


def kafka_ledger(pipeline: Pipeline) -> KafkaLedger:
    """The Kafka sink's ledger (read_committed); SinkError when the pipeline has no Kafka sink."""
    from onceflow.kafka.ledger import pipeline_kafka_ledger

    if pipeline.sinks.kafka is None:
        raise SinkError(f"pipeline {pipeline.name!r} has no sinks.kafka section")
    return pipeline_kafka_ledger(pipeline)


def read_ledgers(pipeline: Pipeline, audit_order: bool = False, kafka: bool = True) -> dict[str, Ledger]:
    """Every sink's ledger, each read once: the Delta sinks' (commit metadata), then with `kafka`
    the Kafka sink's ledger topic as a Ledger. LedgerReadError names the first that cannot be read."""
    ledgers: dict[str, Ledger] = {}
    for name, path in table_paths(pipeline, audit_order=audit_order).items():
        try:
            ledgers[name] = read_ledger(path)
        except Exception as exc:  # delta-rs raises its own types for a damaged log
            raise LedgerReadError(name, path, f"{type(exc).__name__}: {exc}") from None
    if kafka and pipeline.sinks.kafka is not None:
        try:
            ledgers[KAFKA] = kafka_ledger(pipeline).to_ledger()
        except OnceflowError as exc:
            raise LedgerReadError(KAFKA, "its ledger topic", str(exc)) from None
    return ledgers


def read_each_ledger(pipeline: Pipeline) -> dict[str, tuple[str, Ledger | None, str | None]]:
    """Each Delta sink: (path, its ledger or None, the error if it could not be read). For reports
    that show every sink even when one is damaged (health)."""
    out: dict[str, tuple[str, Ledger | None, str | None]] = {}
    for name, path in table_paths(pipeline).items():
        try:
            out[name] = (path, read_ledger(path), None)
        except Exception as exc:  # a damaged Delta log: report, keep reading the rest
            out[name] = (path, None, f"{type(exc).__name__}: {exc}")
    return out


def read_committed_point(pipeline: Pipeline, mode: str = "full", watermark: dict | None = None) -> CommittedPoint:
    """The four ledgers read once, in the order that makes a running job safe to judge: the run
    lock and the checkpoint first, then the Delta sink ledgers (audit order), then Kafka's log
    start; onceflow.reconcile.committed_point fixes the committed point from them."""
    from onceflow.checkpoint import read_checkpoint
    from onceflow.errors import RecoveryError
    from onceflow.generation import read_identity
    from onceflow.kafka.admin import watermarks
    from onceflow.reconcile import committed_point
    from onceflow.status import RunLock

    running = RunLock(pipeline.state_path).is_held()
    checkpoint = read_checkpoint(pipeline.checkpoint_path)
    try:
        identity = read_identity(pipeline.checkpoint_path)
    except RecoveryError:
        identity = None
    ledgers = read_ledgers(pipeline, audit_order=True, kafka=False)
    earliest = {}
    if checkpoint.last_committed is not None or any(ledger.entries for ledger in ledgers.values()):
        earliest = {p: low for p, (low, _high) in
                    watermarks(pipeline.source.bootstrap_servers, pipeline.source.topic).items()}
    return committed_point(pipeline.source.topic, checkpoint, ledgers, mode=mode, watermark=watermark,
                           earliest=earliest, checkpoint_generation=identity.generation if identity else None,
                           running=running)
