"""The onceflow page in the Airflow UI: every pipeline's verdict, lag, last batch and last audit,
links to its DAG runs and last report, and charts of its recent batches (durations, input rate,
lag) and of its last audit (committed records vs rows per partition). It refreshes itself.

A FastAPI app the plugin mounts at /onceflow on Airflow's API server. Every route
depends on Airflow's own authentication (the JWT of the logged-in user, from the
`_token` cookie or an `Authorization: Bearer` header) and on the user's right to
see plugin views: an anonymous request gets 401, never a page. It also serves the
audit reports (HTML and JSON) from the reports folder, nothing outside it, and the
bundled chart scripts (onceflow.web: no CDN, the page works on a cluster with no
internet access). The page is the template web/templates/airflow-page.html, rendered with
autoescape: what pipeline files, status logs and reports say is text on it, never markup.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from onceflow.airflow.dag_kinds import DagKind, dag_id
from onceflow.airflow.hooks import load_pipeline, pipelines_dir, reports_root
from onceflow.airflow.links import UI_PREFIX, report_url
from onceflow.airflow.payloads import PageRow
from onceflow.audit.report import audit_verdict, latest_summary
from onceflow.verdicts import COLORS, Verdict
from onceflow.web import render_page

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
    from onceflow.health import pipeline_health
    from onceflow.state.status import StatusLog
    from onceflow.web import batch_series

    row: dict[str, Any] = {
        "file": file.name,
        "pipeline": file.stem,
        "verdict": Verdict.ERROR,
        "reasons": [],
        "lag": None,
        "last_batch": None,
        "running": None,
        "audit": None,
        "batches": [],
    }
    try:
        pipeline = load_pipeline(file)  # with its Airflow connections (object store, Kafka)
        row["pipeline"] = pipeline.name
        row["batches"] = batch_series(StatusLog(pipeline.state_path, pipeline.name).events(), PAGE_BATCHES)
        health = pipeline_health(pipeline)
        row.update(
            verdict=health.verdict,
            reasons=health.reasons,
            lag=health.lag.total,
            last_batch=health.checkpoint.last_committed,
            running=health.run.running,
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
    try:  # its contract: docs/schemas/onceflow-page-pipelines.schema.json
        return PageRow.model_validate(row).as_json()
    except ValueError as exc:  # a report that does not fit: said on the row, the other rows shown
        return {**row, "verdict": str(Verdict.ERROR), "audit": None, "reasons": [f"{type(exc).__name__}: {exc}"]}


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


CHARTS = (  # (chart, title, what an empty one says)
    ("durations", "batch durations (s)", "no batch in the status log yet"),
    ("rate", "input rate (rows/s)", "no batch in the status log yet"),
    ("lag", "lag after each batch (offsets)", "no batch with a lag recorded yet"),
    ("partitions", "last audit: committed records vs rows", "no audit yet"),
)


def _audit_state(audit: dict[str, Any]) -> str:
    """'passed', or 'FAILED: ' and the first four problems."""
    if audit["passed"]:
        return "passed"
    problems = list(map(str, audit["problems"]))
    return "FAILED: " + ", ".join(problems[:4]) + (f" and {len(problems) - 4} more" if len(problems) > 4 else "")


def _view(r: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of one row (pipeline_rows), laid out by templates/airflow-page.html."""
    audit = r["audit"]
    return {
        **r,
        "color": COLORS.get(r["verdict"], "#555"),
        "audit": None if audit is None else {**audit, "state": _audit_state(audit)},
        "dag_runs": [(kind.value, dag_runs_url(r["pipeline"], kind)) for kind in DagKind],
        "chart_id": f"chart-{r['pipeline']}",
        "chart_data": {"batches": r.get("batches") or [], "partitions": (audit or {}).get("partitions") or []},
    }


def _page(rows: list[dict[str, Any]]) -> str:
    return render_page(
        "airflow-page.html",
        rows=[_view(r) for r in rows],
        charts=CHARTS,
        page_batches=PAGE_BATCHES,
        refresh_seconds=REFRESH_SECONDS,
    )


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
