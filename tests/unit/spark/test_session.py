"""The Spark settings onceflow runs with, the same for its own sessions and for spark-submit."""

from __future__ import annotations

from onceflow.spark.session import driver_java_options, spark_conf


def test_sessions_are_read_committed_delta_sessions_with_their_state_under_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    conf = spark_conf(master="local[2]", extra={"spark.x": "y"})
    assert conf["spark.master"] == "local[2]" and conf["spark.x"] == "y"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.warehouse.dir"] == str(tmp_path / "spark" / "warehouse")
    assert spark_conf(ui=False)["spark.ui.enabled"] == "false"


def test_the_drivers_java_options_add_what_the_environment_asks_for(monkeypatch):
    monkeypatch.setenv("ONCEFLOW_DRIVER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
    assert "-XX:TieredStopAtLevel=1" in driver_java_options()
    assert "log4j2.configurationFile" in driver_java_options(log_config=True)


def test_sparks_falling_behind_warning_is_quieted_by_a_logger_spark_has(tmp_path, monkeypatch):
    """A logger name that is not Spark's class would quiet nothing: it is checked against the jar."""
    import zipfile
    from pathlib import Path

    import pyspark

    from onceflow.spark.session import FALLING_BEHIND_LOGGER, log4j2_file

    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    text = log4j2_file().read_text()
    assert f"logger.fallingbehind.name = {FALLING_BEHIND_LOGGER}\nlogger.fallingbehind.level = ERROR" in text
    jar = next((Path(pyspark.__file__).parent / "jars").glob("spark-sql_*.jar"))
    assert FALLING_BEHIND_LOGGER.replace(".", "/") + ".class" in zipfile.ZipFile(jar).namelist()
