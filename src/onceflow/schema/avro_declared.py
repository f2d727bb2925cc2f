"""The Avro schema of a pipeline's declared fields: what `onceflow produce` registers for an `avro`
pipeline (docs/registry.md#trying-it), as a team's producer would write such records.

Each declared field at its JSON path (`$.meta.ts`: a `ts` in a nested record `meta`), typed as its
JSON view reads back as the declared type (docs/registry.md#the-json-view): a decimal as Avro's bytes
decimal at the declared precision and scale, a timestamp as timestamp-micros, a date as date. An
optional field is a union with null, its default null, so adding one is a compatible change
(BACKWARD). The rules stay the declaration's, never guessed into the schema.
"""

from __future__ import annotations

import re
from typing import Any

from onceflow.schema.model import FieldSpec, Schema

NAMESPACE = "dev.onceflow.generated"
_TYPES: dict[str, Any] = {
    "string": "string",
    "int": "int",
    "long": "long",
    "double": "double",
    "boolean": "boolean",
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "date": {"type": "int", "logicalType": "date"},
}


def _avro_type(f: FieldSpec) -> Any:
    t = f.ftype
    if t.base == "decimal":
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    return _TYPES[t.base]


def _record(name: str) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": []}


def declared_avro_schema(schema: Schema, name: str, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """The record of the declared fields but those named in `leave_out` (an older version of the
    schema, before they were added). A declared path's keys are Avro names already
    ([A-Za-z_][A-Za-z0-9_]*, schema.model)."""
    root = {**_record(_name(name)), "namespace": NAMESPACE}
    for f in schema.fields:
        if f.name in leave_out:
            continue
        *parents, leaf = f.keys
        node = root
        for depth, key in enumerate(parents):
            found = next((x for x in node["fields"] if x["name"] == key), None)
            if found is None:
                inner = _record("_".join(f.keys[: depth + 1]))
                found = {"name": key, "type": inner if f.required else ["null", inner]}
                if not f.required:
                    found["default"] = None
                node["fields"].append(found)
            elif f.required and isinstance(found["type"], list):  # a required field makes its parent required
                found["type"] = found["type"][1]
                found.pop("default", None)
            node = found["type"] if isinstance(found["type"], dict) else found["type"][1]
        kind = _avro_type(f)
        node["fields"].append(
            {"name": leaf, "type": kind} if f.required else {"name": leaf, "type": ["null", kind], "default": None}
        )
    return root


def _name(text: str) -> str:
    """A record name from a pipeline's name (payments_avro -> Payments_avro)."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text) or "Event"
    return cleaned[0].upper() + cleaned[1:] if not cleaned[0].isdigit() else "_" + cleaned
