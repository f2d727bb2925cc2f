"""The driver's newest change per key (spark/sinks/current_rs.py) against the reference fold
(cdc/fold.py): the same winners whatever the order and the duplicates, deletes keeping their key
and sequence only, rows below the floor left out; and the MERGE's `newer` condition."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow import config
from onceflow.cdc.envelope import Change
from onceflow.cdc.fold import fold
from onceflow.cdc.spec import KeyedSpec
from onceflow.spark.sinks.current_rs import _newer, above, newest_changes

ROOT = Path(__file__).resolve().parents[4]
PIPELINE = config.load(ROOT / "pipelines" / "customers_cdc.yaml", env={})


def _keyed() -> KeyedSpec:
    keyed = PIPELINE.keyed
    assert keyed is not None  # the shipped customers_cdc declares sinks.current
    return keyed


KEYED = _keyed()
SEQ = KEYED.sequence[0].column

PROPERTIES = settings(
    max_examples=max(200, settings().max_examples), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def bronze(located: list[tuple[Change, int, int]]) -> pa.Table:
    """Bronze rows of these changes: a delete holds its key only."""
    rows = []
    for change, partition, offset in located:
        values = change.row or {"id": change.key[0]}
        rows.append(
            {
                **{f: values.get(f) for f in PIPELINE.schema.names},
                "_op": change.op,
                "_sequence": {SEQ: change.sequence[0]},
                "_partition": partition,
                "_offset": offset,
                "_batch_id": 3,
                "_generation": 0,
            }
        )
    return pa.Table.from_pylist(rows)


changes = st.lists(
    st.tuples(st.sampled_from("cud"), st.integers(1, 5), st.integers(1, 6), st.integers(0, 2)), min_size=1, max_size=40
)


@PROPERTIES
@given(changes, st.randoms(use_true_random=False))
def test_the_winners_are_the_folds_whatever_the_order_and_the_duplicates(drawn, rng):
    located, offsets = [], {0: 0, 1: 0, 2: 0}
    for op, key, seq, partition in drawn:
        row = None if op == "d" else {"id": key, "email": f"{key}.{seq}@x", "tier": "pro"}
        located.append((Change(op, (key,), row, (seq,)), partition, offsets[partition]))
        offsets[partition] += 1
    delivered = located + rng.sample(located, len(located) // 3)
    rng.shuffle(delivered)
    out = newest_changes(bronze(delivered), PIPELINE.schema, KEYED).to_pylist()
    want = fold(located).versions
    assert {(r["id"],): ((r["_sequence"][SEQ],), r["_partition"], r["_offset"]) for r in out} == {
        k: (v.change.sequence, v.partition, v.offset) for k, v in want.items()
    }
    for r in out:
        assert r["_deleted"] == want[(r["id"],)].change.deleted
        if r["_deleted"]:
            assert all(r[f] is None for f in PIPELINE.schema.names if f != "id"), r


def test_rows_below_the_floor_are_left_out():
    located = [(Change("c", (1,), {"id": 1, "email": "a"}, (5,)), 0, 3), (Change("u", (1,), {"id": 1}, (9,)), 1, 2)]
    out = newest_changes(above(bronze(located), {1: 3}), PIPELINE.schema, KEYED).to_pylist()
    assert [(r["_partition"], r["_offset"]) for r in out] == [(0, 3)]


def test_newer_compares_sequence_then_partition_then_offset():
    newer = _newer(KEYED)
    assert newer.startswith(f"(s.\"_sequence\"['{SEQ}'] > t.\"_sequence\"['{SEQ}'])")
    assert newer.endswith('s."_partition" = t."_partition" AND s."_offset" > t."_offset")')


def test_a_plain_event_streams_sequence_and_delete_marker_are_its_fields():
    from onceflow.cdc.spec import resolve
    from onceflow.schema.model import Schema

    schema = Schema.model_validate(
        {
            "event_time": "at",
            "fields": [
                {"name": "id", "type": "int"},
                {"name": "at", "type": "timestamp"},
                {"name": "version", "type": "long"},
                {"name": "gone", "type": "boolean", "required": False},
                {"name": "name", "type": "string", "required": False},
            ],
        }
    )
    keyed = resolve(schema, ["id"], "version", "gone")
    rows = (
        pa.Table.from_pylist(
            [
                {"id": 1, "at": None, "version": 2, "gone": None, "name": "b", "_partition": 0, "_offset": 1},
                {"id": 1, "at": None, "version": 1, "gone": False, "name": "a", "_partition": 0, "_offset": 0},
                {"id": 2, "at": None, "version": 5, "gone": True, "name": "x", "_partition": 1, "_offset": 0},
                {"id": 2, "at": None, "version": 4, "gone": False, "name": "y", "_partition": 1, "_offset": 3},
            ]
        )
        .append_column("_batch_id", pa.array([0] * 4, pa.int64()))
        .append_column("_generation", pa.array([0] * 4))
    )
    out = {r["id"]: r for r in newest_changes(rows, schema, keyed).to_pylist()}
    assert out[1]["name"] == "b" and out[1]["_sequence"] == {"version": 2} and not out[1]["_deleted"]
    assert out[2]["_deleted"] and out[2]["_sequence"] == {"version": 5} and out[2]["_offset"] == 0
    assert out[2]["name"] is None and out[2]["version"] is None  # a tombstone keeps its key and sequence only


def test_the_driver_merges_while_the_table_is_within_its_bound(tmp_path):
    from deltalake import write_deltalake

    from onceflow.deltars import Appender
    from onceflow.spark.sinks.current_rs import driver_mergeable

    write_deltalake(str(tmp_path / "t"), pa.table({"id": list(range(1000))}))
    appender = Appender(str(tmp_path / "t"))
    size = sum(appender.table().get_add_actions(flatten=True).column("size_bytes").to_pylist())
    assert driver_mergeable(appender, size) and not driver_mergeable(appender, size - 1)
    assert not driver_mergeable(appender, 0)  # 0: always Spark
