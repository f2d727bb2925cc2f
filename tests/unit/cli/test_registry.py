"""`onceflow registry`'s words: a stopped registry is told as stopped; its exports for a shell."""

from __future__ import annotations

from onceflow.cli import main
from onceflow.local.service import free_port


def test_status_of_a_stopped_registry_says_stopped_and_env_names_the_url(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    port = free_port()
    assert main(["registry", "status", "--port", str(port)]) == 1
    assert main(["registry", "env", "--port", str(port)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"schema registry: stopped; http://127.0.0.1:{port}/apis/ccompat/v7" in out
    assert f"export ONCEFLOW_REGISTRY_URL=http://127.0.0.1:{port}/apis/ccompat/v7" in out
