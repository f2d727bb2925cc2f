"""The driver's class-data archive is used only when it was built for this JVM and this Spark."""

from __future__ import annotations

import json

import pytest

from onceflow.airflow.submit import submit_settings
from onceflow.spark import class_archive
from onceflow.spark.session import spark_conf


@pytest.fixture
def archive(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path / "jars"))
    monkeypatch.delenv("ONCEFLOW_CLASS_ARCHIVE", raising=False)
    monkeypatch.delenv("ONCEFLOW_DRIVER_JAVA_OPTIONS", raising=False)
    (tmp_path / "jars" / "spark").mkdir(parents=True)
    (tmp_path / "jars" / "spark" / "x.jar").write_bytes(b"")
    path = class_archive.archive_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not read by these tests")
    return path


def _stamp(path, fingerprint):
    path.with_suffix(".json").write_text(json.dumps({"fingerprint": fingerprint}))


def test_a_matching_archive_is_mapped_by_the_driver_and_by_spark_submit(archive):
    _stamp(archive, class_archive.fingerprint())
    options = spark_conf()["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={archive}" in options and "-Xshare:auto" in options
    submitted = submit_settings("ingest", "local[2]").conf["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={archive}" in submitted and "-Dlog4j2.configurationFile=file:" in submitted


@pytest.mark.parametrize("change", ["pyspark", "java", "spark_jars_hash"])
def test_an_archive_of_another_jvm_or_spark_is_not_used(archive, change):
    _stamp(archive, {**class_archive.fingerprint(), change: "something else"})
    assert class_archive.java_options() == ""
    assert "spark.driver.extraJavaOptions" not in spark_conf()


def test_no_stamp_or_turned_off_means_no_archive(archive, monkeypatch):
    assert class_archive.java_options() == ""  # built, but its stamp never written: not trusted
    _stamp(archive, class_archive.fingerprint())
    monkeypatch.setenv("ONCEFLOW_CLASS_ARCHIVE", "false")
    assert class_archive.java_options() == ""


def test_the_users_driver_options_come_after_the_archive(archive, monkeypatch):
    _stamp(archive, class_archive.fingerprint())
    monkeypatch.setenv("ONCEFLOW_DRIVER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
    assert spark_conf()["spark.driver.extraJavaOptions"].endswith(" -XX:TieredStopAtLevel=1")
    monkeypatch.setenv("ONCEFLOW_CLASS_ARCHIVE", "no")
    assert spark_conf()["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"


def test_jars_replaced_by_files_of_the_same_name_change_the_fingerprint(tmp_path):
    """A reinstall of the same pyspark rewrites its jars: the JVM then refuses the archive (it checks
    each jar's time and size) and starts without it, silently, so setup must see it as stale."""
    import os

    jar = tmp_path / "spark-core.jar"
    jar.write_bytes(b"x" * 10)
    before = class_archive.jars_digest(tmp_path)
    assert class_archive.jars_digest(tmp_path) == before
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    assert class_archive.jars_digest(tmp_path) != before
