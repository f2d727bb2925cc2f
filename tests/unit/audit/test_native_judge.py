"""The compiled judge's own part (its verdicts are held to the reference and to the DuckDB query in
test_columnar_judge.py): the schema as the library reads it, bounds worked out exactly, and the
Arrow shapes a batch may come in."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from onceflow.audit.native_judge import NativeJudge, spec_text
from onceflow.schema.model import Schema
from onceflow.schema.reference import Judge

SCHEMA = Schema.model_validate(
    {
        "event_time": "t",
        "fields": [
            {"name": "m", "type": "decimal(5,2)", "min": 0.005, "max": 999.994},
            {"name": "i", "type": "int", "min": -5.5, "max": 2.5},
            {"name": "d", "type": "double", "max": 1e400, "required": False},
            {"name": "c", "type": "string", "allowed": ["é", "b"]},
            {"name": "t", "type": "timestamp"},
        ],
    }
)


def test_the_spec_holds_exact_bounds():
    lines = spec_text(SCHEMA).splitlines()
    m, i, d = (
        lines.index(f"field {k.encode().hex()} " + rest)
        for k, rest in (("m", "decimal 1 5 2"), ("i", "int 1 0 0"), ("d", "double 0 0 0"))
    )
    assert lines[m + 1 : m + 3] == ["min int 1", "max int 99999"]  # 0.005 -> 0.01 up, 999.994 -> 999.99 down, in cents
    assert lines[i + 1 : i + 3] == ["min int -5", "max int 2"]
    assert lines[d + 1] == "max never"  # past every double: no value can be sure to keep it
    assert f"allowed_str {'é'.encode().hex()}" in lines


def _record(**change) -> bytes:
    return json.dumps({"m": "1.00", "i": 0, "c": "b", "t": "2026-01-01T00:00:00Z", **change}).encode()


@pytest.mark.parametrize(
    ("change", "sure"),
    [
        ({}, True),
        ({"m": "0.00"}, False),
        ({"m": "0.01"}, True),
        ({"m": "999.99"}, True),
        ({"i": -5}, True),
        ({"i": -6}, False),
        ({"i": 3}, False),
        ({"d": 1.5e300}, False),  # an exponent: left to the reference
        ({"d": 12.5}, False),  # a max past every double: never sure
        ({"c": "é"}, True),
    ],
)
def test_bounds_at_their_edges_as_the_reference_reads_them(change, sure):
    value = _record(**change)
    judged = NativeJudge(SCHEMA).judge(pa.array([value], pa.binary())).to_pylist()[0]
    assert judged["_sure"] == sure
    if sure:
        assert Judge(SCHEMA).judge(value).reason is None


def test_the_shapes_a_batch_comes_in():
    """Large binary, a slice (an offset into its buffers), chunks, nulls and no record at all: the
    same verdicts as the plain array's."""
    values = [_record(i=n % 3) if n % 4 else None for n in range(40)]
    judge = NativeJudge(SCHEMA)
    plain = judge.judge(pa.array(values, pa.binary()))
    assert plain["_sure"].to_pylist() == [v is not None for v in values]
    assert judge.judge(pa.array(values, pa.large_binary())).equals(plain)
    assert judge.judge(pa.array(values, pa.binary()).slice(7, 20)).equals(plain.slice(7, 20))
    chunked = pa.chunked_array([pa.array(values[:13], pa.binary()), pa.array(values[13:], pa.binary())])
    assert judge.judge(chunked).equals(plain)
    empty = judge.judge(pa.array([], pa.binary()))
    assert empty.num_rows == 0 and empty.schema == plain.schema
