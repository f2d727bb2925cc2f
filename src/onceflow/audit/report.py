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

from onceflow.offsets import as_json
from onceflow.paths import project_root
from onceflow.reconcile import AuditStatus, CheckStatus

SCHEMA_VERSION = 1
WATERMARK = "watermark.json"
STATUS_EXIT: dict[str, int] = {AuditStatus.PASSED: 0, AuditStatus.FAILED: 1, AuditStatus.ERROR: 2}


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
