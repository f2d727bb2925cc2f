"""Which Avro writer schemas onceflow reads (schema/avro.py), the wire format's header, and decimals
written as Java's Avro writes them."""

from __future__ import annotations

import json
from decimal import Context, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.registry import frame, unframe
from onceflow.schema.avro import minimal_decimal_bytes, unsupported

RECORD = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}


def _with(t) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": t}]})


@pytest.mark.parametrize(
    "schema",
    [
        json.dumps(RECORD),
        _with(["null", "string"]),
        _with({"type": "array", "items": ["null", "double"]}),
        _with({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 2}),
        _with({"type": "record", "name": "Inner", "fields": [{"name": "b", "type": "int"}]}),
        _with({"type": "string", "logicalType": "uuid"}),
        _with({"type": "map", "values": ["null", "long"]}),  # its entries' order aside (spark/avro.py)
    ],
)
def test_records_of_the_types_the_view_holds_are_read(schema):
    assert unsupported(schema) is None


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ('"string"', 'the writer schema is "string", not a record'),
        (json.dumps({"type": "array", "items": "long"}), "not a record"),
        (_with(["null", "long", "string"]), "$.a is a union of 2 non-null types"),
        (_with({"type": "int", "logicalType": "time-millis"}), "$.a is a time-millis"),
        (_with({"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 0}), "more than 38"),
        (_with(["null", "R"]), "refers to the record R inside itself"),
        ("{not json", "not JSON"),
        (_with({"type": "map", "values": {"type": "int", "logicalType": "time-millis"}}), "$.a{} is a time-millis"),
    ],
)
def test_schemas_the_view_cannot_hold_are_refused_with_why(schema, why):
    assert why in (unsupported(schema) or "")


@given(st.integers(0, 2**31 - 1), st.binary(max_size=30))
def test_the_header_holds_the_id_and_the_payload_follows(schema_id, payload):
    assert unframe(frame(schema_id, payload)) == (schema_id, payload)


@pytest.mark.parametrize("value", [b"", b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x01x", b"{}"])
def test_a_value_without_the_header_is_not_framed(value):
    assert unframe(value) is None


@given(st.integers(-(10**38) + 1, 10**38 - 1), st.integers(0, 10))
def test_a_decimal_is_written_in_its_shortest_twos_complement_as_javas_biginteger(unscaled, scale):
    written = minimal_decimal_bytes(
        Decimal(unscaled).scaleb(-scale, Context(prec=100)), {"precision": 38, "scale": scale}
    )
    assert int.from_bytes(written, "big", signed=True) == unscaled
    # shortest: one byte fewer could not hold it (Java's BigInteger.toByteArray)
    shorter = len(written) - 1
    assert shorter == 0 or not (-(2 ** (8 * shorter - 1)) <= unscaled < 2 ** (8 * shorter - 1))


def test_minus_128_is_one_byte():
    assert minimal_decimal_bytes(Decimal(-128), {"precision": 5, "scale": 0}) == b"\x80"
    with pytest.raises(ValueError, match="precision"):
        minimal_decimal_bytes(Decimal("123456"), {"precision": 5, "scale": 0})
