"""The stream operator's decisions without Spark: adopt a running app and renew its lease, wait
for a recovery at work, the app's command line, and the app logs kept. Launching the app for real
is tests/e2e/test_airflow_dags.py's."""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from airflow.sdk.exceptions import AirflowSkipException  # noqa: E402

from devkit.pipelines import write_pipeline  # noqa: E402
from onceflow.airflow.stream import APP_LOGS, StreamOperator, _app_log  # noqa: E402
from onceflow.state.control import RECOVERY_LEASE_SECONDS, RecoveryMarker, Wanted  # noqa: E402
from onceflow.state.status import RunLock  # noqa: E402


@pytest.fixture
def file(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    return write_pipeline(tmp_path / "p", "localhost:1", "t", name="p")


def _context(run_id: str = "run-1") -> dict:
    return {"dag": SimpleNamespace(dag_id="p_stream"), "run_id": run_id}


def test_a_running_app_is_adopted_and_its_lease_renewed(file):
    op = StreamOperator(task_id="stream", pipeline_file=str(file), lease_seconds="900")
    state = op.onceflow.pipeline.state_path
    lock = RunLock(state)
    lock.acquire(run_id="app-run", mode="continuous")
    try:
        out = op.execute(_context())
    finally:
        lock.release()
    assert out["adopted"] is True and out["since"] is None and out["run_id"] == "app-run"
    lease = Wanted(state).current()
    assert lease is not None and lease.info["by"] == "p_stream/run-1" and lease.until == out["lease_until"]


def test_an_adopting_run_links_the_log_its_launcher_recorded(file):
    """The launcher names the app's log on its command line; the app records it in run.json, so
    a run that adopts the app links the same file (it said `log: None` before)."""
    op = StreamOperator(task_id="stream", pipeline_file=str(file))
    state = op.onceflow.pipeline.state_path
    log = str(Path(state) / "apps" / "20260101T000000Z-4242.log")
    lock = RunLock(state)
    lock.acquire(run_id="app-run", mode="continuous", log=log)  # as run_ingest(app_log=...) records it
    try:
        out = op.execute(_context())
    finally:
        lock.release()
    assert out["adopted"] is True and out["log"] == log
    op.app_log = Path(log)
    assert op.arguments({})[-2:] == ["--app-log", log]  # what the launch passes the app


def test_a_stream_runs_lease_is_the_files_grace_and_a_second_run_beside_it_is_refused(file):
    """The stream DAG's run wants the app for `airflow.lease_grace` (120 s by default), not for a
    window and a margin (2,100 s: the app ran 35 min after a pause); and while another run of the
    DAG holds the pipeline, a second one is skipped instead of watching beside it."""
    op = StreamOperator(task_id="stream", pipeline_file=str(file))
    state = op.onceflow.pipeline.state_path
    lock = RunLock(state)
    lock.acquire(run_id="app-run", mode="continuous")
    try:
        began = time.time()
        out = op.execute(_context("manual-1"))
        assert began + 119 <= out["lease_until"] <= time.time() + 120
        with pytest.raises(AirflowSkipException, match="stream run p_stream/manual-1 is at work"):
            op.execute(_context("scheduled-1"))
    finally:
        lock.release()
    lease = Wanted(state).current()
    assert lease is not None and lease.info["by"] == "p_stream/manual-1"


def test_a_stream_run_waits_for_a_recovery_at_work_and_the_recoverys_own_start_renews_it(file):
    op = StreamOperator(task_id="stream", pipeline_file=str(file), lease_seconds="900")
    state = op.onceflow.pipeline.state_path
    RecoveryMarker(state).begin("rec-1", now=time.time() - RECOVERY_LEASE_SECONDS + 30)  # 30 s left
    with pytest.raises(AirflowSkipException, match="recovery run rec-1 is at work"):
        op.execute(_context())
    assert Wanted(state).current() is None  # a skipped run wants nothing
    own = StreamOperator(task_id="start", pipeline_file=str(file), lease_seconds="600", recovery_run="rec-1")
    lock = RunLock(state)
    lock.acquire(run_id="app-run", mode="continuous")  # (adopts: nothing to launch in a unit test)
    try:
        out = own.execute(_context("rec-1"))
    finally:
        lock.release()
    renewed = RecoveryMarker(state).current()
    assert out["adopted"] and renewed is not None and renewed.until > time.time() + RECOVERY_LEASE_SECONDS - 60


def test_the_apps_command_line_asks_for_a_lease_and_names_its_recovery(file):
    op = StreamOperator(task_id="start", pipeline_file=str(file), lease_seconds="600", recovery_run="rec-9")
    args = op.arguments({})
    assert args[-7:] == ["--mode", "continuous", "--lease", "--stop-timeout", "45", "--recovery-run", "rec-9"]
    assert "--app-log" not in args  # named only when a launch has a log file for it
    plain = StreamOperator(task_id="stream", pipeline_file=str(file), lease_seconds="600").arguments({})
    assert "--recovery-run" not in plain and "--max-seconds" not in plain  # the app is not bounded by a run


def test_the_newest_app_logs_are_kept(tmp_path):
    folder = tmp_path / "apps"
    folder.mkdir()
    for i in range(APP_LOGS + 5):
        (folder / f"20260101T0000{i:02d}Z-1.log").write_text("x")
    new = _app_log(tmp_path)
    kept = sorted(p.name for p in folder.glob("*.log"))
    assert len(kept) == APP_LOGS - 1 and kept[0] == f"20260101T0000{6:02d}Z-1.log"
    assert new.parent == folder and not new.exists()


def test_a_launch_is_marked_from_before_it_is_wanted_until_the_app_holds_its_lock(file, tmp_path, monkeypatch):
    """`checkpoint status` reads a launch in progress as `starting`, never `down` (issue 48): the
    launcher marks it (launching.json, with the launched pid) and clears it once the app runs."""
    import json
    import sys

    from onceflow.state.control import Launching

    op = StreamOperator(task_id="stream", pipeline_file=str(file), lease_seconds="900")
    state = op.onceflow.pipeline.state_path
    seen, release = tmp_path / "seen.json", tmp_path / "release"
    app = (  # what the launched app saw of the marker, then its run lock, held until the test ends
        "import json, os, pathlib, sys, time\n"
        "from onceflow.state.control import Launching, Wanted\n"
        "from onceflow.state.status import RunLock\n"
        f"state = {str(state)!r}\n"
        "m = Launching(state).current()\n"
        f"pathlib.Path({str(seen)!r}).write_text(json.dumps({{'marker': m and m.as_dict(), 'pid': os.getpid(),"
        " 'wanted': Wanted(state).current() is not None}))\n"
        "lock = RunLock(state); lock.acquire(run_id='app-run', mode='continuous')\n"
        f"while not os.path.exists({str(release)!r}): time.sleep(0.05)\n"
    )
    monkeypatch.setattr(op, "ready", lambda context: tmp_path)
    monkeypatch.setattr(
        op, "_get_hook", lambda: SimpleNamespace(_build_spark_submit_command=lambda _: [sys.executable, "-c", app])
    )
    try:
        out = op.execute(_context())
    finally:
        release.write_text("")
    marker = json.loads(seen.read_text())
    assert marker["wanted"] and marker["marker"]["by"] == "p_stream/run-1", marker
    assert marker["marker"]["pid"] == marker["pid"] == out["pid"] and out["adopted"] is False
    assert Launching(state).current() is None, "the app holds its lock: no launch is in progress"
