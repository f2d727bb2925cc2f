"""onceflow.metrics: the families a scrape yields from a real health report, their names, and the
docs' table of them."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from onceflow.metrics import AUDIT_METRICS, METRICS, READ_METRIC, RECOVERY_METRIC, registry_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _scrape(pipelines, reports: Path) -> dict[str, list]:
    text = generate_latest(registry_of(lambda: pipelines, reports)).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_a_pipeline_that_never_ran_has_one_verdict_and_no_offsets(tmp_path):
    from devkit.pipelines import load_pipeline

    pipeline = load_pipeline(tmp_path / "p", "127.0.0.1:1", "t")  # no broker there: its offsets are unknown
    found = _scrape([pipeline], tmp_path / "reports")
    verdicts = {s.labels["verdict"]: s.value for s in found["onceflow_pipeline_verdict"]}
    assert verdicts["not_started"] == 1.0 and sum(verdicts.values()) == 1.0
    assert found["onceflow_pipeline_alerting"][0].value == 0.0
    assert found["onceflow_kafka_lag_offsets"] == [] and found["onceflow_audit_passed"] == []
    assert found["onceflow_health_read_seconds"][0].labels == {"pipeline": pipeline.name}


def test_the_newest_audit_report_gives_its_outcome_and_time(tmp_path):
    import json

    from devkit.pipelines import load_pipeline
    from onceflow.audit.report import point_latest

    pipeline = load_pipeline(tmp_path / "p", "127.0.0.1:1", "t")
    reports = tmp_path / "reports"
    for run, status, at in (
        ("r1", "passed", "2026-11-30T01:00:00+00:00"),
        ("r2", "failed", "2026-11-30T02:00:00+00:00"),
    ):
        (reports / pipeline.name / run).mkdir(parents=True)
        (reports / pipeline.name / run / "summary.json").write_text(json.dumps({"status": status, "finished_at": at}))
        point_latest(reports, pipeline.name, run)
    found = _scrape([pipeline], reports)
    assert found["onceflow_audit_passed"][0].value == 0.0  # the newest, r2, failed
    assert found["onceflow_audit_timestamp_seconds"][0].value == 1796004000.0


def test_names_follow_prometheus_conventions_and_the_docs_list_every_metric():
    names = [m.name for m in METRICS] + [RECOVERY_METRIC[0]] + [n for n, _ in AUDIT_METRICS] + [READ_METRIC[0]]
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"onceflow_[a-z_]+", name), name
        assert not re.search(r"_(ms|milliseconds|minutes)$", name), name  # base units
    counters = {m.name for m in METRICS if m.counter} | {RECOVERY_METRIC[0]}
    assert counters == {n for n in names if n.endswith("_total")}  # a counter, and only a counter, ends _total
    documented = re.findall(r"^\| `(onceflow_[a-z_]+)` \|", DOCS.read_text(), re.MULTILINE)
    assert documented == names, "docs/operations.md's metric table must list METRICS, in order"
