"""Recovery's vocabulary: what it can find, what it decides, what it does (docs/recovery.md).

The values are what the recovery record holds (docs/schemas/recovery-record.schema.json)."""

from __future__ import annotations

from enum import StrEnum


class Decision(StrEnum):
    """What recovery does about what it found."""

    RESTART = "restart"  # from the checkpoint, as it is
    NEW_GENERATION = "new_generation"  # a fresh checkpoint at the sink ledgers' lowest committed point
    NOTHING = "nothing"  # nothing to recover
    REFUSE = "refuse"  # it will not act; the plan says why and the fix


class Case(StrEnum):
    """What can be found: one Finding per fact worth telling; Plan.case is the one that decided."""

    RUNNING = "running"  # the job runs
    POISONED = "poisoned_batch"  # the newest runs all failed on the same batch: a restart fails again
    FRESH = "fresh"  # no sink holds a batch: a first run
    STOPPED = "stopped"  # the last run ended cleanly (finished or stopped) and every batch it planned committed
    DEAD_QUERY = "dead_query"  # the last run was killed or crashed, the checkpoint is healthy
    CORRUPT = "corrupt_checkpoint"
    MISSING = "missing_checkpoint"
    UNUSABLE = "unusable_checkpoint"  # readable, but not this query's, or older than the tables
    SINKS_DISAGREE = "sinks_disagree"  # the sinks stopped at different points
    AHEAD = "checkpoint_ahead_of_sink"  # a sink lacks batches the checkpoint committed
    RETENTION = "retention_loss"  # Kafka deleted offsets a restart or a sink needs
    KAFKA_BEHIND = "kafka_behind_ledger"  # committed offsets past Kafka's end
    LEDGER_GAP = "ledger_gap"
    LEFTOVERS = "leftover_files"  # temp files of an interrupted write
    FOLLOWER_LAG = "follower_lag"  # the aggregates trail bronze: the next run merges the rest from bronze
    FOLLOWER_AHEAD = "follower_ahead"  # the aggregates hold offsets bronze does not (bronze restored from a copy)


class ActionKind(StrEnum):
    """The actions the executor knows (onceflow.recovery.execute)."""

    MOVE_CHECKPOINT = "move_checkpoint_aside"
    MOVE_LEFTOVERS = "move_leftovers_aside"
    WRITE_LOSS = "write_loss_entry"
    WRITE_IDENTITY = "write_identity"


class CheckpointState(StrEnum):
    """The checkpoint as recovery judges it (onceflow.recovery.decide.checkpoint_state); the three
    that need a new generation are also the case that decides."""

    HEALTHY = "healthy"
    PREPARED = "prepared"  # its identity only: a recovery or a first run set it up
    MISSING = Case.MISSING.value
    CORRUPT = Case.CORRUPT.value
    UNUSABLE = Case.UNUSABLE.value


EARLIEST = -2  # Kafka startingOffsets for "the log start"
