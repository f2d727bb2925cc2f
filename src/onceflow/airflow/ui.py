"""The onceflow page in the Airflow UI: every pipeline's verdict, lag, last batch and last audit,
links to its DAG runs and last report, and charts of its recent batches (durations, input rate,
lag) and of its last audit (committed records vs rows per partition). It refreshes itself.

A FastAPI app the plugin mounts at /onceflow on Airflow's API server. Every route
depends on Airflow's own authentication (the JWT of the logged-in user, from the
`_token` cookie or an `Authorization: Bearer` header) and on the user's right to
see plugin views: an anonymous request gets 401, never a page. It also serves the
audit reports (HTML and JSON) from the reports folder, nothing outside it, and the
bundled chart scripts (onceflow.web: no CDN, the page works on a cluster with no
internet access).
"""

from __future__ import annotations

import html
import json
import mimetypes
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from onceflow.airflow.dag_kinds import DagKind, dag_id
from onceflow.airflow.hooks import pipelines_dir, reports_root
from onceflow.airflow.links import UI_PREFIX, report_url
from onceflow.audit.report import audit_verdict, latest_summary
from onceflow.verdicts import COLORS, Verdict

REFRESH_SECONDS = 15  # how often the open page reloads its rows and charts
PAGE_BATCHES = 120  # batches a pipeline's charts show


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
    from onceflow.status import StatusLog
    from onceflow.web import batch_series

    row: dict[str, Any] = {
        "file": file.name,
        "pipeline": file.stem,
        "verdict": str(Verdict.ERROR),
        "reasons": [],
        "lag": None,
        "last_batch": None,
        "running": None,
        "audit": None,
        "batches": [],
    }
    try:
        pipeline = config.load(file)
        row["pipeline"] = pipeline.name
        row["batches"] = batch_series(StatusLog(pipeline.state_path, pipeline.name).events(), PAGE_BATCHES)
        health = pipeline_health(pipeline)
        row.update(
            verdict=health["verdict"],
            reasons=health.get("reasons") or [],
            lag=(health.get("lag") or {}).get("total"),
            last_batch=(health.get("checkpoint") or {}).get("last_committed"),
            running=(health.get("run") or {}).get("running"),
        )
    except Exception as exc:  # shown on the page: one bad file must not hide the others
        row["reasons"] = [f"{type(exc).__name__}: {exc}"]
    summary = latest_summary(reports_root() / row["pipeline"])
    if summary is not None:
        verdict = audit_verdict(summary)
        row["audit"] = {
            "passed": verdict["passed"],
            "problems": verdict["problems"],
            "time": summary.get("finished_at") or summary.get("time") or summary.get("started_at"),
            "url": report_url(summary["report_dir"], reports_root()),
            "partitions": [
                {k: p.get(k) for k in ("partition", "source_records", "bronze_rows", "quarantine_rows")}
                for p in summary.get("partitions") or []
                if isinstance(p, dict)
            ],
        }
    return row


def _airflow_base() -> str:
    """The path Airflow's UI lives under (api.base_url's path; '' at the root)."""
    from urllib.parse import urlparse

    try:
        from airflow.configuration import conf

        return urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    except Exception:  # outside an Airflow installation's config
        return ""


def dag_runs_url(pipeline: str, kind: DagKind) -> str:
    """The Airflow UI page listing the runs of one of the pipeline's DAGs."""
    return f"{_airflow_base()}/dags/{dag_id(pipeline, kind)}/runs"


def _charts(r: dict[str, Any]) -> str:
    """One pipeline's charts: data as JSON, one canvas per chart (static/onceflow-charts.js draws them)."""
    e = html.escape
    key = f"chart-{r['pipeline']}"
    data = {"batches": r.get("batches") or [], "partitions": (r.get("audit") or {}).get("partitions") or []}
    blob = json.dumps(data, default=str).replace("</", "<\\/")
    boxes = [
        ("durations", "batch durations (s)", "no batch in the status log yet"),
        ("rate", "input rate (rows/s)", "no batch in the status log yet"),
        ("lag", "lag after each batch (offsets)", "no batch with a lag recorded yet"),
        ("partitions", "last audit: committed records vs rows", "no audit yet"),
    ]
    canvases = "".join(
        f"<div class='chart-box'><div class='chart-title'>{e(title)}</div><div class='chart'>"
        f"<canvas data-chart='{kind}' data-source='{e(key)}' data-empty='{e(empty)}'></canvas>"
        f"</div></div>"
        for kind, title, empty in boxes
    )
    return (
        f"<section class='pipeline-charts' data-pipeline='{e(r['pipeline'])}'><h2>{e(r['pipeline'])}</h2>"
        f"<div class='charts'>{canvases}</div>"
        f"<script type='application/json' id='{e(key)}'>{blob}</script></section>"
    )


def _page(rows: list[dict[str, Any]]) -> str:
    e = html.escape
    body = []
    for r in rows:
        color = COLORS.get(r["verdict"], "#555")
        audit = r["audit"]
        if audit is None:
            audit_cell = "<td class='audit muted'>no audit yet</td>"
        else:
            problems = list(map(str, audit["problems"]))
            state = (
                "passed"
                if audit["passed"]
                else "FAILED: "
                + ", ".join(problems[:4])
                + (f" and {len(problems) - 4} more" if len(problems) > 4 else "")
            )
            audit_cell = (
                f"<td class='audit {'ok' if audit['passed'] else 'bad'}'>{e(state)}"
                f"<div class='muted'>{e(str(audit['time'] or ''))}</div></td>"
            )
        links = " · ".join(
            f"<a href='{e(dag_runs_url(r['pipeline'], kind))}' target='_top'>{kind}</a>" for kind in DagKind
        )
        report = f"<a class='report' href='{e(audit['url'])}' target='_blank'>last audit report</a>" if audit else ""
        body.append(
            f"<tr data-pipeline='{e(r['pipeline'])}'><td><b>{e(r['pipeline'])}</b>"
            f"<div class='muted'>{e(r['file'])}</div></td>"
            f"<td><span class='verdict' style='background:{color}'>{e(str(r['verdict']))}</span>"
            f"<div class='muted'>{e('; '.join(r['reasons']))}</div></td>"
            f"<td class='num'>{'' if r['lag'] is None else r['lag']}</td>"
            f"<td class='num'>{'' if r['last_batch'] is None else r['last_batch']}</td>"
            f"<td>{'' if r['running'] is None else ('yes' if r['running'] else 'no')}</td>"
            f"{audit_cell}<td class='links'>{report}<div class='dag-runs'>DAG runs: {links}</div></td></tr>"
        )
    rows_html = "\n".join(body) or "<tr><td colspan='7' class='muted'>no pipelines/*.yaml found</td></tr>"
    charts = "\n".join(_charts(r) for r in rows)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>onceflow pipelines</title>
<style>
 body {{ font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }}
 table {{ border-collapse: collapse; width: 100%; }}
 th, td {{ text-align: left; padding: .5rem .75rem; border-bottom: 1px solid #ddd; vertical-align: top; }}
 td.audit {{ overflow-wrap: anywhere; }}
 th {{ background: #f4f4f6; }} .num {{ text-align: right; font-variant-numeric: tabular-nums; }}
 .verdict {{ color: #fff; padding: .1rem .5rem; border-radius: .75rem; font-size: .9em; }}
 .muted {{ color: #777; font-size: .85em; }} .ok {{ color: #1b7f3b; }} .bad {{ color: #b00020; font-weight: 600; }}
 .dag-runs {{ font-size: .85em; margin-top: .25rem; }}
 section.pipeline-charts {{ margin-top: 1.5rem; }} section h2 {{ font-size: 1.1rem; margin: .5rem 0; }}
 .charts {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: .75rem 1.5rem; }}
 .chart {{ position: relative; height: 200px; }} .chart-title {{ font-size: .85em; font-weight: 600; }}
</style></head>
<body><h1>onceflow pipelines</h1>
<div id="content">
<p class="muted">Verdicts of <code>onceflow checkpoint status</code>; lag = offsets Kafka holds beyond the
query's committed offsets (records, and also transaction markers and aborted records, so it counts
offsets, not records to read); last batch = last committed micro-batch of the checkpoint. Charts: the
newest {PAGE_BATCHES} batches of each pipeline's status log (times in UTC) and its last audit.
<span id="refreshed">Refreshes every {REFRESH_SECONDS} s.</span></p>
<table id="pipelines"><thead><tr><th>pipeline</th><th>verdict</th><th>lag (offsets)</th><th>last committed batch</th>
<th>running</th><th>last audit</th><th>report and DAG runs</th></tr></thead>
<tbody>
{rows_html}
</tbody></table>
{charts}
</div>
<script src="static/chartjs/chart.umd.min.js"></script>
<script src="static/onceflow-charts.js"></script>
<script>
// refresh rows and charts in place (no reload, so the page does not flicker inside Airflow's frame)
(function () {{
  function refresh() {{
    fetch(location.href, {{credentials: "same-origin", cache: "no-store"}})
      .then(function (r) {{ if (!r.ok) throw new Error(r.status); return r.text(); }})
      .then(function (text) {{
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("content");
        if (!fresh) return;
        document.getElementById("content").replaceWith(fresh);
        window.onceflowCharts.render(fresh);
        document.getElementById("refreshed").textContent =
          "Refreshed " + new Date().toLocaleTimeString() + "; every {REFRESH_SECONDS} s.";
      }})
      .catch(function (err) {{
        var note = document.getElementById("refreshed");
        if (note) note.textContent = "Refresh failed (" + err.message + "); retrying in {REFRESH_SECONDS} s.";
      }});
  }}
  setInterval(refresh, {REFRESH_SECONDS * 1000});
}})();
</script>
</body></html>"""


def _authenticated():
    """Airflow's own check: a valid JWT and the right to see plugin views."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return Depends(requires_access_view(AccessView.PLUGINS))


def create_app() -> FastAPI:
    app = FastAPI(
        title="onceflow",
        description="onceflow pipelines in the Airflow UI",
        dependencies=[_authenticated()],
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.get("/", response_class=HTMLResponse)
    def overview() -> str:
        return _page(pipeline_rows())

    @app.get("/api/pipelines")
    def pipelines() -> list[dict[str, Any]]:
        return pipeline_rows()

    @app.get("/static/{path:path}")
    def static(path: str) -> FileResponse:
        """The bundled chart scripts (and Data Docs assets), so the page needs no CDN."""
        from onceflow.web import STATIC

        return _file_under(STATIC, path, "bundled file")

    @app.get("/reports/{path:path}")
    def report(path: str) -> FileResponse:
        return _file_under(reports_root(), path, "report file")

    return app


def _file_under(root: Path, path: str, what: str) -> FileResponse:
    """A file inside `root`, never outside it (`..`, symlinks out): else 404."""
    root = root.resolve()
    target = (root / path).resolve()
    if root not in target.parents or not target.is_file():
        raise HTTPException(status_code=404, detail=f"no {what} {path!r} under {root.name}/")
    media = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    return FileResponse(target, media_type=media)


app = create_app()
PREFIX = UI_PREFIX
