"""What an incident's message says (onceflow.airflow.notify), and the `airflow.notify` setting.
Sending it through Airflow's notifiers to real receivers: tests/integration/test_notify.py."""

from __future__ import annotations

import importlib

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow import config  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow.notify import (  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
    Incident,
    IncidentKind,
    alert_incident,
    recovery_ended,
    recovery_started,
)
from onceflow.errors import ConfigError  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.verdicts import ALERTS, RUNBOOKS  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from tests.unit.test_config import GOOD, write  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


@pytest.mark.parametrize("verdict", ALERTS)
def test_every_alert_verdict_names_a_runbook_that_exists(verdict):
    from pathlib import Path

    incident = alert_incident("p", {"verdict": str(verdict), "reasons": ["r"]}, "p_stream", "run", "p_recover")
    assert incident.runbook == RUNBOOKS[verdict]
    assert (Path(__file__).resolve().parents[3] / incident.runbook).is_file()


EXECUTED = {"plan": {"case": "dead_query", "decision": "restart"}, "outcome": "done"}
FIRST = {"verdict": "healthy", "time": 100.0, "run": {"last_batch_id": 42}}


def test_a_recovery_whose_app_committed_resolves_the_incident():
    incident = recovery_ended("p", EXECUTED, FIRST, None, "p_recover", "manual__1", 37.2)
    assert incident.kind == IncidentKind.RECOVERED and incident.resolves
    assert incident.evidence == [
        "the recovered app committed batch 42 37 s after the recovery began",
        "case dead_query → decision restart",
    ]


@pytest.mark.parametrize(
    "executed, first, refusal, why",
    [
        (None, None, "Kafka no longer holds [0, 40) of partition 1", "refused: Kafka no longer holds"),
        (None, None, None, "`onceflow recover` failed"),
        (EXECUTED, None, None, "did not commit a first batch"),
    ],
)
def test_a_recovery_that_did_not_finish_says_why(executed, first, refusal, why):
    incident = recovery_ended("p", executed, first, refusal, "p_recover", "manual__1", None)
    assert incident.kind == IncidentKind.RECOVERY_FAILED and not incident.resolves
    assert incident.subject() == "[onceflow] p: recovery did not finish" and why in incident.evidence[0]


def test_a_recovery_by_hand_is_told_as_started():
    incident = recovery_started("p", "manual", "", "p_recover", "manual__1")
    assert incident.headline == "recovery started" and incident.evidence == ["triggered as: manual"]


def test_masking_replaces_every_secret_value_and_leaves_short_ones():
    incident = Incident("p", IncidentKind.ALERT, "dead s3cr3t-pw", ["login s3cr3t-pw refused", "id ab"], None, {})
    masked = incident.masked(["s3cr3t-pw", "ab"])
    assert masked.headline == "dead ***" and masked.evidence == ["login *** refused", "id ab"]


def test_notify_targets_load_and_a_mail_without_recipients_is_refused(tmp_path):
    text = GOOD + (
        "airflow:\n  notify:\n    email: {to: [a@example.test], from: o@example.test}\n"
        "    slack: {connection: team_webhook}\n"
    )
    notify = config.load(write(tmp_path, text), env={}).airflow.notify
    assert notify.email is not None and notify.email.connection == "smtp_default"
    assert notify.email.from_ == "o@example.test" and notify.email.to == ["a@example.test"]
    assert notify.targets == [notify.email, notify.slack]
    assert notify.slack is not None and notify.slack.connection == "team_webhook"
    assert config.load(write(tmp_path, GOOD), env={}).airflow.notify.targets == []
    with pytest.raises(ConfigError) as exc:
        config.load(write(tmp_path, GOOD + "airflow:\n  notify:\n    email: {to: []}\n"), env={})
    assert "field `airflow.notify.email.to`" in str(exc.value) and "Fix" in str(exc.value)
    with pytest.raises(ConfigError, match=r"airflow\.notify\.pager"):
        config.load(write(tmp_path, GOOD + "airflow:\n  notify:\n    pager: {}\n"), env={})


received: list = []


def recording_notifier(incident: Incident):
    """A notifier factory as a pipeline names one (`airflow.notify.notifiers`): Airflow's BaseNotifier."""
    from airflow.sdk import BaseNotifier

    class Recorder(BaseNotifier):
        def notify(self, context):
            received.append((incident.subject(), incident.text()))

    return Recorder()


def test_any_airflow_notifier_takes_the_incident_through_a_factory_the_pipeline_names(tmp_path):
    from onceflow.airflow.notify import send

    factory = "tests.unit.airflow.test_notify:recording_notifier"
    text = GOOD + f"airflow:\n  notify:\n    notifiers: ['{factory}', 'tests.unit.airflow.test_notify:missing']\n"
    pipeline = config.load(write(tmp_path, text), env={})
    incident = recovery_started("p1", "manual", "", "p1_recover", "manual__1")
    logged: list[str] = []
    received.clear()
    assert send(pipeline, incident, {}, logged.append) == [factory]
    assert received == [("[onceflow] p1: recovery started", incident.text())]
    assert any("test_notify:missing" in line and "AttributeError" in line for line in logged), logged
    with pytest.raises(ConfigError, match=r"airflow\.notify\.notifiers"):
        config.load(write(tmp_path, GOOD + "airflow:\n  notify:\n    notifiers: ['not a path']\n"), env={})


def test_telling_never_fails_the_task_that_decided():
    from onceflow.airflow.notify import tell

    logged: list[str] = []

    def unreadable():
        raise ConfigError("p.yaml: field `airflow.notify.email.to`: at least 1 item. Fix: name a recipient")

    assert tell(unreadable, lambda: recovery_started("p", "", "", "d", "r"), {}, logged.append) == []
    assert logged == [
        "the incident could not be told: ConfigError: p.yaml: field `airflow.notify.email.to`: at least 1 item. "
        "Fix: name a recipient"
    ]


def test_a_poisoned_batch_is_told_with_its_offsets_and_error():
    event = {
        "verdict": "poisoned",
        "reasons": ["the last 3 runs all failed on batch 12"],
        "health": {
            "run": {
                "poisoned": {
                    "batch_id": 12,
                    "ranges": {"1": [40, 90], "0": [10, 50]},
                    "runs": 3,
                    "error": "ArithmeticException: / by zero",
                }
            }
        },
    }
    incident = alert_incident("p", event, "p_stream", "r", "p_recover")
    assert incident.runbook == "docs/runbooks/poison-batch.md"
    assert (
        "poisoned batch 12 (partition 0 [10, 50), partition 1 [40, 90)), failed 3 runs: "
        "ArithmeticException: / by zero" in incident.evidence
    )
