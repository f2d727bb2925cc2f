"""The sinks a pipeline can write, one row each: the one place a sink kind is named.

pyiceberg keeps a catalog family in one table (`CatalogType` and `AVAILABLE_CATALOGS`); onceflow
keeps its sinks here. Everything that walks the sinks derives from KINDS instead of naming them:
the ledgers and which sink follows which (onceflow.ledger), the catalogue (onceflow.sinks), the
floors the batch writer keeps (spark/batch_writer.py), what backfill re-writes (spark/backfill.py),
the tables' DDL (spark/table_specs.py) and the audit's datasets (audit/run.py). A new sink kind is
a member, a row, a writer, a ledger reader and its audit checks (docs/architecture.md#where-to-add);
tests/unit/test_sink_kinds.py fails when `config.Sinks` gains a field without a row.

Bottom layer: it imports nothing of onceflow. A StrEnum, so ledgers, reports and JSON keep the
plain names ("bronze") and compare equal to the members.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SinkName(StrEnum):
    """A sink's name: in its ledger entries, its `config.Sinks` field, reports and table specs."""

    BRONZE = "bronze"  # every valid record, as declared
    QUARANTINE = "quarantine"  # every record that failed validation, with its reason
    AGGREGATES = "aggregates"  # windowed counts merged from bronze
    CURRENT = "current"  # the keyed table: the current row per key of a change stream (docs/cdc.md)
    KAFKA = "kafka"  # an output topic, written in Kafka transactions (docs/kafka-sink.md)


class Engine(StrEnum):
    """What a sink writes to, and so how its ledger is read."""

    DELTA = "delta"  # a Delta table; its ledger is in the commits' userMetadata (onceflow.ledger)
    KAFKA = "kafka"  # a Kafka topic; its ledger is a compacted topic (onceflow.kafka.ledger)


@dataclass(frozen=True)
class SinkKind:
    """What every reader needs to know about one sink kind."""

    name: SinkName
    engine: Engine
    field: str  # its section under `sinks:` (a config.Sinks field)
    # the sink whose table it is written from, not from Kafka (spark/follower.py): it holds a
    # prefix of its leader's batches, may trail the checkpoint, and copies the leader's floors and
    # LOSS entries instead of taking its own
    follows: SinkName | None = None
    floors: bool = False  # a new writer generation starts it at its own floor (generation.py)
    backfilled: bool = False  # `onceflow backfill` re-writes its missing rows (spark/backfill.py)
    holds_fields: bool = False  # its columns are the declared fields: a new optional one is added (spark/evolve.py)


# in write order: the job writes bronze, quarantine, then the Kafka sink in one batch, and the
# followers merge off the batch's path; ledgers are read in this order (the audit, in reverse)
KINDS: tuple[SinkKind, ...] = (
    SinkKind(SinkName.BRONZE, Engine.DELTA, "bronze", floors=True, backfilled=True, holds_fields=True),
    SinkKind(SinkName.QUARANTINE, Engine.DELTA, "quarantine", floors=True, backfilled=True),
    SinkKind(SinkName.AGGREGATES, Engine.DELTA, "aggregates", follows=SinkName.BRONZE),
    SinkKind(SinkName.CURRENT, Engine.DELTA, "current", follows=SinkName.BRONZE, holds_fields=True),
    SinkKind(SinkName.KAFKA, Engine.KAFKA, "kafka", floors=True),
)
KIND: dict[str, SinkKind] = {kind.name: kind for kind in KINDS}  # by name (a SinkName or its text)

DELTA = tuple(k.name for k in KINDS if k.engine == Engine.DELTA)  # the Delta sinks, in write order
# sink -> the sink it follows (its table is written from that one's, not from Kafka)
FOLLOWS: dict[str, SinkName] = {k.name: k.follows for k in KINDS if k.follows is not None}
FLOORED = tuple(k.name for k in KINDS if k.floors)  # the sinks a writer generation keeps floors for
BACKFILLED = tuple(k.name for k in KINDS if k.backfilled)  # the sinks `onceflow backfill` re-writes
FIELD_TABLES = tuple(k.name for k in KINDS if k.holds_fields)  # tables whose columns are the declared fields
