"""A registered Protobuf schema read as text or bytes, and refused with the cause, and the message
indexes after the header (schema/protobuf.py)."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from onceflow.errors import UnreadableSchemaError
from onceflow.schema.protobuf import encode_indexes, file_set, message_indexes, unreadable
from onceflow.spark.protobuf import protobuf_view
from tests.protobuf_space import FILES, Payment


def test_a_registered_schema_is_read_as_text_or_as_a_base64_descriptor():
    """`.proto` text (Confluent's Java serializer, a team's registration) and a base64
    FileDescriptorProto (confluent-kafka's Python serializer) give the same messages."""
    text = descriptor_pb2.FileDescriptorSet.FromString(FILES)
    assert [f.name for f in text.file][-1] == "onceflow_registry_schema.proto"
    assert {"google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"} <= {f.name for f in text.file}
    as_bytes = base64.b64encode(text.file[-1].SerializeToString()).decode()
    again = descriptor_pb2.FileDescriptorSet.FromString(file_set(as_bytes))
    assert again.file[-1] == text.file[-1]
    m = Payment(event_id="e1", amount_cents=5)
    body = encode_indexes((0,)) + m.SerializeToString()
    assert protobuf_view(file_set(as_bytes), body) == protobuf_view(FILES, body) is not None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('syntax = "proto2"; message M { optional string a = 1; }', "syntax is proto2"),
        ('syntax = "proto3"; import "other.proto"; message M { string a = 1; }', "protoc refuses"),
        ('syntax = "proto3"; message M { string a = 1 }', "protoc refuses"),
        ('syntax = "proto3"; enum E { A = 0; }', "declares no message"),
    ],
)
def test_a_schema_onceflow_does_not_read_says_why(text, why):
    assert why in str(unreadable(text))
    with pytest.raises(UnreadableSchemaError):
        file_set(text)


def test_message_indexes_read_as_confluent_writes_them():
    """A lone 0 for the first message; else a zigzag count and each index (Confluent's docs)."""
    assert message_indexes(b"\x00rest") == ((0,), 1)
    assert encode_indexes((0,)) == b"\x00"
    assert encode_indexes((1,)) == b"\x02\x02" and message_indexes(b"\x02\x02") == ((1,), 2)
    assert encode_indexes((0, 1)) == b"\x04\x00\x02" and message_indexes(b"\x04\x00\x02x") == ((0, 1), 3)
    assert message_indexes(b"") is None and message_indexes(b"\x01") is None  # empty; a count of -1
    assert message_indexes(b"\x04\x00") is None  # cut short
