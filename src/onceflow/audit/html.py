"""The human page of an audit, read at a glance: the verdict first, then what failed and the
root-cause notes, timings, charts, and every check grouped by kind (a group that passed is
collapsed). The data stays in summary.json; this only lays it out.

One HTML file with inline CSS, from the template web/templates/audit-report.html with autoescape
(every value of the summary is text on the page, never markup). Charts are drawn by Chart.js from
`assets/` next to the page (copied there by `write_page`; never a CDN), so the page also works with
no network and, without JavaScript, still shows every table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onceflow.reconcile import AuditStatus, CheckGroup, CheckStatus
from onceflow.web import render_page

ASSETS = "assets"  # folder next to index.html holding the chart scripts

# the heading of each check group (reconcile.CheckGroup, set where each check is built), in page
# order; a Great Expectations suite is a group of its own
GROUPS: dict[str, str] = {
    CheckGroup.LEDGERS: "Ledgers: checkpoint and sink ledgers agree",
    CheckGroup.ROWS: "Rows: Kafka's committed records vs the tables",
    CheckGroup.AGGREGATES: "Aggregates: the streaming table vs a batch recomputation",
    CheckGroup.CURRENT: "Keyed table: the current state vs a replay of its bronze changes",
    CheckGroup.KAFKA_OUTPUT: "Kafka output topic",
}
PHASES = {
    "committed_point": "read the committed point",
    "reconcile_rows": "reconcile rows",
    "reconcile_aggregates": "reconcile aggregates",
    "reconcile_current": "reconcile the keyed table",
    "great_expectations": "Great Expectations",
    "report": "write the report",
    "total": "total",
}


def check_group(check: dict) -> str:
    """The heading a check is shown under: its group's (a GX check: its suite's, the second part of
    its name gx.<suite>.<expectation>)."""
    group = str(check.get("group"))
    if group == CheckGroup.GX:
        name = check.get("name", "")
        return f"Great Expectations: {name.split('.')[1] if name.count('.') >= 2 else 'other'}"
    return GROUPS.get(group, group)  # a group this page does not know (a newer summary's): its own name


def group_checks(checks: list[dict]) -> list[tuple[str, list[dict]]]:
    """(group, checks) in page order: reconciliation groups first, then GX suites as they ran."""
    groups: dict[str, list[dict]] = {g: [] for g in GROUPS.values()}
    for c in checks:
        groups.setdefault(check_group(c), []).append(c)
    return [(g, cs) for g, cs in groups.items() if cs]


def chart_data(summary: dict) -> dict:
    """What the charts draw: per-partition counts and the pipeline's recent batches."""
    parts = [
        {k: r.get(k) for k in ("partition", "source_records", "bronze_rows", "quarantine_rows")}
        for r in summary.get("partitions") or []
    ]
    return {"partitions": parts, "batches": summary.get("batches") or []}


CHARTS = (  # (chart, title, what an empty one says)
    ("partitions", "Per partition: committed records vs rows", "no partition was audited"),
    ("durations", "Batch durations", "no batch in the pipeline's status log"),
    ("rate", "Input rate per batch", "no batch in the pipeline's status log"),
    ("lag", "Lag after each batch (offsets)", "no batch with a lag in the pipeline's status log"),
)
PARTITION_COLUMNS = (
    "partition",
    "start",
    "end",
    "source_records",
    "source_valid",
    "source_malformed",
    "bronze_rows",
    "quarantine_rows",
    "lost_records",
    "phantom_rows",
    "duplicate_keys",
    "content_mismatches",
)


def _verdict(checks: list[dict], failed: list[dict]) -> str:
    """'; FAILED: loss, content and 3 Great Expectations expectation(s)' (empty when none failed)."""
    if not failed:
        return ""
    failed_recon = [c["name"] for c in failed if c["source"] == "reconcile"]
    failed_gx = len(failed) - len(failed_recon)
    return (
        "; FAILED: "
        + ", ".join(failed_recon)
        + (f"{' and ' if failed_recon else ''}{failed_gx} Great Expectations expectation(s)" if failed_gx else "")
    )


def _timings(summary: dict) -> list[tuple[str, Any, int]]:
    """(phase, seconds, bar width in px) for each phase, then the total (no bar)."""
    timings = summary.get("timings") or {}
    longest = max((v for k, v in timings.items() if k != "total" and isinstance(v, (int, float))), default=0) or 1
    rows = []
    for key, value in sorted(timings.items(), key=lambda kv: kv[0] == "total"):  # phases, then the total
        width = 0 if key == "total" or not isinstance(value, (int, float)) else int(200 * value / longest)
        rows.append((PHASES.get(key, key.replace("_", " ")), value, width))
    return rows


def _partitions(summary: dict) -> list[tuple[dict, bool, bool]]:
    """(row, something is wrong in it, the checksums are equal) per audited partition."""
    out = []
    for r in summary.get("partitions") or []:
        bad = (
            r.get("lost_records")
            or r.get("phantom_rows")
            or r.get("duplicate_keys")
            or r.get("content_mismatches")
            or r.get("source_checksum") != r.get("sink_checksum")
            or r.get("source_records") != r.get("sink_rows")
        )
        out.append((r, bool(bad), r.get("source_checksum") == r.get("sink_checksum")))
    return out


def _groups(checks: list[dict]) -> list[tuple[str, list[dict], int]]:
    """(group, its checks with the failed ones first, how many failed), in page order."""
    return [
        (
            group,
            sorted(cs, key=lambda c: c["status"] != CheckStatus.FAILED),
            sum(c["status"] == CheckStatus.FAILED for c in cs),
        )
        for group, cs in group_checks(checks)
    ]


def render(summary: dict, assets: str = ASSETS) -> str:
    """summary.json → index.html; `assets` is where the chart scripts are, relative to the page."""
    checks = summary.get("checks", [])
    failed = [c for c in checks if c["status"] == CheckStatus.FAILED]
    return render_page(
        "audit-report.html",
        s=summary,
        title=f"{summary['pipeline']} audit {summary['run_id']}: {summary['status'].upper()}",
        checks=checks,
        failed=failed,
        verdict=_verdict(checks, failed),
        timings=_timings(summary),
        charts=CHARTS,
        chart_data=chart_data(summary),
        partition_columns=PARTITION_COLUMNS,
        partitions=_partitions(summary),
        groups=_groups(checks),
        error=AuditStatus.ERROR,
        failed_status=CheckStatus.FAILED,
        assets=assets,
    )


def write_page(directory: Path, summary: dict) -> Path:
    """index.html and its chart assets into an audit's report folder."""
    from onceflow.web import copy_chart_assets

    copy_chart_assets(directory / ASSETS)
    path = directory / "index.html"
    path.write_text(render(summary))
    return path
