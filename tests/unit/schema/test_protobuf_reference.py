"""The audit's Protobuf decoder (schema/protobuf_reference.py, its own wire reader) against the
job's (spark/protobuf.py, the protobuf runtime) on drawn messages and on damaged and arbitrary
bytes: both give the same view, or both none."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow.schema.protobuf_reference import reference_view
from onceflow.spark.protobuf import protobuf_view
from tests.protobuf_space import FILES, payments


def _same(files: bytes, data: bytes) -> None:
    job, judge = protobuf_view(files, data), reference_view(files, data)
    assert (job is None) == (judge is None), (data.hex(), job, judge)
    if job is not None:
        assert json.loads(job) == json.loads(judge), data.hex()  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payments())
def test_job_and_judge_give_one_view_of_every_drawn_message(data):
    _same(FILES, data)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payments(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4))
def test_job_and_judge_agree_on_damaged_messages(data, edits):
    """Bytes changed, cut or inserted: both decoders read the same message, or both none."""
    out = bytearray(data)
    for where, byte in edits:
        at = where % (len(out) + 1)
        kind = byte % 3
        if kind == 0 and at < len(out):
            out[at] = byte
        elif kind == 1:
            out.insert(at, byte)
        else:
            del out[at:]
    _same(FILES, bytes(out))


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=64), st.sampled_from([b"\x00", b"\x02\x02", b"\x04\x00\x00", b"\x04\x00\x02"]))
def test_job_and_judge_agree_on_arbitrary_bytes(data, indexes):
    _same(FILES, indexes + data)
    _same(FILES, data)
