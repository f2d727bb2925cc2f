"""The Great Expectations suites of an audit, one per dataset.

- bronze: generated from the declared schema — column types, compound uniqueness
  of the Kafka coordinates, uniqueness of the declared event_id, not-null for
  required fields, allowed values, ranges, patterns, lengths, UUIDs — and the row
  count Kafka committed;
- quarantine: schema, uniqueness, reason codes from the documented set (with a
  Debezium pipeline's `cdc_*` codes), row count;
- aggregates: one row per declared group and window, counts ≥ 1, windows that
  end after they start, and the row count of the batch recomputation;
- current (the keyed table of a change stream): its schema, one row per key, keys,
  winners and `_deleted` never NULL, and as many rows as the fold's live rows plus
  at most its tombstones;
- reconciliation: one row per partition with the counts and checksums of the
  four-way reconciliation, so accounting, loss, phantoms, duplicates and content
  are expectations too;
- findings: one row per offending offset range or window; each check is an
  `UnexpectedRowsExpectation` that must return no row.

Expected values that come from Kafka (the committed counts) are put into the
suites when they are built, so one GX run holds every check of the audit.

The sink tables' suites run on GX's pandas engine (validate.py converts the Arrow
tables delta-rs reads; no Spark): their type checks name the dtype or Python type
each declared type becomes there (_PANDAS_TYPES); reconciliation and findings run
on SQLite.
"""

from __future__ import annotations

import re

import great_expectations as gx
import great_expectations.expectations as gxe

from onceflow import tables
from onceflow.cdc.spec import KeyedSpec
from onceflow.config import Pipeline
from onceflow.schema import reasons
from onceflow.schema.reasons import Reason

_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

# per-partition reconciliation columns (the `reconciliation` dataset)
RECONCILIATION_DDL = (
    "partition INT, start BIGINT, `end` BIGINT, source_records BIGINT, source_valid BIGINT, "
    "source_malformed BIGINT, bronze_rows BIGINT, quarantine_rows BIGINT, sink_rows BIGINT, lost_records BIGINT, "
    "phantom_rows BIGINT, duplicate_keys BIGINT, content_mismatches BIGINT, source_checksum STRING, "
    "sink_checksum STRING"
)
FINDINGS_DDL = "check STRING, partition INT, start BIGINT, `end` BIGINT, count BIGINT, key STRING, kind STRING"
FINDING_CHECKS = {
    "loss": "committed source records missing from bronze ∪ quarantine (anti-join source → sink)",
    "phantoms": "sink rows without a committed source record (anti-join sink → source)",
    "duplicates": "offsets held by more than one sink row",
    "duplicate_event_ids": "bronze rows sharing the declared event_id",
    "content": "rows whose payload differs from their source record",
    "aggregates": "aggregate windows that differ from the batch recomputation from bronze",
    "current": "keyed-table keys that differ from the fold of their bronze changes",
}


_SPARK_TYPES = {
    "STRING": "StringType",
    "INT": "IntegerType",
    "BIGINT": "LongType",
    "TIMESTAMP": "TimestampType",
    "DECIMAL": "DecimalType",
    "BINARY": "BinaryType",
    "BOOLEAN": "BooleanType",
    "DOUBLE": "DoubleType",
    "DATE": "DateType",
    "STRUCT": "StructType",
}
# Each DDL type's check on GX's pandas engine, as validate._to_pandas converts the Arrow table
# delta-rs reads: GX compares `type_` with the column dtype's `.type` — the NumPy scalar type of a
# masked or NumPy dtype, the Python class of an Arrow dtype's values — so it judges the column's
# type as Spark's check judged the schema, an empty or all-NULL column too. (`type_` is a class GX
# finds by that name in NumPy, pandas or Python's builtins; "date" and "Decimal" are the classes
# pandas.core.dtypes.dtypes imports.) A column stored with another type fails: text holding
# ints is Int64, not str; a BIGINT stored as text is str; an INT stored as BIGINT is int64; a
# TIMESTAMP without a zone (NTZ) is datetime64, not Timestamp; a DATE stored as a timestamp is
# Timestamp. What no GX pandas type check can see: a DECIMAL's precision and scale (any decimal
# passes, as Spark's isinstance(DecimalType) check let any pass) and a STRUCT's fields (any struct
# passes, as with Spark's StructType; the column-set check names its fields, see _nested).
_PANDAS_TYPES = {
    "StringType": "str",  # string[pyarrow]
    "IntegerType": "int32",  # Int32
    "LongType": "int64",  # Int64
    "TimestampType": "Timestamp",  # datetime64[us, UTC]
    "DecimalType": "Decimal",  # decimal128(p, s)[pyarrow]: precision and scale unchecked
    "BinaryType": "bytes",  # binary[pyarrow]
    "BooleanType": "bool",  # boolean
    "DoubleType": "float64",  # Float64
    "DateType": "date",  # date32[pyarrow]
    "StructType": "dict",  # struct<…>[pyarrow]: fields unchecked here
}
_DDL_COLUMN = re.compile(r"^`?(\w+)`?\s+([A-Za-z]+)(?:\(\d+\s*,\s*\d+\)|<.*>)?$", re.DOTALL)


def _top_level(ddl: str) -> list[str]:
    """A DDL's column definitions: split at the commas outside <...> and (...)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in ddl:
        depth += (ch in "<(") - (ch in ">)")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def ddl_types(ddl: str) -> dict[str, str]:
    """Column → pyspark type class name from a tables.py DDL (a struct, Debezium's `_sequence`, is
    StructType; _PANDAS_TYPES maps each to its GX type check, validate._SQLITE_TYPES to an SQLite
    column); parsed without a JVM, so suites can be built and tested anywhere."""
    found = [_DDL_COLUMN.match(part) for part in _top_level(ddl)]
    cols = {m.group(1): _SPARK_TYPES[m.group(2).upper()] for m in found if m}
    if not cols:
        raise ValueError(f"no columns found in DDL {ddl!r}")
    return cols


def _declared(ddl: str) -> dict[str, str]:
    """Column → its type as the DDL writes it (`DECIMAL(18,2)`), for the type checks' meta."""
    out = {}
    for part in _top_level(ddl):
        m = _DDL_COLUMN.match(part)
        if m:
            out[m.group(1)] = part[m.end(1) :].lstrip("`").strip()
    return out


def _nested(keyed: KeyedSpec | None) -> list[str]:
    """The fields of the `_sequence` struct as validate._to_pandas adds them to the columns (as GX's
    Spark batches listed them): the column-set check holds the struct's exact fields."""
    return [f"_sequence.{p.column}" for p in keyed.sequence] if keyed is not None else []


def _schema(ddl: str, nested: list[str] | None = None) -> list:
    """The table's exact columns (with `nested`, the `<struct>.<field>` columns validate._to_pandas
    adds for its struct columns) and one type check per column (_PANDAS_TYPES)."""
    cols = ddl_types(ddl)
    out: list = [
        gxe.ExpectTableColumnsToMatchSet(
            column_set=[*cols, *(nested or [])],
            exact_match=True,
            description="the table has exactly the columns of its schema",
        )
    ]
    declared = _declared(ddl)
    out += [
        gxe.ExpectColumnValuesToBeOfType(column=c, type_=_PANDAS_TYPES[t], meta={"declared": declared[c]})
        for c, t in cols.items()
    ]
    return out


def _not_null(*columns: str) -> list:
    return [gxe.ExpectColumnValuesToNotBeNull(column=c) for c in columns]


def bronze_suite(pipeline: Pipeline, committed_valid: int) -> gx.ExpectationSuite:
    schema, keyed = pipeline.schema, pipeline.keyed
    # a Debezium delete's row holds its key and sequence only: there the other required fields are
    # NULL by design (the row reconciliation checks every row's values against the source's)
    required = (
        [*keyed.key_names, "_op", "_sequence"]
        if keyed is not None and keyed.debezium
        else [f.name for f in schema.fields if f.required]
    )
    rules: list = []
    for f in schema.fields:
        if f.allowed is not None:
            rules.append(gxe.ExpectColumnValuesToBeInSet(column=f.name, value_set=list(f.allowed)))
        if f.min is not None or f.max is not None:
            rules.append(
                gxe.ExpectColumnValuesToBeBetween(
                    column=f.name,
                    min_value=f.min,  # type: ignore[arg-type]  # GX's model parses a bound given as text
                    max_value=f.max,  # type: ignore[arg-type]  # GX's model parses a bound given as text
                )
            )
        if f.pattern is not None:
            rules.append(gxe.ExpectColumnValuesToMatchRegex(column=f.name, regex=f.pattern))
        if f.max_length is not None:
            rules.append(gxe.ExpectColumnValueLengthsToBeBetween(column=f.name, min_value=0, max_value=f.max_length))
        if f.uuid:
            rules.append(gxe.ExpectColumnValuesToMatchRegex(column=f.name, regex=_UUID))
    unique = (
        [gxe.ExpectColumnValuesToBeUnique(column=schema.event_id, description="no event is stored twice")]
        if schema.event_id
        else []
    )
    return gx.ExpectationSuite(
        name="bronze",
        expectations=[
            *_schema(tables.bronze_ddl(schema, keyed), _nested(keyed if keyed and keyed.debezium else None)),
            gxe.ExpectCompoundColumnsToBeUnique(
                column_list=list(tables.SOURCE_KEY), description="no Kafka record is stored twice"
            ),
            *unique,
            *_not_null(*required, *tables.SOURCE_KEY, "_batch_id", "_generation"),
            *rules,
            gxe.ExpectColumnValuesToBeBetween(column="_offset", min_value=0),
            gxe.ExpectTableRowCountToEqual(
                value=committed_valid,
                description="bronze holds exactly the valid records Kafka committed in the audited ranges",
            ),
        ],
    )


def quarantine_reasons(pipeline: Pipeline | None = None) -> list[str]:
    """The reason codes quarantine may hold: the documented ones and `unprocessable`; with a
    Debezium pipeline's records, the envelope's `cdc_*` codes too (cdc/envelope.py); with an Avro,
    JSON Schema or Protobuf pipeline's, its header's `avro_*`, `json_schema_*` or `protobuf_*` ones
    (docs/registry.md)."""
    keyed = pipeline.keyed if pipeline is not None else None
    cdc = list(reasons.CDC_REASONS) if keyed is not None and keyed.debezium else []
    framing = pipeline.schema.framing if pipeline is not None else None
    framed = list(reasons.FRAMED_REASONS[framing]) if framing is not None else []
    return [*reasons.REASONS, *framed, *cdc, Reason.UNPROCESSABLE]


def quarantine_suite(committed_malformed: int, pipeline: Pipeline | None = None) -> gx.ExpectationSuite:
    return gx.ExpectationSuite(
        name="quarantine",
        expectations=[
            *_schema(tables.QUARANTINE_DDL),
            gxe.ExpectCompoundColumnsToBeUnique(
                column_list=list(tables.SOURCE_KEY), description="no Kafka record is quarantined twice"
            ),
            *_not_null("reason", "detail", *tables.SOURCE_KEY, "_batch_id"),
            gxe.ExpectColumnValuesToBeInSet(
                column="reason",
                value_set=quarantine_reasons(pipeline),
                description="every reason is one of the documented codes",
            ),
            gxe.ExpectTableRowCountToEqual(
                value=committed_malformed,
                description="quarantine holds exactly the malformed records Kafka committed in the audited ranges",
            ),
        ],
    )


def aggregates_suite(pipeline: Pipeline, recomputed_windows: int) -> gx.ExpectationSuite:
    aggs = pipeline.sinks.aggregates
    assert aggs is not None  # called for a pipeline with sinks.aggregates
    counts = [m.name for m in aggs.parsed_metrics() if m.func == "count"]
    return gx.ExpectationSuite(
        name="aggregates",
        expectations=[
            gxe.ExpectCompoundColumnsToBeUnique(
                column_list=list(tables.aggregate_key(aggs)), description="one row per group and window"
            ),
            *_not_null("window_start", "window_end", *counts),
            *[gxe.ExpectColumnValuesToBeBetween(column=c, min_value=1) for c in counts],
            gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="window_end", column_B="window_start"),
            gxe.ExpectTableRowCountToEqual(
                value=recomputed_windows, description="as many windows as the batch recomputation from bronze"
            ),
        ],
    )


def current_suite(pipeline: Pipeline, live_rows: int, tombstones: int) -> gx.ExpectationSuite:
    """The keyed table (sinks.current): `live_rows` and `tombstones` are the fold's (audit/current.py);
    the table holds every live row and the tombstones not purged yet."""
    keyed = pipeline.keyed
    assert keyed is not None  # called for a pipeline with sinks.current
    return gx.ExpectationSuite(
        name="current",
        expectations=[
            *_schema(tables.current_ddl(pipeline.schema, keyed), _nested(keyed)),
            (
                gxe.ExpectCompoundColumnsToBeUnique(column_list=list(keyed.key_names), description="one row per key")
                if len(keyed.key_names) > 1
                else gxe.ExpectColumnValuesToBeUnique(column=keyed.key_names[0], description="one row per key")
            ),
            *_not_null(*keyed.key_names, "_sequence", "_partition", "_offset", "_deleted", "_batch_id", "_changed_at"),
            gxe.ExpectTableRowCountToBeBetween(
                min_value=live_rows,
                max_value=live_rows + tombstones,
                description="the fold's live rows, and at most its tombstones (some purged past tombstone_retention)",
            ),
        ],
    )


def reconciliation_suite() -> gx.ExpectationSuite:
    return gx.ExpectationSuite(
        name="reconciliation",
        expectations=[
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="source_records",
                column_B="sink_rows",
                description="accounting: committed records = bronze + quarantine",
            ),
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="source_valid", column_B="bronze_rows", description="accounting: valid records = bronze rows"
            ),
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="source_malformed",
                column_B="quarantine_rows",
                description="accounting: malformed records = quarantine rows",
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column="lost_records",
                min_value=0,
                max_value=0,
                description="loss: no committed record missing from the sinks",
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column="phantom_rows",
                min_value=0,
                max_value=0,
                description="phantoms: no sink row without a committed record",
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column="duplicate_keys", min_value=0, max_value=0, description="duplicates: no offset stored twice"
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column="content_mismatches",
                min_value=0,
                max_value=0,
                description="content: no row differs from its source record",
            ),
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="source_checksum",
                column_B="sink_checksum",
                description="content: order-independent payload checksum per partition, source = sink",
            ),
        ],
    )


def findings_suite() -> gx.ExpectationSuite:
    return gx.ExpectationSuite(
        name="findings",
        expectations=[
            gxe.UnexpectedRowsExpectation(
                unexpected_rows_query=f"SELECT * FROM {{batch}} WHERE `check` = '{name}'",
                description=f"{name}: no {what}",
                meta={"check": name},
            )
            for name, what in FINDING_CHECKS.items()
        ],
    )
