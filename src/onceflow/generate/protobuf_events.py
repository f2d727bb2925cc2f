"""Protobuf records in the Confluent wire format for a `protobuf` pipeline: what `onceflow produce`
writes (docs/registry.md#protobuf-topics), as a team's upgraded producer would.

The writer schemas are the declared fields' as proto3 (`declared_proto`), registered under the
pipeline's subject in two versions: the first without the last optional field, the second with it
(a field added under a new number, a compatible change). generate/avro_events.RegistryEvents writes
the stream from them, half with each version, with the same malformed kinds by Protobuf's reasons:
plain JSON, an unknown id, an id of another subject, a third version onceflow does not read (it
imports google/type/money.proto, not one of the well-known types),
and payloads that are no message (a byte 0 left over: a tag of field 0; or indexes naming no
message). Values are generate/records.py's, as Protobuf's types: a decimal as its plain text, a
timestamp as google.protobuf.Timestamp, a date as its ISO text.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from onceflow.errors import ProducerError
from onceflow.generate.avro_events import OTHER_SUBJECT_SUFFIX, UNKNOWN_ID, RegistryWriters
from onceflow.registry import Registry
from onceflow.schema import reasons as R
from onceflow.schema.model import Schema
from onceflow.schema.protobuf import PROTOBUF_TYPE, TIMESTAMP, encode_indexes, file_set

_SCALARS = {
    "string": "string",
    "int": "int32",
    "long": "int64",
    "double": "double",
    "boolean": "bool",
    "decimal": "string",  # its plain text: the declared decimal reads decimal text exactly
    "timestamp": TIMESTAMP,
    "date": "string",
}
NO_MESSAGE = encode_indexes((63,))  # indexes naming a 64th top-level message, which no schema here has


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part) or "Record"


def declared_proto(schema: Schema, name: str, leave_out: tuple[str, ...] = ()) -> str:
    """The declared fields as a proto3 message named after the pipeline: each field at its path (a
    `meta.ts` a `ts` in a nested `Meta`), numbered in declaration order over all the fields (so a
    version that leaves some out keeps the others' numbers), optional ones with presence."""
    tree: dict[str, Any] = {}
    for f in schema.fields:
        node = tree
        for key in f.keys[:-1]:
            node = node.setdefault(key, {})
        node[f.keys[-1]] = f
    left_out = set(leave_out)

    def message(title: str, node: dict[str, Any], indent: str) -> list[str]:
        lines = [f"{indent}message {title} {{"]
        for number, (key, item) in enumerate(node.items(), start=1):
            if isinstance(item, dict):
                lines += message(_camel(key) + "Fields", item, indent + "  ")
                lines.append(f"{indent}  {_camel(key)}Fields {key} = {number};")
            elif item.name not in left_out:
                kind = _SCALARS[item.ftype.base]
                label = "optional " if not item.required and kind != TIMESTAMP else ""
                lines.append(f"{indent}  {label}{kind} {key} = {number};")
        return [*lines, f"{indent}}}"]

    package = re.sub(r"[^A-Za-z0-9_]", "_", name).lower()
    head = ['syntax = "proto3";', f"package onceflow.{package};", 'import "google/protobuf/timestamp.proto";']
    return "\n".join([*head, *message(_camel(name), tree, "")]) + "\n"


@dataclass(frozen=True)
class ProtoWriter:
    """One registered Protobuf schema (`schema_id`), its records written with the message of `text`
    (a third version onceflow does not read is written with the evolved one's)."""

    schema_id: int
    text: str
    leaves_out: tuple[str, ...] = ()

    @functools.cached_property
    def _message(self) -> type[Message]:
        fset = descriptor_pb2.FileDescriptorSet.FromString(file_set(self.text))
        pool = descriptor_pool.DescriptorPool()
        for f in fset.file:
            pool.Add(f)
        top = fset.file[-1]
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{top.package}.{top.message_type[0].name}"))

    def encode(self, record: dict[str, Any]) -> bytes:
        m = self._message()
        _fill(m, record)
        return encode_indexes((0,)) + m.SerializeToString()

    def undecodable(self, payload: bytes, rng: random.Random) -> bytes:
        if rng.random() < 0.5:
            return payload + b"\x00"  # a tag of field number 0
        return NO_MESSAGE + payload[1:]  # indexes naming no message (payload[0] is the first message's 0)


def _fill(m: Message, record: dict[str, Any]) -> None:
    for key, v in record.items():
        if v is None:
            continue
        if isinstance(v, dict):
            _fill(getattr(m, key), v)
        elif isinstance(v, datetime):
            getattr(m, key).FromDatetime(v)
        elif isinstance(v, Decimal):
            setattr(m, key, format(v, "f"))
        elif isinstance(v, date):
            setattr(m, key, v.isoformat())
        else:
            setattr(m, key, v)


UNREAD_IMPORT = "google/type/money.proto"  # Google's common types: the registry resolves it, onceflow does not


def register_proto_writers(
    registry: Registry, subject: str, schema: Schema, name: str, malformed: bool
) -> RegistryWriters[ProtoWriter]:
    """Register the declared fields' two versions under `subject` (an id already there is reused),
    and, for malformed records, one of another subject and a third version onceflow does not read
    (it imports Google's common Money type, which the registry resolves and onceflow does not)."""
    optional = [f.name for f in schema.fields if not f.required and len(f.keys) == 1]
    added = tuple(optional[-1:])
    first_text, evolved_text = declared_proto(schema, name, leave_out=added), declared_proto(schema, name)
    first = ProtoWriter(registry.register(subject, first_text, PROTOBUF_TYPE), first_text, added)
    evolved = ProtoWriter(registry.register(subject, evolved_text, PROTOBUF_TYPE), evolved_text)
    reasons = R.PROTOBUF_REASONS
    if not malformed:
        return RegistryWriters(first, evolved, reasons=reasons)
    # another package: the registry gives the same text under two subjects one id, which is under both
    other_text = first_text.replace("package onceflow.", "package onceflow.other.", 1)
    other_id = registry.register(subject + OTHER_SUBJECT_SUFFIX, other_text, PROTOBUF_TYPE)
    imports = 'import "google/protobuf/timestamp.proto";'
    third_id = registry.register(
        subject, evolved_text.replace(imports, f'{imports}\nimport "{UNREAD_IMPORT}";'), PROTOBUF_TYPE
    )
    if registry.schema(UNKNOWN_ID) is not None:
        raise ProducerError(
            f"the registry knows schema id {UNKNOWN_ID}; a protobuf_unknown_schema record needs one it does not"
        )
    other = ProtoWriter(other_id, other_text, added)
    return RegistryWriters(first, evolved, other, ProtoWriter(third_id, evolved_text), reasons=reasons)
