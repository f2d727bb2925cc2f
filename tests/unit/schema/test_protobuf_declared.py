"""`schema.fields: registry` for a Protobuf subject (schema/protobuf_declared.py): the first message's
leaves as declared fields, and every record of such a message valid by them, read by the audit's
own decoder; what no declared type reads refused, naming the field."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from onceflow.schema.model import FieldSpec, Schema
from onceflow.schema.protobuf import file_set
from onceflow.schema.protobuf_declared import fields_of_protobuf
from onceflow.schema.protobuf_reference import reference_view
from onceflow.schema.reference import Judge
from onceflow.schema.registry_fields import _with_fields
from tests.protobuf_space import _meta

TEXT = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
enum Channel { CHANNEL_UNSPECIFIED = 0; WEB = 1; }
message Order {
  string order_id = 1;
  int64 cents = 2;
  uint32 items = 3;
  uint64 big = 4;
  double rate = 5;
  bool paid = 6;
  bytes raw = 7;
  Channel channel = 8;
  google.protobuf.Timestamp placed_at = 9;
  optional string note = 10;
  google.protobuf.Int32Value retries = 11;
  Meta meta = 12;
  oneof pay { string card = 13; int64 transfer = 14; }
  message Meta { string source = 1; google.protobuf.Timestamp seen = 2; }
}
message Other { repeated string tags = 1; }
"""


def test_each_leaf_of_the_first_message_is_a_field_typed_as_its_view_reads():
    fields = {f["name"]: f for f in fields_of_protobuf(file_set(TEXT))}
    assert fields["order_id"] == {"name": "order_id", "type": "string", "required": True}
    assert (fields["cents"]["type"], fields["items"]["type"], fields["big"]["type"]) == (
        "long",
        "long",
        "decimal(20,0)",
    )
    assert fields["channel"] == {
        "name": "channel",
        "type": "string",
        "allowed": ["CHANNEL_UNSPECIFIED", "WEB"],
        "required": True,
    }
    assert fields["placed_at"] == {"name": "placed_at", "type": "timestamp", "required": False}
    assert (fields["note"]["required"], fields["card"]["required"], fields["retries"]["type"]) == (False, False, "int")
    assert fields["source"] == {"name": "source", "type": "string", "required": False, "path": "$.meta.source"}
    assert fields["seen"]["path"] == "$.meta.seen" and fields["raw"]["type"] == "string"
    # the file's event_time names a Timestamp, which has presence: it is made required, as it must be
    body = _with_fields({}, {"event_time": "placed_at"}, list(fields.values()))["schema"]
    assert Schema.model_validate(body).field("placed_at").required  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('syntax = "proto3"; message M { repeated string tags = 1; }', "$.tags is repeated"),
        ('syntax = "proto3"; message M { map<string, int32> m = 1; }', "$.m is a map"),
        ('syntax = "proto3"; message M { string a = 1; M child = 2; }', "$.child: the message M is inside itself"),
    ],
)
def test_what_no_declared_type_reads_is_refused_naming_the_field(text, why):
    with pytest.raises(ValueError, match=why.replace("$", r"\$")):
        fields_of_protobuf(file_set(text))


META = """syntax = "proto3"; package dev.onceflow;
enum Channel { CHANNEL_UNSPECIFIED = 0; WEB = 1; STORE = 2; }
message Meta { string source = 1; optional int32 retries = 2; Channel via = 3; }
"""


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_meta())
def test_every_message_of_the_schema_is_valid_by_the_fields_read_from_it(meta):
    """The fields read from a schema accept every record its writer writes (an enum's number the
    enum does not name excepted: its view is the number, refused as it should be)."""
    files = file_set(META)
    judge = Judge(Schema.model_construct(fields=tuple(FieldSpec.model_validate(f) for f in fields_of_protobuf(files))))
    view = reference_view(files, b"\x00" + meta.SerializeToString())
    assert view is not None
    verdict = judge.judge(view.encode())
    assert verdict.reason is None or meta.via not in (0, 1, 2), (verdict.reason, view)
