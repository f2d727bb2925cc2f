"""The Avro schema of a pipeline's declared fields: what `onceflow produce` registers for an `avro`
pipeline (docs/registry.md#trying-it), as a team's producer would write such records; and the other
way, the declared fields an Avro schema's records are read as (`schema.fields: registry`).

Each declared field at its JSON path (`$.meta.ts`: a `ts` in a nested record `meta`), typed as its
JSON view reads back as the declared type (docs/registry.md#the-json-view): a decimal as Avro's bytes
decimal at the declared precision and scale, a timestamp as timestamp-micros, a date as date. An
optional field is a union with null, its default null, so adding one is a compatible change
(BACKWARD). The rules stay the declaration's, never guessed into the schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

from onceflow.schema.avro import MAX_DECIMAL_DIGITS, UNREAD_LOGICAL
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


_PRIMITIVE = {
    "string": "string",
    "int": "int",
    "long": "long",
    "float": "double",
    "double": "double",
    "boolean": "boolean",
}
_LOGICAL = {
    ("int", "date"): "date",
    ("long", "timestamp-millis"): "timestamp",
    ("long", "timestamp-micros"): "timestamp",
}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def fields_of_avro(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The declared fields (FieldSpec's keys) a record schema's records are read as, through their
    JSON view: each leaf at its path (a record inside a record gives `$.meta.ts`), named by its leaf
    name, or by its path's names joined by `_` where two leaves share one. A union with null is
    optional, and so is each field inside an optional record. An enum is a string with its symbols
    `allowed`; a uuid string has the `uuid` rule; each other type is what its view is read as
    (docs/registry.md#the-json-view): float a double, bytes and fixed their base64 text, a local
    timestamp its text with no offset. ValueError, naming the field, for what no declared type
    reads: arrays, maps, unions of two types or more, times of day, a decimal over 38 digits, a
    record inside itself."""
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        raise ValueError("the latest schema is not an Avro record")
    leaves: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    _leaves(schema, (), True, {}, frozenset(), leaves)
    return declared_fields(leaves)


def declared_fields(leaves: list[tuple[tuple[str, ...], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Leaves of a registry's schema (their keys, their type and rules) as declared fields: each
    named by its leaf name, or by its path's names joined by `_` where two leaves share one, with
    its `path` where that is not its name. Avro's (fields_of_avro) and Protobuf's
    (schema/protobuf_declared.py)."""
    counts: dict[str, int] = {}
    for keys, _ in leaves:
        counts[keys[-1].lower()] = counts.get(keys[-1].lower(), 0) + 1
    out = []
    for keys, spec in leaves:
        name = keys[-1] if counts[keys[-1].lower()] == 1 else "_".join(keys)
        if not _NAME.match(name):
            raise ValueError(
                f"$.{'.'.join(keys)}: {name!r} is no declared field name (a letter, then letters, digits or _); "
                "list the fields instead and name it"
            )
        path = {"path": "$." + ".".join(keys)} if len(keys) > 1 or name != keys[-1] else {}
        out.append({"name": name, **spec, **path})
    return out


def _leaves(
    record: dict[str, Any], at: tuple[str, ...], required: bool, defined: dict[str, Any], inside: frozenset, out: list
) -> None:
    """Each leaf of `record` into `out`; `defined`: the named types met so far (by full and short
    name, as a reference may use either), `inside`: the records `record` is nested in."""
    inside = inside | {_full_name(record)}
    _define(record, defined)
    for f in record.get("fields", ()):
        keys = (*at, str(f["name"]))
        kind, optional = _unwrapped(f["type"], keys)
        if isinstance(kind, str) and kind in defined:
            kind = defined[kind]
        if isinstance(kind, dict) and kind.get("type") in ("record", "error"):
            if _full_name(kind) in inside:
                raise ValueError(f"$.{'.'.join(keys)}: the record {kind.get('name')} is inside itself")
            _leaves(kind, keys, required and not optional, defined, inside, out)
            continue
        if isinstance(kind, dict) and kind.get("type") in ("enum", "fixed"):
            _define(kind, defined)
        out.append((keys, {**_declared_type(kind, keys), "required": required and not optional}))


def _define(named: dict[str, Any], defined: dict[str, Any]) -> None:
    defined[_full_name(named)] = named
    defined[str(named.get("name", "")).rsplit(".", 1)[-1]] = named


def _unwrapped(t: Any, keys: tuple[str, ...]) -> tuple[Any, bool]:
    """A field's type without its union with null, and whether it had one."""
    if not isinstance(t, list):
        return t, False
    branches = [b for b in t if b != "null"]
    if len(branches) != 1:
        raise ValueError(f"$.{'.'.join(keys)} is a union of {len(branches)} non-null types; no declared type reads it")
    return branches[0], len(branches) < len(t)


def _declared_type(t: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    where = "$." + ".".join(keys)
    base, logical = (t, None) if isinstance(t, str) else (t.get("type"), t.get("logicalType"))
    if logical in UNREAD_LOGICAL:
        raise ValueError(f"{where} is a {logical}, which the JSON view does not read")
    if logical == "decimal" and base in ("bytes", "fixed"):
        precision, scale = int(t.get("precision", 0)), int(t.get("scale", 0))
        if not 1 <= precision <= MAX_DECIMAL_DIGITS:
            raise ValueError(
                f"{where} is a decimal of {precision} digits; a declared decimal has 1 to {MAX_DECIMAL_DIGITS}"
            )
        return {"type": f"decimal({precision},{scale})"}
    declared = _LOGICAL.get((str(base), str(logical)))
    if declared:
        return {"type": declared}
    if logical in ("local-timestamp-millis", "local-timestamp-micros") or base in ("bytes", "fixed"):
        return {"type": "string"}  # the view's text: a time with no offset, base64 (docs/registry.md)
    if base == "enum":
        return {"type": "string", "allowed": list(t.get("symbols", ()))}
    if base == "string" and logical == "uuid":
        return {"type": "string", "uuid": True}
    if isinstance(base, str) and base in _PRIMITIVE:
        return {"type": _PRIMITIVE[base]}  # an unknown logical type reads as its type (Avro's rule)
    what = json.dumps(base)[:40]
    raise ValueError(f"{where} is {what}, which no declared type reads. Fix: list the fields, leaving it out")


def _full_name(t: dict[str, Any]) -> str:
    name = str(t.get("name", ""))
    return name if "." in name or not t.get("namespace") else f"{t['namespace']}.{name}"
