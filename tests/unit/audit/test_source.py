"""The audit's judge of the source records, as Spark's Python workers run it (mapInArrow): each
record by the declaration in force when its batch was written; records moved by hand are not judged."""

from __future__ import annotations

import json

import pyarrow as pa

from devkit.pipelines import SENSORS_SCHEMA
from onceflow.audit import source
from onceflow.schema import reasons as R
from onceflow.schema.model import Schema

GOOD = {
    "device_id": "d",
    "site": "oslo",
    "reading": 1.5,
    "unit": "hpa",
    "seq": 1,
    "meta": {"ts": "2026-01-01T00:00:00Z"},
}


def _batch(values: list[dict], partition: int = 0) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict(
        {
            "key": [b"k"] * n,
            "value": [json.dumps(v).encode() for v in values],
            "topic": ["t"] * n,
            "partition": [partition] * n,
            "offset": list(range(n)),
        }
    )


def test_each_record_is_judged_by_the_declaration_of_its_batch_and_hand_moved_ones_are_not():
    body = SENSORS_SCHEMA.model_dump(mode="json", exclude_none=True)
    for f in body["fields"]:
        if f["name"] == "site":
            f["allowed"] = [*f["allowed"], "paris"]  # the declaration today, after a change
    current = Schema.model_validate(body)
    older = SENSORS_SCHEMA.model_dump_json()  # offsets [0, 2) were written under it: no "paris" yet
    run = source._judged(current.model_dump_json(), [(older, {0: (0, 2)})], {0: [(3, 4)]})
    paris = {**GOOD, "site": "paris"}
    (out,) = list(run(iter([_batch([paris, GOOD, paris, paris])])))
    assert out.column("reason").to_pylist() == [R.NOT_ALLOWED, None, None, R.UNPROCESSABLE]
    assert out.column("site").to_pylist() == [None, "oslo", "paris", None]
    assert (
        out.column("_offset").to_pylist() == [0, 1, 2, 3]
        and out.column("_value").to_pylist()[0] == json.dumps(paris).encode()
    )
    assert out.schema.field("reading").type == pa.float64() and out.schema.field("seq").type == pa.int64()


def test_the_bronze_types_in_arrow():
    types = {f.name: source._arrow_type(f.ftype) for f in SENSORS_SCHEMA.fields}
    assert types["event_time"] == pa.timestamp("us", tz="UTC") and types["site"] == pa.string()
