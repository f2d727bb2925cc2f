"""Which Avro writer schemas onceflow reads, decided on the schema alone (the job and the judge ask it
alike; neither decodes here).

A record is read as its JSON view (docs/registry.md#the-json-view): the decoded record as JSON
text, judged by the declared fields and rules like any JSON event. A writer schema whose records
have no such view, or whose view the job and the judge could not agree on, is refused for its
records (reason `avro_unsupported_schema`), never guessed at:
- it is not a record (a topic of bare strings has no fields to declare);
- a union of two or more non-null types (Spark reads it as a struct of `member<i>` fields);
- a time-of-day (time-millis, time-micros): no declared type holds one;
- a decimal beyond 38 digits (Spark's largest), or a named type that refers to itself.

A map is read: Avro's Java reader loses the order of its entries, so the job checks a payload with
a map for being exactly one record by its length and its bytes as a multiset rather than byte for
byte (spark/avro.py); the judge, whose reader keeps the order, still compares byte for byte.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

MAX_DECIMAL_DIGITS = 38
# the widest scale whose every decimal Java's BigDecimal.toString (to_json's) and Python's str write
# without an exponent: from scale 7 on, a value under 10^-6 or a zero is written 1E-7 or 0E-7, so the
# JSON view writes those decimals as plain text (spark/avro.py, schema/avro_reference.py)
PLAIN_SCALE = 6
# every decimal as its text, at any scale: a Debezium envelope's view (`encoding: string`, docs/cdc.md)
EVERY_DECIMAL = -1
UNREAD_LOGICAL = ("time-millis", "time-micros")
VIEWED_LOGICAL = (
    "decimal",
    "date",
    "timestamp-millis",
    "timestamp-micros",
    "local-timestamp-millis",
    "local-timestamp-micros",
)


def unsupported(schema_text: str) -> str | None:
    """Why records of this writer schema cannot be read, or None when they can."""
    try:
        schema = json.loads(schema_text)
    except ValueError:
        return "the registry's schema is not JSON"
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        kind = schema.get("type") if isinstance(schema, dict) else schema
        return f"the writer schema is {json.dumps(kind)[:40]}, not a record"
    return _walk(schema, set(), "$")


def _walk(t: Any, named: set[str], at: str) -> str | None:
    if isinstance(t, list):  # a union
        branches = [b for b in t if b != "null"]
        if len(branches) > 1:
            return f"{at} is a union of {len(branches)} non-null types"
        return _walk(branches[0], named, at) if branches else None
    if isinstance(t, str):
        return f"{at} refers to the record {t} inside itself" if t in named else None
    if not isinstance(t, dict):
        return None
    logical, kind = t.get("logicalType"), t.get("type")
    if logical in UNREAD_LOGICAL:
        return f"{at} is a {logical}"
    if logical == "decimal" and int(t.get("precision", 0)) > MAX_DECIMAL_DIGITS:
        return f"{at} is a decimal of {t.get('precision')} digits, more than {MAX_DECIMAL_DIGITS}"
    if kind in ("record", "error"):
        name = t.get("name", "")
        for f in t.get("fields", ()):
            found = _walk(f.get("type"), named | {name}, f"{at}.{f.get('name')}")
            if found:
                return found
    elif kind == "array":
        return _walk(t.get("items"), named, f"{at}[]")
    elif kind == "map":
        return _walk(t.get("values"), named, f"{at}{{}}")
    elif isinstance(kind, (dict, list)):
        return _walk(kind, named, at)
    return None


def minimal_decimal_bytes(data: Any, schema: dict) -> Any:
    """A bytes decimal as Java's Avro writes it: the unscaled value's shortest two's complement.
    fastavro (1.13) writes a negative power of two one byte longer (-128 as ff 80, not 80), which
    is the same number but not the same bytes; the judge's check that a payload is written again
    byte for byte, and the generator's records, need Java's form."""
    if not isinstance(data, Decimal):
        return data
    sign, digits, exp = data.as_tuple()
    if len(digits) > schema["precision"]:
        raise ValueError("The decimal precision is bigger than allowed by schema")
    if not isinstance(exp, int) or exp + schema.get("scale", 0) < 0:
        raise ValueError("Scale provided in schema does not match the decimal")
    unscaled = int("".join(map(str, digits)) or "0") * 10 ** (exp + schema.get("scale", 0))
    unscaled = -unscaled if sign else unscaled
    size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    return unscaled.to_bytes(size, "big", signed=True)


def install_minimal_decimals() -> None:
    """Make fastavro write bytes decimals as Java does (minimal_decimal_bytes), process-wide."""
    from fastavro.write import LOGICAL_WRITERS

    LOGICAL_WRITERS["bytes-decimal"] = minimal_decimal_bytes
