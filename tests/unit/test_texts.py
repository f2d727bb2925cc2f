"""What a person reads: real DAG ids instead of `<p>_`, no `pid None`, runs that "finished"
rather than "ended finished", no empty total row, a typo named with the field it meant."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from onceflow import config
from onceflow.cli.checkpoint import print_status
from onceflow.cli import main
from onceflow.errors import ConfigError
from onceflow.status import ended
from tests.unit import test_health
from tests.unit.test_health import check, committed_checkpoint, kafka, started, status, unreachable  # noqa: F401

pipeline = test_health.pipeline  # the fixture, shared

ROOT = Path(__file__).resolve().parents[2]


def test_kafka_status_of_a_stopped_broker_says_stopped_and_how_to_start_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["kafka", "status", "--port", str(port)]) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert f"Kafka broker: stopped; bootstrap localhost:{port};" in text
    assert "pid" not in text and "start it with `onceflow kafka start`" in text


def test_a_run_that_ended_is_told_in_plain_words(pipeline):  # noqa: F811
    assert [ended(s) for s in ("finished", "stopped", "failed")] == [
        "finished", "was stopped (at a batch boundary)", "failed"]
    committed_checkpoint(pipeline)
    status(pipeline, started(100), ("final", 80, {"status": "finished", "error": None}))
    reason = check(pipeline)["reasons"][0]
    assert reason.startswith("not running; the last run finished at ") and "ended" not in reason


def _status_text(report: dict, capsys) -> str:
    print_status(report)
    return capsys.readouterr().out


def _total(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if " all " in line]


def test_the_total_row_sums_what_is_known_and_is_left_out_when_nothing_is(pipeline, capsys):  # noqa: F811
    status(pipeline, started(100), ("final", 80, {"status": "stopped", "error": None}))
    # nothing committed yet: every partition is read from the start; committed unknown, latest and lag known
    assert _total(_status_text(check(pipeline, kafka({0: 300, 1: 235})), capsys)) == [["all", "—", "535", "535"]]
    committed_checkpoint(pipeline)
    assert _total(_status_text(check(pipeline, kafka({0: 300, 1: 235})), capsys)) == [["all", "65", "535", "470"]]
    assert _total(_status_text(check(pipeline, unreachable), capsys)) == [["all", "65", "—", "—"]]
    report = check(pipeline, kafka({0: 300}))
    report["partitions"] = report["partitions"][:1]
    assert _total(_status_text(report, capsys)) == []  # one partition: its row is the total


def test_recovery_hints_name_the_real_dag_and_command():
    from tests.unit.recovery.test_plan import B, all_sinks, checkpoint, decide, facts

    plan = decide(facts(checkpoint(B, 2), all_sinks()))
    assert "<" not in plan.next_step
    assert plan.next_step == (f"start the query: `onceflow ingest --pipeline {plan.pipeline}` (or `onceflow recover "
                              f"--pipeline {plan.pipeline} --resume`); in Airflow the {plan.pipeline}_recover DAG "
                              "resubmits it")


def test_dag_docs_name_the_real_dag_ids():
    from onceflow.airflow.dag_factory import build_dags

    dags = build_dags(ROOT / "pipelines")
    for dag in dags.values():
        assert "<p>" not in dag.doc_md and "<pipeline>" not in dag.doc_md, dag.dag_id
    assert "triggers `payments_recover`" in dags["payments_stream"].doc_md
    assert "(`payments_stream` waits)" in dags["payments_recover"].doc_md


GOOD = (ROOT / "pipelines" / "payments.yaml").read_text()


@pytest.mark.parametrize("text, message", [
    (GOOD.replace("\nsource:", "\nsourc:"),
     "invalid pipeline config:\n  field `sourc`: unknown field; did you mean `source`? Fix: rename `sourc` to `source`"),
    (GOOD.replace("  topic: payments", "  topik: payments"),
     "  field `source.topik`: unknown field; did you mean `source.topic`? Fix: rename `source.topik` to "
     "`source.topic`"),
    (GOOD + "colour: red\n", "  field `colour`: unknown field. Fix: remove it, or use one of: name, source, schema, "
                             "sinks, checkpoint, trigger, health, spark_master (docs/pipeline-config.md)"),
    (GOOD.replace("checkpoint: checkpoints/payments\n", ""),
     "  field `checkpoint`: missing. Fix: add `checkpoint` to the file"),
])
def test_a_typo_names_the_field_and_the_fix_without_dumping_the_file(tmp_path, text, message):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as caught:
        config.load(f, env={})
    got = str(caught.value)
    assert message in got
    assert "tables/payments" not in got and "{'" not in got  # none of the file's contents
    assert len(got.splitlines()) == 2  # the headline and one line: a misspelling is one mistake


def test_long_values_are_shortened(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(GOOD.replace("  topic: payments", "  topic: '" + "x y" * 100 + "'"))
    with pytest.raises(ConfigError) as caught:
        config.load(f, env={})
    line = str(caught.value).splitlines()[1]
    assert line.startswith("  field `source.topic`: String should match pattern") and " ...)" in line
    assert len(line) < 250
