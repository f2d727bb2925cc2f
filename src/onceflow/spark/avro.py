"""Avro records in the Confluent wire format, read by the job: each record's JSON view, which the
declared fields and rules then judge as any JSON event (spark/parse.py).

Per batch (spark/framed.py): the schema ids the batch holds, each asked of the registry once per
process (onceflow.registry); then per id, in pure Spark: `from_avro` (spark-avro) on the payload,
floats widened to doubles, decimals of a scale over 6 as their plain text, `to_json` → the view
(docs/registry.md#the-json-view). A payload is read as a record only when it is exactly one: its
view read back (`from_json`) and written again (`to_avro`) is the payload, byte for byte (nothing
left over, integers in their shortest form, strings in UTF-8), or for a record with a map, whose
entries Avro's Java reader reorders, of the payload's length and bytes as a multiset; anything else
is `avro_undecodable`. Records whose id the registry does not know, or knows under another subject,
or whose schema onceflow does not read (schema/avro.py), get their own reasons
(schema/reasons.AVRO_REASONS). A registry that does not answer fails the batch: no
record is quarantined because the registry was down.

The audit does not reuse this module: schema/avro_reference.py reads the same bytes with fastavro.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    MapType,
    StructField,
    StructType,
)

from onceflow.registry import Registry
from onceflow.schema.avro import PLAIN_SCALE, unsupported
from onceflow.schema.reasons import AVRO_REASONS
from onceflow.spark.framed import payload, schema_id, sorted_ids, with_views_of

# how the view writes what JSON has no type for (docs/registry.md#the-json-view)
VIEW_OPTIONS = {
    "ignoreNullFields": "false",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
    "dateFormat": "yyyy-MM-dd",
}


def _widened(t: DataType) -> DataType:
    """`t` with every float a double (the view writes a float's exact value, not its shortest text),
    and everything nullable, as PERMISSIVE's decoded record is."""
    if isinstance(t, FloatType):
        return DoubleType()
    if isinstance(t, StructType):
        return StructType([StructField(f.name, _widened(f.dataType), True) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(_widened(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(t.keyType, _widened(t.valueType), True)
    return t


def _has_wide_decimal(t: DataType, plain: int) -> bool:
    if isinstance(t, DecimalType):
        return t.scale > plain
    if isinstance(t, StructType):
        return any(_has_wide_decimal(f.dataType, plain) for f in t.fields)
    if isinstance(t, ArrayType):
        return _has_wide_decimal(t.elementType, plain)
    return isinstance(t, MapType) and _has_wide_decimal(t.valueType, plain)


def _plain_decimals(c: Column, t: DataType, plain: int = PLAIN_SCALE) -> Column:
    """`c` with every decimal of a scale over `plain` as its plain text at its scale (CAST AS
    STRING): `to_json` writes a decimal as Java's BigDecimal.toString does, in exponent notation for
    a value under 10^-6 and a zero at such a scale (1E-8, 0E-8), which the JSON parse reads as an
    approximate number, not a decimal. Narrower decimals stay numbers (nothing to rebuild)."""
    if not _has_wide_decimal(t, plain):
        return c
    if isinstance(t, DecimalType):
        return c.cast("string")
    if isinstance(t, StructType):
        rebuilt = F.struct(*[_plain_decimals(c.getField(f.name), f.dataType, plain).alias(f.name) for f in t.fields])
        return F.when(c.isNotNull(), rebuilt)
    if isinstance(t, ArrayType):
        return F.transform(c, lambda x: _plain_decimals(x, t.elementType, plain))
    if isinstance(t, MapType):
        return F.transform_values(c, lambda _, v: _plain_decimals(v, t.valueType, plain))
    return c


def _complete(c: Column, t: DataType) -> Column | None:
    """True when `c` holds no null where `t` says none may be (`to_avro` fails a batch on such a
    value rather than return NULL); None when `t` allows every null."""
    checks: list[Column] = []
    if isinstance(t, StructType):
        for f in t.fields:
            sub = c.getField(f.name)
            if not f.nullable:
                checks.append(sub.isNotNull())
            inner = _complete(sub, f.dataType)
            if inner is not None:
                checks.append(sub.isNull() | inner)
    elif isinstance(t, ArrayType | MapType):
        element, nullable = (
            (t.elementType, t.containsNull) if isinstance(t, ArrayType) else (t.valueType, t.valueContainsNull)
        )
        inner = _complete(F.lit(None), element)  # does the element need a check at all?
        if not nullable or inner is not None:
            items = c if isinstance(t, ArrayType) else F.map_values(c)

            def each(x: Column) -> Column:
                ok = _complete(x, element)
                held = x.isNull() | ok if ok is not None else F.lit(True)
                return held if nullable else x.isNotNull() & held

            checks.append(F.forall(items, each))
    if not checks:
        return None
    return functools.reduce(lambda a, b: a & b, checks)


def _view(raw: DataFrame, payload: Column, writer: str, plain: int) -> Column:
    """The JSON view of `payload` decoded with the writer schema `writer`; NULL unless the payload is
    exactly one record of it."""
    decoded = from_avro(payload, writer, {"mode": "PERMISSIVE"})
    # the record's type as the writer schema says, its non-null fields so: PERMISSIVE's own type is all
    # nullable (a corrupt record comes out as a row of NULLs); analysis only, no job
    dtype = raw.select(from_avro(payload, writer).alias("r")).schema["r"].dataType
    assert isinstance(dtype, StructType), "schema/avro.unsupported refuses a writer schema that is not a record"
    widened = _widened(dtype)
    text = F.to_json(_plain_decimals(decoded.cast(widened), widened, plain), VIEW_OPTIONS)
    back = F.from_json(text, dtype, VIEW_OPTIONS)  # a decimal's text reads back as the decimal
    complete = _complete(back, dtype)
    again = to_avro(back, writer)
    same = _same_record(again, payload) if _has_map(dtype) else again == payload
    return F.when(same if complete is None else F.when(complete, same), text)


def _has_map(t: DataType) -> bool:
    if isinstance(t, MapType):
        return True
    if isinstance(t, StructType):
        return any(_has_map(f.dataType) for f in t.fields)
    return isinstance(t, ArrayType) and _has_map(t.elementType)


def _same_record(again: Column, payload: Column) -> Column:
    """True when `again` (a record written again) is `payload` but for the order of map entries,
    which Avro's Java reader does not keep (it reads a map into a hash map): the same length, the
    same bytes as a multiset. Every other difference the byte-for-byte check sees changes one of
    them: a byte left over, an integer not in its shortest form, a map in more than one block or
    with a key twice (the length); a string that is not UTF-8 (its bytes become U+FFFD's)."""

    def sorted_bytes(c: Column) -> Column:
        return F.array_sort(F.regexp_extract_all(F.hex(c), F.lit("(..)"), 1))

    return (F.length(again) == F.length(payload)) & (sorted_bytes(again) == sorted_bytes(payload))


def with_views(raw: DataFrame, registry: Registry, subject: str, plain: int = PLAIN_SCALE) -> DataFrame:
    """Kafka rows with `value` the JSON view (UTF-8) of each record, `_wire` its own bytes, and
    `_frame_reason` the reason it has no view (NULL when it has one, or has no value at all); the
    decimals of a scale over `plain` as their text (schema/avro.EVERY_DECIMAL: every one, a Debezium envelope's)."""
    sid = schema_id()

    def read(i: int) -> str | None:
        writer = str(registry.schema(i))
        return None if unsupported(writer) else writer

    readable, refused = sorted_ids(raw, registry, subject, AVRO_REASONS, read)
    view: Column = F.lit(None).cast("string")
    for i, writer in readable.items():
        view = F.when(sid == i, _view(raw, payload(), writer, plain)).otherwise(view)
    return with_views_of(raw, view, refused, AVRO_REASONS)
