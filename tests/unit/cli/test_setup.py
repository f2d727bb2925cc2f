"""`onceflow setup` resolves the jars, then archives the driver's classes, each once."""

from __future__ import annotations

from onceflow import jvm
from onceflow.cli import setup
from onceflow.cli.app import build_parser
from onceflow.spark import class_archive


def test_setup_checks_versions_resolves_and_archives_forcing_both_with_force(monkeypatch):
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(jvm, "check_versions", lambda: calls.append(("versions", None)))
    monkeypatch.setattr(jvm, "resolve", lambda names, force, log: calls.append(("jars", (names, force))))
    monkeypatch.setattr(class_archive, "build", lambda log, force: calls.append(("archive", force)))
    assert setup.cmd_setup(build_parser().parse_args(["setup"])) == 0
    assert setup.cmd_setup(build_parser().parse_args(["setup", "--force"])) == 0
    assert setup.cmd_setup(build_parser().parse_args(["setup", "--only", "kafka,spark"])) == 0
    assert calls == [
        ("versions", None),
        ("jars", (jvm.CLASSPATHS, False)),
        ("archive", False),
        ("versions", None),
        ("jars", (jvm.CLASSPATHS, True)),
        ("archive", True),
        ("versions", None),
        ("jars", (("kafka", "spark"), False)),
        ("archive", False),
    ]
