"""The audit's judge of the source records, as Spark's Python workers run it (mapInArrow): each
record by the declaration in force when its batch was written; records moved by hand are not judged."""

from __future__ import annotations

import json

import pyarrow as pa

from devkit.pipelines import SENSORS_SCHEMA
from onceflow.audit import source
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason

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
    assert out.column("reason").to_pylist() == [Reason.NOT_ALLOWED, None, None, Reason.UNPROCESSABLE]
    assert out.column("site").to_pylist() == [None, "oslo", "paris", None]
    assert (
        out.column("_offset").to_pylist() == [0, 1, 2, 3]
        and out.column("_value").to_pylist()[0] == json.dumps(paris).encode()
    )
    assert out.schema.field("reading").type == pa.float64() and out.schema.field("seq").type == pa.int64()


def test_the_bronze_types_in_arrow():
    types = {f.name: source.arrow_type(f.ftype) for f in SENSORS_SCHEMA.fields}
    assert types["event_time"] == pa.timestamp("us", tz="UTC") and types["site"] == pa.string()


CDC = Schema.model_validate(
    {
        "format": "debezium",
        "event_time": "updated_at",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "email", "type": "string"},
            {"name": "version", "type": "long"},
            {"name": "updated_at", "type": "timestamp"},
        ],
    }
)


def _cdc_batch(values: list[dict | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict(
        {
            "key": [b'{"id": 7}'] * n,
            "value": [None if v is None else json.dumps(v).encode() for v in values],
            "topic": ["t"] * n,
            "partition": [0] * n,
            "offset": list(range(n)),
        },
        schema=pa.schema(
            [
                ("key", pa.binary()),
                ("value", pa.binary()),
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("offset", pa.int64()),
            ]
        ),
    )


def test_debezium_records_are_parsed_by_the_reference_envelope_parser_into_bronze_rows():
    from onceflow import tables
    from onceflow.cdc.spec import resolve

    row = {"id": 7, "email": "a@b.c", "version": 3, "updated_at": "2026-01-01T00:00:00Z"}
    source_ = {"lsn": 100, "scn": "123456789012345678901234567890"}
    update = {"op": "u", "before": None, "after": row, "source": source_}
    delete = {"op": "d", "before": row, "after": None, "source": {**source_, "lsn": 101}}
    wrapped = {"schema": {}, "payload": {**update, "source": {**source_, "lsn": 102}}}
    values: list[dict | None] = [update, delete, None, {"after": row}, update, wrapped, {"schema": {}, "payload": None}]
    run = source._judged(CDC.model_dump_json(), [], {0: [(4, 5)]}, (["id"], ["source.lsn", "source.scn", "version"]))
    (out,) = list(run(iter([_cdc_batch(values)])))
    spec = resolve(CDC, ["id"], ["source.lsn", "source.scn", "version"])
    assert out.schema.names[: len(CDC.names) + 2] == list(tables.bronze_columns(CDC, spec))
    assert out.schema.field("_sequence").type == pa.struct(
        [("source_lsn", pa.int64()), ("source_scn", pa.decimal128(38, 0)), ("version", pa.int64())]
    )
    # a null value and a schemas-enabled null payload: Debezium's tombstones, no-ops in no sink
    tombstone = source.TOMBSTONE_REASON
    reasons = [None, None, tombstone, Reason.CDC_MISSING_OP, Reason.UNPROCESSABLE, None, tombstone]
    assert out.column("reason").to_pylist() == reasons
    assert out.column("_op").to_pylist() == ["u", "d", None, None, None, "u", None]
    # a delete's row: its key and the sequence's field parts (from `before`), the others NULL
    assert out.column("email").to_pylist()[:2] == ["a@b.c", None]
    assert out.column("version").to_pylist()[:2] == [3, 3] and out.column("id").to_pylist()[:2] == [7, 7]
    seq = out.column("_sequence").to_pylist()
    assert seq[1]["source_lsn"] == 101 and seq[5]["source_lsn"] == 102 and seq[2] is None
    assert str(seq[0]["source_scn"]) == source_["scn"]


def test_records_judged_in_spawned_processes_equal_those_judged_here(tmp_path):
    """The split a large audit takes (one process per core, whole batches each) judges every record
    as the judge in this process does; only the order of the batches may differ."""
    from devkit.pipelines import write_pipeline
    from onceflow import config

    pipeline = config.load(write_pipeline(tmp_path, "localhost:1", "t-split"))
    event = {"account_id": "a", "amount": "1.50", "currency": "EUR", "event_time": "2026-01-01T00:00:00Z"}
    values = [
        json.dumps({**event, "event_id": f"00000000-0000-0000-0000-{i:012d}"}).encode() if i % 3 else b"{"
        for i in range(40)
    ]
    raw = [
        pa.RecordBatch.from_arrays(
            [
                pa.array([None] * 10, pa.binary()),
                pa.array(values[i : i + 10], pa.binary()),
                pa.array(["t-split"] * 10, pa.string()),
                pa.array([i // 10] * 10, pa.int32()),
                pa.array(list(range(10)), pa.int64()),
            ],
            names=["key", "value", "topic", "partition", "offset"],
        )
        for i in range(0, 40, 10)
    ]
    here = source.judge_records(pipeline, [], raw, parallel_from=10**9, columnar=False).table
    split = source.judge_records(pipeline, [], raw, parallel_from=1, columnar=False).table
    order = [("_partition", "ascending"), ("_offset", "ascending")]
    assert split.sort_by(order).to_pylist() == here.sort_by(order).to_pylist()
    assert here.num_rows == 40 and 0 < here.filter(pa.compute.is_null(here["reason"])).num_rows < 40
    # the columnar judge's table is the reference's, record for record; only `_columnar` tells them apart
    both = source.judge_records(pipeline, [], raw, sample=5)
    assert both.columnar == 26 and 0 < both.sampled <= 5 and not both.disagreements
    assert both.table.drop_columns(["_columnar"]).sort_by(order).to_pylist() == (
        here.drop_columns(["_columnar"]).sort_by(order).to_pylist()
    )


def test_a_declaration_recorded_before_a_setting_was_added_reads_as_todays_and_a_real_change_does_not():
    from devkit.pipelines import PAYMENTS_SCHEMA_BODY

    body = {**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": "http://registry:8081/apis/ccompat/v7"}}
    today = Schema.model_validate(body).model_dump_json()
    recorded = json.loads(today)
    for added in ("wait_seconds", "ca_location", "connection"):  # what a ledger written before them holds
        del recorded["registry"][added]
    assert source.as_declared_today(json.dumps(recorded)) == today

    recorded["fields"] = recorded["fields"][:-1]  # a field declared since: another declaration
    assert source.as_declared_today(json.dumps(recorded)) != today
    unreadable = json.dumps({"fields": "not a list"})
    assert source.as_declared_today(unreadable) == unreadable  # kept as it was, judged as it was
