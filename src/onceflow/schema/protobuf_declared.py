"""The declared fields a Protobuf schema's records are read as (`schema.fields: registry` with
`format: protobuf`): the first message of the latest schema's file, each leaf at its path, typed as
its JSON view reads back (docs/registry.md#the-json-view-of-a-protobuf-record).

A scalar without presence (a plain proto3 field) is required: the view always holds it, its default
when unset. A field with presence (`optional`, a `oneof` member, a message, a wrapper) is optional,
and so is every field inside a message. An enum is a string with its names `allowed`; a
google.protobuf.Timestamp a timestamp; a wrapper its value's type. Refused, naming the field, for
what no declared type reads: repeated fields and maps, a message inside itself.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2

from onceflow.schema.avro_declared import declared_fields
from onceflow.schema.protobuf import TIMESTAMP, WRAPPERS, FileTypes

F = descriptor_pb2.FieldDescriptorProto
_TYPES = {
    F.TYPE_INT32: "int",
    F.TYPE_SINT32: "int",
    F.TYPE_SFIXED32: "int",
    F.TYPE_UINT32: "long",
    F.TYPE_FIXED32: "long",
    F.TYPE_INT64: "long",
    F.TYPE_SINT64: "long",
    F.TYPE_SFIXED64: "long",
    F.TYPE_UINT64: "decimal(20,0)",  # up to 2^64 - 1, past a long
    F.TYPE_FIXED64: "decimal(20,0)",
    F.TYPE_FLOAT: "double",
    F.TYPE_DOUBLE: "double",
    F.TYPE_BOOL: "boolean",
    F.TYPE_STRING: "string",
    F.TYPE_BYTES: "string",  # its base64 text
}


def fields_of_protobuf(files: bytes) -> list[dict[str, Any]]:
    """The declared fields (FieldSpec's keys) of the first message of the FileDescriptorSet's last
    file (schema/protobuf.file_set). ValueError, naming the field, for what no declared type reads."""
    types = FileTypes(files)
    first = types.named((0,))
    assert first is not None, "schema/protobuf.file_set refuses a file with no message"
    leaves: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    _leaves(first, (), True, types.messages, types.enums, frozenset(), leaves)
    return declared_fields(leaves)


def _leaves(
    name: str,
    at: tuple[str, ...],
    required: bool,
    messages: dict[str, descriptor_pb2.DescriptorProto],
    enums: dict[str, descriptor_pb2.EnumDescriptorProto],
    inside: frozenset[str],
    out: list[tuple[tuple[str, ...], dict[str, Any]]],
) -> None:
    for f in messages[name].field:
        keys = (*at, f.name)
        where = "$." + ".".join(keys)
        if f.label == F.LABEL_REPEATED:
            what = (
                "a map" if messages.get(f.type_name, descriptor_pb2.DescriptorProto()).options.map_entry else "repeated"
            )
            raise ValueError(f"{where} is {what}, which no declared type reads. Fix: list the fields, leaving it out")
        present = f.proto3_optional or f.HasField("oneof_index") or f.type == F.TYPE_MESSAGE
        here = required and not present
        if f.type == F.TYPE_MESSAGE and f.type_name == f".{TIMESTAMP}":
            out.append((keys, {"type": "timestamp", "required": False}))
        elif f.type == F.TYPE_MESSAGE and f.type_name[1:] in WRAPPERS:
            inner = messages[f.type_name].field[0]
            out.append((keys, {"type": _TYPES[inner.type], "required": False}))
        elif f.type == F.TYPE_MESSAGE:
            if f.type_name in inside | {name}:
                raise ValueError(f"{where}: the message {f.type_name[1:]} is inside itself")
            _leaves(f.type_name, keys, False, messages, enums, inside | {name}, out)
        elif f.type == F.TYPE_ENUM:
            names = [v.name for v in enums[f.type_name].value]
            out.append((keys, {"type": "string", "allowed": names, "required": here}))
        else:
            out.append((keys, {"type": _TYPES[f.type], "required": here}))
