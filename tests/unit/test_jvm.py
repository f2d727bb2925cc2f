"""The JVM classpaths setup resolves: found where jars_dir() says, or refused with the fix."""

from __future__ import annotations

import contextlib

import pytest

from onceflow import jvm
from onceflow.errors import SetupError


def test_a_classpath_is_its_folders_jars_in_name_order(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path))
    (tmp_path / "kafka").mkdir()
    for name in ("kafka-clients-4.1.0.jar", "b.jar", "notes.txt"):
        (tmp_path / "kafka" / name).write_text("x")
    assert jvm.classpath_dir("kafka") == tmp_path / "kafka"
    assert [p.name for p in jvm.classpath_jars("kafka")] == ["b.jar", "kafka-clients-4.1.0.jar"]


def test_a_missing_classpath_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path))
    with pytest.raises(SetupError, match=r"no spark jars in .*Fix: run `onceflow setup`"):
        jvm.classpath_jars("spark")


def _tar(path, members: dict[str, bytes], links: dict[str, str] | None = None):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return path


@pytest.mark.parametrize("safe_filter", [True, False], ids=["python-filter", "debian-3.11.2"])
def test_an_app_archive_unpacks_inside_its_folder_with_or_without_pythons_filter(tmp_path, monkeypatch, safe_filter):
    """Debian 12's Python (3.11.2, the stack's image) has no `filter="data"`: setup failed there
    with a TypeError; the same rule holds on both."""
    import tarfile

    if not safe_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    app = _tar(tmp_path / "app.tar.gz", {"app/quarkus-run.jar": b"jar", "app/lib/a.jar": b"a"}, {"app/l": "lib/a.jar"})
    jvm.extract(app, tmp_path / "out")
    assert (tmp_path / "out" / "app" / "quarkus-run.jar").read_bytes() == b"jar"
    assert (tmp_path / "out" / "app" / "l").resolve() == (tmp_path / "out" / "app" / "lib" / "a.jar").resolve()

    for bad in (
        _tar(tmp_path / "up.tar.gz", {"../evil": b"x"}),
        _tar(tmp_path / "link.tar.gz", {}, {"app/escape": "../../../etc/passwd"}),
    ):
        with pytest.raises((SetupError, tarfile.FilterError) if safe_filter else SetupError):
            jvm.extract(bad, tmp_path / "bad")
    assert not (tmp_path / "evil").exists()
    # an absolute member: Python's filter strips its "/", the check here refuses it; never written there
    outside = tmp_path / "abs-evil"
    with contextlib.suppress(SetupError):
        jvm.extract(_tar(tmp_path / "abs.tar.gz", {str(outside): b"x"}), tmp_path / "abs")
    assert not outside.exists()


def test_setup_resolves_only_the_classpaths_asked_for():
    import argparse

    from onceflow.cli import setup

    assert setup._classpaths("kafka, spark,s3proxy") == ("kafka", "spark", "s3proxy")
    with pytest.raises(argparse.ArgumentTypeError, match="choose from kafka, spark, s3proxy, registry"):
        setup._classpaths("kafka,avro")
