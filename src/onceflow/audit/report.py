"""Where audit reports live and what they hold.

    <root>/<pipeline>/<run id>/summary.json   machine-readable (docs/schemas/audit-summary.schema.json)
    <root>/<pipeline>/<run id>/index.html     the human summary page (charts: assets/, bundled Chart.js)
    <root>/<pipeline>/<run id>/data_docs/     the Great Expectations Data Docs site
    <root>/<pipeline>/latest                  → the newest run's directory (a relative symlink)
    <root>/<pipeline>/watermark.json          the end offsets of the last *passed* audit (for --since-last)

The root is --report-dir, else $ONCEFLOW_REPORTS, else `reports/` in the project.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from onceflow.offsets import as_json
from onceflow.paths import project_root
from onceflow.reconcile import AuditScope, AuditStatus, CheckGroup, CheckStatus
from onceflow.wire import BatchPoint, Count, IsoTime, OpenWire, Wire

SCHEMA_VERSION = 1
WATERMARK = "watermark.json"
STATUS_EXIT: dict[str, int] = {AuditStatus.PASSED: 0, AuditStatus.FAILED: 1, AuditStatus.ERROR: 2}


# -- summary.json: its model (docs/schemas/audit-summary.schema.json is generated from it) ----------
Offset = Annotated[int, Field(ge=0)]
# partition (as a string) -> offset: the next offset to read, i.e. everything below it
Offsets = dict[Annotated[str, Field(pattern="^[0-9]+$")], Offset]
# sum of 64-bit row hashes as a decimal string (order-independent)
Checksum = Annotated[str, Field(pattern="^-?[0-9]+$")]


class OffendingRange(Wire):
    """An offending run of offsets in one partition: [start, end), `count` records in it."""

    partition: int | None
    start: int | None
    end: int | None
    count: Count


class CheckResult(Wire):
    """One check as summary.json holds it (onceflow.reconcile.Check.as_dict)."""

    name: str = Field(
        description="reconciliation checks: a plain name (loss, phantoms, …); GX expectations: "
        "gx.<suite>.<expectation type>[<columns>]"
    )
    title: str = Field(description="what the check proves")
    status: CheckStatus
    expected: Any = Field(description="the value the check requires (number, object of numbers, expectation arguments)")
    observed: Any = Field(description="the value the audit found")
    detail: str = Field(description="one line on what broke, empty when the check passed")
    source: Literal["reconcile", "gx"]
    partitions: list[int] = Field(description="partitions where the check failed")
    ranges: list[OffendingRange] = Field(max_length=1000)
    ranges_total: Count = Field(description="all offending ranges (`ranges` lists at most 1000)")
    samples: list[dict[str, Any]] = Field(
        max_length=20, description="a few offending rows (sink rows, source records, or both)"
    )
    group: CheckGroup = Field(description="the part of the audit it belongs to: the page groups checks by it")


class Backfill(OpenWire):
    version: int | None
    rows: Count
    written: list[dict[str, Any]] = Field(
        description="per partition: first and last offset re-written, and the row count"
    )


class SinkPoint(Wire):
    """One sink's ledger at the committed point (onceflow.reconcile.SinkView)."""

    name: str
    path: str
    exists: bool
    version: int | None = Field(ge=0, description="the Delta version audited (pinned at the start)")
    entries: Count
    generation: int | None = Field(ge=0)
    last_batch: int | None = Field(ge=0)
    end: Offsets | None = Field(description="the ledger's end offsets")
    at_point: Offsets | None = Field(
        description="the ledger's end at the checkpoint's committed batch; null if no entry ends there"
    )
    ahead: Count = Field(description="ledger entries beyond the checkpoint's committed batch")
    foreign_commits: list[dict[str, Any]] = Field(
        description="commits without a ledger entry that may change data (manual writes, …)"
    )
    maintenance_commits: Count | None = Field(
        default=None,
        description="compactions and vacuums (OPTIMIZE, auto compaction, VACUUM, REORG): files moved, no row "
        "changed; never ledger entries",
    )
    follows: str | None = Field(
        default=None,
        description="the sink whose batches this one is derived from (the aggregates follow bronze), or null for "
        "a sink written from Kafka",
    )
    trails: Count | None = Field(
        default=None,
        description="for a follower: the batches of the sink it follows that it does not hold yet (the next merge "
        "brings them); it is audited over the batches it holds",
    )
    backfills: list[Backfill] | None = Field(
        default=None,
        description="commits of `onceflow backfill` (BACKFILL ledger entries): rows re-written inside the "
        "committed range",
    )


class CheckpointPoint(Wire):
    path: str | None
    exists: bool
    usable: bool
    last_committed: int | None = Field(ge=0)
    uncommitted: int | None = Field(ge=0)
    generation: int | None = Field(ge=0)
    offsets: Offsets | None = Field(description="end offsets of the last committed batch")


class PartitionPoint(Wire):
    partition: Offset
    first: int | None = Field(ge=0, description="where the pipeline started reading")
    start: int | None = Field(ge=0)
    end: Offset
    records_span: Count
    not_retained: list[int] | None = Field(
        min_length=2, max_length=2, description="[start, end) committed but no longer in Kafka: not verifiable"
    )


class CommittedPointFacts(Wire):
    """The checkpoint, the sink ledgers and Kafka as read once at the start (onceflow.reconcile.CommittedPoint)."""

    topic: str
    mode: AuditScope
    running: bool = Field(description="the pipeline's job held its run lock at the start")
    checkpoint: CheckpointPoint
    sinks: dict[str, SinkPoint]
    partitions: list[PartitionPoint]
    accepted_loss: list[dict[str, Any]]
    watermark: dict[str, Any] | None = Field(description="the last passed audit this since-last audit continues from")


class AuditedRange(Wire):
    partition: Offset
    start: Offset
    end: Offset


class Counts(Wire):
    """Totals over the audited ranges; empty when the audit could not run."""

    source_records: Count | None = Field(default=None, description="committed Kafka records in the audited ranges")
    source_valid: Count | None = None
    source_malformed: Count | None = None
    bronze_rows: Count | None = None
    quarantine_rows: Count | None = None
    sink_rows: Count | None = None
    lost_records: Count | None = None
    phantom_rows: Count | None = None
    duplicate_keys: Count | None = None
    extra_copies: Count | None = None
    content_mismatches: Count | None = None
    offsets_audited: Count | None = Field(
        default=None, description="offsets spanned (records + transaction markers + aborted records)"
    )
    partitions_audited: Count | None = None
    aggregate_windows: Count | None = Field(default=None, description="windows in the batch recomputation compared")
    judged_columnar: Count | None = Field(
        default=None, description="source records whose verdict is the columnar judge's (the reference judged the rest)"
    )


class PartitionCounts(Wire):
    partition: Offset
    start: int | None = Field(ge=0)
    end: int | None = Field(ge=0)
    source_records: Count
    source_valid: Count
    source_malformed: Count
    bronze_rows: Count
    quarantine_rows: Count
    sink_rows: Count
    lost_records: Count
    phantom_keys: Count
    phantom_rows: Count
    duplicate_keys: Count
    extra_copies: Count
    content_mismatches: Count
    source_checksum: Checksum
    sink_checksum: Checksum


class DataDocs(Wire):
    index: str | None = Field(default=None, description="the Data Docs index, relative to the report directory")
    suites: dict[str, str] | None = Field(
        default=None, description="suite → its validation page, relative to the report directory"
    )
    statistics: dict[str, Any] | None = Field(
        default=None, description="GX statistics per suite (evaluated/successful expectations)"
    )


class Watermark(Wire):
    """The end offsets a passed audit stores for the next --since-last."""

    run_id: str
    time: IsoTime
    topic: str
    offsets: Offsets | None


class AuditSummary(Wire):
    """reports/<pipeline>/<run id>/summary.json, written by `onceflow audit` (onceflow.audit.run.run_audit).
    See docs/audit.md."""

    model_config = Wire.model_config | {"title": "onceflow audit summary"}

    schema_version: Literal[1]
    pipeline: str
    run_id: str = Field(pattern="^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")
    status: AuditStatus = Field(description="error: the audit could not run (see reason)")
    exit_code: Literal[0, 1, 2] = Field(description="0 passed, 1 a data problem found, 2 the audit could not run")
    mode: AuditScope
    reason: str | None = Field(description="why the audit could not run (status error), else null")
    topic: str
    started_at: IsoTime
    finished_at: IsoTime | None
    report_dir: str
    committed_point: CommittedPointFacts | None = Field(
        description="the checkpoint, the sink ledgers and Kafka as read once at the start; null if the audit "
        "stopped before"
    )
    ranges: list[AuditedRange] = Field(description="the offset ranges audited, [start, end) per partition")
    counts: Counts
    partitions: list[PartitionCounts]
    checks: list[CheckResult]
    failed_checks: list[str]
    timings: dict[str, Annotated[float, Field(ge=0)]] = Field(description="seconds per phase, and the total")
    throughput_rows_per_second: float | None = Field(
        ge=0, description="committed source records audited per second of the whole audit"
    )
    data_docs: DataDocs
    notes: list[str]
    batches: list[BatchPoint] | None = Field(
        default=None,
        description="the pipeline's newest committed micro-batches (at most 300, oldest first) from its status "
        "log when the audit ran: what the report's batch charts draw",
    )
    watermark: Watermark | None = Field(
        default=None, description="present when the audit passed: the end offsets stored for the next --since-last"
    )


def report_root(report_dir: str | os.PathLike | None = None) -> Path:
    """Where audit reports go: `report_dir`, else $ONCEFLOW_REPORTS, else <state>/reports."""
    from onceflow.paths import reports_dir

    return Path(report_dir).resolve() if report_dir else reports_dir()


def new_run_id(now: datetime | None = None) -> str:
    """Sortable by time, unique across concurrent audits: 20261122T120301Z-3fa9c1."""
    now = now or datetime.now(UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def run_dir(root: Path, pipeline: str, run_id: str) -> Path:
    path = root / pipeline / run_id
    path.mkdir(parents=True, exist_ok=False)
    return path


def point_latest(root: Path, pipeline: str, run_id: str) -> Path:
    """Atomically re-point `<root>/<pipeline>/latest` at this run."""
    base = root / pipeline
    tmp = base / f".latest.{run_id}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run_id, target_is_directory=True)
    os.replace(tmp, base / "latest")
    return base / "latest"


def read_watermark(root: Path, pipeline: str) -> dict | None:
    """The last passed audit's end offsets, or None (never audited, or unreadable: a full audit then)."""
    path = root / pipeline / WATERMARK
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), dict):
        return None
    return body


def write_watermark(root: Path, pipeline: str, run_id: str, topic: str, offsets: dict[int, int]) -> dict:
    body = {
        "run_id": run_id,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "topic": topic,
        "offsets": as_json(offsets),
    }
    path = root / pipeline / WATERMARK
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2))
    os.replace(tmp, path)
    return body


def write_summary(directory: Path, summary: dict) -> Path:
    path = directory / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=str))
    return path


def recent_batches(state_path: Path, pipeline: str) -> list[dict]:
    """The pipeline's newest batches from its status log (progress events), for the report's charts."""
    from onceflow.state.status import StatusLog
    from onceflow.web import batch_series

    return batch_series(StatusLog(state_path, pipeline).events())


def schema_path() -> Path:
    return project_root() / "docs" / "schemas" / "audit-summary.schema.json"


def audit_verdict(summary: dict) -> dict:
    """passed + what failed, from an audit's summary.json (docs/schemas/audit-summary.schema.json)."""
    status = summary.get("status")
    failed = [
        c.get("name")
        for c in summary.get("checks") or []
        if isinstance(c, dict) and c.get("status") == CheckStatus.FAILED
    ]
    failed = failed or [str(c) for c in summary.get("failed_checks") or []]
    problems = failed or ([f"the audit could not run: {summary.get('reason')}"] if status == AuditStatus.ERROR else [])
    return {
        "passed": status == AuditStatus.PASSED and not failed,
        "status": status,
        "problems": problems,
        "counts": summary.get("counts") or {},
    }


def latest_summary(pipeline_reports: Path) -> dict | None:
    """The newest `<run>/summary.json` under one pipeline's report folder."""
    candidates = []
    latest = pipeline_reports / "latest"
    if (latest / "summary.json").is_file():
        candidates.append(latest.resolve())
    else:
        candidates = sorted(
            (p.parent for p in pipeline_reports.glob("*/summary.json")),
            key=lambda p: (p / "summary.json").stat().st_mtime,
            reverse=True,
        )
    for folder in candidates:
        try:
            summary = json.loads((folder / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(summary, dict):
            return {**summary, "report_dir": str(folder)}
    return None
