"""`make airflow`: the environment standalone runs with, and its stop (the whole group, leftovers too)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from onceflow.local.airflow import password_file, standalone_env, stop
from onceflow.polling import wait_until
from onceflow.processes import alive


def test_the_environment_points_airflow_at_the_checkout_and_sizes_it_for_two_cores(tmp_path):
    env = standalone_env(tmp_path / "af", 8081, base={"PATH": "/usr/bin"})
    assert env["AIRFLOW_HOME"] == str(tmp_path / "af") and env["AIRFLOW__API__PORT"] == "8081"
    assert env["AIRFLOW__CORE__DAGS_FOLDER"].endswith("/dags") and env["AIRFLOW__CORE__PARALLELISM"] == "4"
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])["host"] == "local[*]"  # a missing one means yarn
    assert env["PATH"].split(":")[0] == str(sys.executable).rsplit("/", 1)[0] and env["PATH"].endswith("/usr/bin")
    assert password_file(tmp_path) == tmp_path / "simple_auth_manager_passwords.json.generated"


def test_stop_interrupts_the_group_and_kills_what_outlives_its_leader(tmp_path):
    # a leader that exits on SIGINT, with a child that ignores it (as Airflow's idle scheduler does)
    code = (
        "import signal, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    stop(leader, timeout=5)
    assert leader.returncode is not None
    assert wait_until(lambda: not alive(child), 10), "the component that outlived standalone was killed"


def test_stopping_airflow_stops_the_apps_it_kept_running_or_hands_them_over(tmp_path, monkeypatch):
    from devkit.pipelines import write_pipeline
    from onceflow.airflow.hooks import OnceflowHook
    from onceflow.local.airflow import stop_streams
    from tests.unit.airflow.test_hooks import HOLDER

    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    file = write_pipeline(tmp_path / "pipelines", "localhost:1", "t", name="kept")
    monkeypatch.setenv("ONCEFLOW_PIPELINES_DIR", str(file.parent))
    hook = OnceflowHook(file)
    app = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(hook.pipeline.state_path), "stop"], stdout=subprocess.PIPE
    )
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == b"holding"
        said: list[str] = []
        assert stop_streams(log=said.append) == []  # nobody wants it: not Airflow's app, left alone
        hook.wanted.want(600, by="kept_stream/r1")
        assert stop_streams(keep=True, log=said.append) == ["kept"] and app.poll() is None
        assert "runs on, wanted until" in said[-1]
        assert stop_streams(log=said.append) == ["kept"]
        assert app.wait(30) is not None and hook.wanted.current() is None
        assert any("stopped the app" in line for line in said), said
    finally:
        app.kill()
        app.wait()


# `make airflow` with its Airflow replaced by a sleeper (the stop is the point, not Airflow)
FAKE_LAUNCHER = (
    "import sys\n"
    "import onceflow.local.airflow as s\n"
    "s.airflow_command = lambda: [sys.executable, '-c', 'import time; time.sleep(120)']\n"
    "s.wait_ready = lambda port, home, proc, timeout=300: 'pw'\n"
    "sys.exit(s.main(['--no-broker', '--home', sys.argv[1]]))\n"
)


def test_a_sigterm_is_a_clean_stop_and_exits_0(tmp_path, monkeypatch):
    """SIGTERM asks `make airflow` to stop as Ctrl-C does: it stops Airflow and the apps, then
    exits 0, not 143 (a supervisor read the clean stop as a failure)."""
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ONCEFLOW_PIPELINES_DIR", str(tmp_path / "none"))
    launcher = subprocess.Popen(
        [sys.executable, "-c", FAKE_LAUNCHER, str(tmp_path / "af")], stdout=subprocess.PIPE, text=True
    )
    assert launcher.stdout is not None
    next(line for line in launcher.stdout if "is ready" in line)
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(60) == 0
