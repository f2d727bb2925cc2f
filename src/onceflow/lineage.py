"""OpenLineage events of a pipeline's runs: which topic fed which tables, run by run, batch by batch.

The job (`onceflow ingest`, however it was started) tells its own run, from the run's status
events (onceflow.state.status), so lineage says what the status log says: START when its query
starts, RUNNING at each committed batch with that batch's offsets as the `onceflow_batch` run facet,
COMPLETE when it ends (finished or stopped), FAIL with the error; a run killed before its end sends
nothing, so the next run of the pipeline sends FAIL for it as it starts. The run's id is the status
log's run id. Its inputs and outputs are named by OpenLineage's naming spec: a Kafka topic in
`kafka://host:port`, a table in `file` (its absolute path) or `s3://bucket` (its key).

Configured the OpenLineage client's own way (OPENLINEAGE_URL, OPENLINEAGE__TRANSPORT__*,
OPENLINEAGE_CONFIG or an openlineage.yml): unconfigured, nothing is imported or emitted. Airflow's
OpenLineage provider tells the DAGs' task runs (onceflow.airflow.lineage gives it each task's
datasets); a task hands its run to the job it starts (PARENT_ENV), and the job's run names it as its
parent. An event that cannot be sent is logged once and never fails the run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from onceflow.state.status import RunEvent, RunStatus

if TYPE_CHECKING:
    from onceflow.config import Pipeline

PARENT_ENV = "ONCEFLOW_LINEAGE_PARENT"  # {"namespace", "name", "run_id"} of the task run that started the job
BATCH_FACET = "onceflow_batch"
PRODUCER = "urn:onceflow"
DEFAULT_NAMESPACE = "onceflow"

Dataset = tuple[str, str]  # (namespace, name)


def configured() -> bool:
    """Whether the OpenLineage client has somewhere to send events (not its console fallback)."""
    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if any(k == "OPENLINEAGE_URL" or k == "OPENLINEAGE_CONFIG" or k.startswith("OPENLINEAGE__") for k in os.environ):
        return True
    return any(p.is_file() for p in (Path.cwd() / "openlineage.yml", Path.home() / ".openlineage" / "openlineage.yml"))


def topic_dataset(bootstrap: str, topic: str) -> Dataset:
    """A Kafka topic: namespace `kafka://<first bootstrap server>`."""
    return f"kafka://{bootstrap.split(',')[0].strip()}", topic


def table_dataset(path: str) -> Dataset:
    """A Delta table: `s3://bucket` and its key, or `file` and its absolute path."""
    parsed = urlparse(path)
    if parsed.scheme in ("s3", "s3a"):
        return f"s3://{parsed.netloc}", parsed.path.lstrip("/")
    local = parsed.path if parsed.scheme == "file" else path
    return "file", str(Path(local).absolute())


def pipeline_datasets(pipeline: Pipeline) -> tuple[list[Dataset], list[Dataset]]:
    """What the job reads (its topic) and writes (each Delta sink, the Kafka sink's topic)."""
    from onceflow.sinks import table_paths

    inputs = [topic_dataset(pipeline.source.bootstrap_servers, pipeline.source.topic)]
    outputs = [table_dataset(path) for path in table_paths(pipeline).values()]
    kafka = pipeline.sinks.kafka
    if kafka is not None:
        outputs.append(topic_dataset(kafka.bootstrap_servers or pipeline.source.bootstrap_servers, kafka.topic))
    return inputs, outputs


def job_name(pipeline: str, app: str = "ingest") -> str:
    return f"{pipeline}.{app}"


class RunLineage:
    """One ingest run's status events as OpenLineage events (a StatusLog observer)."""

    def __init__(self, pipeline: Pipeline, log: Callable[[str], None] = lambda msg: None, client: Any = None):
        from openlineage.client import OpenLineageClient

        self.client = client or OpenLineageClient()
        self.namespace = os.environ.get("OPENLINEAGE_NAMESPACE", DEFAULT_NAMESPACE)
        self.job = job_name(pipeline.name)
        self.inputs, self.outputs = pipeline_datasets(pipeline)
        self.parent = _parent()
        self.log = log
        self.failed = False
        self.previous_end: dict[str, int] = {}
        self.status = (pipeline.state_path, pipeline.name)

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        try:
            if kind == RunEvent.STARTED:
                orphan = self._orphan()
                if orphan:  # a killed run sends nothing: its successor closes it
                    error = f"the run ended without a final event (its driver died); run {event['run_id']} took over"
                    self._emit("FAIL", {**event, "run_id": orphan}, error=error)
                self._emit("START", event)
            elif kind == RunEvent.PROGRESS:
                self._emit("RUNNING", event, batch=self._batch(event))
            elif kind == RunEvent.FINAL:
                failed = event.get("status") == RunStatus.FAILED
                self._emit("FAIL" if failed else "COMPLETE", event, error=event.get("error") if failed else None)
        except Exception as exc:  # lineage never stops a run; told once
            if not self.failed:
                self.failed = True
                self.log(f"OpenLineage: could not send the run's events ({type(exc).__name__}: {exc})")

    def _orphan(self) -> str | None:
        """The run before this one (whose `started` event was just written), if it has no final event."""
        from onceflow.state.status import Run, StatusLog

        runs = StatusLog(*self.status).newest_runs(2)
        before = runs[0] if len(runs) == 2 else Run(())
        return before.run_id if before.started is not None and before.final is None else None

    def _batch(self, event: dict) -> dict:
        end = {str(p): int(o) for p, o in (event.get("end_offsets") or {}).items()}
        start = {str(p): int(o) for p, o in (event.get("start_offsets") or self.previous_end).items()}
        self.previous_end = end
        return {
            "batchId": event.get("batch_id"),
            "topic": event.get("topic"),
            "startOffsets": start,
            "endOffsets": end,
            "inputRows": event.get("input_rows"),
        }

    def _emit(self, state: str, event: dict, batch: dict | None = None, error: str | None = None) -> None:
        from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
        from openlineage.client.facet_v2 import error_message_run, parent_run
        from openlineage.client.generated.base import RunFacet

        facets: dict[str, Any] = {}
        if self.parent:
            facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=self.parent["run_id"]),
                job=parent_run.Job(namespace=self.parent["namespace"], name=self.parent["name"]),
            )
        if batch is not None:
            facets[BATCH_FACET] = RunFacet().with_additional_properties(**batch)
        if error:
            facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=str(error)[:4000], programmingLanguage="python"
            )
        self.client.emit(
            RunEvent(
                eventType=RunState[state],
                eventTime=_iso(event.get("epoch")),
                run=Run(runId=str(event["run_id"]), facets=facets),
                job=Job(namespace=self.namespace, name=self.job),
                inputs=[InputDataset(namespace=ns, name=name) for ns, name in self.inputs],
                outputs=[OutputDataset(namespace=ns, name=name) for ns, name in self.outputs],
                producer=PRODUCER,
            )
        )


def _iso(epoch: Any) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(float(epoch), UTC).isoformat() if epoch else datetime.now(UTC).isoformat()


def _parent() -> dict | None:
    raw = os.environ.get(PARENT_ENV)
    try:
        parent = json.loads(raw) if raw else None
    except ValueError:
        return None
    return parent if isinstance(parent, dict) and {"namespace", "name", "run_id"} <= parent.keys() else None


def run_observer(pipeline: Pipeline, log: Callable[[str], None] = lambda msg: None) -> RunLineage | None:
    """The run's lineage, when OpenLineage is configured; else None (nothing imported)."""
    if not configured():
        return None
    try:
        return RunLineage(pipeline, log)
    except Exception as exc:  # a bad client configuration: said, and the run goes on
        log(f"OpenLineage is configured but its client could not start ({type(exc).__name__}: {exc})")
        return None
