"""One answer to "which sinks does a pipeline have, where, and what do their ledgers say".

The streaming job, the audit, health, recovery, backfill and the Airflow hook all ask it
here, so a new sink kind is added in one place (docs/architecture.md). No Spark: the
Delta ledgers are read with delta-rs (onceflow.ledger), the Kafka sink's with
confluent-kafka (onceflow.kafka.ledger).

Orders matter: the job writes bronze, quarantine, aggregates, current (then the Kafka sink, in
the same batch); the audit reads them in reverse, so a table read later holds at least
the batches of a table read earlier, even while the job runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from onceflow.config import Pipeline, TableSink
from onceflow.errors import LedgerReadError, OnceflowError, SinkError
from onceflow.ledger import FOLLOWS, Ledger, read_ledger
from onceflow.storage.commit_lock import set_fence
from onceflow.storage.lease import DEFAULT_TTL, DriverLease
from onceflow.storage.location import Location
from onceflow.storage.probe import probe

if TYPE_CHECKING:
    from onceflow.kafka.ledger import KafkaLedger

KAFKA = "kafka"  # the Kafka sink's name, beside the Delta sinks' (bronze, quarantine, aggregates)
# FOLLOWS, which sink is written from which other sink's table, is the ledgers' (onceflow.ledger,
# beside follower_lag); sinks.FOLLOWS is the same dict


def fed_by_kafka(ledgers: dict[str, Ledger]) -> dict[str, Ledger]:
    """The ledgers of the sinks written from Kafka (every sink but the followers), in the same order."""
    return {name: ledger for name, ledger in ledgers.items() if name not in FOLLOWS}


def delta_sinks(pipeline: Pipeline) -> dict[str, TableSink]:
    """Sink name → its settings, for every Delta sink the pipeline has, in the job's write order."""
    sinks = pipeline.sinks
    out: dict[str, TableSink] = {"bronze": sinks.bronze, "quarantine": sinks.quarantine}
    if sinks.aggregates is not None:
        out["aggregates"] = sinks.aggregates
    if sinks.current is not None:
        out["current"] = sinks.current
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
    ledgers, errors = _read_each(pipeline, table_paths(pipeline, audit_order=audit_order), kafka)
    return _unless_unread(ledgers, errors)


def _unless_unread(ledgers: dict[str, Ledger], errors: dict[str, LedgerReadError]) -> dict[str, Ledger]:
    """The ledgers, or the first LedgerReadError."""
    for error in errors.values():
        raise error
    return ledgers


def _read_each(
    pipeline: Pipeline, paths: dict[str, str], kafka: bool
) -> tuple[dict[str, Ledger], dict[str, LedgerReadError]]:
    """The ledgers that could be read and, by sink, why the others could not, in the order read."""
    ledgers: dict[str, Ledger] = {}
    errors: dict[str, LedgerReadError] = {}
    for name, path in paths.items():
        try:
            ledgers[name] = read_ledger(path)
        except Exception as exc:  # delta-rs raises its own types for a damaged log
            errors[name] = LedgerReadError(name, path, f"{type(exc).__name__}: {exc}")
    if kafka and pipeline.sinks.kafka is not None:
        try:
            ledgers[KAFKA] = kafka_ledger(pipeline).to_ledger()
        except OnceflowError as exc:
            errors[KAFKA] = LedgerReadError(KAFKA, "its ledger topic", str(exc))
    return ledgers, errors


def ledgers_as_found(
    pipeline: Pipeline, paths: dict[str, str], kafka: bool = True
) -> tuple[dict[str, Ledger], dict[str, LedgerReadError]]:
    """The ledgers of the Delta sinks at `paths` (and with `kafka` the Kafka sink's) that could be
    read and, by sink, why the others could not: a pipeline's facts (onceflow.facts) keep both."""
    return _read_each(pipeline, paths, kafka)


def lease_folder(pipeline: Pipeline) -> Location | None:
    """Where the pipeline's driver lease lives: `_onceflow/<pipeline>/` beside the first of its tables
    (then its checkpoint) kept in an object store, never inside one (Delta and Spark own those
    folders); None when all are on a file system, which the local run lock guards."""
    for where in (*table_paths(pipeline).values(), pipeline.checkpoint_path):
        location = Location(where)
        if location.is_s3:
            parent = location.uri.rstrip("/").rsplit("/", 1)[0]
            return Location(parent).child("_onceflow", pipeline.name)
    return None


def lease_ttl() -> float:
    """Seconds a driver lease lasts without renewal (ONCEFLOW_LEASE_TTL, default 30): how long a killed
    driver on another machine keeps the next one waiting."""
    import os

    return float(os.environ.get("ONCEFLOW_LEASE_TTL", DEFAULT_TTL))


@contextlib.contextmanager
def driver_lease(pipeline: Pipeline, log: Callable[[str], None] = lambda msg: None) -> Iterator[DriverLease | None]:
    """Hold the pipeline's driver lease in its store for the block, probing the store first; every
    commit to its tables in this process checks the lease (storage/commit_lock.set_fence)."""
    folder = lease_folder(pipeline)
    if folder is None:
        yield None
        return
    probe(folder)
    lease = DriverLease(folder, pipeline.name, ttl=lease_ttl(), log=log)
    tables = [p for p in table_paths(pipeline).values() if Location(p).needs_commit_lock]
    with lease:
        set_fence(tables, lease.check)
        try:
            yield lease
        finally:
            set_fence(tables, None)
