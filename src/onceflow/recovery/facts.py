"""What recovery looks at before it decides: checkpoint, identity, sink ledgers, Kafka, the run.

Gathering is the only part of planning that touches the outside world, so it is
kept apart from the decision (`onceflow.recovery.decide.decide`), which is pure and
unit-tested on hand-made facts. They are read by onceflow.facts.read_facts, as health's
and the audit's are; this module refuses what cannot be read. Nothing here starts a
JVM: the checkpoint is read as files, the ledgers with delta-rs, Kafka with confluent-kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onceflow import facts as pipeline_facts
from onceflow import sinks
from onceflow.checkpoint import Checkpoint
from onceflow.config import Pipeline
from onceflow.errors import LedgerReadError, RecoveryError
from onceflow.ledger import Ledger
from onceflow.sink_kinds import FOLLOWS, SinkName
from onceflow.state.generation import CheckpointIdentity
from onceflow.state.poison import PoisonedBatch, poisoned_batch
from onceflow.state.status import StatusLog
from onceflow.state.unprocessable import Unprocessable

KAFKA_TIMEOUT = 15.0  # seconds: recovery is rare and may run while the broker is busy catching up


@dataclass
class KafkaOffsets:
    """Per partition, Kafka's log start (earliest) and last stable offset (latest)."""

    earliest: dict[int, int]
    latest: dict[int, int]

    @property
    def partitions(self) -> list[int]:
        return sorted(self.latest)


@dataclass
class Facts:
    pipeline: str
    pipeline_file: str
    topic: str
    default_starting_offsets: str  # the pipeline's source.starting_offsets
    checkpoint: Checkpoint
    identity: CheckpointIdentity | None
    identity_error: str | None  # _onceflow.json exists but cannot be read
    ledgers: dict[str, Ledger]  # sink name -> ledger, in write order (bronze, quarantine, aggregates)
    kafka: KafkaOffsets
    running: bool = False
    holder: dict | None = None  # run.json of the process holding the run lock
    last_run: dict = field(default_factory=dict)  # status.Run.summary(): {"run_id", "started_at", "final"}
    poisoned: PoisonedBatch | None = None  # the batch the newest runs all failed on (onceflow.state.poison)

    @property
    def fed(self) -> dict[str, Ledger]:
        """The ledgers of the sinks written from Kafka: where a restart resumes reading is theirs to
        say. The aggregates follow bronze (sink_kinds.FOLLOWS) and catch up from it, not from Kafka."""
        return sinks.fed_by_kafka(self.ledgers)

    @property
    def followers(self) -> dict[str, Ledger]:
        return {name: ledger for name, ledger in self.ledgers.items() if name in FOLLOWS}

    @property
    def written(self) -> dict[str, Ledger]:
        """The sinks written from Kafka that hold at least one ledger entry."""
        return {name: ledger for name, ledger in self.fed.items() if ledger.entries}


def _ledgers(facts: pipeline_facts.PipelineFacts) -> dict[str, Ledger]:
    """Every sink's ledger; RecoveryError naming the sink when one cannot be read (the ledgers are
    what recovery trusts, so it will not guess past a damaged one)."""
    try:
        return facts.ledgers_or_raise()
    except LedgerReadError as exc:
        if exc.sink == SinkName.KAFKA:
            raise RecoveryError(
                f"the Kafka sink's ledger cannot be read ({exc.cause}); recovery needs every sink "
                "ledger. Fix: make the sink's brokers reachable, then run `onceflow recover` "
                "again."
            ) from None
        raise RecoveryError(
            f"the {exc.sink} table's Delta log at {exc.where} cannot be read ({exc.cause}); "
            "recovery needs every sink ledger. Fix: repair or restore the table (its _delta_log), "
            "then run `onceflow recover` again."
        ) from None


def gather(pipeline: Pipeline, running: bool | None = None) -> Facts:
    """Read everything the decision needs (onceflow.facts.read_facts), refusing what cannot be
    read. `running`: whether another process runs the job (None: ask the run lock)."""
    f = pipeline_facts.read_facts(pipeline, kafka_timeout=KAFKA_TIMEOUT)
    if f.checkpoint_error is not None:
        raise RecoveryError(f"cannot plan a recovery: {f.checkpoint_error}") from None
    ledgers = _ledgers(f)
    if f.kafka_error is not None:
        raise RecoveryError(
            f"cannot plan a recovery without Kafka's offsets (to check that the resume point "
            f"is still retained): {f.kafka_error}"
        ) from None
    if running is None:
        running = f.running
    assert f.checkpoint is not None and f.kafka is not None  # read_facts sets each or its error
    return Facts(
        pipeline=pipeline.name,
        pipeline_file=pipeline.file,
        topic=pipeline.source.topic,
        default_starting_offsets=pipeline.source.starting_offsets,
        checkpoint=f.checkpoint,
        identity=f.identity,
        identity_error=f.identity_error,
        ledgers=ledgers,
        kafka=KafkaOffsets(earliest=f.kafka["earliest"], latest=f.kafka["latest"]),
        running=running,
        holder=f.holder if running else None,
        last_run=StatusLog(pipeline.state_path, pipeline.name).newest_run().summary(),
        poisoned=poisoned_batch(StatusLog(pipeline.state_path, pipeline.name), Unprocessable.load(pipeline.state_path)),
    )
