"""The JVM classpaths setup resolves: found where jars_dir() says, or refused with the fix."""

from __future__ import annotations

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
