"""Incidents reach people through Airflow's own notifiers: the smtp provider's SmtpNotifier to a
real SMTP server (with a login) and the slack provider's SlackWebhookNotifier to an HTTP receiver,
each through an Airflow connection. A message names the pipeline, the verdict, the evidence, the
runbook and the links, and neither a pipeline secret a reason quotes nor the connections'
password and webhook token; a target that is down is logged, not raised.

The whole path in Airflow (a kill -9, the watch's `dead`, the recovery's end): the continuous
stream test of tests/e2e/test_airflow_dags.py."""

from __future__ import annotations

import importlib
import json

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from devkit.pipelines import pipeline_file  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow.notify import (  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
    IncidentKind,
    alert_incident,
    audit_failed,
    send,
)
from tests.receivers import (  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
    NOTIFY,
    SMTP_PASSWORD,
    WEBHOOK_TOKEN,
    MailServer,
    WebhookReceiver,
    use_receivers,
)

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")]
KAFKA_SECRET = "kafka-Secret-9999"


@pytest.fixture
def receivers(monkeypatch):
    with MailServer() as mail, WebhookReceiver() as hook:
        use_receivers(monkeypatch, mail, hook)
        yield mail, hook


def _pipeline(tmp_path, monkeypatch, notify=NOTIFY):
    monkeypatch.setenv("ONCEFLOW_TEST_KAFKA_PASSWORD", KAFKA_SECRET)
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080")
    pipeline_file(
        tmp_path,
        "localhost:9092",
        "payments",
        name="pay",
        airflow={"notify": {**notify, "docs_url": "https://docs.example/onceflow"}},
    )
    # a secret setting as a pipeline file must write it: ${VAR}
    body = (
        (tmp_path / "pay.yaml")
        .read_text()
        .replace(
            "  starting_offsets:",
            "  kafka:\n    security.protocol: SASL_PLAINTEXT\n    sasl.mechanism: PLAIN\n    sasl.username: u\n"
            "    sasl.password: ${ONCEFLOW_TEST_KAFKA_PASSWORD}\n  starting_offsets:",
        )
    )
    (tmp_path / "pay.yaml").write_text(body)
    from onceflow import config

    return config.load(tmp_path / "pay.yaml")


def _dead_event() -> dict:
    return {
        "verdict": "dead",
        "reasons": [f"run r1 has no final event and its process 4242 is gone (login {KAFKA_SECRET} refused?)"],
        "health": {"checkpoint": {"last_committed": 17}, "lag": {"total": 640}},
        "run": {"run_id": "r1", "batches": 18, "final_status": None, "error": None},
    }


def test_an_alert_arrives_once_by_mail_and_webhook_with_its_evidence_and_no_secret(tmp_path, monkeypatch, receivers):
    mail, hook = receivers
    pipeline = _pipeline(tmp_path, monkeypatch)
    incident = alert_incident("pay", _dead_event(), "pay_stream", "scheduled__2026-11-30T04:00:00+00:00", "pay_recover")
    logged: list[str] = []
    sent = send(pipeline, incident, {}, logged.append)

    assert sent == ["onceflow_smtp", "onceflow_slack"], logged
    assert len(mail.messages) == 1 and len(hook.posts) == 1
    message = mail.messages[0]
    assert message["Subject"] == "[onceflow] pay: dead, recovery started"
    assert message["To"] == "oncall@example.test" and message["From"] == "onceflow@example.test"
    body, text = mail.bodies()[0], hook.texts()[0]
    path, _ = hook.posts[0]
    assert path == f"/services/{WEBHOOK_TOKEN}"  # the webhook's URL is the connection's, token included
    for shown in (body, text):
        assert "verdict dead: run r1 has no final event" in shown
        assert "last committed batch: 17" in shown and "lag: 640 offsets" in shown
        assert "https://docs.example/onceflow/runbooks/dead-query.md" in shown
        assert "http://airflow.example:8080/dags/pay_stream/runs/scheduled__2026-11-30T04%3A00%3A00%2B00%3A00" in shown
        assert "http://airflow.example:8080/dags/pay_recover/runs" in shown
        assert "http://airflow.example:8080/onceflow/" in shown
        assert KAFKA_SECRET not in shown and "***" in shown  # the reason quoted the pipeline's password
        assert SMTP_PASSWORD not in shown and WEBHOOK_TOKEN not in shown
    assert not any(KAFKA_SECRET in line for line in logged)


def test_a_failed_audit_names_its_checks_and_report_and_html_is_escaped(tmp_path, monkeypatch, receivers):
    mail, hook = receivers
    pipeline = _pipeline(tmp_path, monkeypatch)
    summary = {
        "checks": [
            {"name": "loss", "status": "failed", "detail": "lost 3 offsets: partition 1 [40, 43)"},
            {"name": "duplicates", "status": "passed", "detail": ""},
            {"name": "content", "status": "failed", "detail": "<script>alert(1)</script> differs"},
        ],
        "counts": {"offsets_audited": 1200, "partitions_audited": 2},
    }
    verdict = {"passed": False, "status": "failed", "problems": ["loss", "content"]}
    incident = audit_failed(
        "pay",
        verdict,
        summary,
        "http://airflow.example:8080/onceflow/reports/pay/r/index.html",
        "pay_audit",
        "manual__1",
    )
    assert send(pipeline, incident, {}) == ["onceflow_smtp", "onceflow_slack"]
    body, text = mail.bodies()[0], hook.texts()[0]
    assert mail.messages[0]["Subject"] == "[onceflow] pay: audit failed"
    assert "loss: lost 3 offsets: partition 1 [40, 43)" in text and "duplicates" not in text
    assert "audited 1200 offsets in 2 partitions" in body
    assert "<script>" not in body and "&lt;script&gt;" in body  # a detail is text, never markup
    assert "onceflow/reports/pay/r/index.html" in body


def test_a_target_that_is_down_is_logged_and_the_others_still_hear(tmp_path, monkeypatch, receivers):
    _, hook = receivers
    pipeline = _pipeline(tmp_path, monkeypatch)
    nobody = json.loads(MailServer().connection())  # a port nothing listens on
    nobody["extra"] |= {"retry_limit": 1, "timeout": 5}
    monkeypatch.setenv("AIRFLOW_CONN_ONCEFLOW_SMTP", json.dumps(nobody))
    incident = alert_incident("pay", _dead_event(), "pay_stream", "r", "pay_recover")
    logged: list[str] = []
    assert send(pipeline, incident, {}, logged.append) == ["onceflow_slack"]
    assert incident.kind == IncidentKind.ALERT and len(hook.posts) == 1
    failure = [line for line in logged if "onceflow_smtp" in line]
    assert failure and "failed" in failure[0] and SMTP_PASSWORD not in failure[0], logged
