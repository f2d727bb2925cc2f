"""The "Audit report" link: a report folder as a URL on the onceflow page."""

from __future__ import annotations

import importlib

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow.airflow.links import UI_PREFIX, AuditReportLink, report_url  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


class _Operator:
    report_link = "/onceflow/reports/p/r/index.html"


def test_a_report_folder_is_served_under_the_page(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080/")
    from airflow.configuration import conf

    monkeypatch.setattr(conf, "get", lambda *a, **k: "http://airflow.example:8080/")
    run = tmp_path / "reports" / "p" / "2026 run"
    run.mkdir(parents=True)
    assert (
        report_url(run, tmp_path / "reports")
        == f"http://airflow.example:8080{UI_PREFIX}/reports/p/2026%20run/index.html"
    )


def test_the_link_is_what_the_task_recorded():
    link = AuditReportLink()
    assert link.name == "Audit report"
    assert link.get_link(_Operator(), ti_key=None) == _Operator.report_link
    assert link.get_link(object(), ti_key=None) == ""
