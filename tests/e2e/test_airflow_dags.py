"""The generated DAGs end to end with dag.test(), against the real broker, Spark and Delta.

Each DAG runs as the scheduler would run it, in this process, with spark-submit through
the apache-spark provider (connection spark_default = local[2]) and the sensors'
triggers run inline. The proofs: `<p>_batch` ingests and audits green; `<p>_stream`
submits the app and its sensor sees the commits; killing the app (SIGKILL) makes the
sensor fire `dead` and trigger `<p>_recover`, which brings the pipeline back with zero
duplicates and zero loss (the audit, and an independent read of Kafka and the tables);
`<p>_backfill` over an already-ingested range adds nothing.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from devkit.driver import SHORT_LIVED_DRIVER
from devkit.pipelines import PAYMENTS_SCHEMA, pipeline_file
from onceflow.kafka.producer import produce
from onceflow.spark.ingest import run_ingest
from onceflow.status import RunLock, StatusLog
from tests.airflow_helpers import migrate_db  # AIRFLOW_HOME before airflow is imported
from tests.exactly_once import assert_exactly_once

pytestmark = pytest.mark.e2e
PARTITIONS = 2


@pytest.fixture(scope="module")
def flow(broker, jars, spark, state_home, tmp_path_factory):
    """One pipeline for the whole module (the DAGs run in sequence on its tables). `spark`, the
    worker's long-lived in-process driver, is built before the tasks' short-lived driver options
    are set below, so it keeps the JVM's default compilers."""
    migrate_db()
    root = tmp_path_factory.mktemp("airflow-e2e")
    topic = f"t-airflow-e2e-{os.getpid()}"
    file, pipeline = pipeline_file(
        root / "pipelines",
        broker.bootstrap,
        topic,
        name="afe2e",
        # scheduled runs catch up in one batch; streams keep 500 per batch
        max_offsets=500,
        available_now_max_offsets=20000,
        health={"max_lag": 100000, "stalled_after_triggers": 120, "dead_after_seconds": 120},
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("ONCEFLOW_PIPELINES_DIR", str(file.parent))
    mp.setenv("ONCEFLOW_REPORTS", str(root / "reports"))
    mp.setenv("ONCEFLOW_SPARK_LOG_LEVEL", "ERROR")
    mp.setenv("ONCEFLOW_SHUFFLE_PARTITIONS", "2")
    for key, value in SHORT_LIVED_DRIVER.items():  # each task's spark-submit driver runs one app and exits
        mp.setenv(key, value)
    from onceflow.airflow.dag_factory import build_dags

    yield {
        "file": file,
        "pipeline": pipeline,
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "dags": build_dags(file.parent),
        "produced": [],
    }
    mp.undo()


def _produce(flow, count: int, seed: int):
    summary = produce(
        flow["bootstrap"],
        flow["topic"],
        count,
        schema=PAYMENTS_SCHEMA,
        partitions=PARTITIONS,
        seed=seed,
        abort_ratio=0.1,
        malformed_ratio=0.05,
        txn_size=25,
    )
    flow["produced"].append(summary)
    return summary


def _run(flow, kind: str, conf: dict | None = None):
    dag = flow["dags"][f"afe2e_{kind}"]
    run = dag.test(run_conf=conf)
    return run.run_id, _states(dag.dag_id, run.run_id), run.state


def _states(dag_id: str, run_id: str) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.task_id, TaskInstance.state).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id
            )
        ).all()
    return {task: str(getattr(state, "value", state)) for task, state in rows}


def _xcom(dag_id: str, run_id: str, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        value = session.execute(
            select(XComModel.value).where(
                XComModel.dag_id == dag_id,
                XComModel.run_id == run_id,
                XComModel.task_id == task_id,
                XComModel.key == key,
            )
        ).scalar_one_or_none()
    return XComModel.deserialize_value(type("R", (), {"value": value})()) if value is not None else None


def test_batch_dag_ingests_and_audits_green(flow):
    _produce(flow, 400, seed=1)
    run_id, states, state = _run(flow, "batch")
    assert states == {"ingest": "success", "audit": "success"}, states
    assert str(state) in ("success", "DagRunState.SUCCESS")
    ingest = _xcom("afe2e_batch", run_id, "ingest")
    assert ingest["mode"] == "available-now" and ingest["final_status"] in ("finished", "stopped")
    assert ingest["batches"] >= 1 and ingest["rows"] > 0
    audit = _xcom("afe2e_batch", run_id, "audit")
    assert audit["passed"] is True and audit["problems"] == []
    assert Path(audit["report_dir"], "index.html").is_file()
    assert audit["report_url"].startswith("/onceflow/reports/afe2e/")
    assert _xcom("afe2e_batch", run_id, "audit", key="_link_AuditReportLink") == audit["report_url"]
    assert_exactly_once(flow["pipeline"], flow["bootstrap"], flow["produced"])


def test_backfill_over_an_ingested_range_adds_nothing(flow):
    from onceflow.ledger import read_ledger
    from onceflow.sinks import table_paths

    paths = table_paths(flow["pipeline"])
    before = {
        sink: len(read_ledger(path).entries) + len(read_ledger(path).foreign_commits) for sink, path in paths.items()
    }
    committed = read_ledger(paths["bronze"]).committed_offsets()
    assert committed, "the batch test ingests first"
    params = {"start_offsets": {str(p): 0 for p in committed}, "end_offsets": {str(p): o for p, o in committed.items()}}
    run_id, states, _ = _run(flow, "backfill", params)
    assert states == {"resolve": "success", "backfill": "success", "audit": "success"}, states
    assert _xcom("afe2e_backfill", run_id, "resolve") == {
        "start": params["start_offsets"],
        "end": params["end_offsets"],
    }
    after = {
        sink: len(read_ledger(path).entries) + len(read_ledger(path).foreign_commits) for sink, path in paths.items()
    }
    assert after == before  # not one commit: every record of the range was already there
    assert _xcom("afe2e_backfill", run_id, "audit")["passed"] is True
    assert_exactly_once(flow["pipeline"], flow["bootstrap"], flow["produced"])


def test_backfill_refuses_a_range_past_the_log_end_before_spark_starts(flow):
    _run_id, states, _ = _run(flow, "backfill", {"start_offsets": {"0": 0}, "end_offsets": {"0": 10**9}})
    assert states["resolve"] == "failed" and states["backfill"] == "upstream_failed", states


class Killer(threading.Thread):
    """SIGKILLs the streaming app once it has committed a batch of a run started after `after`."""

    def __init__(self, pipeline, after: float, timeout: float = 420):
        super().__init__(daemon=True)
        self.pipeline, self.after, self.timeout = pipeline, after, timeout
        self.killed: dict | None = None
        self.error: str | None = None

    def run(self) -> None:
        log = StatusLog(self.pipeline.state_path, self.pipeline.name)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            run = log.last_run()
            if run and run[0].get("epoch", 0) >= self.after and any(e["event"] == "progress" for e in run):
                holder = RunLock(self.pipeline.state_path).holder() or {}
                if holder.get("pid"):
                    os.kill(holder["pid"], signal.SIGKILL)
                    self.killed = {"pid": holder["pid"], "batches": sum(e["event"] == "progress" for e in run)}
                    return
            time.sleep(0.5)
        self.error = f"no committed batch of a new run within {self.timeout}s"


def test_stream_kill_makes_the_sensor_fire_and_recover_brings_it_back(flow):
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    _produce(flow, 1200, seed=2)  # a backlog: 500 offsets per batch keep the window busy
    killer = Killer(flow["pipeline"], after=time.time())
    killer.start()
    run_id, states, _ = _run(flow, "stream", {"window_seconds": 600, "start_grace_seconds": 20})
    killer.join(5)
    assert killer.error is None and killer.killed, killer.error
    assert states["stream"] == "failed"  # the app died under it
    assert states["route"] == "success" and states["trigger_recover"] == "success", states
    assert states["window_done"] == "skipped"
    first = _xcom("afe2e_stream", run_id, "wait_healthy")
    assert first["run"]["batches"] >= 1 and first["run"]["rows"] > 0  # the sensor saw the commits
    watch = _xcom("afe2e_stream", run_id, "watch")
    assert watch["verdict"] == "dead" and "no final event" in watch["reasons"][0]

    with create_session() as session:
        triggered = session.execute(select(DagRun).where(DagRun.dag_id == "afe2e_recover")).scalars().all()
        assert len(triggered) == 1
        conf = dict(triggered[0].conf or {})
    assert conf["verdict"] == "dead" and conf["from_run"] == run_id

    _produce(flow, 300, seed=3)  # new data arrives while the pipeline is down
    # every record is produced before the run: the resubmitted stream need not idle the default 20 s
    # before it ends (the `resubmit` task ends with it, and the DAG run waits for that)
    rec_id, rec, _ = _run(flow, "recover", {**conf, "until_idle_seconds": 5, "catchup_max_seconds": 600})
    assert rec == {
        "begin": "success",
        "stop": "success",
        "plan": "success",
        "execute": "success",
        "resubmit": "success",
        "wait_first_batch": "success",
        "audit": "success",
        "end": "success",
    }, rec
    plan = _xcom("afe2e_recover", rec_id, "plan")
    assert plan["outcome"] == "dry_run" and plan["plan"]["pipeline"] == "afe2e"
    resumed = _xcom("afe2e_recover", rec_id, "wait_first_batch")
    assert resumed["run"]["batches"] >= 1 and resumed["run"]["rows"] > 0  # the first new committed batch
    assert _xcom("afe2e_recover", rec_id, "audit")["passed"] is True
    assert not (flow["pipeline"].state_path / "recovering.json").exists()

    # the recovered stream ran until idle after the last record was produced, so it alone brought
    # every committed record into the tables exactly once: zero duplicates, zero loss, nothing
    # aborted, malformed in quarantine (a batch DAG run used to catch up first: two more fresh
    # drivers, and a weaker claim; test_batch_dag_ingests_and_audits_green proves that DAG)
    counts = assert_exactly_once(flow["pipeline"], flow["bootstrap"], flow["produced"])
    assert counts["bronze"] + counts["quarantine"] == counts["committed"] >= 1500


def test_a_stream_that_outlived_its_scheduler_is_watched_not_started_twice(flow, spark, tmp_path):
    """After a scheduler restart the app of the old window may still run (client mode: it
    outlives the task that submitted it). The next `<p>_stream` run must watch that copy,
    never start a second one, and end cleanly when the survivor's window ends."""
    from devkit.driver import IngestProcess

    status = StatusLog(flow["pipeline"].state_path, flow["pipeline"].name)
    started_before = sum(e.get("event") == "started" for e in status.events())
    _produce(flow, 400, seed=4)
    # The survivor's window (--max-seconds) counts from its query's start. The DAG run starts as soon
    # as that query runs (its `started` event is then the newest run the watcher reads), so the guard
    # looks under a second later (0.3 s after the run began, 2026-11-27): 25 s leave it ample time, and
    # the survivor's first trigger plans the 400-event backlog at once, so a batch is in flight and
    # commits even if the window ends first (it stops at a batch boundary: spark/stop.py). It waited
    # for the first commit and ran 90 s before, then 45 s.
    survivor = IngestProcess(flow["pipeline"], flow["file"], tmp_path, extra_args=("--max-seconds", "25")).start()
    progress_before = survivor.progress_count()
    try:
        deadline = time.monotonic() + 300
        while sum(e.get("event") == "started" for e in status.events()) <= started_before:
            assert survivor.process.poll() is None, f"the survivor exited before its query started:\n{survivor.tail()}"
            assert time.monotonic() < deadline, f"the survivor's query did not start within 300s:\n{survivor.tail()}"
            time.sleep(0.5)
        holder = RunLock(flow["pipeline"].state_path).holder()
        assert holder and holder["pid"] == survivor.process.pid
        run_id, states, _ = _run(flow, "stream", {"window_seconds": 60, "start_grace_seconds": 20})
        assert survivor.wait_exit(300) == 0, survivor.tail()  # its own window ended at a batch boundary
    finally:
        survivor.kill9()
    assert survivor.progress_count() > progress_before, "the survivor ran and committed"
    assert states["guard"] == "success" and states["stream"] == "skipped", states  # not submitted again
    assert states["window_done"] == "success" and states["trigger_recover"] == "skipped", states
    assert _xcom("afe2e_stream", run_id, "guard")["running"]["pid"] == survivor.process.pid
    assert _xcom("afe2e_stream", run_id, "watch")["verdict"] == "stopped"
    runs = [
        e for e in StatusLog(flow["pipeline"].state_path, flow["pipeline"].name).events() if e.get("event") == "started"
    ]
    assert len(runs) == started_before + 1  # one copy of the query ran: the survivor
    # the rest (the survivor's one batch planned the whole backlog, so usually nothing), in the
    # session's warm driver: a batch DAG run here cost two fresh drivers, and test_batch_dag_ingests_
    # and_audits_green proves that DAG; then zero duplicates, zero loss
    assert run_ingest(flow["pipeline"], spark=spark).status == "finished"
    assert_exactly_once(flow["pipeline"], flow["bootstrap"], flow["produced"])
