"""A pipeline's facts, read once: its run lock, its Spark checkpoint (and the writer generation it
belongs to), its sinks' ledgers and Kafka's offsets of its topic.

Health, recovery (recovery/facts.py) and the audit (`read_committed_point`, which hands them to
`reconcile.committed_point`) all gather what they judge here, in the one order that makes a
running job safe to judge, and each applies its own policy to what could not be read. Only the
sink ledgers are ledgers (onceflow.sinks reads them); the run lock and the checkpoint are the
pipeline's state (onceflow.state, onceflow.checkpoint), the offsets Kafka's. No Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from onceflow.config import Pipeline
from onceflow.errors import IdentityFileError, LedgerReadError, OnceflowError
from onceflow.kafka.client import KafkaClient, source_client
from onceflow.ledger import Ledger
from onceflow.reconcile import AuditScope, CommittedPoint, committed_point
from onceflow.sinks import ledgers_as_found, table_paths

if TYPE_CHECKING:
    from onceflow.checkpoint import Checkpoint
    from onceflow.state.generation import CheckpointIdentity


@dataclass
class PipelineFacts:
    """A pipeline's facts (its run lock, Spark checkpoint, sink ledgers and Kafka's offsets)
    as one read found them. Reading never raises for what it finds: each
    caller applies its own policy to the errors (health reports them, recovery and
    the audit refuse to go on)."""

    running: bool
    holder: dict | None  # run.json of the process holding the run lock
    checkpoint: Checkpoint | None  # None: unreadable without a JVM (checkpoint_error says why)
    checkpoint_error: OnceflowError | None
    identity: CheckpointIdentity | None
    identity_error: str | None  # _onceflow.json exists but cannot be read
    paths: dict[str, str]  # Delta sink -> table path, in the order read
    ledgers: dict[str, Ledger]  # the sinks whose ledgers could be read, in the order read
    ledger_errors: dict[str, LedgerReadError] = field(default_factory=dict)
    kafka: dict[str, dict[int, int]] | None = None  # {"earliest": {p: o}, "latest": {p: o}}
    kafka_error: Exception | None = None  # unreachable, unknown topic, ...

    def ledgers_or_raise(self) -> dict[str, Ledger]:
        """Every ledger, or the first LedgerReadError."""
        for error in self.ledger_errors.values():
            raise error
        return self.ledgers


def read_facts(
    pipeline: Pipeline,
    *,
    audit_order: bool = False,
    with_kafka_ledger: bool = True,
    kafka_timeout: float = 10.0,
    kafka_offsets: Callable[[KafkaClient, str], dict[str, dict[int, int]]] | None = None,
) -> PipelineFacts:
    """Read the pipeline's facts once, in the order that makes a running job safe to judge: the
    run lock and the checkpoint first, then the sink ledgers (write order, or the audit's),
    then Kafka's offsets (`list_end_offsets` within `kafka_timeout` s; `kafka_offsets(cluster,
    topic)` replaces it in tests of health's rules). Health, recovery and the audit all gather
    their facts here."""
    from onceflow.checkpoint import read_checkpoint
    from onceflow.state.generation import read_identity
    from onceflow.state.status import RunLock

    lock = RunLock(pipeline.state_path)
    running = lock.is_held()
    holder = lock.holder() if running else None
    checkpoint, checkpoint_error = None, None
    try:
        checkpoint = read_checkpoint(pipeline.checkpoint_path)
    except OnceflowError as exc:  # a remote URI: not readable without a JVM
        checkpoint_error = exc
    identity, identity_error = None, None
    if checkpoint is not None and checkpoint.exists:
        try:
            identity = read_identity(pipeline.checkpoint_path)
        except IdentityFileError as exc:
            identity_error = exc.problem
        except OSError as exc:  # e.g. a directory where the file should be
            identity_error = f"{pipeline.checkpoint_path}/_onceflow.json cannot be read ({exc.strerror})"
    paths = table_paths(pipeline, audit_order=audit_order)
    ledgers, errors = ledgers_as_found(pipeline, paths, with_kafka_ledger)
    facts = PipelineFacts(
        running=running,
        holder=holder,
        checkpoint=checkpoint,
        checkpoint_error=checkpoint_error,
        identity=identity,
        identity_error=identity_error,
        paths=paths,
        ledgers=ledgers,
        ledger_errors=errors,
    )
    try:
        cluster = source_client(pipeline)  # an unknown kafka_connection is reported like an unreachable broker
        if kafka_offsets is not None:
            facts.kafka = kafka_offsets(cluster, pipeline.source.topic)
        else:
            from onceflow.kafka.admin import list_end_offsets

            facts.kafka = list_end_offsets(cluster, pipeline.source.topic, timeout=kafka_timeout)
    except Exception as exc:
        facts.kafka_error = exc
    return facts


def read_committed_point(
    pipeline: Pipeline, mode: AuditScope = AuditScope.FULL, watermark: dict | None = None
) -> CommittedPoint:
    """The committed point of the audit (onceflow.reconcile.committed_point) from the pipeline's
    facts, read once in the audit's order (read_facts)."""
    facts = read_facts(pipeline, audit_order=True, with_kafka_ledger=False)
    if facts.checkpoint_error is not None:
        raise facts.checkpoint_error
    assert facts.checkpoint is not None  # read_facts sets the checkpoint or its error
    ledgers = facts.ledgers_or_raise()
    earliest = {}
    if facts.checkpoint.last_committed is not None or any(ledger.entries for ledger in ledgers.values()):
        if facts.kafka_error is not None:
            raise facts.kafka_error
        assert facts.kafka is not None  # read Kafka's offsets, or their error
        earliest = dict(facts.kafka["earliest"])
    return committed_point(
        pipeline.source.topic,
        facts.checkpoint,
        ledgers,
        mode=mode,
        watermark=watermark,
        earliest=earliest,
        checkpoint_generation=facts.identity.generation if facts.identity else None,
        running=facts.running,
    )
