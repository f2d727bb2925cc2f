"""The JSON Schema of a pipeline's declared fields: what `onceflow produce` registers for a
`json_schema` pipeline whose subject holds no schema yet (docs/registry.md#json-schema-topics).

Types only, and an open object: a record with members the declaration does not name stays valid,
as the job keeps reading it; the rules stay the declaration's (Java regexes, decimal bounds), never
guessed into JSON Schema keywords. An optional field may be absent or null.
"""

from __future__ import annotations

from typing import Any

from onceflow.schema.model import Schema

DRAFT = "http://json-schema.org/draft-07/schema#"
_TYPES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "int": {"type": "integer"},
    "long": {"type": "integer"},
    "double": {"type": "number"},
    # a number, or decimal text ("12.50": money is often sent as text; docs/validation.md)
    "decimal": {"type": ["number", "string"], "pattern": r"^-?[0-9]+(\.[0-9]+)?$"},
    "boolean": {"type": "boolean"},
    "timestamp": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
}


def _object() -> dict[str, Any]:
    return {"type": "object", "properties": {}, "required": []}


def declared_json_schema(schema: Schema, title: str) -> dict[str, Any]:
    """Each declared field at its JSON path (`$.meta.ts`: a `ts` in a `meta` object), typed."""
    root = {"$schema": DRAFT, "title": title, **_object()}
    for f in schema.fields:
        *parents, leaf = f.keys
        node = root
        for key in parents:
            if key not in node["properties"]:
                node["properties"][key] = _object()
                if f.required:
                    node["required"].append(key)
            node = node["properties"][key]
        kind = dict(_TYPES[f.ftype.base])
        if not f.required:
            types = kind["type"] if isinstance(kind["type"], list) else [kind["type"]]
            kind["type"] = [*types, "null"]
        node["properties"][leaf] = kind
        if f.required:
            node["required"].append(leaf)
    return root
