"""The onceflow page in the Airflow UI: every pipeline's verdict, lag, last batch and last audit.

A FastAPI app the plugin mounts at /onceflow on Airflow's API server. Every route
depends on Airflow's own authentication (the JWT of the logged-in user, from the
`_token` cookie or an `Authorization: Bearer` header) and on the user's right to
see plugin views: an anonymous request gets 401, never a page. It also serves the
audit reports (HTML and JSON) from the reports folder, nothing outside it.
"""

from __future__ import annotations

import html
import mimetypes
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from onceflow.airflow.hooks import latest_summary, pipelines_dir, reports_root
from onceflow.airflow.links import UI_PREFIX, report_url

_VERDICT_COLORS = {"healthy": "#1b7f3b", "lagging": "#b26b00", "stopped": "#555", "not_started": "#555",
                   "stalled": "#b00020", "dead": "#b00020", "failed": "#b00020", "broken": "#b00020",
                   "unknown": "#b26b00", "error": "#b00020"}


def pipeline_rows(folder: Path | None = None) -> list[dict[str, Any]]:
    """One row per pipeline file, checked in parallel (each may wait on Kafka); a file or
    check that fails becomes a row saying so."""
    from concurrent.futures import ThreadPoolExecutor

    files = sorted((folder or pipelines_dir()).glob("*.yaml"))
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(files)))) as pool:
        return list(pool.map(_row, files))


def _row(file: Path) -> dict[str, Any]:
    from onceflow import config
    from onceflow.health import pipeline_health

    row: dict[str, Any] = {"file": file.name, "pipeline": file.stem, "verdict": "error", "reasons": [],
                           "lag": None, "last_batch": None, "running": None, "audit": None}
    try:
        pipeline = config.load(file)
        row["pipeline"] = pipeline.name
        health = pipeline_health(pipeline)
        row.update(verdict=health["verdict"], reasons=health.get("reasons") or [],
                   lag=(health.get("lag") or {}).get("total"),
                   last_batch=(health.get("checkpoint") or {}).get("last_committed"),
                   running=(health.get("run") or {}).get("running"))
    except Exception as exc:  # shown on the page: one bad file must not hide the others
        row["reasons"] = [f"{type(exc).__name__}: {exc}"]
    summary = latest_summary(reports_root() / row["pipeline"])
    if summary is not None:
        from onceflow.airflow.operators import audit_verdict

        verdict = audit_verdict(summary)
        row["audit"] = {"passed": verdict["passed"], "problems": verdict["problems"],
                        "time": summary.get("finished_at") or summary.get("time") or summary.get("started_at"),
                        "url": report_url(summary["report_dir"], reports_root())}
    return row


def _page(rows: list[dict[str, Any]]) -> str:
    e = html.escape
    body = []
    for r in rows:
        color = _VERDICT_COLORS.get(r["verdict"], "#555")
        audit = r["audit"]
        if audit is None:
            audit_cell = "<td class='muted'>no audit yet</td><td></td>"
        else:
            state = "passed" if audit["passed"] else "FAILED: " + ", ".join(map(str, audit["problems"]))
            audit_cell = (f"<td class='{'ok' if audit['passed'] else 'bad'}'>{e(state)}"
                          f"<div class='muted'>{e(str(audit['time'] or ''))}</div></td>"
                          f"<td><a href='{e(audit['url'])}' target='_blank'>audit report</a></td>")
        body.append(
            f"<tr data-pipeline='{e(r['pipeline'])}'><td><b>{e(r['pipeline'])}</b>"
            f"<div class='muted'>{e(r['file'])}</div></td>"
            f"<td><span class='verdict' style='background:{color}'>{e(str(r['verdict']))}</span>"
            f"<div class='muted'>{e('; '.join(r['reasons']))}</div></td>"
            f"<td class='num'>{'' if r['lag'] is None else r['lag']}</td>"
            f"<td class='num'>{'' if r['last_batch'] is None else r['last_batch']}</td>"
            f"<td>{'' if r['running'] is None else ('yes' if r['running'] else 'no')}</td>"
            f"{audit_cell}</tr>")
    rows_html = "\n".join(body) or "<tr><td colspan='7' class='muted'>no pipelines/*.yaml found</td></tr>"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>onceflow pipelines</title>
<style>
 body {{ font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }}
 table {{ border-collapse: collapse; width: 100%; }}
 th, td {{ text-align: left; padding: .5rem .75rem; border-bottom: 1px solid #ddd; vertical-align: top; }}
 th {{ background: #f4f4f6; }} .num {{ text-align: right; font-variant-numeric: tabular-nums; }}
 .verdict {{ color: #fff; padding: .1rem .5rem; border-radius: .75rem; font-size: .9em; }}
 .muted {{ color: #777; font-size: .85em; }} .ok {{ color: #1b7f3b; }} .bad {{ color: #b00020; font-weight: 600; }}
</style></head>
<body><h1>onceflow pipelines</h1>
<p class="muted">Verdicts of <code>onceflow checkpoint status</code>; lag = records Kafka holds that the query
has not committed; last batch = last committed micro-batch of the checkpoint.</p>
<table id="pipelines"><thead><tr><th>pipeline</th><th>verdict</th><th>lag</th><th>last committed batch</th>
<th>running</th><th>last audit</th><th>report</th></tr></thead>
<tbody>
{rows_html}
</tbody></table></body></html>"""


def _authenticated():
    """Airflow's own check: a valid JWT and the right to see plugin views."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return Depends(requires_access_view(AccessView.PLUGINS))


def create_app() -> FastAPI:
    app = FastAPI(title="onceflow", description="onceflow pipelines in the Airflow UI",
                  dependencies=[_authenticated()], docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def overview() -> str:
        return _page(pipeline_rows())

    @app.get("/api/pipelines")
    def pipelines() -> list[dict[str, Any]]:
        return pipeline_rows()

    @app.get("/reports/{path:path}")
    def report(path: str) -> FileResponse:
        root = reports_root().resolve()
        target = (root / path).resolve()
        if root not in target.parents or not target.is_file():
            raise HTTPException(status_code=404, detail=f"no report file {path!r} under the reports folder")
        media = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return FileResponse(target, media_type=media)

    return app


app = create_app()
PREFIX = UI_PREFIX
