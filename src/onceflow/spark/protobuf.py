"""Protobuf records in the Confluent wire format, read by the job: each record's JSON view, which the
declared fields and rules then judge as any JSON event (spark/parse.py).

Per batch (spark/framed.py): the schema ids it holds, each asked of the registry once per process;
an id the registry does not know, knows under another subject, or whose schema is no Protobuf
schema onceflow reads (schema/protobuf.py) gets its own reason. Then a Python UDF decodes each
payload with the protobuf runtime (upb): the message its indexes name, parsed from the bytes after
them, written as its view (docs/registry.md#the-json-view-of-a-protobuf-record). A payload that does
not parse is `protobuf_undecodable`. spark-protobuf is not served here; the runtime is the
well-kept decoder at hand. A registry that does not answer fails the batch.

The audit does not reuse this module: schema/protobuf_reference.py reads the same bytes with a wire
decoder of its own.
"""

from __future__ import annotations

import base64
import json
import logging
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from onceflow.errors import UnreadableSchemaError
from onceflow.registry import Registry
from onceflow.schema.protobuf import (
    MAX_NANOS,
    PROTOBUF_TYPE,
    TIMESTAMP,
    TIMESTAMP_SECONDS,
    WRAPPERS,
    file_set,
    message_indexes,
)
from onceflow.schema.reasons import PROTOBUF_REASONS
from onceflow.spark.framed import payload, schema_id, sorted_ids, with_views_of

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Reader:
    """One registered schema's messages, built once per Python worker."""

    def __init__(self, files: bytes):
        fset = descriptor_pb2.FileDescriptorSet.FromString(files)
        pool = descriptor_pool.DescriptorPool()
        for f in fset.file:
            pool.Add(f)
        self.file = pool.FindFileByName(fset.file[-1].name)
        self.tops = [self.file.message_types_by_name[m.name] for m in fset.file[-1].message_type]
        self.classes: dict[tuple[int, ...], type[Message] | None] = {}

    def message(self, indexes: tuple[int, ...]) -> type[Message] | None:
        if indexes not in self.classes:
            found: Descriptor | None = None
            for depth, i in enumerate(indexes):
                within = self.tops if depth == 0 else found.nested_types  # type: ignore[union-attr]
                found = within[i] if i < len(within) else None
                if found is None or found.GetOptions().map_entry:
                    found = None
                    break
            self.classes[indexes] = None if found is None else message_factory.GetMessageClass(found)
        return self.classes[indexes]


_READERS: dict[bytes, _Reader] = {}


def _timestamp(m: Message) -> Any:
    seconds, nanos = m.seconds, m.nanos
    if not (TIMESTAMP_SECONDS[0] <= seconds <= TIMESTAMP_SECONDS[1] and 0 <= nanos <= MAX_NANOS):
        return {"seconds": seconds, "nanos": nanos}  # no instant: a timestamp field reads it as wrong_type
    t = _EPOCH + timedelta(seconds=seconds)
    fraction = f".{nanos // 1000:06d}" if nanos % 1000 == 0 else f".{nanos:09d}"
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}{fraction}Z"


def _scalar(fd: FieldDescriptor, v: Any) -> Any:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        name = fd.message_type.full_name
        if name == TIMESTAMP:
            return _timestamp(v)
        if name in WRAPPERS:
            return _scalar(fd.message_type.fields_by_name["value"], v.value)
        return _view(v)
    if fd.type == FieldDescriptor.TYPE_ENUM:
        known = fd.enum_type.values_by_number.get(v)
        return v if known is None else known.name
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(v).decode("ascii")
    if fd.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def _key(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _view(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd in m.DESCRIPTOR.fields:
        v = getattr(m, fd.name)
        if fd.is_repeated and fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_fd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {_key(k): _scalar(value_fd, v[k]) for k in v}
        elif fd.is_repeated:
            out[fd.name] = [_scalar(fd, x) for x in v]
        elif fd.has_presence and not m.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _scalar(fd, v)
    return out


def protobuf_view(files: bytes, data: bytes | None) -> str | None:
    """The JSON view of a payload (the bytes after the header) of the schema whose FileDescriptorSet
    is `files`; None when the payload is not a message of it."""
    if data is None:
        return None
    reader = _READERS.get(files)
    if reader is None:
        reader = _READERS[files] = _Reader(files)
    found = message_indexes(data)
    if found is None:
        return None
    cls = reader.message(found[0])
    if cls is None:
        return None
    try:
        m = cls.FromString(data[found[1] :])
    except (DecodeError, RuntimeWarning):
        return None
    return json.dumps(_view(m), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _views(readable: dict[int, bytes]) -> Any:
    @F.pandas_udf("string")  # type: ignore[call-overload]
    def views(ids: pd.Series, payloads: pd.Series) -> pd.Series:
        # ids with a NULL among them arrive as floats with NaN
        found = [None if pd.isna(i) else readable.get(int(i)) for i in ids]
        views = [None if f is None else protobuf_view(f, p) for f, p in zip(found, payloads, strict=True)]
        return pd.Series(views, dtype=object)

    return views


def with_protobuf_views(raw: DataFrame, registry: Registry, subject: str) -> DataFrame:
    """Kafka rows with `value` the JSON view (UTF-8) of each record, `_wire` its own bytes, and
    `_frame_reason` the reason it has no view (NULL when it has one, or has no value at all)."""
    sid = schema_id()

    def read(i: int) -> bytes | None:
        if registry.schema_type(i) != PROTOBUF_TYPE:
            return None
        try:
            return file_set(str(registry.schema(i)))
        except UnreadableSchemaError as exc:
            log.warning("schema id %s of %s is not read: %s", i, subject, exc)
            return None

    readable, refused = sorted_ids(raw, registry, subject, PROTOBUF_REASONS, read)
    view: Column = F.lit(None).cast("string")
    if readable:
        view = F.when(sid.isin(list(readable)), _views(readable)(sid, payload()))
    return with_views_of(raw, view, refused, PROTOBUF_REASONS)
