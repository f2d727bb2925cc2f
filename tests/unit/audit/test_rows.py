"""The row reconciliation's logic on Arrow tables made here: the source judged by the audit's own
judge from raw JSON records, bronze and quarantine as the job would have written them, then each
planted defect (a lost row, a phantom, a duplicate, a changed value, a repeated event_id) found
at its offsets and nowhere else. The reads (Kafka by range, delta-rs) run in the integration tests."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest

from devkit.pipelines import write_pipeline
from onceflow import config, tables
from onceflow.audit.rows import RowReconciler
from onceflow.audit.source import record_judge
from onceflow.reconcile import AuditScope, CommittedPoint

TOPIC = "t-rows"


def _raw(n: int, partitions: int = 2, malformed_every: int = 7) -> pa.RecordBatch:
    keys, values, parts, offs = [], [], [], []
    for i in range(n):
        p = i % partitions
        event = {
            "event_id": str(uuid.UUID(int=i + 1)),
            "account_id": f"acct-{i % 5}",
            "amount": f"{i}.25",
            "currency": "EUR",
            "event_time": f"2026-01-01T00:{i % 60:02d}:00Z",
        }
        value = b"not json" if i % malformed_every == 3 else json.dumps(event).encode()
        keys.append(f"k{i}".encode())
        values.append(value)
        parts.append(p)
        offs.append(i // partitions)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([TOPIC] * n, pa.string()),
            pa.array(parts, pa.int32()),
            pa.array(offs, pa.int64()),
        ],
        names=["key", "value", "topic", "partition", "offset"],
    )


@pytest.fixture()
def made(tmp_path):
    pipeline = config.load(write_pipeline(tmp_path, "localhost:1", TOPIC))
    judge, _ = record_judge(pipeline, [])
    source = pa.Table.from_batches(list(judge(iter([_raw(60)]))))
    columns = list(tables.bronze_columns(pipeline.schema))
    valid = source.filter(pa.compute.is_null(source["reason"]))
    bad = source.filter(pa.compute.is_valid(source["reason"]))
    n = valid.num_rows
    bronze = valid.select([*columns, "_topic", "_partition", "_offset"]).append_column(
        "_batch_id", pa.array([0] * n, pa.int64())
    )
    quarantine = (
        bad.select(["_key", "_value", "reason", "_topic", "_partition", "_offset"])
        .append_column("detail", pa.array(["x"] * bad.num_rows, pa.string()))
        .append_column("_batch_id", pa.array([0] * bad.num_rows, pa.int64()))
    )
    point = CommittedPoint(
        topic=TOPIC,
        mode=AuditScope.FULL,
        checkpoint={},
        sinks={},
        first={0: 0, 1: 0},
        start={0: 0, 1: 0},
        end={0: 30, 1: 30},
        not_retained={},
        accepted_loss=[],
        problems={},
    )
    return {"pipeline": pipeline, "point": point, "source": source, "bronze": bronze, "quarantine": quarantine}


def reconcile(made, bronze=None, quarantine=None):
    rec = RowReconciler(
        made["pipeline"],
        made["point"],
        made["source"],
        made["bronze"] if bronze is None else bronze,
        made["quarantine"] if quarantine is None else quarantine,
    )
    try:
        result = rec.run()
    finally:
        rec.release()
    return result, {c.name: c for c in result.checks}


def _failed(checks) -> set[str]:
    return {name for name, c in checks.items() if c.status == "failed"}


def test_a_clean_copy_passes_with_equal_checksums_per_partition(made):
    result, checks = reconcile(made)
    assert _failed(checks) == set()
    assert result.totals["source_records"] == 60 and result.totals["source_malformed"] == 9
    assert result.totals["bronze_rows"] == 51 and result.totals["quarantine_rows"] == 9
    assert all(p["source_checksum"] == p["sink_checksum"] != "0" for p in result.partitions)


def _without(table: pa.Table, partition: int, offsets: set[int]) -> pa.Table:
    keep = [
        not (p == partition and o in offsets)
        for p, o in zip(table["_partition"].to_pylist(), table["_offset"].to_pylist(), strict=True)
    ]
    return table.filter(pa.array(keep))


def test_rows_deleted_from_bronze_are_lost_at_their_exact_ranges(made):
    # partition 0's offsets 14..17 (records 28, 30, 32, 34: none malformed)
    result, checks = reconcile(made, bronze=_without(made["bronze"], 0, {14, 15, 16, 17}))
    assert _failed(checks) == {"accounting", "loss", "content"}
    loss = checks["loss"]
    assert loss.observed == 4
    assert loss.ranges == [{"partition": 0, "start": 14, "end": 18, "count": 4}]
    assert [s["_offset"] for s in loss.samples] == [14, 15, 16, 17]
    assert {f["check"] for f in result.findings} == {"loss"}


def test_a_duplicate_a_phantom_and_a_changed_value_are_each_found_where_they_are(made):
    bronze = made["bronze"]
    dup = bronze.slice(5, 1)  # a second copy of one row
    phantom = bronze.slice(6, 1)
    phantom = phantom.set_column(
        phantom.column_names.index("_offset"), "_offset", pa.array([500], pa.int64())
    )  # an offset Kafka never committed
    changed_at = 8
    amount = bronze.column("amount").to_pylist()
    amount[changed_at] = amount[changed_at] + 1
    altered = bronze.set_column(bronze.column_names.index("amount"), "amount", pa.array(amount, bronze["amount"].type))
    _, checks = reconcile(made, bronze=pa.concat_tables([altered, dup, phantom]))
    assert {"duplicates", "phantoms", "content"} <= _failed(checks)
    assert "loss" not in _failed(checks)
    p, o = bronze["_partition"][5].as_py(), bronze["_offset"][5].as_py()
    assert checks["duplicates"].ranges == [{"partition": p, "start": o, "end": o + 1, "count": 1}]
    assert checks["duplicates"].observed == {"keys": 1, "extra_rows": 1}
    p6 = bronze["_partition"][6].as_py()
    assert checks["phantoms"].ranges == [{"partition": p6, "start": 500, "end": 501, "count": 1}]
    content = checks["content"]
    pc, oc = bronze["_partition"][changed_at].as_py(), bronze["_offset"][changed_at].as_py()
    assert content.ranges == [{"partition": pc, "start": oc, "end": oc + 1, "count": 1}]
    sample = content.samples[0]
    assert sample["source"]["amount"] != sample["sink"]["amount"]
    # the duplicate and the phantom (a copy of another row) each repeat an event_id
    assert checks["duplicate_event_ids"].observed == 2


def test_a_quarantined_record_with_another_reason_is_a_content_mismatch(made):
    q = made["quarantine"]
    reasons = q["reason"].to_pylist()
    reasons[0] = "schema_mismatch" if reasons[0] != "schema_mismatch" else "invalid_json"
    altered = q.set_column(q.column_names.index("reason"), "reason", pa.array(reasons, pa.string()))
    _, checks = reconcile(made, quarantine=altered)
    assert _failed(checks) == {"content"}
    assert checks["content"].ranges[0]["count"] == 1


def _columnar(made, monkeypatch=None, wrong_at: int | None = None):
    """The source judged as an audit judges it (the columnar judge, the reference for the rest and a
    sample); with `wrong_at`, the columnar judge made to misread that record's amount (a bug in it)."""
    from onceflow.audit import columnar_judge, native_judge, source

    if wrong_at is not None:
        for engine in (columnar_judge.ColumnarJudge, native_judge.NativeJudge):  # whichever the audit uses

            def misread(self, values, judge=engine.judge):
                out = judge(self, values)
                amount = out["amount"].to_pylist()
                amount[wrong_at] = amount[wrong_at] + 7
                column = pa.array(amount, out["amount"].type)
                return out.set_column(out.column_names.index("amount"), "amount", column)

            monkeypatch.setattr(engine, "judge", misread)
    return source.judge_records(made["pipeline"], [], [_raw(60)], sample=3)


def test_the_columnar_judge_reads_the_plain_records_and_agrees(made):
    judged = _columnar(made)
    assert judged.columnar == 51 and judged.sampled == 3 and not judged.disagreements
    result, checks = reconcile({**made, "source": judged})
    assert _failed(checks) == set() and result.judged_columnar == 51
    assert checks["judges_agree"].observed == {"disagreements": 0, "judged_by_both": 3, "columnar": 51}


def test_a_record_the_columnar_judge_misreads_is_judged_again_and_named(made, monkeypatch):
    """The sinks hold what the reference reads; the columnar judge (made wrong at one record) reads
    otherwise: the reconciliation judges the disputed record again, the reference's verdict stands,
    so the data passes, and the disagreement fails `judges_agree` at its offset."""
    judged = _columnar(made, monkeypatch, wrong_at=1)  # record 1: partition 1, offset 0
    assert not judged.disagreements  # the sample did not hold it
    result, checks = reconcile({**made, "source": judged})
    assert _failed(checks) == {"judges_agree"}
    assert judged.disagreements == [(1, 0)] and judged.rejudged == 1
    assert "partition 1 offset 0" in checks["judges_agree"].detail and result.judged_columnar == 50


def test_a_changed_row_stays_a_content_mismatch_when_the_reference_agrees(made):
    """A row changed in the sink (not a misreading): judged again, the reference agrees with the
    columnar judge, so the content check fails there and the judges agree."""
    bronze = made["bronze"]
    amount = bronze.column("amount").to_pylist()
    amount[8] = amount[8] + 1
    altered = bronze.set_column(bronze.column_names.index("amount"), "amount", pa.array(amount, bronze["amount"].type))
    judged = _columnar(made)
    _, checks = reconcile({**made, "source": judged}, bronze=altered)
    assert _failed(checks) == {"content"} and judged.rejudged == 1 and not judged.disagreements
