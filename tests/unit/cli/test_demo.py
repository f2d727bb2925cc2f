"""`onceflow demo` runs the shipped examples unless told which pipelines, each with --count events."""

from __future__ import annotations

from onceflow.cli import demo
from onceflow.cli.app import build_parser


def test_the_demo_runs_both_examples_by_default_and_fails_on_a_mismatch(monkeypatch):
    seen: list[tuple[list[str], int]] = []

    def fake(pipelines, count, log, out, named):
        seen.append((list(pipelines), count))
        assert named == (list(pipelines) == ["sensors"])  # the defaults may leave one out, a named one not
        return {"match": len(seen) == 1}

    monkeypatch.setattr(demo, "run_demo", fake)
    assert demo.cmd_demo(build_parser().parse_args(["demo"])) == 0
    assert demo.cmd_demo(build_parser().parse_args(["demo", "--pipeline", "sensors", "--count", "5"])) == 1
    assert seen == [(["payments", "sensors", "customers_cdc", "payments_avro"], 20_000), (["sensors"], 5)]


def test_without_java_21_the_default_demo_leaves_the_avro_pipeline_out_and_a_named_one_fails(monkeypatch, tmp_path):
    """The schema registry needs Java 21+: a machine without one still runs the other examples."""
    import pytest

    from onceflow import config
    from onceflow.errors import RegistryError
    from onceflow.local import registry

    def no_java():
        raise RegistryError("no Java 21+ for the schema registry. Fix: install one")

    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    monkeypatch.setattr(registry, "registry_java", no_java)
    loaded = [config.load_pipeline(name) for name in ("payments", "payments_avro")]
    said: list[str] = []
    kept = demo._start_registry(loaded, said.append, required=False)
    assert [p.name for p in kept] == ["payments"]
    assert said and said[0].startswith("payments_avro: left out") and "Fix: install one" in said[0]
    with pytest.raises(RegistryError, match="no Java 21"):
        demo._start_registry(loaded, said.append, required=True)
