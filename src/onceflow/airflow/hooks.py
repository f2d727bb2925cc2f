"""OnceflowHook: one pipeline as Airflow sees it (config, Kafka, checkpoint, ledgers, status).

Like a provider hook it is the one place operators, sensors and triggers get
their facts from. Its "connection" is the pipeline YAML (the project's one
source of configuration), so there is no Airflow Connection to keep in sync;
Spark is the exception: spark-submit reads the `spark_default` connection; and a
pipeline may name an Airflow `kafka` connection for its cluster (onceflow.airflow.kafka).
Everything here is JVM-free and quick, so the triggerer may call it every few
seconds.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from onceflow import config, processes
from onceflow.airflow.aws import use_aws_connection
from onceflow.airflow.kafka import use_kafka_connections
from onceflow.airflow.registry import use_registry_connection
from onceflow.audit.report import latest_summary
from onceflow.config import DEFAULT_STOP_TIMEOUT, Pipeline
from onceflow.kafka.client import KafkaClient, source_client
from onceflow.sink_kinds import SinkName
from onceflow.state.control import RecoveryMarker, StreamRun, Wanted, control_lock, keep_watching
from onceflow.state.status import Run, RunLock, StatusLog

if TYPE_CHECKING:
    from onceflow.health import HealthReport


def pipelines_dir() -> Path:
    """Where the DAG factory and the UI look for pipelines/*.yaml: $ONCEFLOW_PIPELINES_DIR,
    else <project>/pipelines."""
    return config.pipelines_dir()


def load_pipeline(file: str | Path) -> Pipeline:
    """The validated pipeline (ConfigError names the file and field), with the Airflow connections
    it reaches through applied to this process's environment: ONCEFLOW_AWS_CONN_ID's for its object
    store (onceflow.airflow.aws), the `kafka` connections it names for its clusters
    (onceflow.airflow.kafka), the login to its schema registry (onceflow.airflow.registry). Tasks,
    triggers and the page load a pipeline through here."""
    use_aws_connection()
    pipeline = config.load(file)
    use_kafka_connections(pipeline)
    use_registry_connection(pipeline)
    return pipeline


def reports_root() -> Path:
    """Where the audit writes its reports ($ONCEFLOW_REPORTS, else <state>/reports)."""
    from onceflow.paths import reports_dir

    return reports_dir()


class OnceflowHook(BaseHook):
    """Facts about one onceflow pipeline, read from its YAML, Kafka and its files."""

    hook_name = "onceflow"

    def __init__(self, pipeline_file: str | os.PathLike, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline_file = str(pipeline_file)

    # -- config ---------------------------------------------------------------
    @cached_property
    def pipeline(self) -> Pipeline:
        """The validated pipeline, its Airflow connections applied (load_pipeline)."""
        return load_pipeline(self.pipeline_file)

    def get_conn(self) -> Pipeline:
        return self.pipeline

    @property
    def name(self) -> str:
        return self.pipeline.name

    def table_path(self, sink: str) -> str:
        from onceflow.sinks import table_path

        return table_path(self.pipeline, sink)

    # -- ledgers --------------------------------------------------------------
    @property
    def source_client(self) -> KafkaClient:
        """The cluster the pipeline reads: its servers and client settings (onceflow.kafka.client)."""
        return source_client(self.pipeline)

    def watermarks(self) -> dict[int, tuple[int, int]]:
        """Kafka (low, high) per partition of the source topic."""
        from onceflow.kafka.admin import watermarks

        return watermarks(self.source_client, self.pipeline.source.topic)

    def checkpoint(self):
        """The Spark checkpoint, read without a JVM (onceflow.checkpoint.Checkpoint)."""
        from onceflow.checkpoint import read_checkpoint

        return read_checkpoint(self.pipeline.checkpoint_path)

    def ledger(self, sink: str = SinkName.BRONZE):
        """The sink ledger of one Delta table (onceflow.ledger.Ledger)."""
        from onceflow.ledger import read_ledger

        return read_ledger(self.table_path(sink))

    def health(self) -> HealthReport:
        """`onceflow checkpoint status` for this pipeline: verdict, reasons, lag, last batch."""
        from onceflow.health import pipeline_health

        return pipeline_health(self.pipeline)

    # -- the running job ------------------------------------------------------
    @property
    def status_log(self) -> StatusLog:
        return StatusLog(self.pipeline.state_path, self.name)

    def last_run(self) -> Run:
        """The newest run in the status log (Run.as_dict() is what the tasks return)."""
        return self.status_log.newest_run()

    @property
    def run_lock(self) -> RunLock:
        return RunLock(self.pipeline.state_path)

    def running_job(self) -> dict | None:
        """run.json of the process holding the run lock, or None when no copy runs."""
        lock = self.run_lock
        return (lock.holder() or {"pid": None}) if lock.is_held() else None

    def stop_running(
        self,
        grace_seconds: float | None = None,
        log: Callable[[str], None] = print,
        on_kill: Callable[[], None] | None = None,
    ) -> dict | None:
        """Stop the running copy: SIGTERM (it stops at a batch boundary), SIGKILL after the grace.
        The default grace outlasts the app's own stop bound (its `--stop-timeout`, in run.json) by 30 s.

        Only a process on this host can be signalled; for another host the error says so.
        Returns the holder that was stopped, None if nothing ran; `on_kill` is called if it needed SIGKILL.
        """
        holder = self.running_job()
        if holder is None:
            return None
        pid, host = holder.get("pid"), holder.get("host")
        if not pid or (host and host != socket.gethostname()):
            raise RuntimeError(
                f"the {self.name} query runs as pid {pid} on host {host}, not here "
                f"({socket.gethostname()}). Fix: stop it there (SIGTERM) and run this task again."
            )
        if grace_seconds is None:
            grace_seconds = float(holder.get("stop_timeout") or DEFAULT_STOP_TIMEOUT) + 30
        log(f"stopping the running {self.name} query (pid {pid}) with SIGTERM: it stops at a batch boundary")
        grace = grace_seconds
        stopped = processes.stop(
            int(pid),
            grace=grace,
            done=lambda: not self.run_lock.is_held(),
            on_kill=lambda: log(
                f"pid {pid} did not stop within {grace:.0f}s: SIGKILL (recovery replays the open batch)"
            ),
        )
        if stopped.killed and on_kill is not None:
            on_kill()
        if not stopped.gone:
            raise RuntimeError(f"pid {pid} still holds {self.run_lock.dir / 'run.lock'} 30s after SIGKILL")
        if not stopped.killed:
            log(f"pid {pid} stopped")
        return holder

    # -- who may start the query, who wants it (onceflow.state.control) ----------
    @property
    def recovery_marker(self) -> RecoveryMarker:
        return RecoveryMarker(self.pipeline.state_path)

    def recovery_in_progress(self) -> dict | None:
        """The marker of the `<p>_recover` run at work, or None (none, or it expired with its run)."""
        lease = self.recovery_marker.current()
        return lease.as_dict() if lease else None

    def control_lock(self):
        """The pipeline's control lock: recoveries begin and stream runs launch under it."""
        return control_lock(self.pipeline.state_path)

    @property
    def wanted(self) -> Wanted:
        return Wanted(self.pipeline.state_path)

    @property
    def stream_run(self) -> StreamRun:
        """The claim of the `<p>_stream` run at work (one at a time, whatever Airflow starts)."""
        return StreamRun(self.pipeline.state_path)

    def keep_watching(self, run: str) -> bool:
        """A stream run's watcher looked again: renew its claim and the lease for the pipeline's
        `airflow.lease_grace`. False when another run holds the claim (nothing renewed)."""
        return keep_watching(self.pipeline.state_path, run, self.pipeline.airflow.lease_grace_seconds) is not None

    # -- audit reports --------------------------------------------------------
    @property
    def reports_dir(self) -> Path:
        return reports_root() / self.name

    def latest_audit(self) -> dict | None:
        """summary.json of the newest audit report (with its folder as `report_dir`), or None."""
        return latest_summary(self.reports_dir)
