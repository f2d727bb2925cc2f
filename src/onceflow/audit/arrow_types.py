"""The declared field types in Arrow: the types the audit holds source values in (audit/source.py),
as the judges give them (audit/native_judge.py) and as delta-rs reads bronze."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.schema.model import FieldType

if TYPE_CHECKING:
    import pyarrow as pa

_ARROW = {
    "string": "string",
    "int": "int32",
    "long": "int64",
    "double": "float64",
    "boolean": "bool_",
    "date": "date32",
}


def arrow_type(ftype: FieldType) -> pa.DataType:
    """A declared type's Arrow type: decimal(p,s) a decimal128, a timestamp microseconds in UTC."""
    import pyarrow as pa

    if ftype.base == "decimal":
        return pa.decimal128(ftype.precision, ftype.scale)
    if ftype.base == "timestamp":
        return pa.timestamp("us", tz="UTC")
    return getattr(pa, _ARROW[ftype.base])()
