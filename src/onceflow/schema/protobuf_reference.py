"""The audit's own reading of Protobuf records, in plain Python: a wire-format decoder over the
schema's FileDescriptorProtos, not the protobuf runtime the job parses with (spark/protobuf.py), so
a bug in either shows as a disagreement (tests/unit/schema/test_protobuf_reference.py draws records
and damaged bytes for both).

It reads as the Protobuf encoding spec says a parser must: fields in any order, the last of a
repeated singular scalar wins, a singular message's occurrences merge, the last member of a oneof
wins, a field whose wire type is not its type's is kept as unknown (repeated numbers packed or not),
unknown fields are skipped (groups to their end), and a string must be UTF-8 (proto3). The view is
docs/registry.md#the-json-view-of-a-protobuf-record; the declared fields then judge it as JSON.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import descriptor_pb2

from onceflow.errors import UndecodableMessage, UnreadableSchemaError
from onceflow.registry import Registry
from onceflow.schema.framed import FramedJudge
from onceflow.schema.model import Schema
from onceflow.schema.protobuf import (
    MAX_NANOS,
    PROTOBUF_TYPE,
    TIMESTAMP,
    TIMESTAMP_SECONDS,
    WRAPPERS,
    FileTypes,
    file_set,
    message_indexes,
)
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import Verdict

F = descriptor_pb2.FieldDescriptorProto
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
_MASK64 = (1 << 64) - 1
_WIRE_OF = {
    **dict.fromkeys((F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_SINT32), VARINT),
    **dict.fromkeys((F.TYPE_SINT64, F.TYPE_BOOL, F.TYPE_ENUM), VARINT),
    **dict.fromkeys((F.TYPE_FIXED64, F.TYPE_SFIXED64, F.TYPE_DOUBLE), I64),
    **dict.fromkeys((F.TYPE_FIXED32, F.TYPE_SFIXED32, F.TYPE_FLOAT), I32),
    **dict.fromkeys((F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE), LEN),
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
UNKNOWN = 0  # no field has number 0: the key of a decoded message's "held an unknown field"
MAX_DEPTH = 100  # the runtime's recursion limit: deeper messages (or groups) do not parse


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for n in range(10):
        if at + n >= len(data):
            raise UndecodableMessage("cut short in a varint")
        b = data[at + n]
        value |= (b & 0x7F) << (7 * n)
        if b < 0x80:
            return value & _MASK64, at + n + 1
    raise UndecodableMessage("a varint of more than 10 bytes")


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _unzigzag(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return (v >> 1) ^ -(v & 1)


def _one(t: int, wire: int, data: bytes, at: int) -> tuple[Any, int]:
    """One scalar of type `t` in its own wire type at `at`, and the offset after it."""
    if wire == VARINT:
        v, at = _varint(data, at)
        if t in (F.TYPE_INT32, F.TYPE_ENUM):
            return _signed(v, 32), at
        if t == F.TYPE_INT64:
            return _signed(v, 64), at
        if t == F.TYPE_UINT32:
            return v & 0xFFFFFFFF, at
        if t == F.TYPE_SINT32:
            return _unzigzag(v, 32), at
        if t == F.TYPE_SINT64:
            return _unzigzag(v, 64), at
        if t == F.TYPE_BOOL:
            return v != 0, at
        return v, at  # uint64
    size = 8 if wire == I64 else 4
    if at + size > len(data):
        raise UndecodableMessage("cut short in a fixed-size number")
    chunk = data[at : at + size]
    fmt = {F.TYPE_DOUBLE: "<d", F.TYPE_FLOAT: "<f", F.TYPE_FIXED64: "<Q", F.TYPE_SFIXED64: "<q"}.get(t)
    fmt = fmt or {F.TYPE_FIXED32: "<I", F.TYPE_SFIXED32: "<i"}[t]
    return struct.unpack(fmt, chunk)[0], at + size


class _Decoder:
    def __init__(self, types: FileTypes):
        self.types = types

    def _skip(self, wire: int, number: int, data: bytes, at: int, depth: int) -> int:
        if wire == VARINT:
            return _varint(data, at)[1]
        if wire in (I64, I32):
            end = at + (8 if wire == I64 else 4)
        elif wire == LEN:
            size, at = _varint(data, at)
            end = at + size
        elif wire == SGROUP:
            if depth >= MAX_DEPTH:
                raise UndecodableMessage("groups nested too deep")
            while True:
                tag, at = self._tag(data, at)
                if tag[1] == EGROUP:
                    if tag[0] != number:
                        raise UndecodableMessage("a group ends with another field's number")
                    return at
                at = self._skip(tag[1], tag[0], data, at, depth + 1)
        else:
            raise UndecodableMessage(f"wire type {wire}")
        if end > len(data):
            raise UndecodableMessage("cut short")
        return end

    @staticmethod
    def _tag(data: bytes, at: int) -> tuple[tuple[int, int], int]:
        tag, at = _varint(data, at)
        if tag > 0xFFFFFFFF:
            raise UndecodableMessage("a tag of more than 32 bits")
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise UndecodableMessage("field number 0")
        if wire in (6, 7):
            raise UndecodableMessage(f"wire type {wire}")
        return (number, wire), at

    def message(self, name: str, data: bytes, depth: int = 0) -> dict[int, Any]:
        """The fields the bytes set: {number: value}; singular messages as their merged bytes; and
        UNKNOWN when it holds a field the type does not have (or not in its wire type)."""
        if depth >= MAX_DEPTH:
            raise UndecodableMessage("messages nested too deep")
        m = self.types.messages[name]
        fields = {f.number: f for f in m.field}
        found: dict[int, Any] = {}
        v: Any
        at = 0
        while at < len(data):
            (number, wire), at = self._tag(data, at)
            if wire == EGROUP:
                raise UndecodableMessage("a group's end outside a group")
            f = fields.get(number)
            repeated = f is not None and f.label == F.LABEL_REPEATED
            packable = repeated and _WIRE_OF[f.type] in (VARINT, I64, I32)  # type: ignore[union-attr]
            if f is None or not (wire == _WIRE_OF[f.type] or (packable and wire == LEN)):
                at = self._skip(wire, number, data, at, depth)
                found[UNKNOWN] = True
                continue
            if wire == LEN and packable:
                size, at = _varint(data, at)
                end = at + size
                if end > len(data):
                    raise UndecodableMessage("cut short in a packed field")
                while at < end:
                    v, at = _one(f.type, _WIRE_OF[f.type], data[:end], at)
                    found.setdefault(number, []).append(v)
                continue
            if wire == LEN:
                size, at = _varint(data, at)
                if at + size > len(data):
                    raise UndecodableMessage("cut short in a length-delimited field")
                chunk, at = data[at : at + size], at + size
                if f.type == F.TYPE_MESSAGE:
                    # an early check of its bytes, so a bad nested message fails the record at once
                    self.message(f.type_name, chunk, depth + 1)
                if f.type == F.TYPE_STRING:
                    try:
                        v = chunk.decode("utf-8")
                    except UnicodeDecodeError:
                        raise UndecodableMessage("a string that is not UTF-8") from None
                else:
                    v = chunk
                if repeated:
                    found.setdefault(number, []).append(v)
                elif f.type == F.TYPE_MESSAGE:
                    found[number] = found.get(number, b"") + v  # occurrences merge
                else:
                    found[number] = v
            else:
                v, at = _one(f.type, wire, data, at)
                if repeated:
                    found.setdefault(number, []).append(v)
                else:
                    found[number] = v
            if f.HasField("oneof_index"):
                for other in m.field:
                    if other.HasField("oneof_index") and other.oneof_index == f.oneof_index and other.number != number:
                        found.pop(other.number, None)
        return found


def _timestamp(fields: dict[int, Any]) -> Any:
    seconds, nanos = fields.get(1, 0), fields.get(2, 0)
    if not (TIMESTAMP_SECONDS[0] <= seconds <= TIMESTAMP_SECONDS[1] and 0 <= nanos <= MAX_NANOS):
        return {"seconds": seconds, "nanos": nanos}
    t = _EPOCH + timedelta(seconds=seconds)
    fraction = f".{nanos:09d}"
    if nanos % 1000 == 0:
        fraction = fraction[:7]
    return t.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + fraction + "Z"


class _View:
    """A decoded message written as its view."""

    def __init__(self, decoder: _Decoder):
        self.decoder = decoder
        self.types = decoder.types

    def _default(self, f: descriptor_pb2.FieldDescriptorProto) -> Any:
        if f.type in (F.TYPE_STRING,):
            return ""
        if f.type == F.TYPE_BYTES:
            return b""
        if f.type == F.TYPE_BOOL:
            return False
        if f.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
            return 0.0
        if f.type == F.TYPE_MESSAGE:
            return b""
        return 0

    def value(self, f: descriptor_pb2.FieldDescriptorProto, v: Any, depth: int) -> Any:
        if f.type == F.TYPE_MESSAGE:
            if f.type_name == f".{TIMESTAMP}":
                return _timestamp(self.decoder.message(f.type_name, v, depth + 1))
            if f.type_name[1:] in WRAPPERS:
                inner = self.types.messages[f.type_name].field[0]
                got = self.decoder.message(f.type_name, v, depth + 1)
                return self.value(inner, got.get(inner.number, self._default(inner)), depth + 1)
            return self.message(f.type_name, v, depth + 1)
        if f.type == F.TYPE_ENUM:
            names = [e.name for e in self.types.enums[f.type_name].value if e.number == v]
            return names[0] if names else v
        if f.type == F.TYPE_BYTES:
            return base64.b64encode(v).decode("ascii")
        if f.type == F.TYPE_FLOAT:
            v = struct.unpack("<f", struct.pack("<f", v))[0]
        if f.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT) and not math.isfinite(v):
            return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        return v

    def message(self, name: str, data: bytes, depth: int = 0) -> dict[str, Any]:
        m = self.types.messages[name]
        found = self.decoder.message(name, data, depth)
        out: dict[str, Any] = {}
        for f in m.field:
            v = found.get(f.number)
            entry = self.types.messages.get(f.type_name) if f.type == F.TYPE_MESSAGE else None
            if f.label == F.LABEL_REPEATED and entry is not None and entry.options.map_entry:
                k_f, v_f = entry.field[0], entry.field[1]
                pairs: dict[str, Any] = {}
                for chunk in v or []:
                    kv = self.decoder.message(f.type_name, chunk, depth + 1)
                    if kv.get(UNKNOWN):
                        continue  # an entry holding an unknown field is kept as unknown (as upb does)
                    key = kv.get(k_f.number, self._default(k_f))
                    text = ("true" if key else "false") if k_f.type == F.TYPE_BOOL else str(key)
                    pairs.pop(text, None)
                    pairs[text] = self.value(v_f, kv.get(v_f.number, self._default(v_f)), depth + 1)
                out[f.name] = pairs
            elif f.label == F.LABEL_REPEATED:
                out[f.name] = [self.value(f, x, depth) for x in v or []]
            elif v is None and (f.type == F.TYPE_MESSAGE or f.proto3_optional or f.HasField("oneof_index")):
                out[f.name] = None
            else:
                out[f.name] = self.value(f, self._default(f) if v is None else v, depth)
        return out


@functools.lru_cache(maxsize=64)
def _types(files: bytes) -> FileTypes:
    """The set's types, read once per set (a judge sees a handful of schemas, and every record)."""
    return FileTypes(files)


def reference_view(files: bytes, data: bytes) -> str | None:
    """The JSON view of a payload (after the header) of the schema whose FileDescriptorSet is
    `files`, by this module's own decoder; None when it is not a message of it."""
    types = _types(files)
    found = message_indexes(data)
    if found is None:
        return None
    name = types.named(found[0])
    if name is None:
        return None
    try:
        view = _View(_Decoder(types)).message(name, data[found[1] :])
    except UndecodableMessage:
        return None
    return json.dumps(view, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class ProtobufJudge(FramedJudge):
    """A Protobuf serializer's records: the header's checks, the payload decoded by this module,
    its view judged as a JSON event."""

    NOT_FRAMED = Reason.PROTOBUF_NOT_FRAMED
    UNKNOWN_SCHEMA = Reason.PROTOBUF_UNKNOWN_SCHEMA
    OTHER_SUBJECT = Reason.PROTOBUF_OTHER_SUBJECT

    def __init__(self, schema: Schema, registry: Registry, subject: str):
        super().__init__(schema, registry, subject)
        self._files: dict[int, bytes | None] = {}

    def _schema(self, schema_id: int) -> bytes | None:
        if schema_id not in self._files:
            files = None
            if self.registry.schema_type(schema_id) == PROTOBUF_TYPE:
                try:
                    files = file_set(str(self.registry.schema(schema_id)))
                except UnreadableSchemaError:
                    files = None
            self._files[schema_id] = files
        return self._files[schema_id]

    def judge(self, value: bytes | None) -> Verdict:
        found = self.header(value)
        if isinstance(found, Verdict):
            return found
        schema_id, data = found
        files = self._schema(schema_id)
        if files is None:
            return self._empty(Reason.PROTOBUF_UNSUPPORTED_SCHEMA)
        view = reference_view(files, data)
        if view is None:
            return self._empty(Reason.PROTOBUF_UNDECODABLE)
        return self.json.judge(view.encode("utf-8"))
