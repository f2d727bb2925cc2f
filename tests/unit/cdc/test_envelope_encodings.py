"""Debezium's default encodings read by the reference parser (cdc/envelope.py), issue 48: a
`precise` decimal (base64 of the unscaled two's-complement integer), Debezium's variable-scale
struct, epoch days / millis / micros / nanos and ZonedTimestamp text, read by the JSON converter's
schema wrapper when it is there and by the field's declared `encoding` when it is not; the
placeholder of an unchanged TOASTed column; the envelope's event time."""

from __future__ import annotations

import base64
import json
from datetime import UTC, date, datetime
from decimal import Context, Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.cdc.envelope import Change, Envelope, Malformed
from onceflow.cdc.spec import PLACEHOLDER
from onceflow.generate.changes import written
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import read_unscaled, scaled_text

FIELDS = [
    {"name": "id", "type": "long"},
    {"name": "balance", "type": "decimal(12,2)", "encoding": "precise", "required": False},
    {"name": "born", "type": "date", "encoding": "epoch_days", "required": False},
    {"name": "seen", "type": "timestamp", "encoding": "epoch_micros", "required": False},
    {"name": "bio", "type": "string", "required": False},
]
SCHEMA = Schema.model_validate({"format": "debezium", "fields": FIELDS})  # no timestamp column: source.ts_ms
SOURCE = {"version": "2.7.3.Final", "connector": "postgresql", "ts_ms": 1767225900120, "lsn": 24023128}


def b64(unscaled: int) -> str:
    """As Kafka Connect's Decimal writes it: BigInteger.toByteArray, base64."""
    size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


def env(after: dict | None, op: str = "u", before: Any = None, **more: Any) -> dict:
    return {"before": before, "after": after, "source": SOURCE, "op": op, "ts_ms": 1767225900123, **more}


def parse(obj: Any, schema: Schema = SCHEMA) -> Any:
    return Envelope(schema, ["id"], "source.lsn").parse(None, json.dumps(obj).encode())


# the value schema of the row as the JSON converter writes it (schemas.enable=true)
ROW_SCHEMA = {
    "type": "struct",
    "optional": True,
    "name": "shop.public.customers.Value",
    "fields": [
        {"type": "int64", "optional": False, "field": "id"},
        {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "12"},
            "field": "balance",
        },
        {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "version": 1, "field": "born"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "seen"},
        {"type": "string", "optional": True, "field": "bio"},
    ],
}


def wrapped(payload: dict, row_schema: dict = ROW_SCHEMA) -> dict:
    fields = [{**row_schema, "field": "before"}, {**row_schema, "field": "after"}]
    fields += [{"type": "string", "optional": False, "field": "op"}, {"type": "int64", "field": "ts_ms"}]
    return {
        "schema": {"type": "struct", "name": "shop.public.customers.Envelope", "fields": fields},
        "payload": payload,
    }


def row_of(obj: Any) -> dict:
    got = parse(obj)
    assert isinstance(got, Change), got
    assert got.row is not None
    return got.row


def test_the_all_digit_base64_trap_is_read_as_base64():
    """Issue 48: -26,629.84 is "1124" in base64 and landed as 1124.00; it is base64, always."""
    assert b64(-2662984) == "1124"
    assert row_of(env({"id": 1, "balance": "1124"}))["balance"] == Decimal("-26629.84")
    assert row_of(wrapped(env({"id": 1, "balance": "1124"})))["balance"] == Decimal("-26629.84")


@pytest.mark.parametrize(
    "unscaled",
    [0, 1, -1, 127, 128, -128, -129, 255, 256, 2662984, -2662984, 10**12 - 1, -(10**12 - 1)],
)
def test_precise_decimals_both_signs_with_and_without_the_wrapper(unscaled):
    want = Decimal(unscaled).scaleb(-2)
    assert row_of(env({"id": 1, "balance": b64(unscaled)}))["balance"] == want
    assert row_of(wrapped(env({"id": 1, "balance": b64(unscaled)})))["balance"] == want


@pytest.mark.parametrize(
    "value",
    ["abc", "AB==", "AA=", "AA", "", " AA==", "AA==\n", "A" * 23 + "=", b64(10**12), 12.5, "12.50", True],
)
def test_anything_else_is_refused(value):
    got = parse(env({"id": 1, "balance": value}))
    assert isinstance(got, Malformed) and got.reason in (Reason.INVALID_VALUE, Reason.WRONG_TYPE), got


def test_the_wrapper_scale_wins_and_is_checked_exactly():
    """The wrapper's Decimal scale is the one the unscaled integer is at; the value must then fit
    the declared decimal(12,2) without rounding."""
    scale4 = json.loads(json.dumps(ROW_SCHEMA))
    scale4["fields"][1]["parameters"]["scale"] = "4"
    assert row_of(wrapped(env({"id": 1, "balance": b64(1234500)}), scale4))["balance"] == Decimal("123.45")
    got = parse(wrapped(env({"id": 1, "balance": b64(1234567)}), scale4))
    assert isinstance(got, Malformed) and got.reason == Reason.INVALID_VALUE
    bad = json.loads(json.dumps(ROW_SCHEMA))
    bad["fields"][1]["parameters"]["scale"] = "x"
    got = parse(wrapped(env({"id": 1, "balance": b64(5)}), bad))
    assert isinstance(got, Malformed) and got.reason == Reason.WRONG_TYPE


def test_variable_scale_decimal_and_other_logical_types():
    vsd = json.loads(json.dumps(ROW_SCHEMA))
    vsd["fields"][1] = {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "field": "balance"}
    value = {"scale": 1, "value": b64(-125)}
    assert row_of(wrapped(env({"id": 1, "balance": value}), vsd))["balance"] == Decimal("-12.5")
    assert row_of(env({"id": 1, "balance": value}))["balance"] == Decimal("-12.5")  # self-describing
    as_text = json.loads(json.dumps(ROW_SCHEMA))
    as_text["fields"][1] = {"type": "string", "optional": True, "field": "balance"}  # decimal.handling.mode=string
    assert row_of(wrapped(env({"id": 1, "balance": "1124"}), as_text))["balance"] == Decimal("1124")
    wrong = json.loads(json.dumps(ROW_SCHEMA))
    wrong["fields"][2]["name"] = "io.debezium.time.MicroTime"  # a time of day is no date
    got = parse(wrapped(env({"id": 1, "born": 5}), wrong))
    assert isinstance(got, Malformed) and got.reason == Reason.WRONG_TYPE


def test_dates_and_timestamps_in_each_encoding():
    row = row_of(env({"id": 1, "born": 20454, "seen": 1767225900123456}))
    assert row["born"] == date(2026, 1, 1)
    assert row["seen"] == datetime(2026, 1, 1, 0, 5, 0, 123456, tzinfo=UTC)
    assert row_of(wrapped(env({"id": 1, "born": -719162})))["born"] == date(1, 1, 1)
    for name, value in [
        ("io.debezium.time.Timestamp", 1767225900123),
        ("org.apache.kafka.connect.data.Timestamp", 1767225900123),
        ("io.debezium.time.NanoTimestamp", 1767225900123000000),
        ("io.debezium.time.ZonedTimestamp", "2026-01-01T01:05:00.123+01:00"),
    ]:
        other = json.loads(json.dumps(ROW_SCHEMA))
        other["fields"][3] = {"type": "int64", "name": name, "field": "seen"}
        got = row_of(wrapped(env({"id": 1, "seen": value}), other))["seen"]
        assert got == datetime(2026, 1, 1, 0, 5, 0, 123000, tzinfo=UTC), name
    for value in ["2026-01-01T00:05:00Z", 1.5, 253402300800000000, -62135596800000001]:
        got = parse(env({"id": 1, "seen": value}))
        assert isinstance(got, Malformed) and got.reason in (Reason.WRONG_TYPE, Reason.INVALID_VALUE), value
    nanos = json.loads(json.dumps(ROW_SCHEMA))
    nanos["fields"][3] = {"type": "int64", "name": "io.debezium.time.NanoTimestamp", "field": "seen"}
    got = parse(wrapped(env({"id": 1, "seen": 1767225900123456789}), nanos))  # never rounded to micros
    assert isinstance(got, Malformed) and got.reason == Reason.INVALID_VALUE


def test_an_unchanged_toasted_column_is_never_stored():
    """The placeholder is refused without the old row, and replaced by it with REPLICA IDENTITY FULL."""
    got = parse(env({"id": 1, "bio": PLACEHOLDER}))
    assert isinstance(got, Malformed) and got.reason == Reason.CDC_UNAVAILABLE_VALUE
    assert "bio" in got.detail and "REPLICA IDENTITY FULL" in got.detail
    got = parse(env({"id": 1, "bio": PLACEHOLDER}, before={"id": 1}))  # the key alone: no real value
    assert isinstance(got, Malformed) and got.reason == Reason.CDC_UNAVAILABLE_VALUE
    long_text = "x" * 6000
    assert row_of(env({"id": 1, "bio": PLACEHOLDER}, before={"id": 1, "bio": long_text}))["bio"] == long_text
    assert row_of(wrapped(env({"id": 1, "bio": PLACEHOLDER}, before={"id": 1, "bio": None})))["bio"] is None
    got = parse(env({"id": 1, "bio": PLACEHOLDER}, before={"id": 1, "bio": PLACEHOLDER}))
    assert isinstance(got, Malformed) and got.reason == Reason.CDC_UNAVAILABLE_VALUE
    # a delete's row is not judged: the placeholder there changes nothing
    assert isinstance(parse(env(None, op="d", before={"id": 1, "bio": PLACEHOLDER})), Change)


def test_the_event_time_is_the_commit_time_by_default():
    got = parse(env({"id": 1}))
    assert isinstance(got, Change) and got.event_time == datetime(2026, 1, 1, 0, 5, 0, 120000, tzinfo=UTC)
    for source in [{"lsn": 1}, {"lsn": 1, "ts_ms": "5"}, {"lsn": 1, "ts_ms": 2**62}, {"lsn": 1, "ts_ms": None}]:
        got = parse({**env({"id": 1}), "source": source})
        assert isinstance(got, Malformed) and got.reason == Reason.CDC_INVALID_EVENT_TIME, source
    processed = Schema.model_validate({"format": "debezium", "event_time": "ts_ms", "fields": FIELDS})
    got = parse({**env({"id": 1}), "source": {"lsn": 1}}, processed)
    assert isinstance(got, Change) and got.event_time == datetime(2026, 1, 1, 0, 5, 0, 123000, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(unscaled=st.integers(-(2**127), 2**127 - 1), scale=st.integers(0, 38))
def test_base64_two_s_complement_round_trips(unscaled, scale):
    assert read_unscaled(b64(unscaled)) == unscaled
    text = scaled_text(unscaled, scale)
    assert Decimal(text) == Decimal(unscaled).scaleb(-scale, Context(prec=80))


@settings(max_examples=200, deadline=None)
@given(cents=st.integers(-(10**12) + 1, 10**12 - 1))
def test_the_generator_writes_what_the_declaration_reads(cents):
    value = str(Decimal(cents).scaleb(-2))
    balance = SCHEMA.fields[1]
    assert row_of(env({"id": 1, "balance": written(balance, value)}))["balance"] == Decimal(value)
