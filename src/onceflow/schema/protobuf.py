"""Protobuf schemas as a registry keeps them, and the record framing both readers share
(docs/registry.md#protobuf-topics).

A registry holds a Protobuf schema as `.proto` text (what Confluent's Java serializer and a team's
own registration send) or as a base64 `FileDescriptorProto` (what confluent-kafka's Python
serializer sends). Either becomes a `FileDescriptorSet`, the file last and its imports (Google's
well-known types only) before it: text is compiled by protoc (grpcio-tools, in a child process so
its messages can be read), bytes are parsed. The job (spark/protobuf.py) and the audit's judge
(schema/protobuf_reference.py) both start from that set and then read records on their own.

After the Confluent header a record names its message by its indexes in the file (a zigzag varint
count, then each index; a lone 0 for the first message), then the message's bytes.
"""

from __future__ import annotations

import base64
import binascii
import functools
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from onceflow.errors import UnreadableSchemaError

PROTOBUF_TYPE = "PROTOBUF"  # a Protobuf schema's registry `schemaType`
PROTO3 = "proto3"
# the well-known types' files a schema may import (they ship with protoc and the runtime)
WELL_KNOWN = "google/protobuf/"
SCHEMA_FILE = "onceflow_registry_schema.proto"  # the name a `.proto` text is compiled under
# the view of google.protobuf.Timestamp (docs/registry.md#the-json-view-of-a-protobuf-record)
TIMESTAMP = "google.protobuf.Timestamp"
WRAPPERS = frozenset(
    f"google.protobuf.{n}Value"
    for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
MAX_INDEXES = 32  # a deeper path of nested messages is refused (real schemas nest a few levels)
# the Timestamps the view writes as RFC 3339 text (0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z, nanos
# 0..999,999,999); any other is written as its {"seconds", "nanos"} object (docs/registry.md)
TIMESTAMP_SECONDS = (-62_135_596_800, 253_402_300_799)
MAX_NANOS = 999_999_999


def _from_bytes(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto a base64 schema holds; None when `text` is not one (`.proto` text has
    spaces and semicolons, which base64 has not)."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(raw)
    except DecodeError:
        return None


def _well_known(names: list[str]) -> list[descriptor_pb2.FileDescriptorProto]:
    """protoc's own copies of well-known types' files, with what they import, each once."""
    out: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name in names:
        text = (resources.files("grpc_tools") / "_proto" / name).read_text()
        for f in _compiled(text, name).file:
            out.setdefault(f.name, f)
    return list(out.values())


def _compiled(text: str, name: str = SCHEMA_FILE) -> descriptor_pb2.FileDescriptorSet:
    with tempfile.TemporaryDirectory(prefix="onceflow-proto-") as tmp:
        (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
        (Path(tmp) / name).write_text(text)
        out = Path(tmp) / "set.pb"
        include = resources.files("grpc_tools") / "_proto"
        protoc = [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{include}", "--include_imports"]
        done = subprocess.run(
            [*protoc, f"--descriptor_set_out={out}", name],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise UnreadableSchemaError(f"protoc refuses it: {done.stderr.strip()[:500] or done.returncode}")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


@functools.lru_cache(maxsize=256)
def file_set(text: str) -> bytes:
    """The serialized FileDescriptorSet of a registered schema (its imports first, the file last).
    Raises UnreadableSchemaError with the cause for a schema onceflow does not read: one that does not compile,
    imports a file other than Google's well-known types, is not proto3, or holds no message."""
    found = _from_bytes(text)
    if found is None:
        compiled = _compiled(text)
        files = list(compiled.file)
    else:
        files = [*_well_known([d for d in found.dependency if d.startswith(WELL_KNOWN)]), found]
    schema = files[-1]
    foreign = [d for d in schema.dependency if not d.startswith(WELL_KNOWN)]
    if foreign:
        raise UnreadableSchemaError(
            f"it imports {', '.join(foreign)}; onceflow reads only Google's well-known types as imports"
        )
    if schema.syntax != PROTO3:
        raise UnreadableSchemaError(f"its syntax is {schema.syntax or 'proto2'}; onceflow reads proto3 schemas")
    if not schema.message_type:
        raise UnreadableSchemaError("it declares no message")
    return descriptor_pb2.FileDescriptorSet(file=files).SerializeToString()


def unreadable(text: str) -> str | None:
    """Why onceflow does not read a registered Protobuf schema, None when it does."""
    try:
        file_set(text)
    except UnreadableSchemaError as exc:
        return str(exc)
    return None


def _varint(data: bytes, at: int) -> tuple[int, int] | None:
    """An unsigned varint at `at` (at most 10 bytes) and the offset after it; None if cut short."""
    value, shift = 0, 0
    for i in range(at, min(at + 10, len(data))):
        value |= (data[i] & 0x7F) << shift
        if data[i] < 0x80:
            return value, i + 1
        shift += 7
    return None


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def message_indexes(payload: bytes) -> tuple[tuple[int, ...], int] | None:
    """The indexes a payload names its message by, and where the message's bytes start; None when
    they cannot be read (cut short, negative, or more than MAX_INDEXES)."""
    first = _varint(payload, 0)
    if first is None:
        return None
    count, at = _zigzag(first[0]), first[1]
    if count == 0:
        return (0,), at
    if not 0 < count <= MAX_INDEXES:
        return None
    out: list[int] = []
    for _ in range(count):
        read = _varint(payload, at)
        if read is None or _zigzag(read[0]) < 0:
            return None
        out.append(_zigzag(read[0]))
        at = read[1]
    return tuple(out), at


def encode_indexes(indexes: tuple[int, ...]) -> bytes:
    """The indexes as a payload starts with them (the first message: a lone 0)."""

    def varint(n: int) -> bytes:
        z = (n << 1) ^ (n >> 63)
        out = bytearray()
        while True:
            out.append((z & 0x7F) | (0x80 if z > 0x7F else 0))
            z >>= 7
            if not z:
                return bytes(out)

    if indexes == (0,):
        return b"\x00"
    return varint(len(indexes)) + b"".join(varint(i) for i in indexes)


class FileTypes:
    """A FileDescriptorSet's messages and enums by full name (`.pkg.Outer.Inner`), and the message a
    record's indexes name in its last file: the audit's decoder (schema/protobuf_reference.py) and
    `fields: registry` (schema/protobuf_declared.py) read the schema through it; the job reads it
    with the protobuf runtime."""

    def __init__(self, files: bytes):
        fset = descriptor_pb2.FileDescriptorSet.FromString(files)
        self.messages: dict[str, descriptor_pb2.DescriptorProto] = {}
        self.enums: dict[str, descriptor_pb2.EnumDescriptorProto] = {}
        for f in fset.file:
            prefix = f".{f.package}" if f.package else ""
            for e in f.enum_type:
                self.enums[f"{prefix}.{e.name}"] = e
            for m in f.message_type:
                self._add(prefix, m)
        self.file = fset.file[-1]
        self.package = f".{self.file.package}" if self.file.package else ""

    def _add(self, prefix: str, m: descriptor_pb2.DescriptorProto) -> None:
        name = f"{prefix}.{m.name}"
        self.messages[name] = m
        for e in m.enum_type:
            self.enums[f"{name}.{e.name}"] = e
        for n in m.nested_type:
            self._add(name, n)

    def named(self, indexes: tuple[int, ...]) -> str | None:
        """The full name of the message the record's indexes point at; None for no such message."""
        within, name = list(self.file.message_type), self.package
        found = None
        for i in indexes:
            if i >= len(within):
                return None
            found = within[i]
            name = f"{name}.{found.name}"
            within = list(found.nested_type)
        if found is None or found.options.map_entry:
            return None
        return name
