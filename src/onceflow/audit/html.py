"""The human summary page of an audit: pass/fail at a glance, failing checks
first with their offending offsets, the per-partition table, links to Data Docs.

One self-contained HTML file (inline CSS, no script), readable from disk.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{padding:18px 28px;color:#fff}
header.passed{background:#1a7f37} header.failed{background:#cf222e} header.error{background:#9a6700}
header h1{margin:0 0 4px;font-size:22px} header p{margin:0;opacity:.92}
main{padding:12px 28px 40px;max-width:1400px}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:16px 0;padding:12px 16px}
h2{font-size:16px;margin:4px 0 10px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #eaeef2;padding:4px 8px;text-align:left;vertical-align:top}
table.checks td,td code{overflow-wrap:anywhere}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff}
.badge.passed{background:#1a7f37} .badge.failed{background:#cf222e} .badge.skipped{background:#6e7781}
tr.bad td{background:#ffebe9}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{white-space:pre-wrap;background:#f6f8fa;padding:8px;border-radius:4px;margin:4px 0;max-height:260px;overflow:auto}
.muted{color:#656d76} a{color:#0969da}
"""


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
    parts = [f"<h2>{_badge(c['status'])} {escape(c['name'])} <span class='muted'>— {escape(c['title'])}</span></h2>",
             f"<p>expected {_v(c.get('expected'))}, observed {_v(c.get('observed'))}</p>"]
    if c.get("detail"):
        parts.append(f"<p>{escape(c['detail'])}</p>")
    if c.get("ranges"):
        rows = "".join(f"<tr><td class='num'>{_v(r.get('partition'))}</td><td class='num'>{_v(r.get('start'))}</td>"
                       f"<td class='num'>{_v(r.get('end'))}</td><td class='num'>{_v(r.get('count'))}</td></tr>"
                       for r in c["ranges"][:200])
        more = c.get("ranges_total", 0) - min(len(c["ranges"]), 200)
        parts.append("<table><tr><th>partition</th><th>first offset</th><th>end offset (exclusive)</th>"
                     f"<th>records</th></tr>{rows}</table>"
                     + (f"<p class='muted'>… {more} more ranges in summary.json</p>" if more > 0 else ""))
    if c.get("samples"):
        parts.append("<p class='muted'>samples:</p>" + _samples(c["samples"]))
    return f"<section class='check {escape(c['status'])}' id='check-{escape(c['name'])}'>{''.join(parts)}</section>"


def render(summary: dict) -> str:
    """summary.json → index.html."""
    status = summary["status"]
    checks = summary.get("checks", [])
    failed = [c for c in checks if c["status"] == "failed"]
    counts = summary.get("counts") or {}
    title = f"{summary['pipeline']} audit {summary['run_id']}: {status.upper()}"
    failed_recon = [c["name"] for c in failed if c["source"] == "reconcile"]
    failed_gx = len(failed) - len(failed_recon)
    verdict = ""
    if failed:
        verdict = "; FAILED: " + ", ".join(failed_recon) + (
            f"{' and ' if failed_recon else ''}{failed_gx} Great Expectations expectation(s)" if failed_gx else "")
    head = (f"<header class='{escape(status)}'><h1>{escape(title)}</h1><p>{escape(summary.get('mode', ''))} audit of "
            f"topic {escape(str(summary.get('topic')))}; {len(checks) - len(failed)} of {len(checks)} checks passed"
            f"{escape(verdict)}"
            f" — started {escape(str(summary.get('started_at')))}, "
            f"{_v((summary.get('timings') or {}).get('total'))} s</p></header>")
    body = []
    if summary.get("reason"):
        body.append(f"<section><h2>The audit could not run</h2><pre>{escape(summary['reason'])}</pre></section>")
    links = ["<a href='summary.json'>summary.json</a>"]
    docs = summary.get("data_docs") or {}
    if docs.get("index"):
        links.append(f"<a href='{escape(docs['index'])}'>Great Expectations Data Docs</a>")
    for suite, page in (docs.get("suites") or {}).items():
        links.append(f"<a href='{escape(page)}'>{escape(suite)} validation</a>")
    body.append(f"<section><h2>Links</h2><p>{' · '.join(links)}</p></section>")
    if counts:
        body.append("<section><h2>Counts</h2><table>" + "".join(
            f"<tr><th>{escape(k.replace('_', ' '))}</th><td class='num'>{_v(v)}</td></tr>" for k, v in counts.items())
            + "</table></section>")
    parts = summary.get("partitions") or []
    if parts:
        cols = ["partition", "start", "end", "source_records", "source_valid", "source_malformed", "bronze_rows",
                "quarantine_rows", "lost_records", "phantom_rows", "duplicate_keys", "content_mismatches"]
        rows = []
        for r in parts:
            bad = (r.get("lost_records") or r.get("phantom_rows") or r.get("duplicate_keys")
                   or r.get("content_mismatches") or r.get("source_checksum") != r.get("sink_checksum")
                   or r.get("source_records") != r.get("sink_rows"))
            cells = "".join(f"<td class='num'>{_v(r.get(c))}</td>" for c in cols)
            check = "equal" if r.get("source_checksum") == r.get("sink_checksum") else "DIFFERS"
            rows.append(f"<tr class='{'bad' if bad else ''}'>{cells}<td>{check}</td></tr>")
        body.append("<section><h2>Per partition (audited offsets [start, end))</h2><table><tr>"
                    + "".join(f"<th>{escape(c.replace('_', ' '))}</th>" for c in cols)
                    + "<th>checksum</th></tr>" + "".join(rows) + "</table></section>")
    if failed:
        body.append("<h2>Failing checks</h2>" + "".join(_check_block(c) for c in failed))
    def name_cell(c: dict) -> str:  # failing checks link to their block above
        name = escape(c["name"])
        return f"<a href='#check-{name}'>{name}</a>" if c["status"] == "failed" else name

    rows = "".join(f"<tr class='{'bad' if c['status'] == 'failed' else ''}'><td>{_badge(c['status'])}</td>"
                   f"<td>{name_cell(c)}</td><td>{escape(c['title'])}</td>"
                   f"<td>{_v(c.get('expected'))}</td><td>{_v(c.get('observed'))}</td></tr>"
                   for c in sorted(checks, key=lambda c: (c["status"] != "failed", c["source"] != "reconcile")))
    body.append("<section><h2>All checks</h2><table class='checks'><colgroup><col style='width:7%'><col style='width:25%'>"
                "<col style='width:28%'><col style='width:20%'><col style='width:20%'></colgroup>"
                "<tr><th>status</th><th>check</th><th>what it proves</th>"
                f"<th>expected</th><th>observed</th></tr>{rows}</table></section>")
    point = summary.get("committed_point")
    if point:
        body.append("<section><h2>Committed point (read once at the start)</h2>"
                    f"<pre>{escape(json.dumps(point, indent=1, default=str)[:20000])}</pre></section>")
    if summary.get("notes"):
        body.append("<section><h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in summary["notes"])
                    + "</ul></section>")
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{head}<main>{''.join(body)}</main></body></html>")
