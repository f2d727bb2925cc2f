"""One pipeline lookup for every command: a name or a path, the same from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from onceflow import config
from onceflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "pipelines" / "payments.yaml"
OTHER = """
name: other
source: {bootstrap_servers: "localhost:1", topic: other}
schema: {event_time: ts, fields: [{name: ts, type: timestamp}]}
sinks: {bronze: {path: b}, quarantine: {path: q}}
checkpoint: cp
"""


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory with no pipelines/ in it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ONCEFLOW_PIPELINES_DIR", raising=False)
    return tmp_path


@pytest.mark.parametrize("spec", [None, "payments", "pipelines/payments.yaml", str(SHIPPED), "payments.yaml"])
def test_a_name_or_a_path_finds_the_shipped_pipeline_from_any_directory(elsewhere, spec):
    assert config.find_pipeline(spec) == SHIPPED


def test_a_path_relative_to_the_working_directory_wins(elsewhere):
    (elsewhere / "mine.yaml").write_text(OTHER)
    assert config.find_pipeline("mine.yaml") == elsewhere / "mine.yaml"
    assert config.load_pipeline("./mine.yaml").name == "other"


def test_names_are_looked_up_in_onceflow_pipelines_dir(elsewhere, monkeypatch):
    folder = elsewhere / "defs"
    folder.mkdir()
    (folder / "other.yaml").write_text(OTHER)
    monkeypatch.setenv("ONCEFLOW_PIPELINES_DIR", str(folder))
    assert config.pipelines_dir() == folder
    assert config.find_pipeline("other") == folder / "other.yaml"


def test_an_unknown_name_lists_the_pipelines_that_exist_and_the_fix(elsewhere):
    with pytest.raises(ConfigError) as caught:
        config.find_pipeline("paymnets")
    assert str(caught.value) == (
        f"no pipeline named 'paymnets' ({ROOT / 'pipelines'} holds: customers_cdc, payments, payments_avro, sensors). "
        "Fix: pass one of those names or the path of a pipeline YAML, or set ONCEFLOW_PIPELINES_DIR to the folder "
        "that holds yours"
    )


def test_a_missing_file_says_so_and_lists_the_names(elsewhere):
    with pytest.raises(
        ConfigError,
        match=r"^x/none\.yaml: no such pipeline file\. Fix: pass an existing YAML "
        r"file, or a pipeline name \(.*holds: customers_cdc, payments, payments_avro, sensors\)$",
    ):
        config.find_pipeline("x/none.yaml")


@pytest.mark.parametrize(
    "command",
    [
        ["ingest"],
        ["audit"],
        ["backfill", "--start-offsets", '{"0": 0}', "--end-offsets", '{"0": 1}'],
        ["produce"],
        ["checkpoint", "status"],
        ["checkpoint", "show"],
        ["recover", "--dry-run"],
        ["demo"],
    ],
)
def test_every_command_takes_a_pipeline_name_and_refuses_an_unknown_one_the_same_way(tmp_path, command):
    env = {k: v for k, v in os.environ.items() if k not in ("ONCEFLOW_PIPELINES_DIR", "ONCEFLOW_PROJECT")}
    proc = subprocess.run(
        [sys.executable, "-m", "onceflow.cli", *command, "--pipeline", "nope"],
        cwd=tmp_path,
        env={**env, "ONCEFLOW_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert (
        f"error: no pipeline named 'nope' ({ROOT / 'pipelines'} holds: customers_cdc, payments, payments_avro, "
        "sensors). "
        "Fix: pass one of those names" in " ".join(proc.stderr.split())
    )


def test_checkpoint_show_by_name_from_another_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ONCEFLOW_PIPELINES_DIR", "ONCEFLOW_PROJECT")}
    proc = subprocess.run(
        [sys.executable, "-m", "onceflow.cli", "checkpoint", "show", "--pipeline", "payments"],
        cwd=tmp_path,
        env={**env, "ONCEFLOW_HOME": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"no checkpoint at {tmp_path / 'state' / 'checkpoints' / 'payments'}" in proc.stdout
