"""The pages onceflow renders (the audit report, the onceflow page in Airflow) keep hostile values
inert: a pipeline name, a reason, a check, a sample value that holds markup, quotes, a closing
`</td>` or template syntax is shown as text. Every field a page shows is filled with such a value;
the HTML, parsed, has the same elements and attributes as the page with plain values (nothing was
injected), and the hostile value is there as text (escaped in the markup, not interpreted)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from onceflow.audit.html import render
from onceflow.reconcile import AuditStatus, CheckStatus

HOSTILE = "<script>alert(1)</script>\"'</td><img src=x onerror=alert(2)>{{7*7}}{% raw %}"
DATA = Path(__file__).resolve().parents[1] / "data" / "audit-report"
# what decides the layout stays a real value; everything else a page shows is filled in
KEEP = {"status", "source"}


class _Page(HTMLParser):
    """The page as the browser builds it: its elements with their attributes, its text, its JSON blobs."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, tuple[str, ...]]] = []
        self.attributes: list[str] = []
        self.text: list[str] = []
        self.blobs: list[Any] = []
        self._script_type: str | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, tuple(name for name, _ in attrs)))
        self.attributes += [value or "" for _, value in attrs]
        self._script_type = dict(attrs).get("type") if tag == "script" else None

    def handle_data(self, data):
        if self._script_type == "application/json":
            self.blobs.append(json.loads(data))
        else:
            self.text.append(data)

    def handle_endtag(self, tag):
        self._script_type = None


def _fill(value: Any, with_: str, key: str = "") -> Any:
    """Every string in `value` (and every key of a table the page shows) replaced by `with_`."""
    if isinstance(value, dict):
        return {
            (f"{with_}{i}" if key in ("counts", "timings") or (key == "samples" and k != "_partition") else k): (
                v if k in KEEP else _fill(v, with_, k)
            )
            for i, (k, v) in enumerate(value.items())
        }
    if isinstance(value, list):
        return [_fill(v, with_, key) for v in value]
    return with_ if isinstance(value, str) else value


def _inert(hostile: str, plain: str) -> _Page:
    """The hostile page has the plain page's elements and attributes, and shows the value as text."""
    page, same = _Page(hostile), _Page(plain)
    assert page.elements == same.elements, "an element or attribute was injected"
    assert "<script>alert" not in hostile and "<img src=x" not in hostile  # escaped in the markup
    assert any(HOSTILE in t for t in page.text), "the value is not on the page as text"
    assert any(HOSTILE in a for a in page.attributes), "the value is not in an attribute as text"
    return page


def _blob_strings(blob: Any) -> list[str]:
    if isinstance(blob, dict):
        return [s for v in blob.values() for s in _blob_strings(v)]
    if isinstance(blob, list):
        return [s for v in blob for s in _blob_strings(v)]
    return [blob] if isinstance(blob, str) else []


@pytest.mark.parametrize("kind", ["failed", "passed"])
def test_the_audit_report_shows_every_hostile_value_as_text(kind):
    summary = json.loads((DATA / f"summary-{kind}.json").read_text())
    summary["batches"] = [{"batch": 1, "time": "t", "rows": 3, "seconds": 1.0, "input_rate": 1, "lag": 0}]
    summary["notes"] = ["a note"]
    summary["data_docs"] = {"index": "data_docs/index.html", "suites": {"bronze": "data_docs/bronze.html"}}
    for check in summary["checks"]:  # a flat and a nested sample, and ranges, on every check
        check.update(
            samples=[{"_partition": 0, "value": "v"}] if check["status"] == CheckStatus.PASSED else [{"n": {"v": "v"}}],
            ranges=[{"partition": 0, "start": 1, "end": 2, "count": 1}],
            detail="detail",
            expected="e",
            observed={"o": "o"},
        )
    page = _inert(render(_fill(summary, HOSTILE)), render(_fill(summary, "plain")))
    assert HOSTILE in _blob_strings(page.blobs), "the chart data holds the value as data"
    text = "".join(page.text)
    for where in ("audit", "Notes", "Counts", "Timings", "Links"):
        assert where in text


def test_an_audit_that_could_not_run_shows_a_hostile_reason_as_text():
    summary = json.loads((DATA / "summary-failed.json").read_text())
    summary.update(status=AuditStatus.ERROR, checks=[], failed_checks=[], partitions=[], batches=[])
    _inert(render(_fill(summary, HOSTILE)), render(_fill(summary, "plain")))


def test_the_onceflow_page_in_airflow_shows_every_hostile_value_as_text():
    import importlib

    importlib.import_module("tests.airflow_helpers")  # AIRFLOW_HOME before airflow is imported
    from onceflow.airflow.ui import _page

    def rows(value: str, passed: bool) -> list[dict]:
        audit = {
            "passed": passed,
            "problems": [value] * 6,
            "time": value,
            "url": value,
            "partitions": [{"partition": 0, "source_records": value, "bronze_rows": 1, "quarantine_rows": 0}],
        }
        return [
            {
                "file": value,
                "pipeline": value,
                "verdict": value,
                "reasons": [value, value],
                "lag": 3,
                "last_batch": 7,
                "running": True,
                "audit": audit,
                "batches": [{"batch": 1, "time": value, "rows": 2, "seconds": 0.5, "lag": 0}],
            },
            {**_base(value), "audit": None},
        ]

    for passed in (False, True):
        page = _inert(_page(rows(HOSTILE, passed)), _page(rows("plain", passed)))
        assert HOSTILE in _blob_strings(page.blobs)


def _base(value: str) -> dict:
    return {
        "file": value,
        "pipeline": value,
        "verdict": value,
        "reasons": [value],
        "lag": None,
        "last_batch": None,
        "running": None,
        "batches": [],
    }
