"""`onceflow demo` runs the shipped examples unless told which pipelines, each with --count events."""

from __future__ import annotations

from onceflow.cli import demo
from onceflow.cli.app import build_parser


def test_the_demo_runs_both_examples_by_default_and_fails_on_a_mismatch(monkeypatch):
    seen: list[tuple[list[str], int]] = []

    def fake(pipelines, count, log, out):
        seen.append((list(pipelines), count))
        return {"match": len(seen) == 1}

    monkeypatch.setattr(demo, "run_demo", fake)
    assert demo.cmd_demo(build_parser().parse_args(["demo"])) == 0
    assert demo.cmd_demo(build_parser().parse_args(["demo", "--pipeline", "sensors", "--count", "5"])) == 1
    assert seen == [(["payments", "sensors", "customers_cdc", "payments_avro"], 20_000), (["sensors"], 5)]
