"""DAG integrity: the DAG files import cleanly, each pipeline gets its five DAGs with the
expected tasks, dependencies and defaults, and a bad pipeline YAML is an import error
that names the file and the field."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.airflow_helpers import ROOT  # sets up AIRFLOW_HOME before airflow is imported

SHAPES: dict[str, dict[str, list[str]]] = {
    "stream": {
        "guard": ["release", "stream"],
        "stream": ["wait_healthy"],
        "wait_healthy": ["watch"],
        "watch": ["trigger_recover"],
        "trigger_recover": ["release"],
        "release": [],
    },
    "batch": {"ingest": ["audit"], "audit": []},
    "audit": {"audit": []},
    "recover": {
        "begin": ["end", "execute"],
        "execute": ["start"],
        "start": ["wait_first_batch"],
        "wait_first_batch": ["audit", "end"],
        "audit": [],
        "end": [],
    },
    "backfill": {"resolve": ["backfill"], "backfill": ["audit"], "audit": []},
}
# every shipped pipeline (pipelines/*.yaml) gets the same five DAGs
EXPECTED = {
    f"{p}_{kind}": shape
    for p in ("customers_cdc", "payments", "payments_avro", "sensors")
    for kind, shape in SHAPES.items()
}


def _dagbag(folder: Path):
    from airflow.dag_processing.dagbag import DagBag

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = DagBag(dag_folder=str(folder))
    return bag, caught


@pytest.fixture(scope="module")
def bag(monkeypatch_module):
    monkeypatch_module.setenv("ONCEFLOW_PIPELINES_DIR", str(ROOT / "pipelines"))
    return _dagbag(ROOT / "dags")


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_dag_files_import_without_error_or_warning(bag):
    dagbag, caught = bag
    assert dagbag.import_errors == {}
    assert dagbag.captured_warnings == {}
    ours = [w for w in caught if "onceflow" in str(w.filename) or str(ROOT / "dags") in str(w.filename)]
    assert ours == [], [f"{w.filename}:{w.lineno}: {w.message}" for w in ours]


def test_each_pipeline_gets_its_dags_tasks_and_dependencies(bag):
    dagbag, _ = bag
    assert set(dagbag.dags) == set(EXPECTED)
    for dag_id, shape in EXPECTED.items():
        dag = dagbag.dags[dag_id]
        assert {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks} == shape, dag_id


def test_defaults_docs_retries_and_concurrency(bag):
    dagbag, _ = bag
    for dag_id, dag in dagbag.dags.items():
        assert dag.max_active_runs == 1, dag_id
        assert dag.doc_md and dag_id.rsplit("_", 1)[0] in dag.doc_md and len(dag.doc_md) > 200, dag_id
        assert not dag.catchup, dag_id
    stream = dagbag.dags["payments_stream"]
    assert stream.task_dict["stream"].retries == 0  # a retried window could race the watcher
    assert stream.task_dict["wait_healthy"].deferrable and stream.task_dict["watch"].deferrable
    assert stream.task_dict["release"].is_teardown  # the claim is given up however the run went
    batch = dagbag.dags["payments_batch"]
    ingest = batch.task_dict["ingest"]
    assert ingest.retries == 2 and ingest.retry_exponential_backoff  # replay is a no-op: retry helps
    assert batch.task_dict["audit"].trigger_rule == "none_failed"
    recover = dagbag.dags["payments_recover"]
    assert all(t.retries == 0 for t in recover.tasks if t.task_id != "audit")
    assert recover.task_dict["end"].is_teardown
    assert recover.schedule is None and dagbag.dags["payments_backfill"].schedule is None
    assert stream.schedule == "@continuous"  # the next window starts when this one ends
    # the audit produces the table's Asset and carries the "Audit report" link
    audit = dagbag.dags["payments_audit"].task_dict["audit"]
    assert [a.name for a in audit.outlets] == ["onceflow.payments.bronze"]
    assert [link.name for link in audit.operator_extra_links] == ["Audit report"]


def test_dags_serialize_as_the_dag_processor_stores_them(bag):
    from airflow.serialization.serialized_objects import DagSerialization

    dagbag, _ = bag
    for dag_id, dag in dagbag.dags.items():
        restored = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
        assert set(restored.task_dict) == set(EXPECTED[dag_id])
    audit = DagSerialization.serialize_dag(dagbag.dags["payments_audit"])
    assert "Audit report" in str(audit)


SCHEMA = "schema: {event_time: ts, fields: [{name: ts, type: timestamp}]}\n"


@pytest.mark.parametrize(
    "yaml_text, field, fix",
    [
        (
            "name: bad\nsource: {bootstrap_servers: 'x:1', topic: t}\n" + SCHEMA + "sinks: {quarantine: {path: q}}\n"
            "checkpoint: c\n",
            "sinks.bronze",
            "Fix: add `sinks.bronze` to the file",
        ),
        (
            "name: bad\nsource: {bootstrap_servers: 'x:1', topic: 'no spaces'}\n"
            + SCHEMA
            + "sinks: {bronze: {path: b}, quarantine: {path: q}}\ncheckpoint: c\n",
            "source.topic",
            "Fix: see docs/pipeline-config.md",
        ),
        (
            "name: payments\nsource: {bootstrap_servers: 'x:1', topic: t}\n"
            + SCHEMA
            + "sinks: {bronze: {path: b}, quarantine: {path: q}}\ncheckpoint: c\n",
            "name",
            "Fix: give each pipeline file its own name",
        ),
    ],
)
def test_a_bad_pipeline_file_is_one_named_error_and_the_good_pipelines_keep_their_dags(
    tmp_path, monkeypatch, yaml_text, field, fix
):
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    for shipped in ("customers_cdc.yaml", "payments.yaml", "payments_avro.yaml", "sensors.yaml"):
        (pipelines / shipped).write_text((ROOT / "pipelines" / shipped).read_text())
    bad = pipelines / "zz-bad.yaml"  # sorts after payments.yaml: a clash of names is blamed on it
    bad.write_text(yaml_text)
    monkeypatch.setenv("ONCEFLOW_PIPELINES_DIR", str(pipelines))
    dagbag, _ = _dagbag(ROOT / "dags")
    assert dagbag.import_errors == {}
    assert set(dagbag.dags) == set(EXPECTED) | {"invalid_pipeline_zz-bad"}
    invalid = dagbag.dags["invalid_pipeline_zz-bad"]
    for text in (invalid.description, invalid.doc_md):
        assert str(bad) in text and f"field `{field}`" in text and fix in text, text
    assert invalid.dag_display_name == "INVALID zz-bad.yaml" and invalid.schedule is None
    assert "invalid" in invalid.tags and list(invalid.task_dict) == ["fix_the_pipeline_file"]
    from airflow.serialization.serialized_objects import DagSerialization  # as the dag processor stores it

    restored = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(invalid))
    assert restored.description == invalid.description and str(bad) in (restored.doc_md or "")


def test_each_bad_file_gets_its_own_error_and_running_it_fails_with_the_fix(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    (pipelines / "one.yaml").write_text("name: one\nsource: {topic: t}\n")
    (pipelines / "two.yaml").write_text("name: [unclosed\n")
    monkeypatch.setenv("ONCEFLOW_PIPELINES_DIR", str(pipelines))
    dagbag, _ = _dagbag(ROOT / "dags")
    assert dagbag.import_errors == {}
    assert set(dagbag.dags) == {"invalid_pipeline_one", "invalid_pipeline_two"}
    assert "two.yaml: not valid YAML" in dagbag.dags["invalid_pipeline_two"].description
    task = dagbag.dags["invalid_pipeline_one"].task_dict["fix_the_pipeline_file"]
    with pytest.raises(AirflowFailException) as failed:
        task.execute({})
    assert str(pipelines / "one.yaml") in str(failed.value) and "Fix: add `sinks` to the file" in str(failed.value)


def test_dag_docs_name_the_real_dag_ids():
    from onceflow.airflow.dag_factory import build_dags

    dags = build_dags(ROOT / "pipelines")
    for dag in dags.values():
        doc = dag.doc_md or ""
        assert "<p>" not in doc and "<pipeline>" not in doc, dag.dag_id
    assert "triggers `payments_recover`" in (dags["payments_stream"].doc_md or "")
    assert "(`payments_stream` waits)" in (dags["payments_recover"].doc_md or "")


def test_the_stream_window_and_the_lease_come_from_the_pipeline_file(tmp_path, monkeypatch):
    """Scheduled runs of `<p>_stream` take the params' defaults: the window is the file's
    `airflow.window` (it was always 1,800 s), and the watchers renew the lease for its
    `airflow.lease_grace` (once for window + 300 s before)."""
    from devkit.pipelines import write_pipeline
    from onceflow.airflow.dag_factory import build_dags

    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    file = write_pipeline(tmp_path / "p", "x:1", "t", name="win", airflow={"window": "60 seconds"})
    stream = build_dags(file.parent)["win_stream"]
    assert stream.params["window_seconds"] == 60
    assert "airflow.window" in (stream.doc_md or "") and "60 seconds" in (stream.doc_md or "")
    watcher = "{{ dag.dag_id }}/{{ run_id }}"
    tasks: dict[str, Any] = dict(stream.task_dict)
    assert tasks["watch"].watcher == watcher and tasks["wait_healthy"].watcher == watcher
    assert tasks["stream"].lease_seconds is None  # the file's lease_grace, not a window
    default = build_dags(write_pipeline(tmp_path / "d", "x:1", "t", name="dflt").parent)["dflt_stream"]
    assert default.params["window_seconds"] == 1800
