"""The declared fields a JSON Schema subject's records are read as (`schema.fields: registry` with
`format: json_schema`): each leaf of the latest schema's object at its path, typed as the payload's
JSON is read (docs/registry.md#fields-from-the-registry).

A property the object's `required` lists, whose type does not allow null, is required; any other
is optional, and so is every leaf inside an optional object. `integer` is a `long`, `number` a
`double`; a string of format `date-time` a `timestamp`, of format `date` a `date`, of format
`uuid` a string with the `uuid` rule; an `enum` of strings a string with its values `allowed`.
Local references (`#/definitions/...`, `#/$defs/...`) are followed, and a `oneOf`/`anyOf` of null and
one type is that type, optional. Refused, naming the field, for what no declared type reads:
arrays, a property of no type or of two, a reference elsewhere or to itself. No other keyword is
guessed into a rule (a JSON Schema regex is not Java's; `maxLength` counts otherwise).
"""

from __future__ import annotations

from typing import Any

from onceflow.schema.avro_declared import declared_fields

_FORMATS = {"date-time": "timestamp", "date": "date"}
_TYPES = {"integer": "long", "number": "double", "boolean": "boolean", "string": "string"}


def fields_of_json_schema(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The declared fields (FieldSpec's keys) of a JSON Schema whose root is an object. ValueError,
    naming the field, for what no declared type reads."""
    root, _ = _resolved(schema, schema, "$", frozenset())
    if root.get("type") != "object" and "properties" not in root:
        raise ValueError("the latest schema is not a JSON Schema of an object")
    leaves: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    _leaves(schema, root, (), True, frozenset(), leaves)
    return declared_fields(leaves)


def _resolved(
    doc: dict[str, Any], node: Any, where: str, seen: frozenset[str]
) -> tuple[dict[str, Any], frozenset[str]]:
    """`node` with its local reference followed (and the references followed so far)."""
    if not isinstance(node, dict):
        raise ValueError(f"{where} is no schema")
    ref = node.get("$ref")
    if ref is None:
        return node, seen
    if not isinstance(ref, str) or not ref.startswith("#/"):
        raise ValueError(f"{where} refers to {ref!r}, outside the schema; list the fields instead")
    if ref in seen:
        raise ValueError(f"{where} refers to {ref} inside itself")
    target: Any = doc
    for part in ref[2:].split("/"):
        target = target.get(part) if isinstance(target, dict) else None
    if target is None:
        raise ValueError(f"{where} refers to {ref}, which the schema does not define")
    return _resolved(doc, target, where, seen | {ref})


def _typed(
    doc: dict[str, Any], node: dict[str, Any], where: str, seen: frozenset[str]
) -> tuple[dict[str, Any], bool, frozenset[str]]:
    """The node's one non-null type (a oneOf/anyOf of null and one branch unwrapped) and whether
    null is allowed."""
    node, seen = _resolved(doc, node, where, seen)
    for key in ("oneOf", "anyOf"):
        if key in node:
            branches = [_resolved(doc, b, where, seen) for b in node[key]]
            real = [(b, s) for b, s in branches if b.get("type") != "null"]
            if len(real) != 1:
                raise ValueError(f"{where} is a {key} of {len(real)} non-null schemas; no declared type reads it")
            inner, nullable, seen = _typed(doc, real[0][0], where, real[0][1])
            return inner, nullable or len(real) < len(branches), seen
    kind = node.get("type")
    if isinstance(kind, list):
        real_types = [t for t in kind if t != "null"]
        if len(real_types) != 1:
            raise ValueError(f"{where} is of types {kind}; no declared type reads it")
        return {**node, "type": real_types[0]}, len(real_types) < len(kind), seen
    if kind is None and "properties" in node:
        return {**node, "type": "object"}, False, seen
    return node, False, seen


def _leaves(
    doc: dict[str, Any],
    obj: dict[str, Any],
    at: tuple[str, ...],
    required: bool,
    seen: frozenset[str],
    out: list[tuple[tuple[str, ...], dict[str, Any]]],
) -> None:
    listed = set(obj.get("required", ()))
    for name, prop in (obj.get("properties") or {}).items():
        keys = (*at, str(name))
        where = "$." + ".".join(keys)
        node, nullable, inner_seen = _typed(doc, prop, where, seen)
        here = required and name in listed and not nullable
        kind = node.get("type")
        if kind == "object":
            _leaves(doc, node, keys, here, inner_seen, out)
        elif kind in _TYPES:
            out.append((keys, {**_declared(node, kind), "required": here}))
        else:
            what = kind if kind is not None else "of no type"
            raise ValueError(f"{where} is {what}, which no declared type reads. Fix: list the fields, leaving it out")


def _declared(node: dict[str, Any], kind: str) -> dict[str, Any]:
    enum = node.get("enum")
    if kind == "string" and isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return {"type": "string", "allowed": list(enum)}
    fmt = node.get("format")
    if kind == "string" and fmt in _FORMATS:
        return {"type": _FORMATS[fmt]}
    if kind == "string" and fmt == "uuid":
        return {"type": "string", "uuid": True}
    return {"type": _TYPES[kind]}
