"""Records framed with a schema registry's id (the Confluent wire format), read by the job.

Each batch's raw Kafka rows come out with `value` the payload the JSON parse reads
(spark/parse.py), `_wire` the record's own bytes (kept for quarantine and the size check) and
`_frame_reason` the reason a record has nothing to parse (NULL when it has, or has no value at
all). Per batch, the schema ids it holds are read first (one small Spark job) and each is asked of
the registry once per process (onceflow.registry), so a schema registered after the query started
is read too. A registry that does not answer fails the batch: no record is quarantined because the
registry was down.

- `avro`: the payload is decoded into its JSON view (spark/avro.py).
- `json_schema`: the payload is the JSON a JSON Schema serializer wrote, read as it is. The id must
  be a JSON Schema registered under the pipeline's subject; the schema itself is not applied: the
  declared fields and rules judge the payload, as for any JSON event (docs/registry.md).

The audit does not reuse this module: schema/avro_reference.py and schema/framed.py judge the
same bytes in plain Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from onceflow.registry import HEADER_BYTES, JSON_SCHEMA_TYPE, MAGIC, Registry
from onceflow.schema.reasons import JSON_SCHEMA_REASONS, Reason

T = TypeVar("T")

WIRE = "_wire"
FRAME_REASON = "_frame_reason"


def framed() -> Column:
    value = F.col("value")
    return (F.length(value) >= HEADER_BYTES) & (F.substring(value, 1, 1) == F.lit(bytes([MAGIC])))


def schema_id() -> Column:
    """The header's schema id (big-endian, 4 bytes), NULL for a record not in the wire format."""
    return F.when(framed(), F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("long"))


def payload() -> Column:
    """The bytes after the header."""
    return F.expr(f"substring(value, {HEADER_BYTES + 1})")


def batch_ids(raw: DataFrame) -> list[int]:
    """The schema ids the batch's framed records name (one small Spark job)."""
    return sorted(r[0] for r in raw.select(schema_id().alias("id")).where("id IS NOT NULL").distinct().collect())


def sorted_ids(
    raw: DataFrame, registry: Registry, subject: str, reasons: tuple[Reason, ...], read: Callable[[int], T | None]
) -> tuple[dict[int, T], dict[int, Reason]]:
    """The batch's schema ids: those of `subject` whose schema `read` reads (with what it gives),
    and the others with their reason of `reasons` (the format's, in schema/reasons.AVRO_REASONS'
    order): an id the registry does not know, one of another subject, one `read` refuses (None)."""
    _, unknown, other, unsupported = reasons[:4]
    readable: dict[int, T] = {}
    refused: dict[int, Reason] = {}
    for i in batch_ids(raw):
        if registry.schema_type(i) is None:
            refused[i] = unknown
        elif subject not in registry.subjects(i):
            refused[i] = other
        else:
            got = read(i)
            if got is None:
                refused[i] = unsupported
            else:
                readable[i] = got
    return readable, refused


def _reasons(refused: dict[int, Reason], not_framed: Reason) -> Column:
    reason: Column = F.when(F.col("value").isNotNull() & ~framed(), F.lit(not_framed.value))
    sid = schema_id()
    for i, why in refused.items():
        reason = reason.when(sid == i, F.lit(why.value))
    return reason


def with_views_of(raw: DataFrame, view: Column, refused: dict[int, Reason], reasons: tuple[Reason, ...]) -> DataFrame:
    """Kafka rows with `value` the JSON view (UTF-8) of each record (`view`: NULL for a record with
    none), `_wire` its own bytes, and `_frame_reason` the reason it has no view: its id's in
    `refused`, else the format's not-framed or undecodable one (NULL when it has a view, or has no
    value at all). Avro's (spark/avro.py) and Protobuf's (spark/protobuf.py) views."""
    not_framed, undecodable = reasons[0], reasons[4]
    missing = F.col("value").isNotNull() & F.col("_view").isNull()
    return (
        raw.withColumn(WIRE, F.col("value"))
        .withColumn("_view", view)
        .withColumn(FRAME_REASON, _reasons(refused, not_framed).when(missing, F.lit(undecodable.value)))
        .withColumn("value", F.encode(F.col("_view"), "UTF-8"))
        .drop("_view")
    )


def with_json_payloads(raw: DataFrame, registry: Registry, subject: str) -> DataFrame:
    """A JSON Schema serializer's records: `value` the JSON payload of each record whose header names
    a JSON Schema of `subject`, NULL for the others, whose `_frame_reason` says why."""
    kind = registry.schema_type
    _, refused = sorted_ids(
        raw, registry, subject, JSON_SCHEMA_REASONS, lambda i: True if kind(i) == JSON_SCHEMA_TYPE else None
    )
    reason = _reasons(refused, Reason.JSON_SCHEMA_NOT_FRAMED)
    return (
        raw.withColumn(WIRE, F.col("value"))
        .withColumn(FRAME_REASON, reason)
        .withColumn("value", F.when(F.col(FRAME_REASON).isNull(), payload()))
    )
