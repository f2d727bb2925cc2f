"""The DAGs dags/ builds for each pipeline (onceflow.airflow.dag_factory), and their ids."""

from __future__ import annotations

from enum import StrEnum


class DagKind(StrEnum):
    """One of a pipeline's DAGs; its id is `<pipeline>_<kind>`."""

    STREAM = "stream"  # bounded continuous windows, watched, recovery triggered on a problem
    BATCH = "batch"  # a scheduled available-now run, then a since-last audit
    AUDIT = "audit"  # a scheduled audit
    RECOVER = "recover"  # plan, execute, start the app, audit
    BACKFILL = "backfill"  # an offset or time range re-read, adding only what the tables lack


def dag_id(pipeline: str, kind: DagKind) -> str:
    """`<pipeline>_<kind>`, e.g. payments_stream."""
    return f"{pipeline}_{kind.value}"
