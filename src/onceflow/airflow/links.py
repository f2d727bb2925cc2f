"""The "Audit report" extra link on audit tasks: opens the report on the onceflow UI page.

The audit operator records which report its run wrote; at the end of the task
Airflow stores get_link()'s answer in XCom, and the UI shows it as a button.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

UI_PREFIX = "/onceflow"


def report_url(report_dir: str | Path, reports_root: str | Path) -> str:
    """The onceflow page URL that serves one report folder's index.html."""
    rel = Path(report_dir).resolve().relative_to(Path(reports_root).resolve())
    return f"{base_url()}{UI_PREFIX}/reports/{quote(rel.as_posix())}/index.html"


def base_url() -> str:
    """This Airflow UI's root URL ([api] base_url) without a trailing slash; empty when unset."""
    try:
        from airflow.configuration import conf

        return (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    except Exception:  # the task SDK may run without airflow-core's config
        return ""


class AuditReportLink(BaseOperatorLink):
    """Links an audit task instance to the HTML report its run wrote."""

    name = "Audit report"

    def get_link(self, operator, *, ti_key) -> str:
        return getattr(operator, "report_link", None) or ""
