"""Five DAGs per pipeline, built from pipelines/*.yaml: stream, batch, audit, recover, backfill.

dags/onceflow_dags.py only calls build_dags(); everything a DAG does is here
and in the operators, so it is tested as library code. Pipeline files are
isolated from each other: one that does not validate becomes one DAG of its own,
`invalid_pipeline_<file>`, whose description, docs and single task name the
file, the field and the fix, while every good pipeline keeps its five DAGs.
(An import error would mark every DAG of the DAG file stale, good ones too.)
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, BaseOperator, Param
from airflow.sdk.exceptions import AirflowFailException

from onceflow import config
from onceflow.airflow.audit import AuditOperator
from onceflow.airflow.dag_kinds import DagKind, dag_id
from onceflow.airflow.hooks import pipelines_dir
from onceflow.airflow.ingest import IngestOperator
from onceflow.airflow.recovery import RecoveryMarkerOperator, RecoveryOperator
from onceflow.airflow.route import RecoverOnProblemOperator
from onceflow.airflow.sensors import PipelineHealthSensor, StreamGuardSensor
from onceflow.airflow.stream import ReleaseStreamRunOperator, StreamOperator
from onceflow.config import Pipeline
from onceflow.errors import ConfigError
from onceflow.reconcile import AuditScope
from onceflow.sink_kinds import SinkName
from onceflow.state.status import IngestMode
from onceflow.verdicts import ALERTS, PROBLEMS, Verdict

START = datetime(2026, 1, 1, tzinfo=UTC)
MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS = (int(b) for b in config.STREAM_WINDOW_BOUNDS)
# a recovered app is wanted this long by the recovery alone, for a stream run to adopt it
RECOVERY_HANDOVER_SECONDS = 600
# a scheduled batch's micro-batches are large (a batch of the shipped available-now size takes over a
# minute: docs/benchmarks.md, "Ingest throughput and latency"): its stop may have to wait for one
AVAILABLE_NOW_STOP_GRACE = 240.0

# retries only where a retry cannot duplicate work: the ingest is idempotent (ledger +
# Delta txn ids); a stream window or a recovery is not retried (the watcher and
# <p>_recover handle failures), an audit is retried only when it could not run.
_DEFAULTS = {"owner": "onceflow", "retries": 0}
_IDEMPOTENT_RETRY: dict[str, Any] = {
    "retries": 2,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=10),
}


def table_asset(pipeline: Pipeline, sink: str = SinkName.BRONZE) -> Asset:
    """The Airflow Asset for one of a pipeline's Delta tables (produced by its audit)."""
    path = pipeline.resolve(getattr(pipeline.sinks, sink).path)
    uri = path if "://" in path else f"file://{path}"
    return Asset(name=f"onceflow.{pipeline.name}.{sink}", uri=uri, group="onceflow")


def _doc(pipeline: Pipeline, file: str, what: str) -> str:
    return (
        f"### {pipeline.name}: {what}\n\n"
        f"Pipeline file `{Path(file).name}`: topic `{pipeline.source.topic}` "
        f"(read_committed) → Delta `{pipeline.sinks.bronze.path}`, quarantine "
        f"`{pipeline.sinks.quarantine.path}`; checkpoint `{pipeline.checkpoint}`.\n\n"
        "See docs/airflow.md for the design (one long-lived app, its lease, the watcher, the locks)."
    )


def stream_dag(pipeline: Pipeline, file: str) -> DAG:
    """`<p>_stream`: each run adopts (or launches) the pipeline's long-lived app and watches one window."""
    with DAG(
        dag_id=dag_id(pipeline.name, DagKind.STREAM),
        schedule="@continuous",
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=_DEFAULTS,
        tags=["onceflow", pipeline.name, DagKind.STREAM.value],
        params={
            "window_seconds": Param(
                pipeline.airflow.window_seconds,
                type="integer",
                minimum=MIN_WINDOW_SECONDS,
                maximum=MAX_WINDOW_SECONDS,
                description="how long this run watches the app (the app runs on; the next run adopts it); "
                "scheduled runs take the pipeline file's `airflow.window`",
            ),
            "start_grace_seconds": Param(
                300, type="integer", minimum=1, description="how long the watcher waits for a launched app to start"
            ),
        },
        doc_md=_doc(pipeline, file, "one long-lived streaming app, watched in windows")
        + f"""

The app is not bounded by a run: it runs until nobody wants it. Each run: **guard** waits while
`{pipeline.name}_recover` works or another run of this DAG is at work (one run at a time, whatever
Airflow starts) → **stream** adopts the running app, or launches it (detached: it outlives the task)
when none runs, and renews the lease that keeps it wanted → **wait_healthy** and **watch**
(deferrable, in the triggerer) follow its commits for the window (`airflow.window`:
{pipeline.airflow.window}), renewing the lease for `airflow.lease_grace` ({pipeline.airflow.lease_grace})
at every look. The window's end changes nothing for the app: the next run adopts it. A stalled, dead,
failed, poisoned or broken verdict ends **watch** in the triggerer, and **trigger_recover**
triggers `{pipeline.name}_recover` (else it skips: the window ended cleanly); an app that stopped while
wanted (`down`) is started again by the next run. Pause this DAG and, once the run at work ends its
window, the app stops by itself at a batch boundary within `airflow.lease_grace`.
""",
    ) as dag:
        guard = StreamGuardSensor(task_id="guard", pipeline_file=file, timeout=6 * 3600)
        stream = StreamOperator(
            task_id="stream",
            pipeline_file=file,
            execution_timeout=timedelta(minutes=10),
            doc_md="Adopts the running app or launches it (detached), and renews its lease.",
        )
        watcher = "{{ dag.dag_id }}/{{ run_id }}"
        since = "{{ ti.xcom_pull(task_ids='stream')['since'] }}"
        wait_healthy = PipelineHealthSensor(
            task_id="wait_healthy",
            pipeline_file=file,
            fire_on=[Verdict.HEALTHY, Verdict.LAGGING, Verdict.STOPPED, *ALERTS],
            since=since,
            start_grace="{{ params.start_grace_seconds }}",
            watcher=watcher,
            doc_md="Fires when the app commits (healthy) or on a problem verdict.",
        )
        watch = PipelineHealthSensor(
            task_id="watch",
            pipeline_file=file,
            fire_on=[Verdict.STOPPED, *ALERTS],
            since=since,
            start_grace="{{ params.start_grace_seconds }}",
            wait_timeout="{{ params.window_seconds }}",
            window_ends_wait=True,
            watcher=watcher,
            end_on=list(PROBLEMS),  # ended in the triggerer: trigger_recover is the next task to start
            doc_md="Follows the app for the window, renewing its lease; a problem verdict ends it early.",
        )
        trigger_recover = RecoverOnProblemOperator(
            task_id="trigger_recover",
            pipeline_file=file,
            watch_task="watch",
            trigger_dag_id=dag_id(pipeline.name, DagKind.RECOVER),
            doc_md="On a problem verdict of the watch, triggers the recovery (without waiting); else skips.",
        )
        release = ReleaseStreamRunOperator(
            task_id="release", pipeline_file=file, doc_md="The next run of this DAG may start watching."
        )
        guard >> stream >> wait_healthy >> watch >> trigger_recover >> release
        release.as_teardown(setups=guard)
    return dag


def batch_dag(pipeline: Pipeline, file: str) -> DAG:
    """`<p>_batch`: a scheduled availableNow run, then an incremental audit."""
    with DAG(
        dag_id=dag_id(pipeline.name, DagKind.BATCH),
        schedule="@hourly",
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=_DEFAULTS,
        tags=["onceflow", pipeline.name, DagKind.BATCH.value],
        doc_md=_doc(pipeline, file, "scheduled batch ingest (availableNow) + incremental audit")
        + """

**ingest** reads everything Kafka holds past the last committed offsets and stops
(availableNow); it is retried with backoff because a replayed batch is a no-op
(ledger + Delta txn ids). It skips while the streaming app runs (the stream is
already ingesting). **audit** then checks the new range and publishes its report.
""",
    ) as dag:
        ingest = IngestOperator(
            task_id="ingest",
            pipeline_file=file,
            mode=IngestMode.AVAILABLE_NOW,
            max_seconds=3 * 3600,
            execution_timeout=timedelta(hours=3, minutes=15),
            stop_grace=AVAILABLE_NOW_STOP_GRACE,
            **_IDEMPOTENT_RETRY,
        )
        audit = AuditOperator(
            task_id="audit",
            pipeline_file=file,
            audit_mode=AuditScope.SINCE_LAST,
            trigger_rule="none_failed",
            outlets=[table_asset(pipeline)],
            retries=1,
            retry_delay=timedelta(minutes=1),
        )
        ingest >> audit
    return dag


def audit_dag(pipeline: Pipeline, file: str) -> DAG:
    """`<p>_audit`: scheduled full or incremental audit producing the table's Asset."""
    with DAG(
        dag_id=dag_id(pipeline.name, DagKind.AUDIT),
        schedule="@daily",
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=_DEFAULTS,
        tags=["onceflow", pipeline.name, DagKind.AUDIT.value],
        params={
            "mode": Param(
                AuditScope.FULL.value,
                type="string",
                enum=[*(s.value for s in AuditScope), "incremental"],
                description="full: every row; since-last (or incremental, its older name): since the last passed audit",
            )
        },
        doc_md=_doc(pipeline, file, "audit")
        + """

Reconciles Kafka (read_committed), the checkpoint, the sink ledgers and the rows.
Fails on any duplicate or loss (no retry: the data will not change by asking
again); retried once when the audit could not run. The report is the task's
**Audit report** link and on the onceflow page; the table's Asset is updated.
""",
    ) as dag:
        AuditOperator(
            task_id="audit",
            pipeline_file=file,
            audit_mode="{{ params.mode }}",
            outlets=[table_asset(pipeline)],
            retries=1,
            retry_delay=timedelta(minutes=1),
        )
    return dag


def recover_dag(pipeline: Pipeline, file: str) -> DAG:
    """`<p>_recover`: plan → execute → start the long-lived app → its first batch → hand over; audit beside it."""
    with DAG(
        dag_id=dag_id(pipeline.name, DagKind.RECOVER),
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=_DEFAULTS,
        tags=["onceflow", pipeline.name, DagKind.RECOVER.value],
        params={
            "verdict": Param("manual", type="string", description="what triggered the recovery"),
            "reasons": Param("", type="string"),
            "from_run": Param("", type="string"),
            "force": Param(False, type="boolean", description="recover even if the checkpoint looks usable"),
            "accept_loss": Param(
                False, type="boolean", description="accept offsets Kafka no longer holds as lost (recorded by range)"
            ),
            "handover_seconds": Param(
                RECOVERY_HANDOVER_SECONDS,
                type="integer",
                minimum=60,
                maximum=MAX_WINDOW_SECONDS,
                description="how long the recovered app runs wanted by this recovery alone: a stream run "
                "adopts it meanwhile, else it stops by itself (the stream DAG is paused)",
            ),
        },
        doc_md=_doc(pipeline, file, "recovery")
        + f"""

**begin** marks recovery in progress (`{pipeline.name}_stream` waits) and no other copy of the
query may start, then stops a copy still running (SIGTERM, then SIGKILL) → **execute** (`onceflow
recover`: its plan and what was done are in the log and XCom) → **start** launches the long-lived app
from the recovered offsets (the stream DAG's next run adopts it: no second start) →
**wait_first_batch** (deferrable) sees its first committed batch → **end** clears the mark, and
**audit** checks the recovered range beside the running stream. No retries: a half-done recovery
is planned again. The mark expires by itself if this run dies (docs/airflow.md).
""",
    ) as dag:
        # the marker and the stop in one task, and no separate dry run (execute's record holds its
        # plan): each task start is seconds on a small machine, on the path from a kill to the app
        begin = RecoveryMarkerOperator(task_id="begin", pipeline_file=file, action="begin", stop_running=True)
        execute = RecoveryOperator(
            task_id="execute",
            pipeline_file=file,
            action="execute",
            force="{{ params.force }}",
            accept_loss="{{ params.accept_loss }}",
        )
        start = StreamOperator(
            task_id="start",
            pipeline_file=file,
            lease_seconds="{{ params.handover_seconds }}",
            recovery_run="{{ run_id }}",
            execution_timeout=timedelta(minutes=10),
        )
        wait_first_batch = PipelineHealthSensor(
            task_id="wait_first_batch",
            pipeline_file=file,
            fire_on=[Verdict.HEALTHY, Verdict.LAGGING, Verdict.STOPPED, *ALERTS],
            fail_on=list(ALERTS),
            require_progress=True,
            since="{{ ti.xcom_pull(task_ids='start')['since'] }}",
            start_grace=300,
        )
        # the end tells the outcome (recovered, or why not) from the tasks' XComs
        end = RecoveryMarkerOperator(
            task_id="end",
            pipeline_file=file,
            action="end",
            outcome_tasks=(execute.task_id, wait_first_batch.task_id),
        )
        audit = AuditOperator(
            task_id="audit", pipeline_file=file, audit_mode=AuditScope.SINCE_LAST, outlets=[table_asset(pipeline)]
        )
        begin >> execute >> start >> wait_first_batch >> [end, audit]
        end.as_teardown(setups=begin)
    return dag


def backfill_dag(pipeline: Pipeline, file: str) -> DAG:
    """`<p>_backfill`: reprocess an offset or time range, adding only what the tables lack."""
    from onceflow.airflow.backfill import BackfillOperator, BackfillRangeOperator

    with DAG(
        dag_id=dag_id(pipeline.name, DagKind.BACKFILL),
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=_DEFAULTS,
        tags=["onceflow", pipeline.name, DagKind.BACKFILL.value],
        params={
            "start_offsets": Param(
                None, type=["null", "object"], description='per partition, first offset: {"0": 100, "1": 0}'
            ),
            "end_offsets": Param(
                None, type=["null", "object"], description='per partition, offset after the last: {"0": 200, "1": 50}'
            ),
            "start_time": Param(
                None,
                type=["null", "string"],
                format="date-time",
                description="instead of offsets: ISO-8601 time range start",
            ),
            "end_time": Param(
                None,
                type=["null", "string"],
                format="date-time",
                description="instead of offsets: ISO-8601 time range end",
            ),
        },
        doc_md=_doc(pipeline, file, "backfill")
        + """

Give either `start_offsets` + `end_offsets` or `start_time` + `end_time`.
**resolve** validates the range against Kafka (times become offsets) and refuses
one the broker no longer holds → **backfill** reads the part the stream has
committed at read_committed and re-writes only the records the tables lack (by
topic, partition, offset), each table in one commit with a BACKFILL ledger entry,
so a range already ingested adds nothing and a retry adds nothing more; offsets
past the stream's committed end are left to the stream → **audit** (full) checks
the whole table again, the repaired range included.
""",
    ) as dag:
        resolve = BackfillRangeOperator(task_id="resolve", pipeline_file=file)
        backfill = BackfillOperator(
            task_id="backfill", pipeline_file=file, offsets="{{ ti.xcom_pull(task_ids='resolve') | tojson }}"
        )
        # full: a backfill repairs ranges an incremental audit already passed
        audit = AuditOperator(
            task_id="audit", pipeline_file=file, audit_mode=AuditScope.FULL, outlets=[table_asset(pipeline)]
        )
        resolve >> backfill >> audit
    return dag


BUILDERS = {
    DagKind.STREAM: stream_dag,
    DagKind.BATCH: batch_dag,
    DagKind.AUDIT: audit_dag,
    DagKind.RECOVER: recover_dag,
    DagKind.BACKFILL: backfill_dag,
}
INVALID_PREFIX = "invalid_pipeline_"


class InvalidPipelineOperator(BaseOperator):
    """The one task of a pipeline file that does not validate: running it fails with the
    file, the field and the fix (the same text as the DAG's description and docs)."""

    ui_color = "#f8d7da"

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.message = message

    def execute(self, context: Any) -> None:
        raise AirflowFailException(self.message)


log = logging.getLogger(__name__)


def invalid_dag(file: Path, message: str) -> DAG:
    """`invalid_pipeline_<file>`: how a pipeline file that does not validate shows in Airflow.

    Its description (the DAG list), docs and only task carry the whole message (file,
    field, fix); it never runs on its own. Fixing the file replaces it with the pipeline's DAGs."""
    dag_id = INVALID_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "_", file.stem)
    headline = " ".join(message.split())
    with DAG(
        dag_id=dag_id,
        dag_display_name=f"INVALID {file.name}",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=_DEFAULTS,
        tags=["onceflow", "invalid"],
        description=headline if len(headline) <= 300 else headline[:297] + "...",
        doc_md=(
            f"### {file.name} does not validate\n\nThis pipeline file gets no DAGs until it is fixed; "
            "the other pipelines are not affected.\n\n```\n" + message + "\n```\n\n"
            "Reference: docs/pipeline-config.md. After the fix, this DAG is replaced by the "
            "pipeline's DAGs at the next parse."
        ),
    ) as dag:
        InvalidPipelineOperator(task_id="fix_the_pipeline_file", message=message)
    return dag


def build_dags(folder: str | Path | None = None) -> dict[str, DAG]:
    """Every DAG of every pipeline in `folder` (default: pipelines_dir()), keyed by dag_id.

    Each file is built on its own: one that does not validate (or whose name another file
    already uses) becomes its invalid_dag() and is logged; the others are unaffected."""
    folder = Path(folder) if folder is not None else pipelines_dir()
    dags: dict[str, DAG] = {}
    owners: dict[str, Path] = {}  # pipeline name -> the file that defined it
    for file in sorted(folder.glob("*.yaml")):
        try:
            pipeline = config.load(file)
            if pipeline.name in owners:
                raise ConfigError(
                    f"{file}: field `name`: {pipeline.name!r} is already the name of "
                    f"{owners[pipeline.name]}. Fix: give each pipeline file its own name"
                )
            built = [BUILDERS[kind](pipeline, str(file.resolve())) for kind in DagKind]
        except Exception as exc:  # one bad file must not take the other pipelines' DAGs with it
            message = str(exc) if isinstance(exc, ConfigError) else f"{file}: {type(exc).__name__}: {exc}"
            log.error("onceflow: %s", message)
            built = [invalid_dag(file, message)]
        else:
            owners[pipeline.name] = file
        for dag in built:
            dags[dag.dag_id] = dag
    return dags
