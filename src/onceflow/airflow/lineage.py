"""What Airflow's OpenLineage provider tells of onceflow's tasks: each task's datasets (the topic it
reads, the tables it writes; onceflow.lineage names them), and the job run a task starts, which
names the task's run as its parent (the provider's own macros give the task run's id).

The provider tells nothing until a transport is configured ([openlineage] transport, or the
client's OPENLINEAGE_* variables; docs/operations.md#lineage)."""

from __future__ import annotations

import json
from typing import Any

from onceflow.config import Pipeline
from onceflow.lineage import PARENT_ENV, pipeline_datasets

# what each spark_apps/ entry point reads and writes, beyond its pipeline's topic
_WRITES_TABLES = {"ingest", "backfill"}


def parent_env(context: Any) -> dict[str, str]:
    """PARENT_ENV for the job this task starts, when the provider is on; else nothing."""
    from airflow.providers.openlineage.conf import is_disabled

    if is_disabled():
        return {}
    from airflow.providers.openlineage.plugins.macros import lineage_job_name, lineage_job_namespace, lineage_run_id

    ti = context["ti"]
    parent = {"namespace": lineage_job_namespace(), "name": lineage_job_name(ti), "run_id": lineage_run_id(ti)}
    return {PARENT_ENV: json.dumps(parent)}


def task_lineage(pipeline: Pipeline, app: str):
    """The provider's OperatorLineage of a spark-submit task: the ingest and the backfill read the
    topic and write the tables; the audit reads both and writes none."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

    read, written = pipeline_datasets(pipeline)
    inputs, outputs = (read, written) if app in _WRITES_TABLES else (read + written, [])
    return OperatorLineage(
        inputs=[Dataset(namespace=ns, name=name) for ns, name in inputs],
        outputs=[Dataset(namespace=ns, name=name) for ns, name in outputs],
    )
