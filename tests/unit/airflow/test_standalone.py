"""`make airflow`: the environment standalone runs with, and its stop (the whole group, leftovers too)."""

from __future__ import annotations

import json
import subprocess
import sys

from onceflow.airflow.standalone import password_file, standalone_env, stop
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
