"""`onceflow metrics`: printed once, every named pipeline's families; a pipeline that does not load is
refused before anything is served."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from onceflow.cli import main


def test_prints_the_named_pipelines_metrics_once(tmp_path, capsys):
    from devkit.pipelines import write_pipeline

    files = [write_pipeline(tmp_path / n, "127.0.0.1:1", f"t-{n}", name=n) for n in ("one", "two")]
    args = ["metrics", "--report-dir", str(tmp_path / "reports")]
    assert main([*args, "--pipeline", str(files[0]), "--pipeline", str(files[1])]) == 0
    families = {f.name: f for f in text_string_to_metric_families(capsys.readouterr().out)}
    running = families["onceflow_pipeline_running"].samples
    assert sorted(s.labels["pipeline"] for s in running) == ["one", "two"]


def test_a_pipeline_that_does_not_load_is_refused_naming_it(tmp_path, capsys):
    assert main(["metrics", "--pipeline", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_the_port_must_be_a_port():
    from onceflow.cli.app import build_parser

    with pytest.raises(SystemExit):
        build_parser(["metrics"]).parse_args(["metrics", "--serve", "0"])
