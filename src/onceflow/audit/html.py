"""The human page of an audit, read at a glance: the verdict first, then what failed and the
root-cause notes, timings, charts, and every check grouped by kind (a group that passed is
collapsed). The data stays in summary.json; this only lays it out.

One HTML file with inline CSS. Charts are drawn by Chart.js from `assets/` next to the page
(copied there by `write_page`; never a CDN), so the page also works with no network and,
without JavaScript, still shows every table.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

ASSETS = "assets"  # folder next to index.html holding the chart scripts

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{padding:18px 28px;color:#fff}
header.passed{background:#1a7f37} header.failed{background:#cf222e} header.error{background:#9a6700}
header h1{margin:0 0 4px;font-size:22px} header p{margin:0;opacity:.92}
main{padding:12px 28px 40px;max-width:1400px}
section,details.group{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:16px 0;padding:12px 16px}
section.why{border:2px solid #cf222e} section.why.error{border-color:#9a6700}
h2{font-size:16px;margin:4px 0 10px} h3{font-size:14px;margin:14px 0 6px}
details.group>summary{cursor:pointer;font-weight:600;font-size:15px}
details.group[open]>summary{margin-bottom:8px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #eaeef2;padding:4px 8px;text-align:left;vertical-align:top}
table.checks td,td code{overflow-wrap:anywhere}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff}
.badge.passed{background:#1a7f37} .badge.failed{background:#cf222e} .badge.skipped{background:#6e7781}
tr.bad td{background:#ffebe9}
ul.failing li{margin:4px 0} ul.notes li{margin:4px 0}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{white-space:pre-wrap;background:#f6f8fa;padding:8px;border-radius:4px;margin:4px 0;max-height:260px;overflow:auto}
.muted{color:#656d76} a{color:#0969da}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px 24px}
.chart{position:relative;height:240px} .chart-box h3{margin-top:4px}
.bar{display:inline-block;height:10px;background:#8250df;border-radius:2px;vertical-align:middle}
"""

# how checks are grouped on the page, in this order (a GX suite is a group of its own)
LEDGER_CHECKS = ("checkpoint_ledger_agreement", "ledger_agreement", "ledger_contiguity")
GROUPS = (
    "Ledgers: checkpoint and sink ledgers agree",
    "Rows: Kafka's committed records vs the tables",
    "Aggregates: the streaming table vs a batch recomputation",
    "Kafka output topic",
)
PHASES = {
    "committed_point": "read the committed point",
    "reconcile_rows": "reconcile rows",
    "reconcile_aggregates": "reconcile aggregates",
    "great_expectations": "Great Expectations",
    "report": "write the report",
    "total": "total",
}


def check_group(check: dict) -> str:
    """The kind of a check, as the page groups it."""
    name = check.get("name", "")
    if check.get("source") == "gx":
        suite = name.split(".")[1] if name.count(".") >= 2 else "other"
        return f"Great Expectations: {suite}"
    if name in LEDGER_CHECKS:
        return GROUPS[0]
    if name == "aggregates":
        return GROUPS[2]
    if name.startswith("kafka_"):
        return GROUPS[3]
    return GROUPS[1]


def group_checks(checks: list[dict]) -> list[tuple[str, list[dict]]]:
    """(group, checks) in page order: reconciliation groups first, then GX suites as they ran."""
    groups: dict[str, list[dict]] = {g: [] for g in GROUPS}
    for c in checks:
        groups.setdefault(check_group(c), []).append(c)
    return [(g, cs) for g, cs in groups.items() if cs]


def _v(value: Any) -> str:
    if value is None:
        return '<span class="muted">—</span>'
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=str)
        return f"<code>{escape(text[:600])}{'…' if len(text) > 600 else ''}</code>"
    return escape(str(value))


def _badge(status: str) -> str:
    return f'<span class="badge {escape(status)}">{escape(status.upper())}</span>'


def _samples(samples: list) -> str:
    """Flat rows as a table (one column per field); nested ones (source vs sink) as one JSON line each."""
    if all(isinstance(s, dict) and not any(isinstance(v, (dict, list)) for v in s.values()) for s in samples):
        cols = list(dict.fromkeys(k for s in samples for k in s))
        head = "".join(f"<th>{escape(str(k))}</th>" for k in cols)
        rows = "".join("<tr>" + "".join(f"<td>{_v(s.get(k))}</td>" for k in cols) + "</tr>" for s in samples)
        return f"<table class='samples'><tr>{head}</tr>{rows}</table>"
    return "".join(f"<pre>{escape(json.dumps(s, default=str)[:2000])}</pre>" for s in samples)


def _check_block(c: dict) -> str:
    parts = [
        f"<h2>{_badge(c['status'])} {escape(c['name'])} <span class='muted'>— {escape(c['title'])}</span></h2>",
        f"<p>expected {_v(c.get('expected'))}, observed {_v(c.get('observed'))}</p>",
    ]
    if c.get("detail"):
        parts.append(f"<p>{escape(c['detail'])}</p>")
    if c.get("ranges"):
        rows = "".join(
            f"<tr><td class='num'>{_v(r.get('partition'))}</td><td class='num'>{_v(r.get('start'))}</td>"
            f"<td class='num'>{_v(r.get('end'))}</td><td class='num'>{_v(r.get('count'))}</td></tr>"
            for r in c["ranges"][:200]
        )
        more = c.get("ranges_total", 0) - min(len(c["ranges"]), 200)
        parts.append(
            "<table><tr><th>partition</th><th>first offset</th><th>end offset (exclusive)</th>"
            f"<th>records</th></tr>{rows}</table>"
            + (f"<p class='muted'>… {more} more ranges in summary.json</p>" if more > 0 else "")
        )
    if c.get("samples"):
        parts.append("<p class='muted'>samples:</p>" + _samples(c["samples"]))
    return f"<section class='check {escape(c['status'])}' id='check-{escape(c['name'])}'>{''.join(parts)}</section>"


def _header(summary: dict, checks: list[dict], failed: list[dict]) -> tuple[str, str]:
    status = summary["status"]
    title = f"{summary['pipeline']} audit {summary['run_id']}: {status.upper()}"
    failed_recon = [c["name"] for c in failed if c["source"] == "reconcile"]
    failed_gx = len(failed) - len(failed_recon)
    verdict = ""
    if failed:
        verdict = (
            "; FAILED: "
            + ", ".join(failed_recon)
            + (f"{' and ' if failed_recon else ''}{failed_gx} Great Expectations expectation(s)" if failed_gx else "")
        )
    head = (
        f"<header class='{escape(status)}'><h1>{escape(title)}</h1><p>{escape(summary.get('mode', ''))} audit of "
        f"topic {escape(str(summary.get('topic')))}; {len(checks) - len(failed)} of {len(checks)} checks passed"
        f"{escape(verdict)}"
        f" — started {escape(str(summary.get('started_at')))}, "
        f"{_v((summary.get('timings') or {}).get('total'))} s</p></header>"
    )
    return title, head


def _why(summary: dict, failed: list[dict]) -> str:
    """The first section: why the audit failed (or could not run) and the notes that explain it."""
    notes = summary.get("notes") or []
    items = "<ul class='notes'>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
    notes_html = f"<h3>Notes (root-cause clues)</h3>{items}" if notes else ""
    if summary["status"] == "error":
        return (
            f"<section class='why error' id='why'><h2>The audit could not run</h2>"
            f"<pre>{escape(str(summary.get('reason')))}</pre>{notes_html}</section>"
        )
    if not failed:
        return f"<section id='why'><h2>Notes</h2>{items}</section>" if notes else ""
    items = "".join(
        f"<li><a href='#check-{escape(c['name'])}'><b>{escape(c['name'])}</b></a>: "
        f"{escape(_short(c.get('detail') or c['title']))}</li>"
        for c in failed
    )
    return (
        f"<section class='why' id='why'><h2>Why it failed: {len(failed)} failing check(s)</h2>"
        f"{notes_html}<h3>Failing checks</h3><ul class='failing'>{items}</ul></section>"
    )


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _timings(summary: dict) -> str:
    timings = summary.get("timings") or {}
    if not timings:
        return ""
    longest = max((v for k, v in timings.items() if k != "total" and isinstance(v, (int, float))), default=0) or 1
    rows = []
    for key, value in sorted(timings.items(), key=lambda kv: kv[0] == "total"):  # phases, then the total
        width = 0 if key == "total" or not isinstance(value, (int, float)) else int(200 * value / longest)
        bar = f"<span class='bar' style='width:{width}px'></span>" if width else ""
        rows.append(
            f"<tr><th>{escape(PHASES.get(key, key.replace('_', ' ')))}</th>"
            f"<td class='num'>{_v(value)} s</td><td>{bar}</td></tr>"
        )
    rate = summary.get("throughput_rows_per_second")
    extra = f"<p class='muted'>{_v(rate)} committed records audited per second</p>" if rate else ""
    return f"<section id='timings'><h2>Timings</h2><table style='width:auto'>{''.join(rows)}</table>{extra}</section>"


def chart_data(summary: dict) -> dict:
    """What the charts draw: per-partition counts and the pipeline's recent batches."""
    parts = [
        {k: r.get(k) for k in ("partition", "source_records", "bronze_rows", "quarantine_rows")}
        for r in summary.get("partitions") or []
    ]
    return {"partitions": parts, "batches": summary.get("batches") or []}


def _charts(summary: dict) -> str:
    data = json.dumps(chart_data(summary), default=str).replace("</", "<\\/")
    boxes = [
        ("partitions", "Per partition: committed records vs rows", "no partition was audited"),
        ("durations", "Batch durations", "no batch in the pipeline's status log"),
        ("rate", "Input rate per batch", "no batch in the pipeline's status log"),
        ("lag", "Lag after each batch (offsets)", "no batch with a lag in the pipeline's status log"),
    ]
    charts = "".join(
        f"<div class='chart-box'><h3>{escape(t)}</h3><div class='chart'><canvas data-chart='{k}' "
        f"data-source='chart-data' data-empty='{escape(e)}' aria-label='{escape(t)}'></canvas></div></div>"
        for k, t, e in boxes
    )
    return (
        f"<section id='charts'><h2>Charts</h2><p class='muted'>Batches: the newest "
        f"{len(summary.get('batches') or [])} progress events of the pipeline's status log when the audit "
        f"ran (times in UTC).</p><div class='charts'>{charts}</div>"
        f"<script type='application/json' id='chart-data'>{data}</script></section>"
    )


def _groups(checks: list[dict]) -> str:
    def name_cell(c: dict) -> str:  # failing checks link to their block above
        name = escape(c["name"])
        return f"<a href='#check-{name}'>{name}</a>" if c["status"] == "failed" else name

    out = []
    for group, cs in group_checks(checks):
        bad = sum(c["status"] == "failed" for c in cs)
        mark = "✗" if bad else "✓"
        state = f"{bad} of {len(cs)} failed" if bad else f"{len(cs)} of {len(cs)} passed"
        rows = "".join(
            f"<tr class='{'bad' if c['status'] == 'failed' else ''}'><td>{_badge(c['status'])}</td>"
            f"<td>{name_cell(c)}</td><td>{escape(c['title'])}</td>"
            f"<td>{_v(c.get('expected'))}</td><td>{_v(c.get('observed'))}</td></tr>"
            for c in sorted(cs, key=lambda c: c["status"] != "failed")
        )
        out.append(
            f"<details class='group {'failed' if bad else 'passed'}'{' open' if bad else ''}>"
            f"<summary>{mark} {escape(group)} — {state}</summary>"
            "<table class='checks'><colgroup><col style='width:7%'><col style='width:25%'>"
            "<col style='width:28%'><col style='width:20%'><col style='width:20%'></colgroup>"
            "<tr><th>status</th><th>check</th><th>what it proves</th>"
            f"<th>expected</th><th>observed</th></tr>{rows}</table></details>"
        )
    return "<h2 id='all-checks'>All checks, by kind</h2>" + "".join(out) if out else ""


def _partitions(summary: dict) -> str:
    parts = summary.get("partitions") or []
    if not parts:
        return ""
    cols = [
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
    ]
    rows = []
    for r in parts:
        bad = (
            r.get("lost_records")
            or r.get("phantom_rows")
            or r.get("duplicate_keys")
            or r.get("content_mismatches")
            or r.get("source_checksum") != r.get("sink_checksum")
            or r.get("source_records") != r.get("sink_rows")
        )
        cells = "".join(f"<td class='num'>{_v(r.get(c))}</td>" for c in cols)
        check = "equal" if r.get("source_checksum") == r.get("sink_checksum") else "DIFFERS"
        rows.append(f"<tr class='{'bad' if bad else ''}'>{cells}<td>{check}</td></tr>")
    return (
        "<section id='partitions'><h2>Per partition (audited offsets [start, end))</h2><table><tr>"
        + "".join(f"<th>{escape(c.replace('_', ' '))}</th>" for c in cols)
        + "<th>checksum</th></tr>"
        + "".join(rows)
        + "</table></section>"
    )


def render(summary: dict, assets: str = ASSETS) -> str:
    """summary.json → index.html; `assets` is where the chart scripts are, relative to the page."""
    checks = summary.get("checks", [])
    failed = [c for c in checks if c["status"] == "failed"]
    title, head = _header(summary, checks, failed)
    body = [_why(summary, failed)]
    if failed:
        body.append("<h2>Failing checks</h2>" + "".join(_check_block(c) for c in failed))
    body.append(_timings(summary))
    body.append(_charts(summary))
    links = ["<a href='summary.json'>summary.json</a>"]
    docs = summary.get("data_docs") or {}
    if docs.get("index"):
        links.append(f"<a href='{escape(docs['index'])}'>Great Expectations Data Docs</a>")
    for suite, page in (docs.get("suites") or {}).items():
        links.append(f"<a href='{escape(page)}'>{escape(suite)} validation</a>")
    body.append(f"<section id='links'><h2>Links</h2><p>{' · '.join(links)}</p></section>")
    counts = summary.get("counts") or {}
    if counts:
        body.append(
            "<section id='counts'><h2>Counts</h2><table>"
            + "".join(
                f"<tr><th>{escape(k.replace('_', ' '))}</th><td class='num'>{_v(v)}</td></tr>"
                for k, v in counts.items()
            )
            + "</table></section>"
        )
    body.append(_partitions(summary))
    body.append(_groups(checks))
    point = summary.get("committed_point")
    if point:
        body.append(
            "<details class='group'><summary>Committed point (read once at the start)</summary>"
            f"<pre>{escape(json.dumps(point, indent=1, default=str)[:20000])}</pre></details>"
        )
    scripts = "".join(
        f"<script src='{escape(assets)}/{name}'></script>" for name in ("chart.umd.min.js", "onceflow-charts.js")
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>{head}<main>{''.join(body)}</main>{scripts}</body></html>"
    )


def write_page(directory: Path, summary: dict) -> Path:
    """index.html and its chart assets into an audit's report folder."""
    from onceflow.web import copy_chart_assets

    copy_chart_assets(directory / ASSETS)
    path = directory / "index.html"
    path.write_text(render(summary))
    return path
