"""Validation of raw Kafka records into bronze rows or quarantine rows.

Pure Spark SQL (Spark 4's VARIANT functions), no Python UDF: the JSON is parsed
once per record, and each malformed kind gets its own reason code, checked in a
fixed order so a record has exactly one reason. The audit reuses this function
to know what bronze *should* hold, so source and sink are judged by one rule.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from onceflow import events
from onceflow.config import EventSpec

_AMOUNT = r"^-?[0-9]{1,16}(\.[0-9]{1,2})?$"
_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


def _field(name: str) -> Column:
    return F.expr(f"variant_get(_json, '$.{name}')")


def _kind(name: str) -> Column:
    """The JSON type of a field: 'STRING', 'BOOLEAN', 'ARRAY<...>', 'VOID' (null), or SQL NULL if absent."""
    return F.expr(f"schema_of_variant(variant_get(_json, '$.{name}'))")


def _text(name: str) -> Column:
    return F.expr(f"variant_get(_json, '$.{name}', 'string')")


def parse_events(kafka_df: DataFrame, spec: EventSpec) -> DataFrame:
    """Kafka rows (key, value, topic, partition, offset, timestamp) → one row per record
    with the parsed event fields, `reason` (NULL when valid) and `detail`."""
    raw = kafka_df.select(
        F.col("key").alias("_key"), F.col("value").alias("_value"),
        F.col("topic").alias("_topic"), F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"), F.col("timestamp").alias("_kafka_ts"),
        F.length("value").alias("_size"),
    ).withColumn("_json", F.expr("try_parse_json(cast(_value as string))"))

    kinds = {f: _kind(f) for f in events.REQUIRED_FIELDS}
    missing = [F.when(k.isNull() | (k == F.lit("VOID")), F.lit(f)) for f, k in kinds.items()]
    wrong = [F.when(k.isNotNull() & (k != F.lit("VOID")) & (k != F.lit("STRING")), F.concat(F.lit(f + " is "), k))
             for f, k in kinds.items()]
    amount_text, id_text = _text("amount"), _text("event_id")
    amount = F.expr("try_cast(variant_get(_json, '$.amount', 'string') as decimal(18,2))")
    event_time = F.expr("try_cast(variant_get(_json, '$.event_time', 'string') as timestamp)")
    currency = _text("currency")

    missing_list = F.concat_ws(", ", *missing)
    wrong_list = F.concat_ws(", ", *wrong)
    bad_values = F.concat_ws(", ",
                             F.when(~amount_text.rlike(_AMOUNT) | amount.isNull(), F.lit("amount")),
                             F.when(event_time.isNull(), F.lit("event_time")),
                             F.when(~id_text.rlike(_UUID), F.lit("event_id")))
    top = F.expr("schema_of_variant(_json)")

    reason = (F.when(F.col("_size") > spec.max_bytes, F.lit(events.OVERSIZED))
              .when(F.col("_json").isNull() | ~top.startswith("OBJECT"), F.lit(events.INVALID_JSON))
              .when(missing_list != "", F.lit(events.MISSING_FIELD))
              .when(wrong_list != "", F.lit(events.WRONG_TYPE))
              .when(bad_values != "", F.lit(events.INVALID_VALUE))
              .when(amount < 0, F.lit(events.NEGATIVE_AMOUNT))
              .when(~currency.isin(*spec.currencies), F.lit(events.BAD_CURRENCY)))
    detail = (F.when(F.col("_size") > spec.max_bytes,
                     F.format_string(f"record is %d bytes, more than the {spec.max_bytes} allowed", F.col("_size")))
              .when(F.col("_json").isNull(), F.lit("not parseable as JSON"))
              .when(~top.startswith("OBJECT"), F.concat(F.lit("top level is "), top, F.lit(", not an object")))
              .when(missing_list != "", F.concat(F.lit("missing or null: "), missing_list))
              .when(wrong_list != "", F.concat(wrong_list, F.lit(", expected STRING")))
              .when(bad_values != "", F.concat(F.lit("unusable value: "), bad_values))
              .when(amount < 0, F.concat(F.lit("amount "), amount_text, F.lit(" is negative")))
              .when(~currency.isin(*spec.currencies), F.concat(F.lit("currency "), currency, F.lit(" not allowed"))))

    return raw.select(
        id_text.alias("event_id"), _text("account_id").alias("account_id"), amount.alias("amount"),
        currency.alias("currency"), event_time.alias("event_time"),
        "_key", "_value", "_topic", "_partition", "_offset", "_kafka_ts",
        reason.alias("reason"), detail.alias("detail"),
    )


def bronze_rows(parsed: DataFrame, batch_id: int, generation: int) -> DataFrame:
    """The valid records, in the bronze schema (tables.BRONZE_DDL)."""
    return (parsed.where(F.col("reason").isNull())
            .select("event_id", "account_id", "amount", "currency", "event_time",
                    "_topic", "_partition", "_offset", "_kafka_ts", *_batch_columns(batch_id, generation)))


def quarantine_rows(parsed: DataFrame, batch_id: int, generation: int) -> DataFrame:
    """The invalid records with their raw bytes and reason (tables.QUARANTINE_DDL)."""
    return (parsed.where(F.col("reason").isNotNull())
            .select("_key", "_value", "reason", "detail",
                    "_topic", "_partition", "_offset", "_kafka_ts", *_batch_columns(batch_id, generation)))


def _batch_columns(batch_id: int, generation: int) -> list[Column]:
    return [F.lit(batch_id).cast("bigint").alias("_batch_id"), F.lit(generation).cast("int").alias("_generation"),
            F.current_timestamp().alias("_ingested_at")]
