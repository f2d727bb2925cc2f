"""The committed point and the pure parts of the audit: no JVM, no broker.

Checkpoints are real directories in Spark's format, read by onceflow.checkpoint;
ledgers are lists of the entries the job writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from onceflow import config
from onceflow.audit import report, suites
from onceflow.audit.html import render
from onceflow.checkpoint import read_checkpoint
from onceflow.errors import AuditError
from onceflow.ledger import EntryKind, Ledger, LedgerEntry
from onceflow.reconcile import AuditScope, CheckStatus, agreement_checks, jsonable, offset_ranges
from onceflow.reconcile import committed_point as plan

TOPIC = "payments"
ROOT = Path(__file__).resolve().parents[2]


def write_checkpoint(root: Path, batches: list[dict[int, int]], committed: int | None, initial: dict[int, int]):
    """A Spark 4 checkpoint: metadata, sources/0/0, offsets/N for each batch, commits/0..committed."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    (root / "metadata").write_text(json.dumps({"id": "3c5f8d55-0000-4000-8000-000000000000"}))
    (root / "sources" / "0" / "0").write_text("\x00v1\n" + json.dumps({TOPIC: {str(p): o for p, o in initial.items()}}))
    for n, end in enumerate(batches):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_700_000_000_000 + n, "conf": {}}
        (root / "offsets" / str(n)).write_text(
            "v1\n" + json.dumps(meta) + "\n" + json.dumps({TOPIC: {str(p): o for p, o in end.items()}})
        )
    for n in range(0 if committed is not None else 1, (committed or -1) + 1):
        (root / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return read_checkpoint(root)


def entries(
    sink: str, batches: list[dict[int, int]], initial: dict[int, int], generation: int = 0, first_batch: int = 0
) -> list[LedgerEntry]:
    out, start = [], dict(initial)
    for i, end in enumerate(batches):
        out.append(
            LedgerEntry(
                pipeline="payments",
                sink=sink,
                generation=generation,
                batch_id=first_batch + i,
                topic=TOPIC,
                start=dict(start),
                end=dict(end),
                rows=sum(end.values()) - sum(start.values()),
                version=i + 1,
            )
        )
        start = dict(end)
    return out


def ledgers(batches, initial, sinks=("aggregates", "quarantine", "bronze"), **overrides) -> dict[str, Ledger]:
    out = {s: Ledger(table=f"/t/{s}", entries=entries(s, batches, initial), foreign_commits=[]) for s in sinks}
    out.update(overrides)
    return out


BATCHES = [{0: 100, 1: 80}, {0: 250, 1: 160}, {0: 400, 1: 300}]
INITIAL = {0: 0, 1: 0}


# -- offsets ---------------------------------------------------------------------------
def test_offset_ranges_are_maximal_runs_end_exclusive():
    assert offset_ranges([7, 3, 4, 5, 9, 10, 4]) == [(3, 6), (7, 8), (9, 11)]
    assert offset_ranges([]) == []


# -- the committed point ---------------------------------------------------------------
def test_agreeing_ledgers_audit_up_to_the_checkpoint(tmp_path):
    cp = write_checkpoint(tmp_path / "cp", BATCHES, committed=2, initial=INITIAL)
    point = plan(TOPIC, cp, ledgers(BATCHES, INITIAL), earliest={0: 0, 1: 0}, checkpoint_generation=0)
    assert point.ranges() == {0: (0, 400), 1: (0, 300)}
    assert all(c.status == CheckStatus.PASSED for c in agreement_checks(point)), point.problems
    assert point.sinks["bronze"].at_point == {0: 400, 1: 300} and point.sinks["bronze"].version == 3


def test_a_ledger_behind_the_checkpoint_fails_and_bounds_the_audit(tmp_path):
    cp = write_checkpoint(tmp_path / "cp", BATCHES, committed=2, initial=INITIAL)
    quarantine = Ledger("/t/quarantine", entries("quarantine", BATCHES[:2], INITIAL), [])
    point = plan(TOPIC, cp, ledgers(BATCHES, INITIAL, quarantine=quarantine), earliest=INITIAL)
    assert point.end == {0: 250, 1: 160}  # min(checkpoint, ledgers): never judge rows a sink may not hold
    failed = {c.name: c for c in agreement_checks(point) if c.status == CheckStatus.FAILED}
    assert (
        "checkpoint_ledger_agreement" in failed
        and "quarantine: the ledger is behind" in failed["checkpoint_ledger_agreement"].detail
    )
    assert "ledger_agreement" in failed  # bronze holds 3 entries, quarantine 2


def test_sinks_recovered_from_their_own_floors_agree_when_they_cover_the_same_offsets(tmp_path):
    """A kill between bronze's and quarantine's commits of batch 1, then a lost checkpoint: the new
    generation starts at the lowest committed point and each sink at its own floor, so bronze holds
    g0b0, g0b1, g1b0 and quarantine g0b0, g1b0 (from its floor to the same end). Same offsets, other
    batch boundaries: no disagreement (the audit said there was one until 2026-11-28). A sink whose
    coverage differs still fails."""
    new_end = {0: 400, 1: 300}
    bronze = [*entries("bronze", BATCHES[:2], INITIAL), *entries("bronze", [new_end], BATCHES[1], generation=1)]
    quarantine = [*entries("quarantine", BATCHES[:1], INITIAL), *entries("quarantine", [new_end], BATCHES[0], 1)]
    aggregates = [*entries("aggregates", BATCHES[:2], INITIAL), *entries("aggregates", [new_end], BATCHES[1], 1)]
    cp = write_checkpoint(tmp_path / "cp", [new_end], committed=0, initial=BATCHES[1])
    sinks = {
        "aggregates": Ledger("/t/aggregates", aggregates, []),
        "quarantine": Ledger("/t/quarantine", quarantine, []),
        "bronze": Ledger("/t/bronze", bronze, []),
    }
    point = plan(TOPIC, cp, sinks, earliest=INITIAL, checkpoint_generation=1)
    assert point.problems["ledger_agreement"] == [], point.problems
    assert point.ranges() == {0: (0, 400), 1: (0, 300)}

    short = [*entries("quarantine", BATCHES[:1], INITIAL), *entries("quarantine", [new_end], BATCHES[1], 1)]
    point = plan(TOPIC, cp, {**sinks, "quarantine": Ledger("/t/quarantine", short, [])}, earliest=INITIAL)
    assert point.problems["ledger_agreement"], "quarantine lacks [100, 250) and [80, 160): a disagreement"


def test_aggregates_that_trail_bronze_are_a_lag_not_a_disagreement(tmp_path):
    """The aggregates follow bronze (sink_kinds.FOLLOWS): after a kill between bronze's commit and the
    aggregates' merge they hold fewer batches. That is no disagreement and does not bound the
    audited range; the aggregates are judged over the batches their ledger holds."""
    cp = write_checkpoint(tmp_path / "cp", BATCHES, committed=2, initial=INITIAL)
    trailing = Ledger("/t/aggregates", entries("aggregates", BATCHES[:1], INITIAL), [])
    point = plan(TOPIC, cp, ledgers(BATCHES, INITIAL, aggregates=trailing), earliest=INITIAL, checkpoint_generation=0)
    assert point.end == {0: 400, 1: 300}
    assert all(c.status == CheckStatus.PASSED for c in agreement_checks(point)), point.problems
    view = point.sinks["aggregates"]
    assert (view.follows, view.trails, view.end) == ("bronze", 2, {0: 100, 1: 80})
    assert point.sinks["bronze"].follows is None

    # a follower holding offsets bronze does not cannot have merged them from it
    ahead = Ledger("/t/aggregates", entries("aggregates", [*BATCHES, {0: 500, 1: 300}], INITIAL), [])
    point = plan(TOPIC, cp, ledgers(BATCHES, INITIAL, aggregates=ahead), earliest=INITIAL, running=True)
    failed = {c.name: c for c in agreement_checks(point) if c.status == CheckStatus.FAILED}
    assert "aggregates holds offsets {'0': 500}, beyond what bronze holds" in failed["ledger_agreement"].detail


def test_one_uncommitted_batch_ahead_is_normal_but_more_is_not(tmp_path):
    ahead = [*BATCHES, {0: 500, 1: 350}]
    cp = write_checkpoint(tmp_path / "cp", ahead, committed=2, initial=INITIAL)  # offsets/3 planned, not committed
    point = plan(TOPIC, cp, ledgers(ahead, INITIAL), earliest=INITIAL)
    assert point.end == {0: 400, 1: 300} and point.sinks["bronze"].ahead == 1
    assert all(c.status == CheckStatus.PASSED for c in agreement_checks(point)), point.problems

    more = [*ahead, {0: 600, 1: 400}]
    cp2 = write_checkpoint(tmp_path / "cp2", BATCHES, committed=2, initial=INITIAL)
    stopped = plan(TOPIC, cp2, ledgers(more, INITIAL), earliest=INITIAL)
    assert any("beyond the checkpoint" in p for p in stopped.problems["checkpoint_ledger_agreement"])
    running = plan(TOPIC, cp2, ledgers(more, INITIAL), earliest=INITIAL, running=True)
    assert running.problems["checkpoint_ledger_agreement"] == []  # a running job commits sinks first
    assert running.end == {0: 400, 1: 300}  # still the point read at the start


def test_checkpoint_batch_offsets_must_match_the_ledger_entry(tmp_path):
    cp = write_checkpoint(tmp_path / "cp", BATCHES, committed=2, initial=INITIAL)
    bad = entries("bronze", BATCHES, INITIAL)
    bad[1] = LedgerEntry(**{**bad[1].__dict__, "end": {0: 251, 1: 160}})
    point = plan(
        TOPIC,
        cp,
        ledgers(BATCHES, INITIAL, bronze=Ledger("/t/bronze", bad, [])),
        earliest=INITIAL,
        checkpoint_generation=0,
    )
    problems = " ".join(point.problems["checkpoint_ledger_agreement"])
    assert "batch 1 (generation 0) ends at {'0': 251, '1': 160} in the ledger" in problems
    assert point.problems["ledger_contiguity"]  # batch 2 starts where batch 1 did not end


def test_no_checkpoint_audits_up_to_the_ledgers_and_says_so(tmp_path):
    cp = read_checkpoint(tmp_path / "missing")
    point = plan(TOPIC, cp, ledgers(BATCHES, INITIAL), earliest=INITIAL)
    assert point.end == {0: 400, 1: 300}
    assert "does not exist" in point.problems["checkpoint_ledger_agreement"][0]


def test_nothing_committed_cannot_be_audited(tmp_path):
    empty = {s: Ledger(f"/t/{s}", [], [], exists=False) for s in ("bronze", "quarantine")}
    with pytest.raises(AuditError, match=r"nothing to audit.*onceflow ingest"):
        plan(TOPIC, read_checkpoint(tmp_path / "none"), empty)


def test_since_last_starts_at_the_watermark_clamped_to_the_point(tmp_path):
    cp = write_checkpoint(tmp_path / "cp", BATCHES, committed=2, initial=INITIAL)
    watermark = {"run_id": "r", "topic": TOPIC, "offsets": {"0": 250, "1": 900}}
    since = AuditScope.SINCE_LAST
    point = plan(TOPIC, cp, ledgers(BATCHES, INITIAL), mode=since, watermark=watermark, earliest=INITIAL)
    assert point.ranges() == {0: (250, 400)}  # partition 1: watermark beyond the point → nothing to audit
    full = plan(TOPIC, cp, ledgers(BATCHES, INITIAL), mode=AuditScope.FULL, watermark=watermark, earliest=INITIAL)
    assert full.ranges() == {0: (0, 400), 1: (0, 300)}


def test_offsets_kafka_no_longer_holds_are_left_out_and_reported(tmp_path):
    cp = write_checkpoint(tmp_path / "cp", BATCHES, committed=2, initial=INITIAL)
    point = plan(TOPIC, cp, ledgers(BATCHES, INITIAL), earliest={0: 120, 1: 0})
    assert point.ranges() == {0: (120, 400), 1: (0, 300)}
    assert point.not_retained == {0: (0, 120)}


def test_pipeline_that_started_late_audits_from_its_first_offsets(tmp_path):
    initial = {0: 50, 1: 20}
    cp = write_checkpoint(tmp_path / "cp", BATCHES, committed=2, initial=initial)
    point = plan(TOPIC, cp, ledgers(BATCHES, initial), earliest={0: 0, 1: 0})
    assert point.ranges() == {0: (50, 400), 1: (20, 300)}


def test_accepted_loss_entries_are_listed(tmp_path):
    cp = write_checkpoint(tmp_path / "cp", BATCHES, committed=2, initial=INITIAL)
    bronze = entries("bronze", BATCHES, INITIAL)
    loss = LedgerEntry(
        "payments", "bronze", 1, 0, TOPIC, start={0: 400, 1: 300}, end={0: 450, 1: 300}, kind=EntryKind.LOSS
    )
    point = plan(TOPIC, cp, {"bronze": Ledger("/t/bronze", [*bronze, loss], [])}, earliest=INITIAL, running=True)
    assert point.accepted_loss == [{"partition": 0, "start": 400, "end": 450, "sink": "bronze", "batch_id": 0}]


# -- values and suites -----------------------------------------------------------------
def test_jsonable_keeps_big_hashes_and_decimals_exact():
    from decimal import Decimal

    out = jsonable({"h": 2**63 - 1, "d": Decimal("12.30"), "b": b"x" * 300, 1: [1, 2]})
    assert out["h"] == str(2**63 - 1) and out["d"] == "12.30" and out["1"] == [1, 2]
    assert out["b"].startswith("x" * 200) and "(300 bytes)" in out["b"]


def test_suite_schemas_follow_the_table_ddl():
    import great_expectations.expectations as gxe

    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow import tables

    types = suites.ddl_types(tables.bronze_ddl(PAYMENTS_SCHEMA))
    assert types["amount"] == "DecimalType" and types["_offset"] == "LongType" and len(types) == 12
    pipeline = config.load(ROOT / "pipelines" / "payments.yaml", env={})
    bronze = suites.bronze_suite(pipeline, committed_valid=42)
    counts = [e for e in bronze.expectations if isinstance(e, gxe.ExpectTableRowCountToEqual)]
    assert counts and counts[0].value == 42
    names = {(e.meta or {}).get("check") for e in suites.findings_suite().expectations}
    assert names == set(suites.FINDING_CHECKS)


# -- report files ----------------------------------------------------------------------
def _summary(status: str = "failed") -> dict:
    check = {
        "name": "loss",
        "title": "no committed record is missing",
        "status": CheckStatus.FAILED,
        "expected": 0,
        "observed": 3,
        "detail": "lost: partition 1 [10, 13) (3)",
        "source": "reconcile",
        "partitions": [1],
        "ranges": [{"partition": 1, "start": 10, "end": 13, "count": 3}],
        "ranges_total": 1,
        "samples": [{"_partition": 1, "_offset": 10, "event_id": "<script>alert(1)</script>"}],
        "group": "rows",
    }
    ok = {
        **check,
        "name": "phantoms",
        "title": "no phantom",
        "status": CheckStatus.PASSED,
        "observed": 0,
        "detail": "",
        "partitions": [],
        "ranges": [],
        "ranges_total": 0,
        "samples": [],
    }
    part = {
        "partition": 1,
        "start": 0,
        "end": 20,
        "source_records": 18,
        "source_valid": 17,
        "source_malformed": 1,
        "bronze_rows": 14,
        "quarantine_rows": 1,
        "sink_rows": 15,
        "lost_records": 3,
        "phantom_keys": 0,
        "phantom_rows": 0,
        "duplicate_keys": 0,
        "extra_copies": 0,
        "content_mismatches": 0,
        "source_checksum": "-123",
        "sink_checksum": "456",
    }
    return {
        "schema_version": 1,
        "pipeline": "payments",
        "run_id": "20261122T120000Z-abcdef",
        "status": status,
        "exit_code": report.STATUS_EXIT[status],
        "mode": "full",
        "reason": None,
        "topic": TOPIC,
        "started_at": "2026-11-22T12:00:00+00:00",
        "finished_at": "2026-11-22T12:01:00+00:00",
        "report_dir": "/r",
        "committed_point": None,
        "ranges": [{"partition": 1, "start": 0, "end": 20}],
        "counts": {"source_records": 18, "lost_records": 3},
        "partitions": [part],
        "checks": [check, ok],
        "failed_checks": ["loss"],
        "timings": {"total": 60.0},
        "throughput_rows_per_second": 0.3,
        "data_docs": {"index": "data_docs/index.html", "suites": {}},
        "notes": [],
    }


def test_summary_schema_accepts_a_summary_and_rejects_a_wrong_status():
    schema = json.loads((ROOT / "docs" / "schemas" / "audit-summary.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(_summary())
    bad = {**_summary(), "status": "ok"}
    assert not validator.is_valid(bad)
    assert not validator.is_valid({**_summary(), "checks": [{**_summary()["checks"][0], "group": "guessed"}]})


def test_html_shows_failing_checks_first_with_ranges_and_escapes_values():
    page = render(_summary())
    assert "FAILED" in page and "Failing checks" in page
    assert page.index("id='check-loss'") < page.index("All checks")
    assert "<td class='num'>10</td><td class='num'>13</td>" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert "data_docs/index.html" in page


def test_latest_points_at_the_newest_run_and_watermark_round_trips(tmp_path):
    for run in ("20260101T000000Z-aaaaaa", "20260101T000001Z-bbbbbb"):
        report.run_dir(tmp_path, "payments", run)
        report.point_latest(tmp_path, "payments", run)
    latest = tmp_path / "payments" / "latest"
    assert latest.is_symlink() and latest.resolve().name == "20260101T000001Z-bbbbbb"
    assert report.read_watermark(tmp_path, "payments") is None
    report.write_watermark(tmp_path, "payments", "r1", TOPIC, {1: 20, 0: 5})
    watermark = report.read_watermark(tmp_path, "payments")
    assert watermark is not None and watermark["offsets"] == {"0": 5, "1": 20}
    (tmp_path / "payments" / report.WATERMARK).write_text("{torn")
    assert report.read_watermark(tmp_path, "payments") is None  # unreadable → a full audit, never a crash
