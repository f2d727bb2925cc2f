"""Browser assets shipped with the package, and the chart data pages draw from.

The pages themselves are Jinja2 templates in `templates/`, rendered with autoescape
(`render_page`). Pages must work with no network (an air-gapped cluster, a report opened from a
laptop on a train): the charting library (Chart.js) and the scripts and styles
of Great Expectations' Data Docs are bundled in `static/` (versions and licences
in static/README.md) and copied next to the page or served by the onceflow page,
never loaded from a CDN.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import jinja2

STATIC = Path(__file__).resolve().parent / "static"
# what a chart page needs, relative to STATIC
CHART_FILES = ("chartjs/chart.umd.min.js", "chartjs/LICENSE.md", "onceflow-charts.js")
MAX_BATCHES = 300  # batches a chart shows (the newest)


def _json_text(value: Any, limit: int, indent: int | None = None, ellipsis: bool = True) -> str:
    """A value as JSON text (what it cannot encode, as its str), cut at `limit` characters (an
    ellipsis marks the cut)."""
    text = json.dumps(value, default=str, indent=indent)
    return text[:limit] + ("…" if ellipsis and len(text) > limit else "")


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _flat_rows(rows: list) -> bool:
    """Rows of plain values only (a table shows them; nested ones are shown as JSON lines)."""
    return all(isinstance(r, dict) and not any(isinstance(v, (dict, list)) for v in r.values()) for r in rows)


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("onceflow.web", "templates"),
        autoescape=True,  # every value is text; only the templates are markup
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
    )
    env.policies["json.dumps_kwargs"] = {"default": str}  # `tojson`: chart data as given, in its order
    env.filters.update(
        json_text=_json_text, shorten=_shorten, columns=lambda rows: list(dict.fromkeys(k for r in rows for k in r))
    )
    env.tests.update(structured=lambda v: isinstance(v, (dict, list)), flat_rows=_flat_rows)
    return env


def render_page(template: str, **context: Any) -> str:
    """One of the pages in templates/ (the audit report, the Airflow page), rendered with
    autoescape: a value from a summary, a pipeline file or a status log is text, never markup."""
    return _environment().get_template(template).render(**context)


def copy_static(rel: str, target: Path) -> None:
    """Copy a bundled file or folder (`rel`, under static/) to `target`, wherever the package is
    imported from: a spark-submit driver imports it from the zip shipped with --py-files, where a
    path into STATIC does not exist (seen in the docker stack: the audit's report failed)."""
    node: Traversable = resources.files("onceflow.web").joinpath("static")
    for part in rel.split("/"):
        node = node.joinpath(part)
    if node.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        for child in node.iterdir():
            copy_static(f"{rel}/{child.name}", target / child.name)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(node.read_bytes())


def copy_chart_assets(dest: Path) -> Path:
    """Copy Chart.js (with its licence) and onceflow's chart script into `dest`; returns `dest`."""
    for rel in CHART_FILES:
        copy_static(rel, dest / Path(rel).name)
    return dest


def batch_series(events: Iterable[dict], limit: int = MAX_BATCHES) -> list[dict]:
    """The newest `limit` progress events of a status log as chart points, oldest first.

    Each point: batch id, time (ISO, UTC), rows read, seconds, input and processed rows/s,
    and lag (offsets Kafka held beyond the batch's end when it ran; None in logs written
    before the field existed)."""
    points: list[dict] = []
    for e in events:
        if e.get("event") != "progress":
            continue
        points.append(
            {
                "batch": e.get("batch_id"),
                "time": e.get("time"),
                "rows": e.get("input_rows"),
                "seconds": round((e.get("batch_duration_ms") or 0) / 1000, 3),
                "input_rate": e.get("input_rows_per_second"),
                "processed_rate": e.get("processed_rows_per_second"),
                "lag": e.get("lag"),
            }
        )
    return points[-limit:]
