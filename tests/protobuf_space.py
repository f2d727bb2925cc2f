"""One Protobuf schema with every kind of field the view writes, its message classes (the protobuf
runtime's), and Hypothesis strategies drawing its messages: shared by the tests of the job's decoder
and of the audit's."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import strategies as st

from onceflow.schema.protobuf import file_set

SCHEMA = """
syntax = "proto3";
package dev.onceflow;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Channel { CHANNEL_UNSPECIFIED = 0; WEB = 1; STORE = 2; }

message Payment {
  string event_id = 1;
  int64 amount_cents = 2;
  double rate = 3;
  float ratio = 4;
  bool refunded = 5;
  bytes raw = 6;
  int32 i32 = 7;
  uint32 u32 = 8;
  uint64 u64 = 9;
  sint32 s32 = 10;
  sint64 s64 = 11;
  fixed32 f32 = 12;
  fixed64 f64 = 13;
  sfixed32 sf32 = 14;
  sfixed64 sf64 = 15;
  Channel channel = 16;
  google.protobuf.Timestamp event_time = 17;
  optional string note = 18;
  Meta meta = 19;
  oneof method { string card = 20; int64 transfer = 21; Meta wallet = 22; }
  google.protobuf.Int64Value fee = 23;
  google.protobuf.StringValue memo = 24;
  repeated string tags = 25;
  repeated int64 counts = 26;
  map<string, int32> limits = 27;
  map<int64, Meta> metas = 28;
  message Meta { string source = 1; optional int32 retries = 2; Channel via = 3; }
}

message Refund { string event_id = 1; Payment.Meta meta = 2; }
"""

FILES = file_set(SCHEMA)


def _classes():
    fset = descriptor_pb2.FileDescriptorSet.FromString(FILES)
    pool = descriptor_pool.DescriptorPool()
    for f in fset.file:
        pool.Add(f)
    get = lambda n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n))  # noqa: E731
    return get("dev.onceflow.Payment"), get("dev.onceflow.Refund"), get("dev.onceflow.Payment.Meta")


Payment, Refund, Meta = _classes()


_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_text = st.text(max_size=8)


@st.composite
def _meta(draw):
    m = Meta(source=draw(_text), via=draw(st.integers(0, 4)))
    if draw(st.booleans()):
        m.retries = draw(_i32)
    return m


@st.composite
def payments(draw) -> bytes:
    m = Payment(
        event_id=draw(_text),
        amount_cents=draw(_i64),
        rate=draw(st.floats(allow_nan=True)),
        ratio=draw(st.floats(width=32)),
        refunded=draw(st.booleans()),
        raw=draw(st.binary(max_size=6)),
        i32=draw(_i32),
        u32=draw(st.integers(0, 2**32 - 1)),
        u64=draw(st.integers(0, 2**64 - 1)),
        s32=draw(_i32),
        s64=draw(_i64),
        f32=draw(st.integers(0, 2**32 - 1)),
        f64=draw(st.integers(0, 2**64 - 1)),
        sf32=draw(_i32),
        sf64=draw(_i64),
        channel=draw(st.integers(-2, 5)),
    )
    if draw(st.booleans()):
        m.event_time.seconds = draw(st.integers(-(2**40), 2**40))
        m.event_time.nanos = draw(st.sampled_from([0, 1000, 999_999_999, 5, -1, 10**9]))
    if draw(st.booleans()):
        m.note = draw(_text)
    if draw(st.booleans()):
        m.meta.CopyFrom(draw(_meta()))
    method = draw(st.sampled_from(["", "card", "transfer", "wallet"]))
    if method == "card":
        m.card = draw(_text)
    elif method == "transfer":
        m.transfer = draw(_i64)
    elif method == "wallet":
        m.wallet.CopyFrom(draw(_meta()))
    if draw(st.booleans()):
        m.fee.value = draw(_i64)
    if draw(st.booleans()):
        m.memo.value = draw(_text)
    m.tags.extend(draw(st.lists(_text, max_size=3)))
    m.counts.extend(draw(st.lists(_i64, max_size=3)))
    for k, v in draw(st.dictionaries(_text, _i32, max_size=3)).items():
        m.limits[k] = v
    for k, v in draw(st.dictionaries(_i64, _meta(), max_size=2)).items():
        m.metas[k].CopyFrom(v)
    return b"\x00" + m.SerializeToString()
