"""The audit report's layout, from stored summaries of real audits (tests/data/audit-report/):
verdict first, then why it failed (root-cause notes, failing checks), timings, charts with
bundled Chart.js (never a CDN), and checks grouped by kind, collapsed when the group passed."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import jsonschema

from onceflow.audit import report
from onceflow.audit.html import chart_data, check_group, render, write_page
from onceflow.cli.audit import note_lines
from onceflow.state.status import StatusLog
from onceflow.web import STATIC, batch_series

DATA = Path(__file__).resolve().parents[2] / "data" / "audit-report"
ROOT = Path(__file__).resolve().parents[3]
NOTE = "bronze: 1 commit(s) without a ledger entry (not written by the streaming job): v4 DELETE"


def summary(kind: str) -> dict:
    s = json.loads((DATA / f"summary-{kind}.json").read_text())
    s["batches"] = batch_series(StatusLog(DATA, "payments").events())
    return s


def groups(page: str) -> list[tuple[bool, str]]:
    """(open?, summary text) of each collapsible check group, in page order."""
    return [
        (bool(m.group(1)), html.unescape(m.group(2)))
        for m in re.finditer(r"<details class='group (?:passed|failed)'( open)?><summary>([^<]*)</summary>", page)
    ]


def test_a_failed_report_opens_with_the_verdict_then_the_root_cause_note_then_the_failing_checks():
    page = render(summary("failed"))
    body = page[page.index("<body>") :]
    verdict, why = body.index("<header class='failed'>"), body.index("id='why'")
    assert verdict < why < body.index(NOTE) < body.index("href='#check-loss'") < body.index("id='timings'")
    assert body.index("id='charts'") < body.index("id='all-checks'")  # the long list of checks comes last
    assert ": FAILED" in body[verdict:why] and "70 of 82 checks passed" in body[verdict:why]
    # every failing check is in the "why" list, and its full block comes before the grouped list
    s = summary("failed")
    for name in s["failed_checks"]:
        assert body.index(f"href='#check-{name}'") < body.index(f"id='check-{name}'") < body.index("id='all-checks'")


def test_groups_that_passed_are_collapsed_and_groups_with_a_failure_are_open():
    failed = groups(render(summary("failed")))
    by_name = {text.split(" — ")[0][2:]: is_open for is_open, text in failed}
    assert by_name["Rows: Kafka's committed records vs the tables"] is True
    assert by_name["Ledgers: checkpoint and sink ledgers agree"] is False
    assert by_name["Great Expectations: quarantine"] is False
    assert by_name["Great Expectations: reconciliation"] is True
    assert "✗ Rows: Kafka's committed records vs the tables — 3 of 6 failed" in [t for _, t in failed]
    passed = groups(render(summary("passed")))
    assert passed and not any(is_open for is_open, _ in passed[:-1])  # the last one: the committed point
    assert "✓ Great Expectations: bronze — 35 of 35 passed" in [t for _, t in passed]
    # the groups hold every check exactly once
    s = summary("passed")
    assert sum(int(re.findall(r"(\d+) of", t)[0]) for _, t in passed if " of " in t) == len(s["checks"])


def test_check_kinds_are_read_from_each_check_never_guessed_from_its_name():
    assert check_group({"name": "ledger_contiguity", "group": "ledgers"}).startswith("Ledgers")
    assert check_group({"name": "kafka_output_loss", "group": "kafka_output"}) == "Kafka output topic"
    assert check_group({"name": "current_rows", "group": "current"}).startswith("Keyed table")
    assert check_group({"name": "kafka_looks_like_output", "group": "rows"}).startswith("Rows")  # the name says nothing
    assert check_group({"name": "gx.findings.unexpected_rows_expectation[loss]", "group": "gx"}) == (
        "Great Expectations: findings"
    )


def test_timings_and_charts_are_on_the_page_with_their_data():
    s = summary("passed")
    page = render(s)
    timings = page[page.index("id='timings'") : page.index("id='charts'")]
    assert "reconcile rows" in timings and f"{s['timings']['reconcile_rows']} s" in timings
    for kind in ("partitions", "durations", "rate", "lag"):
        assert f"data-chart='{kind}'" in page
    blob = re.findall(r"<script type='application/json' id='chart-data'>(.*?)</script>", page)[0]
    data = json.loads(blob)
    assert data == json.loads(json.dumps(chart_data(s)))
    assert [p["partition"] for p in data["partitions"]] == [0, 1, 2, 3]
    assert len(data["batches"]) == 40 and data["batches"][-1]["lag"] is not None


def test_charts_load_only_bundled_files_never_a_cdn(tmp_path):
    s = summary("failed")
    page = write_page(tmp_path, s).read_text()
    assert not re.search(r"(src|href)=['\"]https?://", page)
    scripts = re.findall(r"<script src='([^']+)'>", page)
    assert scripts == ["assets/chart.umd.min.js", "assets/onceflow-charts.js"]
    for src in scripts:
        assert (tmp_path / src).stat().st_size > 1000
    assert "Chart.js" in (tmp_path / "assets" / "chart.umd.min.js").read_text()[:300]
    assert (tmp_path / "assets" / "LICENSE.md").is_file()


def test_a_summary_with_batches_matches_the_schema():
    schema = json.loads((ROOT / "docs" / "schemas" / "audit-summary.schema.json").read_text())
    s = summary("failed")
    s["report_dir"] = "/r"
    jsonschema.Draft202012Validator(schema).validate(s)


def test_an_audit_that_could_not_run_says_why_first():
    s = {
        **summary("failed"),
        "status": "error",
        "reason": "the broker at localhost:1 did not answer. Fix: ...",
        "checks": [],
        "failed_checks": [],
        "partitions": [],
        "batches": [],
    }
    page = render(s)
    assert page.index("The audit could not run") < page.index("did not answer") < page.index("id='charts'")
    assert "no partition was audited" in page  # an empty chart says so (data-empty)


def test_batch_series_reads_progress_events_only_and_keeps_the_newest(tmp_path):
    log = StatusLog(tmp_path, "p")
    log.append("started", run_id="r")
    for b in range(5):
        log.append(
            "progress",
            batch_id=b,
            input_rows=10 * b,
            batch_duration_ms=1500,
            input_rows_per_second=2.0,
            processed_rows_per_second=3.0,
            lag=100 - b,
        )
        log.append("idle")
    points = batch_series(log.events(), limit=3)
    assert [p["batch"] for p in points] == [2, 3, 4]
    assert points[0] == {
        "batch": 2,
        "time": points[0]["time"],
        "rows": 20,
        "seconds": 1.5,
        "input_rate": 2.0,
        "processed_rate": 3.0,
        "lag": 98,
    }


def test_report_reads_the_pipelines_batches(tmp_path):
    StatusLog(tmp_path, "p").append("progress", batch_id=7, input_rows=3, batch_duration_ms=10)
    assert [b["batch"] for b in report.recent_batches(tmp_path, "p")] == [7]
    assert report.recent_batches(tmp_path / "none", "p") == []


def test_the_cli_prints_the_root_cause_notes():
    assert note_lines(summary("failed")) == [f"  note: {NOTE}"]
    assert note_lines({"notes": []}) == []


def test_the_bundled_assets_ship_with_the_package():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"onceflow.web" = ["static/**/*"]' in pyproject
    for rel in ("chartjs/chart.umd.min.js", "onceflow-charts.js", "datadocs/jquery/jquery.min.js", "README.md"):
        assert (STATIC / rel).is_file(), rel


def test_a_passed_audit_shows_its_notes_first_and_no_failure_section():
    s = {
        **summary("passed"),
        "notes": ["since-last: no passed audit of this topic yet, so everything committed was audited"],
    }
    page = render(s)
    assert (
        page.index("<header class='passed'>")
        < page.index("id='why'")
        < page.index("since-last: no passed")
        < page.index("id='timings'")
    )
    assert "Why it failed" not in page and "Failing checks" not in page
    assert "id='why'" not in render(summary("passed"))  # nothing to say: straight to the timings
