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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from onceflow.registry import HEADER_BYTES, JSON_SCHEMA_TYPE, MAGIC, Registry
from onceflow.schema.reasons import Reason

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


def with_json_payloads(raw: DataFrame, registry: Registry, subject: str) -> DataFrame:
    """A JSON Schema serializer's records: `value` the JSON payload of each record whose header names
    a JSON Schema of `subject`, NULL for the others, whose `_frame_reason` says why."""
    sid = schema_id()
    refused: dict[int, Reason] = {}
    for i in batch_ids(raw):
        kind = registry.schema_type(i)
        if kind is None:
            refused[i] = Reason.JSON_SCHEMA_UNKNOWN_SCHEMA
        elif subject not in registry.subjects(i):
            refused[i] = Reason.JSON_SCHEMA_OTHER_SUBJECT
        elif kind != JSON_SCHEMA_TYPE:
            refused[i] = Reason.JSON_SCHEMA_UNSUPPORTED_SCHEMA
    reason: Column = F.when(F.col("value").isNotNull() & ~framed(), F.lit(Reason.JSON_SCHEMA_NOT_FRAMED.value))
    for i, why in refused.items():
        reason = reason.when(sid == i, F.lit(why.value))
    return (
        raw.withColumn(WIRE, F.col("value"))
        .withColumn(FRAME_REASON, reason)
        .withColumn("value", F.when(F.col(FRAME_REASON).isNull(), payload()))
    )
