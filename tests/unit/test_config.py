"""Pipeline config: every error names the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow import config
from onceflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
GOOD = """
name: p1
source: {bootstrap_servers: "${BOOT:-localhost:9092}", topic: t}
schema: {event_time: ts, fields: [{name: ts, type: timestamp}]}
sinks: {bronze: {path: b}, quarantine: {path: q}}
checkpoint: cp
"""


def write(tmp_path, text: str) -> Path:
    f = tmp_path / "p.yaml"
    f.write_text(text)
    return f


def test_shipped_pipelines_load():
    pipelines = config.load_all(ROOT / "pipelines")
    assert [p.name for p in pipelines] == ["customers_cdc", "payments", "payments_avro", "sensors"]
    sensors = pipelines[3]
    event_time, aggregates = sensors.schema.field("event_time"), sensors.sinks.aggregates
    assert event_time is not None and aggregates is not None
    assert sensors.schema.event_id is None and event_time.json_path == "$.meta.ts"
    assert aggregates.group_by == ("site", "device_id") and sensors.kafka_key == "site"
    assert sensors.checkpoint == "checkpoints/sensors" and sensors.sinks.bronze.path == "tables/sensors/bronze"
    keyed = pipelines[0].keyed
    assert keyed is not None and keyed.debezium and keyed.key_names == ("id",)
    assert [p.column for p in keyed.sequence] == ["source_lsn"]


def test_env_substitution_and_defaults(tmp_path):
    f = write(tmp_path, GOOD)
    assert config.load(f, env={}).source.bootstrap_servers == "localhost:9092"
    assert config.load(f, env={"BOOT": "kafka:9092"}).source.bootstrap_servers == "kafka:9092"


def test_unset_variable_without_default(tmp_path):
    f = write(tmp_path, GOOD.replace("${BOOT:-localhost:9092}", "${NOPE}"))
    with pytest.raises(ConfigError, match=r"p.yaml: \$\{NOPE\} is used but not set. Fix"):
        config.load(f, env={})


@pytest.mark.parametrize(
    "text, field, hint",
    [
        (GOOD.replace("topic: t", "topic: ''"), "source.topic", "at least 1"),
        (GOOD.replace("checkpoint: cp", ""), "checkpoint", "add `checkpoint`"),
        (GOOD + "trigger: {processing_time: soon}\n", "trigger.processing_time", "not a duration"),
        (GOOD + "colour: red\n", "colour", "unknown field"),
        (GOOD.replace("name: p1", "name: P-1"), "name", "pattern"),
        (
            GOOD.replace("topic: t}", "topic: t, available_now_max_offsets_per_trigger: 0}"),
            "source.available_now_max_offsets_per_trigger",
            "greater than 0",
        ),
        (
            GOOD.replace("topic: t}", "topic: t, driver_commit_max_offsets: -1}"),
            "source.driver_commit_max_offsets",
            "greater than or equal to 0",
        ),
    ],
)
def test_field_errors(tmp_path, text, field, hint):
    with pytest.raises(ConfigError) as exc:
        config.load(write(tmp_path, text), env={})
    msg = str(exc.value)
    assert "p.yaml" in msg and f"field `{field}`" in msg and hint in msg and "Fix" in msg


def test_batch_size_per_mode(tmp_path):
    source = config.load(write(tmp_path, GOOD), env={}).source
    assert source.max_offsets(available_now=False) == source.max_offsets(available_now=True) == 100_000
    larger = GOOD.replace("topic: t}", "topic: t, available_now_max_offsets_per_trigger: 1000000}")
    source = config.load(write(tmp_path, larger), env={}).source
    assert (source.max_offsets(available_now=False), source.max_offsets(available_now=True)) == (100_000, 1_000_000)
    shipped = config.load(ROOT / "pipelines" / "payments.yaml", env={}).source
    limited, larger_limit = shipped.max_offsets(available_now=False), shipped.max_offsets(available_now=True)
    assert limited is not None and larger_limit is not None
    assert larger_limit > limited


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        config.load(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config.load(write(tmp_path, "name: [unclosed"))


def test_relative_paths_resolve_under_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    p = config.load(write(tmp_path, GOOD), env={})
    assert p.checkpoint_path == str(tmp_path / "home" / "cp")
    assert p.resolve("s3a://bucket/x") == "s3a://bucket/x"


def test_durations():
    assert config.duration_seconds("500 ms") == 0.5
    assert config.duration_seconds("10 seconds") == 10
    assert config.duration_seconds("1 minute") == 60
    with pytest.raises(ValueError):
        config.duration_seconds("ten")


def test_the_airflow_section_states_the_stream_window_and_the_lease_grace(tmp_path):
    """The stream DAG's window and its lease's grace belong in the pipeline file (docs/airflow.md)."""
    default = config.load(write(tmp_path, GOOD)).airflow
    assert (default.window_seconds, default.lease_grace_seconds) == (1800, 120.0)
    set_ = config.load(write(tmp_path, GOOD + "airflow: {window: 1 minute, lease_grace: 30 s}\n")).airflow
    assert (set_.window_seconds, set_.lease_grace_seconds) == (60, 30.0)


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from(["window", "lease_grace"]),
    seconds=st.integers(min_value=1, max_value=6 * 3600),
)
def test_an_airflow_duration_is_accepted_exactly_within_its_range(tmp_path_factory, key, seconds):
    low, high = config.STREAM_WINDOW_BOUNDS if key == "window" else config.LEASE_GRACE_BOUNDS
    file = write(tmp_path_factory.mktemp("af"), GOOD + f"airflow: {{{key}: {seconds} seconds}}\n")
    if low <= seconds <= high:
        assert getattr(config.load(file).airflow, f"{key}_seconds") == seconds
    else:
        with pytest.raises(ConfigError, match=rf"field `airflow\.{key}`: .* is outside {low:g} s to {high:g} s"):
            config.load(file)
