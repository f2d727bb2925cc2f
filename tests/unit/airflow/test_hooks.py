"""The hook's facts about one pipeline: the running copy and its stop, the recovery marker, the last audit."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from devkit.pipelines import write_pipeline  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow.hooks import OnceflowHook  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.polling import wait_until  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.state.status import RunEvent  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME

# a stand-in for the job: holds the run lock, stops on SIGTERM unless told to ignore it
HOLDER = (
    "import signal, sys, time\n"
    "from onceflow.state.status import RunLock\n"
    "if sys.argv[2] == 'ignore': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "lock = RunLock(sys.argv[1])\n"
    "lock.acquire(run_id='r1', stop_timeout=1)\n"
    "print('holding', flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def hook(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ONCEFLOW_REPORTS", str(tmp_path / "reports"))
    return OnceflowHook(write_pipeline(tmp_path / "p", "localhost:1", "t", name="p"))


def _holder(hook: OnceflowHook, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(hook.pipeline.state_path), mode], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "holding\n"
    return proc


@pytest.mark.parametrize("mode, killed", [("stop", False), ("ignore", True)])
def test_the_running_copy_is_stopped_and_killed_after_its_grace(hook, mode, killed):
    assert hook.running_job() is None and hook.stop_running(log=lambda m: None) is None
    proc = _holder(hook, mode)
    try:
        holder = hook.running_job()
        assert holder is not None and holder["pid"] == proc.pid and holder["run_id"] == "r1"
        lines: list[str] = []
        assert hook.stop_running(grace_seconds=1, log=lines.append) == holder
        assert hook.running_job() is None and wait_until(lambda: proc.poll() is not None, 10)
        assert lines[0].startswith(f"stopping the running p query (pid {proc.pid}) with SIGTERM")
        assert ("SIGKILL (recovery replays the open batch)" in lines[-1]) is killed
        assert (lines[-1] == f"pid {proc.pid} stopped") is not killed
    finally:
        proc.kill()
        proc.wait()


def test_a_copy_on_another_host_is_not_signalled(hook):
    hook.run_lock.dir.mkdir(parents=True)
    proc = _holder(hook, "stop")
    try:
        hook.run_lock.info_path.write_text(json.dumps({"pid": proc.pid, "host": "elsewhere"}))
        with pytest.raises(RuntimeError, match="on host elsewhere, not here"):
            hook.stop_running(log=lambda m: None)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_the_hook_reads_the_recovery_marker_and_the_lease(hook):
    assert hook.recovery_in_progress() is None and hook.wanted.current() is None
    with hook.control_lock():
        hook.recovery_marker.begin("run-1")
    assert hook.recovery_in_progress()["run_id"] == "run-1"
    hook.recovery_marker.clear("run-1")
    assert hook.recovery_in_progress() is None and not hook.recovery_marker.path.exists()


def test_the_last_run_and_the_last_audit(hook):
    hook.status_log.append(RunEvent.STARTED, run_id="r9", mode="continuous")
    assert hook.last_run().run_id == "r9" and hook.last_run().as_dict()["mode"] == "continuous"
    assert hook.latest_audit() is None
    run = hook.reports_dir / "20261122T120000Z-abc"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "passed"}))
    assert hook.latest_audit() == {"status": "passed", "report_dir": str(run)}
