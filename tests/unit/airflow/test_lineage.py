"""What Airflow's OpenLineage provider is told of onceflow's tasks (onceflow.airflow.lineage). The
provider's own events and the job's parent link, in a real DAG run: tests/e2e/test_airflow_dags.py."""

from __future__ import annotations

import importlib
import os

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from devkit.pipelines import load_pipeline  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow.lineage import parent_env, task_lineage  # noqa: E402 -- after AIRFLOW_HOME


def _names(datasets) -> set[tuple[str, str]]:
    return {(d.namespace, d.name) for d in datasets}


def test_the_ingest_reads_the_topic_and_writes_the_tables_and_the_audit_reads_both(tmp_path):
    pipeline = load_pipeline(tmp_path / "p", "b:9092", "payments")
    tables = {("file", str((tmp_path / "p" / t).absolute())) for t in ("bronze", "quarantine", "aggregates")}
    ingest = task_lineage(pipeline, "ingest")
    assert _names(ingest.inputs) == {("kafka://b:9092", "payments")} and _names(ingest.outputs) == tables
    audit = task_lineage(pipeline, "audit")
    assert _names(audit.inputs) == {("kafka://b:9092", "payments")} | tables and audit.outputs == []


def test_no_parent_is_handed_on_while_the_provider_is_off(monkeypatch):
    # (the provider reads its configuration afresh under pytest: no cache to clear)
    for key in [k for k in os.environ if k.startswith(("OPENLINEAGE", "AIRFLOW__OPENLINEAGE"))]:
        monkeypatch.delenv(key)
    assert parent_env({"ti": object()}) == {}  # the task instance is not even looked at
