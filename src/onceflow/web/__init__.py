"""Browser assets shipped with the package, and the chart data pages draw from.

Pages must work with no network (an air-gapped cluster, a report opened from a
laptop on a train): the charting library (Chart.js) and the scripts and styles
of Great Expectations' Data Docs are bundled in `static/` (versions and licences
in static/README.md) and copied next to the page or served by the onceflow page,
never loaded from a CDN.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
# what a chart page needs, relative to STATIC
CHART_FILES = ("chartjs/chart.umd.min.js", "chartjs/LICENSE.md", "onceflow-charts.js")
MAX_BATCHES = 300  # batches a chart shows (the newest)


def copy_chart_assets(dest: Path) -> Path:
    """Copy Chart.js (with its licence) and onceflow's chart script into `dest`; returns `dest`."""
    for rel in CHART_FILES:
        target = dest / Path(rel).name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STATIC / rel, target)
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
