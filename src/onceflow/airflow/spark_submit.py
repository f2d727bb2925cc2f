"""OnceflowSparkSubmitOperator: spark-submit of an onceflow Spark app (spark_apps/) for one pipeline.

It is the apache-spark provider's SparkSubmitOperator (the `spark_default` connection picks the
master) with onceflow's jars, conf and env. Two traps of long-lived spark-submit tasks are closed
here: every run is bounded (`--max-seconds`, so the task always ends), and killing the task first
sends SIGTERM to the app, which stops at a batch boundary, before the provider's SIGKILL (bounded
wait). The ingest app's own stop bound (`--stop-timeout`) is `stop_grace` less STOP_MARGIN, so it
stops, or gives up and says so, before that SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from onceflow.airflow.hooks import OnceflowHook
from onceflow.airflow.lineage import parent_env, task_lineage
from onceflow.airflow.submit import submit_settings
from onceflow.processes import descends_from

# seconds of stop_grace kept for the app's exit after its stop (status, checkpoint check, JVM exit)
STOP_MARGIN = 15.0


class OnceflowSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of spark_apps/<app>.py for one pipeline, with onceflow's jars, conf and env.

    :param pipeline_file: the pipeline YAML (passed to the app as --pipeline)
    :param app: the entry point in spark_apps/ (ingest, audit, backfill)
    :param app_args: more arguments for the app (templated)
    :param stop_grace: seconds to wait after SIGTERM on kill before the provider's SIGKILL; the
        ingest app gets `stop_grace - STOP_MARGIN` to stop at a batch boundary, so it must exceed
        the longest batch by that margin (docs/airflow.md)
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "pipeline_file", "app_args")
    ui_color = "#fdf0e0"

    def __init__(
        self,
        *,
        pipeline_file: str,
        app: str,
        app_args: Sequence[str] = (),
        conn_id: str = "spark_default",
        stop_grace: float = 60.0,
        **kwargs: Any,
    ) -> None:
        if stop_grace <= STOP_MARGIN:
            raise ValueError(
                f"stop_grace={stop_grace:g}: must exceed {STOP_MARGIN:g}s, the app's exit after "
                "its stop, by at least the longest batch's time"
            )
        kwargs.setdefault("name", f"onceflow-{app}")
        super().__init__(conn_id=conn_id, **kwargs)
        self.pipeline_file = pipeline_file
        self.app = app
        self.app_args = list(app_args)
        self.stop_grace = stop_grace

    @property
    def onceflow(self) -> OnceflowHook:
        return OnceflowHook(self.pipeline_file)

    def arguments(self, context: Any) -> list[str]:
        """The app's command line (subclasses add theirs)."""
        return ["--pipeline", str(Path(self.pipeline_file).resolve()), *[str(a) for a in self.app_args]]

    def prepare(self, context: Any) -> None:
        master = SparkSubmitHook(conn_id=self._conn_id)._connection["master"]
        settings = submit_settings(self.app, master)
        self.application = settings.application
        self.application_args = self.arguments(context)
        self.conf = {**settings.conf, **(self.conf or {})}
        self.jars = ",".join(j for j in (settings.jars, self.jars) if j)
        self.py_files = ",".join(p for p in (settings.py_files, self.py_files) if p) or None
        # the job's OpenLineage run names this task's run as its parent (onceflow.airflow.lineage)
        self.env_vars = {**settings.env_vars, **(self.env_vars or {}), **parent_env(context)}
        self._hook = None
        self.log.info("spark-submit %s on master %s (connection %s)", self.application, master, self._conn_id)

    def ready(self, context: Any) -> Path:
        """Check the pipeline's brokers (a broker that is down fails here, before spark-submit) and
        prepare the submission; returns the folder spark-submit starts in: <state>/spark, since the
        driver JVM leaves files (Spark 4.0's artifacts/) in its working directory."""
        from onceflow.kafka.preflight import require_pipeline_brokers
        from onceflow.spark.session import spark_dir

        require_pipeline_brokers(self.onceflow.pipeline)
        self.prepare(context)
        spark_dir().mkdir(parents=True, exist_ok=True)
        return spark_dir()

    def execute(self, context: Any) -> Any:
        here, work = Path.cwd(), self.ready(context)
        os.chdir(work)
        try:
            return super().execute(context)
        finally:
            os.chdir(here)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The topic this task read and the tables it wrote, for Airflow's OpenLineage provider."""
        return task_lineage(self.onceflow.pipeline, self.app)

    def on_kill(self) -> None:
        """SIGTERM the app first (it stops at a batch boundary), then let the provider kill spark-submit."""
        submit = getattr(self._hook, "_submit_sp", None) if self._hook else None
        try:
            holder = self.onceflow.running_job()
        except Exception:
            holder = None
        pid = (holder or {}).get("pid")
        if submit is not None and submit.poll() is None and pid and descends_from(pid, submit.pid):
            self.log.info("stopping the app (pid %s) with SIGTERM; waiting up to %ss", pid, self.stop_grace)
            os.kill(pid, signal.SIGTERM)
            try:
                submit.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                self.log.warning("the app did not stop within %ss: killing spark-submit", self.stop_grace)
        super().on_kill()
