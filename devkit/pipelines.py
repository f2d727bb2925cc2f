"""The shipped example pipelines, and scratch pipeline files built on them: a real pipeline YAML in
a folder of its own, pointed at a broker of one's own."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from devkit import ROOT
from onceflow import config

# the shipped payments example: its declared schema and aggregates are the default event
PAYMENTS_FILE = ROOT / "pipelines" / "payments.yaml"
_PAYMENTS = yaml.safe_load(PAYMENTS_FILE.read_text())
PAYMENTS_SCHEMA_BODY = _PAYMENTS["schema"]
PAYMENTS_AGGREGATES = {k: _PAYMENTS["sinks"]["aggregates"][k] for k in ("group_by", "metrics")}
PAYMENTS_SCHEMA = config.Schema.model_validate(PAYMENTS_SCHEMA_BODY)
# the sensors example, a second shape (generator and multi-pipeline tests, the broker restart)
SENSORS = config.load(ROOT / "pipelines" / "sensors.yaml")


def aggregates_of(pipeline: config.Pipeline) -> config.AggregateSink:
    """The pipeline's sinks.aggregates (the pipelines built here have them)."""
    assert pipeline.sinks.aggregates is not None, f"pipeline {pipeline.name} has no sinks.aggregates"
    return pipeline.sinks.aggregates


SENSORS_SCHEMA = SENSORS.schema
_SENSORS = yaml.safe_load((ROOT / "pipelines" / "sensors.yaml").read_text())
SENSORS_SCHEMA_BODY = _SENSORS["schema"]
SENSORS_AGGREGATES = {k: v for k, v in _SENSORS["sinks"]["aggregates"].items() if k != "path"}


# the shipped change-data-capture example: Debezium changes of a customers table, kept as a keyed table
_CUSTOMERS_CDC = yaml.safe_load((ROOT / "pipelines" / "customers_cdc.yaml").read_text())


def cdc_pipeline_file(
    folder: Path, bootstrap: str, topic: str, current: dict | None = None, **overrides
) -> tuple[Path, config.Pipeline]:
    """A copy of pipelines/customers_cdc.yaml (its schema and keyed table, `current` overriding
    settings of the keyed table) reading `topic`, its tables and checkpoint under `folder`:
    (file, pipeline), as pipeline_file."""
    root = str(folder).rstrip("/")
    sinks = {
        "bronze": {"path": f"{root}/bronze"},
        "quarantine": {"path": f"{root}/quarantine"},
        "current": {**_CUSTOMERS_CDC["sinks"]["current"], **(current or {}), "path": f"{root}/current"},
    }
    overrides.setdefault("schema", _CUSTOMERS_CDC["schema"])
    return pipeline_file(folder, bootstrap, topic, sinks=sinks, **overrides)


def table_sinks(folder: Path | str, aggregates: dict | None = None) -> dict:
    """The `sinks` section of a pipeline whose Delta tables live under `folder` (a path, or an
    object-store URI such as `s3://bucket/prefix`): bronze, quarantine and the aggregates (the
    payments example's group_by and metrics unless `aggregates` says)."""
    root = str(folder).rstrip("/")
    return {
        "bronze": {"path": f"{root}/bronze"},
        "quarantine": {"path": f"{root}/quarantine"},
        "aggregates": {
            "path": f"{root}/aggregates",
            "window": "1 minute",
            "watermark": "10 minutes",
            **(aggregates or PAYMENTS_AGGREGATES),
        },
    }


def write_pipeline(
    folder: Path,
    bootstrap: str,
    topic: str,
    name: str | None = None,
    max_offsets: int = 2000,
    available_now_max_offsets: int | None = None,
    aggregates: dict | None = None,
    data: str | None = None,
    **overrides,
) -> Path:
    """A pipeline file whose tables and checkpoint live under `folder`, reading `topic` from
    the start, `max_offsets` per batch (`available_now_max_offsets` in available-now runs, if
    given); `overrides` replace top-level sections (e.g. trigger={"processing_time": "500 ms"}).
    The event is the payments example's (schema and aggregates) unless `schema=` and
    `aggregates=` (group_by and metrics) say otherwise.
    The name defaults to one made from the topic, so each test or run has its own status files.
    `data`: where the tables and the checkpoint live instead (e.g. `s3://onceflow/<test>`)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = name or "p_" + re.sub(r"[^a-z0-9_]", "_", topic.lower())[:60]
    body = {
        "name": name,
        "source": {
            "bootstrap_servers": bootstrap,
            "topic": topic,
            "starting_offsets": "earliest",
            "max_offsets_per_trigger": max_offsets,
        },
        "schema": PAYMENTS_SCHEMA_BODY,
        "sinks": table_sinks(data or folder, aggregates),
        "checkpoint": f"{str(data or folder).rstrip('/')}/checkpoint",
        "trigger": {"processing_time": "1 second"},
    }
    if available_now_max_offsets is not None:
        body["source"]["available_now_max_offsets_per_trigger"] = available_now_max_offsets
    body.update(overrides)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def load_pipeline(folder: Path, bootstrap: str, topic: str, **overrides) -> config.Pipeline:
    return config.load(write_pipeline(folder, bootstrap, topic, **overrides))


def pipeline_file(folder: Path, bootstrap: str, topic: str, **overrides) -> tuple[Path, config.Pipeline]:
    """The file (for subprocesses and CLIs) and the loaded pipeline."""
    path = write_pipeline(folder, bootstrap, topic, **overrides)
    return path, config.load(path)
