"""Reason codes of quarantined records, in the fixed order they are checked.

A record gets exactly one reason: the first check it fails, in this order. The
job's Spark validation (spark/parse.py) and the audit's independent judge
(schema/reference.py) both follow it, and the generator makes each kind on purpose.
Codes are stable: they are data in the quarantine table and in users' queries.

A record of a Debezium topic (`schema.format: debezium`, cdc/envelope.py) is checked in this
order: the whole-record checks (RECORD_REASONS) on its value, then its envelope (CDC_REASONS,
in their order), then its row (`after`) as a JSON record's fields (FIELD_REASONS, then the
rules). A delete's row is not judged: Debezium's `before` may hold only the key columns.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why a record is quarantined: the `reason` column's codes."""

    OVERSIZED = "oversized"  # the value is longer than schema.max_bytes (bytes, `>`)
    INVALID_UTF8 = "invalid_utf8"  # the value is not valid UTF-8 (RFC 8259 §8.1)
    TOO_DEEP = "too_deep"  # brackets nest more than MAX_DEPTH deep, outside strings
    NUMBER_TOO_LONG = "number_too_long"  # more than MAX_NUMBER_CHARS number characters in a row, outside strings
    INVALID_JSON = "invalid_json"  # the value does not start with a JSON value
    DUPLICATE_KEY = "duplicate_key"  # one JSON value, but an object in it repeats a key
    NOT_AN_OBJECT = "not_an_object"  # the JSON value is not an object
    TRAILING_CONTENT = "trailing_content"  # a JSON object followed by more than whitespace
    LONE_SURROGATE = "lone_surrogate"  # a \uD800-\uDFFF escape that is not half of a pair, anywhere in the text
    MISSING_FIELD = "missing_field"  # a required field is absent or null
    WRONG_TYPE = "wrong_type"  # a field's JSON type does not fit its declared type
    INVALID_VALUE = "invalid_value"  # right JSON type, unusable value (timestamp text, decimal digits, range)
    # rules, checked field by field in declaration order, each field's rules in this order
    NOT_ALLOWED = "not_allowed"
    BELOW_MIN = "below_min"
    ABOVE_MAX = "above_max"
    PATTERN_MISMATCH = "pattern_mismatch"
    TOO_LONG = "too_long"
    NOT_A_UUID = "not_a_uuid"
    # a record an operator moved to quarantine by hand because the job could not process its batch
    # (`onceflow quarantine`, docs/runbooks/poison-batch.md); never given by validation
    UNPROCESSABLE = "unprocessable"
    # an Avro record in the Confluent wire format (schema.format: avro; see AVRO_REASONS)
    AVRO_NOT_FRAMED = "avro_not_framed"  # shorter than the 5-byte header, or its first byte is not the magic 0
    AVRO_UNKNOWN_SCHEMA = "avro_unknown_schema"  # the registry knows no schema with the header's id
    AVRO_OTHER_SUBJECT = "avro_other_subject"  # the id's schema is registered, but not under the pipeline's subject
    # the writer schema is one onceflow does not read (not a record; a union of two or more non-null types)
    AVRO_UNSUPPORTED_SCHEMA = "avro_unsupported_schema"
    # the payload is not exactly one record of its writer schema: it does not decode, bytes are left over,
    # an integer is not written in its shortest form, or a string is not UTF-8
    AVRO_UNDECODABLE = "avro_undecodable"
    # a JSON record in the Confluent wire format (schema.format: json_schema; see JSON_SCHEMA_REASONS)
    JSON_SCHEMA_NOT_FRAMED = "json_schema_not_framed"  # shorter than the 5-byte header, or no magic 0 first
    JSON_SCHEMA_UNKNOWN_SCHEMA = "json_schema_unknown_schema"  # the registry knows no schema with the header's id
    # the id's schema is registered, but not under the pipeline's subject
    JSON_SCHEMA_OTHER_SUBJECT = "json_schema_other_subject"
    # the id's schema is no JSON Schema: an Avro or Protobuf schema (its registry `schemaType`)
    JSON_SCHEMA_UNSUPPORTED_SCHEMA = "json_schema_unsupported_schema"
    # a Protobuf record in the Confluent wire format (schema.format: protobuf; see PROTOBUF_REASONS)
    PROTOBUF_NOT_FRAMED = "protobuf_not_framed"  # shorter than the 5-byte header, or no magic 0 first
    PROTOBUF_UNKNOWN_SCHEMA = "protobuf_unknown_schema"  # the registry knows no schema with the header's id
    PROTOBUF_OTHER_SUBJECT = "protobuf_other_subject"  # the id's schema is registered, but not under the subject
    # the id's schema is not a Protobuf schema onceflow reads: another schemaType, one protoc refuses, one
    # importing files other than Google's well-known types, or not proto3 (docs/registry.md#protobuf-topics)
    PROTOBUF_UNSUPPORTED_SCHEMA = "protobuf_unsupported_schema"
    # the message indexes after the header name no message of the schema, or the bytes after them are not
    # one message of it (cut short, a bad tag or wire type, a string that is not UTF-8, nested past 100)
    PROTOBUF_UNDECODABLE = "protobuf_undecodable"
    # a Debezium change event's envelope (see CDC_REASONS)
    CDC_MISSING_OP = "cdc_missing_op"  # no `op`, or `op` is null
    CDC_UNKNOWN_OP = "cdc_unknown_op"  # `op` is not one of "c", "u", "d", "r" (Debezium's truncate "t" too)
    # a create, update or snapshot read whose `after` is absent, null or not an object
    CDC_MISSING_AFTER = "cdc_missing_after"
    CDC_MISSING_BEFORE = "cdc_missing_before"  # a delete whose `before` is absent, null or not an object
    CDC_MISSING_KEY = "cdc_missing_key"  # a key field absent or null in the change's row (`after`; a delete's `before`)
    CDC_INVALID_KEY = "cdc_invalid_key"  # a key field of the wrong JSON type, or not a usable value of its type
    CDC_MISSING_SEQUENCE = "cdc_missing_sequence"  # a part of `sequence_by` absent or null
    CDC_INVALID_SEQUENCE = "cdc_invalid_sequence"  # a part of `sequence_by` of the wrong type (lsn "9"), or unusable
    # the event time when it is an envelope position (schema.event_time, by default source.ts_ms): absent,
    # null, or not epoch milliseconds of years 0001-9999
    CDC_INVALID_EVENT_TIME = "cdc_invalid_event_time"
    # a column of a create/update/read holds Debezium's placeholder for an unchanged TOASTed value
    # (`__debezium_unavailable_value`) and `before` holds no real value of it (the fix: REPLICA IDENTITY FULL)
    CDC_UNAVAILABLE_VALUE = "cdc_unavailable_value"


# The limits of what the job's engine reads (Spark's JSON reader refuses nesting past 1,000 and
# numbers past 1,000 characters): a record past them gets its own reason, never a crash or a
# misleading `invalid_json`. Both are far beyond any real event (docs/validation.md).
MAX_DEPTH = 500
MAX_NUMBER_CHARS = 500
# the checks on the whole record, then on fields' presence and types, then the rules
RECORD_REASONS = (
    Reason.OVERSIZED,
    Reason.INVALID_UTF8,
    Reason.TOO_DEEP,
    Reason.NUMBER_TOO_LONG,
    Reason.LONE_SURROGATE,
    Reason.INVALID_JSON,
    Reason.DUPLICATE_KEY,
    Reason.NOT_AN_OBJECT,
    Reason.TRAILING_CONTENT,
)
FIELD_REASONS = (Reason.MISSING_FIELD, Reason.WRONG_TYPE, Reason.INVALID_VALUE)
RULE_REASONS = {
    "allowed": Reason.NOT_ALLOWED,
    "min": Reason.BELOW_MIN,
    "max": Reason.ABOVE_MAX,
    "pattern": Reason.PATTERN_MISMATCH,
    "max_length": Reason.TOO_LONG,
    "uuid": Reason.NOT_A_UUID,
}
REASONS = RECORD_REASONS + FIELD_REASONS + tuple(RULE_REASONS.values())

# An Avro record (schema.format: avro, docs/registry.md), checked after `oversized` on its bytes and
# before the whole-record checks on its JSON view (the decoded record as JSON text: those can then
# fail only as `not_an_object`), in this order
AVRO_REASONS = (
    Reason.AVRO_NOT_FRAMED,
    Reason.AVRO_UNKNOWN_SCHEMA,
    Reason.AVRO_OTHER_SUBJECT,
    Reason.AVRO_UNSUPPORTED_SCHEMA,
    Reason.AVRO_UNDECODABLE,
)

# A JSON record in the Confluent wire format (schema.format: json_schema, docs/registry.md): its
# header is checked after `oversized` on the record's bytes, in this order; then the payload after
# the header is judged as a JSON event, from the whole-record checks on (RECORD_REASONS after
# `oversized`). Its JSON Schema is not applied: the declared fields are the pipeline's contract.
JSON_SCHEMA_REASONS = (
    Reason.JSON_SCHEMA_NOT_FRAMED,
    Reason.JSON_SCHEMA_UNKNOWN_SCHEMA,
    Reason.JSON_SCHEMA_OTHER_SUBJECT,
    Reason.JSON_SCHEMA_UNSUPPORTED_SCHEMA,
)
# A Protobuf record (schema.format: protobuf, docs/registry.md): checked after `oversized` on its bytes,
# in this order, then its JSON view as for Avro
PROTOBUF_REASONS = (
    Reason.PROTOBUF_NOT_FRAMED,
    Reason.PROTOBUF_UNKNOWN_SCHEMA,
    Reason.PROTOBUF_OTHER_SUBJECT,
    Reason.PROTOBUF_UNSUPPORTED_SCHEMA,
    Reason.PROTOBUF_UNDECODABLE,
)
# the header's reasons of each format whose records carry a registry's schema id
FRAMED_REASONS = {"avro": AVRO_REASONS, "json_schema": JSON_SCHEMA_REASONS, "protobuf": PROTOBUF_REASONS}

# A Debezium change event's envelope (cdc/envelope.py, docs/cdc.md), checked after the whole-record
# checks and before the row's fields, in this order. The null-value tombstone that follows a delete
# is no record to judge (a no-op), so it has no reason.
CDC_REASONS = (
    Reason.CDC_MISSING_OP,
    Reason.CDC_UNKNOWN_OP,
    Reason.CDC_MISSING_AFTER,
    Reason.CDC_MISSING_BEFORE,
    Reason.CDC_MISSING_KEY,
    Reason.CDC_INVALID_KEY,
    Reason.CDC_MISSING_SEQUENCE,
    Reason.CDC_INVALID_SEQUENCE,
    Reason.CDC_INVALID_EVENT_TIME,
    Reason.CDC_UNAVAILABLE_VALUE,
)
