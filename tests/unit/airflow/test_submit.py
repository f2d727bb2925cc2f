"""What the operators hand to the apache-spark provider's spark-submit."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest

from onceflow.airflow.submit import submit_settings
from tests.airflow_helpers import ROOT


@pytest.fixture
def jars(tmp_path, monkeypatch):
    folder = tmp_path / "jars" / "spark"
    folder.mkdir(parents=True)
    for name in ("delta-spark_2.13-4.0.0.jar", "spark-sql-kafka-0-10_2.13-4.0.0.jar"):
        (folder / name).write_bytes(b"PK")
    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path / "jars"))
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    return folder


def test_local_master_settings(jars):
    s = submit_settings("ingest", "local[2]")
    assert s.application == str(ROOT / "spark_apps" / "ingest.py")
    assert "spark.master" not in s.conf and "spark.jars" not in s.conf  # the connection and --jars decide
    assert s.conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert s.conf["spark.pyspark.python"] == sys.executable
    # submitted apps write Spark event logs for `make spark-history` (docs/runbooks/slow-batch.md)
    assert s.conf["spark.eventLog.enabled"] == "true" and s.conf["spark.eventLog.dir"].endswith("/spark/events")
    assert s.jars.split(",") == [str(p) for p in sorted(jars.glob("*.jar"))]
    assert s.env_vars["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)  # spark-submit
    assert s.env_vars["ONCEFLOW_SPARK_MASTER"] == "local[2]" and s.env_vars["ONCEFLOW_JARS"]
    assert s.py_files is None


def test_cluster_master_ships_the_package(jars):
    s = submit_settings("audit", "spark://master:7077")
    assert s.application.endswith("spark_apps/audit.py")
    assert s.py_files is not None
    with zipfile.ZipFile(s.py_files) as zf:
        names = zf.namelist()
    assert "onceflow/__init__.py" in names and "onceflow/airflow/submit.py" in names
    assert not any("__pycache__" in n for n in names)


def test_missing_jars_say_how_to_get_them(tmp_path, monkeypatch):
    from onceflow.errors import SetupError

    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path / "none"))
    with pytest.raises(SetupError, match="onceflow setup"):
        submit_settings("ingest", "local[2]")


def test_submitted_apps_log_at_warn_from_the_first_line(jars, monkeypatch):
    s = submit_settings("ingest", "local[2]")
    option = s.conf["spark.driver.extraJavaOptions"]
    path = Path(option.removeprefix("-Dlog4j2.configurationFile=file:"))
    assert path == Path(os.environ["ONCEFLOW_HOME"]) / "spark" / "log4j2.properties"
    assert "rootLogger.level = WARN" in path.read_text()
    monkeypatch.setenv("ONCEFLOW_SPARK_LOG_LEVEL", "info")
    submit_settings("ingest", "local[2]")
    assert "rootLogger.level = INFO" in path.read_text()  # the variable still decides
