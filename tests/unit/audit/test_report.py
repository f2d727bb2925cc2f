"""Where audit reports live and what they say: run ids, the latest link, the watermark, the verdict."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime

from onceflow.audit import report


def test_run_ids_sort_by_time_and_latest_points_at_the_newest(tmp_path):
    first = report.new_run_id(datetime(2026, 11, 22, 12, 3, 1, tzinfo=UTC))
    assert re.fullmatch(r"20261122T120301Z-[0-9a-f]{6}", first)
    for run_id in (first, report.new_run_id()):
        report.write_summary(report.run_dir(tmp_path, "p", run_id), {"run_id": run_id, "status": "passed"})
        latest = report.point_latest(tmp_path, "p", run_id)
        assert latest.resolve() == (tmp_path / "p" / run_id).resolve()
        summary = report.latest_summary(tmp_path / "p")
        assert summary is not None and summary["run_id"] == run_id and summary["report_dir"] == str(latest.resolve())


def test_without_a_latest_link_the_newest_readable_summary_counts(tmp_path):
    assert report.latest_summary(tmp_path / "p") is None
    older, newer = tmp_path / "p" / "a", tmp_path / "p" / "b"
    for folder, run in ((older, "a"), (newer, "b")):
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"run_id": run}))
    (tmp_path / "p" / "c").mkdir()
    (tmp_path / "p" / "c" / "summary.json").write_text("{torn")
    os.utime(older / "summary.json", (1, 1))
    os.utime(tmp_path / "p" / "c" / "summary.json", (2, 2))
    summary = report.latest_summary(tmp_path / "p")
    assert summary is not None and summary["run_id"] == "b"


def test_the_watermark_keeps_the_last_passed_audits_end_offsets(tmp_path):
    (tmp_path / "p").mkdir()
    assert report.read_watermark(tmp_path, "p") is None
    body = report.write_watermark(tmp_path, "p", "r1", "t", {1: 7, 0: 5})
    assert body["offsets"] == {"0": 5, "1": 7} and report.read_watermark(tmp_path, "p") == body
    (tmp_path / "p" / report.WATERMARK).write_text('{"offsets": "not a map"}')
    assert report.read_watermark(tmp_path, "p") is None


def test_the_verdict_says_passed_or_names_what_failed():
    checks = [{"name": "loss", "status": "failed"}, {"name": "duplicates", "status": "passed"}]
    assert report.audit_verdict({"status": "passed", "checks": checks[1:], "counts": {"rows": 3}}) == {
        "passed": True,
        "status": "passed",
        "problems": [],
        "counts": {"rows": 3},
    }
    failed = report.audit_verdict({"status": "failed", "checks": checks})
    assert failed["passed"] is False and failed["problems"] == ["loss"]
    assert report.audit_verdict({"status": "failed", "failed_checks": ["content"]})["problems"] == ["content"]
    error = report.audit_verdict({"status": "error", "reason": "Kafka is down"})
    assert error["passed"] is False and error["problems"] == ["the audit could not run: Kafka is down"]
