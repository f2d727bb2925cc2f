"""Everything generated goes under the state dir: audit reports, Spark's warehouse and scratch."""

from __future__ import annotations

import os
from pathlib import Path

from onceflow import paths
from onceflow.cli import app as cli
from onceflow.spark.session import jvm_working_dir, spark_conf, spark_dir


def test_reports_default_to_the_state_dir_unless_onceflow_reports_says_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ONCEFLOW_REPORTS", raising=False)
    assert paths.reports_dir() == tmp_path / "home" / "reports"
    monkeypatch.setenv("ONCEFLOW_REPORTS", str(tmp_path / "elsewhere"))
    assert paths.reports_dir() == tmp_path / "elsewhere"


def test_the_audit_command_writes_its_report_under_the_state_dir_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ONCEFLOW_REPORTS", raising=False)
    args = cli.build_parser().parse_args(["audit"])
    args.needs_kafka = False  # the Kafka check is tested in test_cli_fail_fast
    cli.prepare(args)
    assert args.report_dir == str(tmp_path / "home" / "reports")
    args = cli.build_parser().parse_args(["audit", "--report-dir", str(tmp_path / "r")])
    args.needs_kafka = False
    cli.prepare(args)
    assert args.report_dir == str(tmp_path / "r")


def test_the_airflow_side_reads_the_same_reports_folder(tmp_path, monkeypatch):
    from onceflow.airflow.hooks import reports_root

    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("ONCEFLOW_REPORTS", raising=False)
    assert reports_root() == paths.reports_dir() == tmp_path / "reports"


def test_spark_warehouse_is_under_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    assert spark_conf()["spark.sql.warehouse.dir"] == str(tmp_path / "spark" / "warehouse")


def test_spark_event_logs_go_under_the_state_dir_and_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("ONCEFLOW_SPARK_EVENT_LOG", raising=False)
    conf = spark_conf()
    events = tmp_path / "spark" / "events"
    assert conf["spark.eventLog.enabled"] == "true" and conf["spark.eventLog.dir"] == events.as_uri()
    assert conf["spark.eventLog.rolling.enabled"] == "true"
    assert events.is_dir()  # Spark refuses to start when the directory is missing
    monkeypatch.setenv("ONCEFLOW_SPARK_EVENT_LOG", "false")
    assert "spark.eventLog.enabled" not in spark_conf()


def test_make_spark_history_opens_the_same_folder():
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    target = makefile[makefile.index("spark-history: venv") :].split("\n\n")[0]
    assert "event_log_dir()" in target and "org.apache.spark.deploy.history.HistoryServer" in target
    assert "-Dspark.history.fs.logDirectory=$$events" in target


def test_the_jvm_starts_in_the_state_dir_with_an_absolute_pythonpath(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["src", "/abs/lib"]))
    with jvm_working_dir() as where:
        assert Path.cwd() == where == spark_dir() == tmp_path / "home" / "spark"
        assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "src"), "/abs/lib"]
    assert Path.cwd() == tmp_path


def test_a_location_is_a_local_path_unless_another_scheme_names_it():
    assert paths.local_path("/data/cp") == Path("/data/cp")
    assert paths.local_path(Path("rel/cp")) == Path("rel/cp")
    for uri in ("file:/data/cp", "file:///data/cp", "file://localhost/data/cp"):
        assert paths.local_path(uri) == Path("/data/cp"), uri
    assert paths.local_path("file:///data/a%20b") == Path("/data/a b")  # decoded, as Spark decodes it
    for remote in ("s3a://bucket/cp", "gs://bucket/cp", "abfss://c@a.dfs.core.windows.net/cp"):
        assert paths.local_path(remote) is None, remote


def test_a_fresh_state_dir_uses_the_checkouts_jars_unless_told_otherwise(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    (checkout / ".onceflow" / "jars" / "kafka").mkdir(parents=True)
    monkeypatch.setenv("ONCEFLOW_PROJECT", str(checkout))
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "fresh"))
    monkeypatch.delenv("ONCEFLOW_JARS", raising=False)
    assert paths.jars_dir() == checkout / ".onceflow" / "jars"  # nothing to resolve again
    (tmp_path / "fresh" / "jars").mkdir(parents=True)
    assert paths.jars_dir() == tmp_path / "fresh" / "jars"  # its own, once it has them
    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path / "elsewhere"))
    assert paths.jars_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("ONCEFLOW_JARS")
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "other"))
    monkeypatch.setenv("ONCEFLOW_PROJECT", str(tmp_path / "no-checkout"))
    assert paths.jars_dir() == tmp_path / "other" / "jars"  # where `onceflow setup` resolves them


def test_a_driver_keeps_the_compiled_code_of_a_whole_batch():
    """Spark's 100 classes are fewer than one batch and one audit use: each batch would compile
    them again (docs/benchmarks.md, "Compiled code kept")."""
    assert int(spark_conf()["spark.sql.codegen.cache.maxEntries"]) >= 1000
