"""The generated DAGs end to end with dag.test(), against the real broker, Spark and Delta.

Each DAG runs as the scheduler would run it, in this process, with spark-submit through
the apache-spark provider (connection spark_default = local[2]) and the sensors'
triggers run inline. The proofs: `<p>_batch` ingests and audits green; `<p>_stream`
keeps one long-lived app across its windows and its sensor sees the commits; killing the app
(SIGKILL) makes the sensor fire `dead` and trigger `<p>_recover`, which starts the app again for
the next stream run to adopt, with zero duplicates and zero loss (the audit, and an independent
read of Kafka and the tables), and no gap between commits but the kill's; the kill is told once by
mail and webhook (Airflow's notifiers, to a real SMTP server and an HTTP receiver), the recovery's
end once more as resolved, and nothing else is;
`<p>_backfill` over an already-ingested range adds nothing. With OpenLineage's file transport on,
the batch DAG's tasks tell their datasets through Airflow's provider, and the job its own run, as
the task's child, batch by batch, with offsets that chain up to the topic's end.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from devkit.driver import SHORT_LIVED_DRIVER
from devkit.pipelines import PAYMENTS_SCHEMA, pipeline_file
from onceflow.generate.producer import produce
from onceflow.kafka.admin import watermarks
from onceflow.polling import wait_until
from onceflow.sinks import table_paths
from onceflow.state.status import RunLock, StatusLog
from tests.airflow_helpers import migrate_db  # AIRFLOW_HOME before airflow is imported
from tests.exactly_once import assert_exactly_once
from tests.receivers import NOTIFY, MailServer, WebhookReceiver, use_receivers

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")]
PARTITIONS = 2
# kill -9 → `dead` at the watch's next poll → the recover DAG (begun by the test as the scheduler
# would) → its app launched: the platform's own hops, 10 s measured on 2 cores at load 20. The cold
# driver's first batch that follows is the JVM's time, not the platform's, and grows with the
# machine's load (35 s at load 20): the whole outage is measured by benchmarks/airflow_kills.py
# through a real scheduler, and printed here, not bounded
RECOVERY_LAUNCH_SECONDS = 30
LEASE_GRACE_SECONDS = 30


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
        # the stream runs' window comes from the file (no run parameter); a short grace is proved below
        airflow={"window": "20 seconds", "lease_grace": f"{LEASE_GRACE_SECONDS} seconds", "notify": NOTIFY},
    )
    mp = pytest.MonkeyPatch()
    mail, webhook = MailServer().__enter__(), WebhookReceiver().__enter__()
    use_receivers(mp, mail, webhook)
    lineage = root / "lineage.jsonl"  # the provider (in this process) and the jobs (spark-submit) append here
    for key, value in {"TYPE": "file", "LOG_FILE_PATH": str(lineage), "APPEND": "true"}.items():
        mp.setenv(f"OPENLINEAGE__TRANSPORT__{key}", value)  # (the provider reads them afresh under pytest)
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
        "mail": mail,
        "webhook": webhook,
        "lineage": lineage,
    }
    mp.undo()
    mail.__exit__(None, None, None)
    webhook.__exit__(None, None, None)


def _lineage(flow) -> list[dict]:
    path = flow["lineage"]
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


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

    # lineage: the provider's task events carry onceflow's datasets; the job's run is the ingest task's child
    events = _lineage(flow)
    tasks = {(e["job"]["name"], e["eventType"]): e for e in events if e["job"]["name"].startswith("afe2e_batch.")}
    ingest_done, audit_done = tasks[("afe2e_batch.ingest", "COMPLETE")], tasks[("afe2e_batch.audit", "COMPLETE")]
    topic = ("kafka://" + flow["bootstrap"].split(",")[0], flow["topic"])
    tables = {("file", str(Path(p).absolute())) for p in table_paths(flow["pipeline"]).values()}
    datasets = lambda e, side: {(d["namespace"], d["name"]) for d in e.get(side) or []}  # noqa: E731
    assert datasets(ingest_done, "inputs") == {topic} and datasets(ingest_done, "outputs") == tables
    assert datasets(audit_done, "inputs") == {topic} | tables and datasets(audit_done, "outputs") == set()
    job = [e for e in events if e["job"]["name"] == "afe2e.ingest" and e["job"]["namespace"] == "onceflow"]
    assert job and job[0]["eventType"] == "START" and job[-1]["eventType"] == "COMPLETE", job
    assert {e["run"]["runId"] for e in job} == {ingest["run_id"]}  # the status log's run id
    parent = job[0]["run"]["facets"]["parent"]
    assert parent["job"]["name"] == "afe2e_batch.ingest" and parent["run"]["runId"] == ingest_done["run"]["runId"]
    batches = [e["run"]["facets"]["onceflow_batch"] for e in job if e["eventType"] == "RUNNING"]
    assert len(batches) == ingest["batches"] and sum(b["inputRows"] for b in batches) == ingest["rows"]
    for before, after in itertools.pairwise(batches):  # each batch starts where the one before ended
        assert after["startOffsets"] == before["endOffsets"] and after["batchId"] == before["batchId"] + 1
    ends = {str(p): high for p, (_, high) in watermarks(flow["bootstrap"], flow["topic"]).items()}
    assert batches[-1]["endOffsets"] == ends  # the last batch ends at the topic's end, as Kafka says


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


class SteadyProducer(threading.Thread):
    """Events at a steady rate (transactions, some aborted, some malformed) until stopped."""

    def __init__(self, flow, rate: float = 40.0, chunk: int = 120):
        super().__init__(daemon=True)
        self.flow, self.rate, self.chunk = flow, rate, chunk
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        seed = 100
        try:
            while not self.halt.is_set():
                summary = produce(
                    self.flow["bootstrap"],
                    self.flow["topic"],
                    self.chunk,
                    schema=PAYMENTS_SCHEMA,
                    partitions=PARTITIONS,
                    seed=seed,
                    rate=self.rate,
                    abort_ratio=0.1,
                    malformed_ratio=0.05,
                    txn_size=20,
                )
                self.flow["produced"].append(summary)
                seed += 1
        except BaseException as exc:  # reported by the test, not lost in a thread
            self.error = exc


def _commits(pipeline) -> list[tuple[float, str | None, float]]:
    """(epoch, run id, batch seconds) of every committed batch in the status log, oldest first."""
    runs = StatusLog(pipeline.state_path, pipeline.name).runs()
    out = []
    for run in runs:
        for e in run:
            if e.get("event") == "progress":
                out.append((e["epoch"], e.get("run_id"), (e.get("batch_duration_ms") or 0) / 1000))
    return sorted(out)


def _kill_after(pipeline, pid: int, delay: float) -> tuple[threading.Thread, dict]:
    """SIGKILL the app `pid` after `delay` seconds, if it still holds the run lock; the dict gets
    the kill's time."""
    times: dict = {}

    def kill() -> None:
        time.sleep(delay)
        holder = RunLock(pipeline.state_path).holder() or {}
        if holder.get("pid") == pid:
            os.kill(pid, signal.SIGKILL)
            times["kill"] = time.time()

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread, times


def test_a_continuous_stream_runs_across_windows_and_recovers_from_a_kill_without_a_second_outage(flow):
    """The stream DAG keeps one long-lived app: its runs adopt it window after window (no new
    driver, no gap at rollover); a `kill -9` makes the watch fire `dead`, the recovery starts the
    app again and the next stream run adopts that one (no second outage). Events flow at a steady
    rate throughout; the longest gap between commits is asserted, and every record lands once."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from onceflow.airflow.hooks import OnceflowHook

    pipeline = flow["pipeline"]
    hook = OnceflowHook(flow["file"])
    window = {"start_grace_seconds": 120}  # the window is the file's `airflow.window` (20 s)
    mail, webhook = flow["mail"], flow["webhook"]
    subjects = lambda: [m["Subject"] for m in mail.messages]  # noqa: E731
    assert subjects() == [] and webhook.posts == []  # the earlier DAGs' audits passed: nothing to tell
    producer = SteadyProducer(flow)
    producer.start()
    timeline: dict[str, float] = {}
    try:
        runs = [_run(flow, "stream", window) for _ in range(3)]  # three windows, two rollovers between them
        outs = [_xcom("afe2e_stream", run_id, "stream") for run_id, _, _ in runs]
        assert [o["adopted"] for o in outs] == [False, True, True], outs  # launched once, then adopted
        assert len({o["pid"] for o in outs}) == 1 and len({o["run_id"] for o in outs}) == 1, outs
        assert outs[0]["log"] and {o["log"] for o in outs} == {outs[0]["log"]}, outs  # adopters link the app's log
        assert all(o["lease_until"] <= time.time() + LEASE_GRACE_SECONDS for o in outs), outs
        for _run_id, states, _ in runs:
            assert states["watch"] == "success" and states["release"] == "success", states
            assert states["trigger_recover"] == "skipped", states  # no problem: the window ended cleanly
        app = outs[0]["pid"]
        timeline["rollovers_done"] = time.time()
        assert subjects() == [] and webhook.posts == []  # clean windows tell nobody

        killer, killed = _kill_after(pipeline, app, delay=8)
        run_id, states, _ = _run(flow, "stream", window)  # the fourth window: the app is killed in it
        killer.join(5)
        timeline["kill"] = killed["kill"]
        assert _xcom("afe2e_stream", run_id, "stream")["adopted"] is True
        assert states["trigger_recover"] == "success", states
        watch = _xcom("afe2e_stream", run_id, "watch")
        assert watch["verdict"] == "dead" and "no final event" in watch["reasons"][0], watch
        timeline["dead_seen"] = watch["time"]
        with create_session() as session:
            triggered = session.execute(select(DagRun).where(DagRun.dag_id == "afe2e_recover")).scalars().all()
            assert len(triggered) == 1
            conf = dict(triggered[0].conf or {})
        assert conf["verdict"] == "dead" and conf["from_run"] == run_id
        # the incident, told once through each notifier, by the task that triggered the recovery
        assert subjects() == ["[onceflow] afe2e: dead, recovery started"], subjects()
        assert len(webhook.posts) == 1 and "afe2e: dead, recovery started" in webhook.texts()[0]
        assert "runbooks/dead-query.md" in webhook.texts()[0] and "no final event" in mail.bodies()[0]
        timeline["mail_dead"], timeline["webhook_dead"] = mail.arrived[0], webhook.arrived[0]

        timeline["recover_begin"] = time.time()
        rec_id, rec, _ = _run(flow, "recover", conf)
        assert rec == {
            "begin": "success",
            "execute": "success",
            "start": "success",
            "wait_first_batch": "success",
            "end": "success",
            "audit": "success",
        }, rec
        started = _xcom("afe2e_recover", rec_id, "start")
        assert started["adopted"] is False and started["pid"] != app
        timeline["app_started"] = started["since"]
        executed = _xcom("afe2e_recover", rec_id, "execute")  # its plan and outcome (no separate dry run)
        assert executed["plan"] and executed["outcome"] in ("done", "nothing_to_do"), executed
        assert _xcom("afe2e_recover", rec_id, "audit")["passed"] is True
        assert hook.recovery_in_progress() is None  # the mark went with the recovery
        assert subjects()[1:] == ["[onceflow] afe2e: recovered"], subjects()  # resolved, once
        assert len(webhook.posts) == 2 and "the recovered app committed batch" in webhook.texts()[1]
        timeline["mail_recovered"] = mail.arrived[1]

        run_id, states, _ = _run(flow, "stream", window)  # hand-over: the recovered app is adopted
        adopted = _xcom("afe2e_stream", run_id, "stream")
        assert adopted["adopted"] is True and adopted["pid"] == started["pid"], adopted
        assert adopted["log"] == started["log"] and Path(started["log"]).is_file(), (adopted, started)
        assert states["trigger_recover"] == "skipped", states
        assert len(mail.messages) == 2 and len(webhook.posts) == 2  # the hand-over tells nobody
    finally:
        producer.halt.set()
        producer.join(60)
    assert producer.error is None, producer.error
    # the app drains what was produced (watched, as a stream run would), then no run watches it
    # (the DAG paused): it stops by itself at a batch boundary within the lease's grace
    drained = wait_until(lambda: hook.keep_watching("afe2e_stream/drain") and not hook.health().lag.total, 180)
    assert drained, hook.health().reasons
    hook.wanted.clear()  # the recovery's hand-over lease (600 s) is not a stream run's
    last_look = hook.keep_watching("afe2e_stream/drain") and time.time()
    assert wait_until(lambda: hook.running_job() is None, LEASE_GRACE_SECONDS + 60)
    stopped_after = time.time() - last_look
    print(f"no look for {stopped_after:.1f}s: the app stopped (grace {LEASE_GRACE_SECONDS}s)")
    assert LEASE_GRACE_SECONDS - 2 <= stopped_after <= LEASE_GRACE_SECONDS + 2 * flow["pipeline"].trigger.seconds + 20
    assert hook.last_run().status == "stopped"
    assert hook.health().verdict == "stopped"

    commits = _commits(pipeline)
    kill = timeline["kill"]
    before = [c for c in commits if c[1] == outs[0]["run_id"]]  # the one app of the first four windows
    after = [c for c in commits if c[1] == started["run_id"]]  # the recovered app, through its hand-over
    assert before and after and before[-1][0] < kill < after[0][0]
    trigger = pipeline.trigger.seconds
    batch = max(c[2] for c in before + after)
    bound = 2 * trigger + batch + 1  # two triggers and a batch (and a second of the status log's own latency)
    rollover_gaps = [b[0] - a[0] for a, b in itertools.pairwise(before)]
    steady_gaps = [b[0] - a[0] for a, b in itertools.pairwise(after)]
    outage = after[0][0] - before[-1][0]
    timeline["first_commit_after"] = after[0][0]
    print(
        "timeline (s after the kill): "
        + ", ".join(f"{k} {v - kill:+.1f}" for k, v in sorted(timeline.items(), key=lambda kv: kv[1]))
        + f"; longest gap before the kill {max(rollover_gaps):.1f}s, after the recovery {max(steady_gaps):.1f}s,"
        f" kill outage {outage:.1f}s, bound {bound:.1f}s"
    )
    assert max(rollover_gaps) <= bound, (max(rollover_gaps), bound)
    assert timeline["app_started"] - kill <= RECOVERY_LAUNCH_SECONDS, timeline
    assert max(steady_gaps) <= bound, (max(steady_gaps), bound)  # no second outage

    counts = assert_exactly_once(pipeline, flow["bootstrap"], flow["produced"])
    assert counts["bronze"] + counts["quarantine"] == counts["committed"] >= 1000
