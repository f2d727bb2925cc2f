"""What the Airflow side emits as JSON: the events PipelineHealthTrigger fires (and the sensors return
as their XCom), and the rows of the onceflow page (GET /onceflow/api/pipelines).

They cross a serialization boundary (the triggerer's database, HTTP), so they travel as dicts; these
models are their contract: docs/schemas/airflow-health-event.schema.json and
onceflow-page-pipelines.schema.json are generated from them (`python -m devkit.schemas`), and the page
builds its rows through `PageRow`. No Airflow import: the schemas generate without it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, RootModel, WithJsonSchema

from onceflow.health import HealthReport
from onceflow.state.status import IngestMode, RunStatus
from onceflow.verdicts import EVENT_VERDICTS, PAGE_VERDICTS, Verdict
from onceflow.wire import BatchPoint, Count, OpenWire, Wire

EventVerdict = Annotated[Verdict, WithJsonSchema({"enum": [str(v) for v in EVENT_VERDICTS]})]
RowVerdict = Annotated[Verdict, WithJsonSchema({"enum": [str(v) for v in PAGE_VERDICTS]})]


class RunBrief(Wire):
    """The newest run in the status log (onceflow.state.status.Run.as_dict)."""

    run_id: str | None
    started_epoch: float | None
    mode: IngestMode | None
    batches: Count = Field(description="micro-batches committed by this run")
    rows: Count = Field(description="input rows of those batches")
    last_batch_id: int | None
    final_status: RunStatus | None
    error: str | None


class HealthEvent(Wire):
    """A look at the pipeline: its verdict, scoped to the run started since `since`. `verdict` is a verdict
    of `onceflow checkpoint status`, or one the trigger adds: not_started (no run started since `since`
    within start_grace), timeout; a stream window's watcher returns window_end (its window ran out, the
    app runs on)."""

    pipeline: str
    verdict: EventVerdict
    last_verdict: str | None = Field(default=None, description="timeout only: the verdict when the wait gave up")
    reasons: list[str]
    health: HealthReport
    run: RunBrief
    since: float | None = Field(description="epoch seconds: runs started before it did not count")
    time: float
    waited_seconds: float | None = Field(
        default=None, ge=0, description="how long the trigger waited (not in a non-deferrable sensor's look)"
    )


class ErrorEvent(Wire):
    """The pipeline could not be read at all: polling will not heal it."""

    verdict: Literal[Verdict.ERROR]
    pipeline_file: str
    error: str = Field(description="what could not be read, with the fix")


class TriggerPayload(RootModel[HealthEvent | ErrorEvent]):
    """The payload PipelineHealthTrigger fires and PipelineHealthSensor returns as its XCom (docs/airflow.md)."""

    model_config = {"title": "onceflow PipelineHealthTrigger event"}


class PartitionCounts(OpenWire):
    """Per partition of the last audit: committed records vs rows (the page's partition chart)."""

    partition: int | None
    source_records: int | None = None
    bronze_rows: int | None = None
    quarantine_rows: int | None = None


class PageAudit(Wire):
    passed: bool
    problems: list[str]
    time: str | None
    url: str = Field(description="the report on the onceflow page")
    partitions: list[PartitionCounts]


class PageRow(Wire):
    """One row of the onceflow page, per pipelines/*.yaml; a file or check that fails is a row with verdict
    `error` and the reason."""

    file: str = Field(description="the pipeline file's name")
    pipeline: str
    verdict: RowVerdict
    reasons: list[str]
    lag: int | None = Field(
        ge=0,
        description="offsets Kafka holds past the committed offsets (records, transaction markers and aborted records)",
    )
    last_batch: int | None = Field(description="the checkpoint's last committed batch")
    running: bool | None
    audit: PageAudit | None
    batches: list[BatchPoint] = Field(
        description="the newest batches of the pipeline's status log (at most 120, oldest first), as in the "
        "audit summary's `batches`"
    )


class PagePipelines(RootModel[list[PageRow]]):
    """GET /onceflow/api/pipelines on the Airflow API server (the table of the onceflow page; docs/airflow.md)."""

    model_config = {"title": "onceflow page: pipelines"}
