"""The event the benchmarks use: the shipped payments pipeline (pipelines/payments.yaml),
its schema and aggregates, and scratch pipeline files built on it.

Kept here, not borrowed from tests/: benchmarks run without the test tree.
Import it inside a benchmark's functions (it reads the YAML), after `harness`.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from harness import ROOT

from onceflow import config

PAYMENTS_FILE = ROOT / "pipelines" / "payments.yaml"
_PAYMENTS = yaml.safe_load(PAYMENTS_FILE.read_text())
PAYMENTS_SCHEMA_BODY = _PAYMENTS["schema"]
PAYMENTS_AGGREGATES = {k: _PAYMENTS["sinks"]["aggregates"][k] for k in ("group_by", "metrics")}
PAYMENTS_SCHEMA = config.load(PAYMENTS_FILE).schema


def write_pipeline(
    folder: Path, bootstrap: str, topic: str, name: str | None = None, max_offsets: int = 2000, **overrides
) -> Path:
    """A payments pipeline file whose tables and checkpoint live under `folder`, reading
    `topic` from the start, `max_offsets` per batch; `overrides` replace top-level
    sections (e.g. trigger={"processing_time": "500 ms"}). The name defaults to one made
    from the topic, so each run has its own status files."""
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
        "sinks": {
            "bronze": {"path": str(folder / "bronze")},
            "quarantine": {"path": str(folder / "quarantine")},
            "aggregates": {
                "path": str(folder / "aggregates"),
                "window": "1 minute",
                "watermark": "10 minutes",
                **PAYMENTS_AGGREGATES,
            },
        },
        "checkpoint": str(folder / "checkpoint"),
        "trigger": {"processing_time": "1 second"},
    }
    body.update(overrides)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def pipeline_file(folder: Path, bootstrap: str, topic: str, **overrides) -> tuple[Path, config.Pipeline]:
    """The file (for subprocesses) and the loaded pipeline."""
    path = write_pipeline(folder, bootstrap, topic, **overrides)
    return path, config.load(path)
