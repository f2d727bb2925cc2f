"""The jobs run distributed, not only in local[*]: a real Spark standalone cluster.

A master and one worker are started from the pyspark install (what the docker
stack's spark-master and spark-worker services run), checked with the stack's
own healthchecks, and the real ingest app runs against them with the master
given the way the stack gives it: ONCEFLOW_SPARK_MASTER, read by
pipelines/payments.yaml — the same file and code path as the local default.
The app runs in a subprocess: this test session already holds a local[2]
SparkContext, and one process can only have one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pyspark
import pytest
import yaml

from devkit.driver import SHORT_LIVED_DRIVER
from devkit.kafka import consume_all
from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow import config, processes
from onceflow.generate.producer import produce
from onceflow.kafka.admin import watermarks
from onceflow.ledger import read_ledger
from onceflow.local.service import free_port
from onceflow.sinks import table_paths
from tests.exactly_once import assert_exactly_once, table_rows

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

ROOT = Path(__file__).resolve().parents[2]
PIPELINE_FILE = ROOT / "pipelines" / "payments.yaml"
SPARK_HOME = Path(pyspark.__file__).parent
HEALTHCHECK = ROOT / "docker" / "healthcheck.py"
START_TIMEOUT = 240  # JVM start-ups on 2 busy cores
APP_TIMEOUT = 900


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def stack_master_opts() -> str:
    """SPARK_MASTER_OPTS of the stack's spark-master service, with the documented defaults."""
    from tests.unit.test_docker_stack import ENV_EXAMPLE, interpolate, read_env_file

    raw = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    return interpolate(raw["services"]["spark-master"]["environment"]["SPARK_MASTER_OPTS"], read_env_file(ENV_EXAMPLE))


@dataclass
class Standalone:
    """A Spark standalone master + worker on this machine."""

    folder: Path
    port: int = field(default_factory=free_port)
    master_ui: int = field(default_factory=free_port)
    worker_ui: int = field(default_factory=free_port)
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def master_json(self) -> str:
        return f"http://127.0.0.1:{self.master_ui}/json/"

    @property
    def worker_json(self) -> str:
        return f"http://127.0.0.1:{self.worker_ui}/json/"

    @property
    def work_dir(self) -> Path:
        return self.folder / "work"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_DAEMON_MEMORY": "512m",
            "SPARK_LOG_DIR": str(self.folder),
            "SPARK_WORKER_DIR": str(self.work_dir),
            "SPARK_MASTER_OPTS": stack_master_opts(),
        }

    def _start(self, name: str, *args: str) -> None:
        with open(self.folder / f"{name}.log", "wb") as log:  # the child writes through its own copy
            self.procs.append(
                subprocess.Popen(
                    [str(SPARK_HOME / "bin" / "spark-class"), *args],
                    env=self.env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.folder / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"

    def bound_port(self, name: str, pattern: str) -> int:
        """The port a daemon really bound: another process may take a free port before
        Spark binds it, and Spark then moves on to the next one (and logs it)."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            match = re.search(pattern, self.log_tail(name, 10_000))
            if match:
                return int(match.group(1))
            for proc in self.procs:
                assert proc.poll() is None, (
                    f"a Spark daemon exited ({cast(list, proc.args)[1]}):\n{self.log_tail(name)}"
                )
            time.sleep(0.25)  # poll: the daemon logs its port within seconds
        raise AssertionError(f"{name} did not log /{pattern}/ within {START_TIMEOUT}s:\n{self.log_tail(name)}")

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.master_ui),
        )
        self.port = self.bound_port("master", r"Starting Spark master at spark://127\.0\.0\.1:(\d+)")
        self.master_ui = self.bound_port("master", r"service 'MasterUI' on port (\d+)")
        self.wait_healthy("spark-master", self.master_json)
        self._start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--host",
            "127.0.0.1",
            "--cores",
            "2",
            "--memory",
            "1g",
            "--webui-port",
            str(self.worker_ui),
            "--work-dir",
            str(self.work_dir),
        )
        self.worker_ui = self.bound_port("worker", r"service 'WorkerUI' on port (\d+)")
        self.wait_healthy("spark-worker", self.worker_json)

    def wait_healthy(self, service: str, url: str) -> None:
        """Run the docker stack's healthcheck of `service` (docker/compose.yaml), pointed at this cluster."""
        test = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"][service]["healthcheck"][
            "test"
        ]
        assert test[:2] == ["CMD", "onceflow-healthcheck"], test
        local_url = test[2].replace("http://localhost:8080/json/", url).replace("http://localhost:8081/json/", url)
        assert local_url == url, f"{service}'s healthcheck asks {test[2]}, not a Spark UI's /json/"
        command = [sys.executable, str(HEALTHCHECK), local_url, *test[3:]]
        deadline, last = time.monotonic() + START_TIMEOUT, None
        while time.monotonic() < deadline:
            for proc in self.procs:
                assert proc.poll() is None, (
                    f"a Spark daemon exited ({cast(list, proc.args)[1]}):\n{self.log_tail(service.split('-')[1])}"
                )
            last = subprocess.run(command, capture_output=True, text=True)
            if last.returncode == 0:
                return
            time.sleep(0.5)  # poll: each look runs the healthcheck script
        raise AssertionError(
            f"{service} not healthy within {START_TIMEOUT}s: {last.stderr.strip() if last else ''}\n"
            f"{self.log_tail(service.split('-')[1])}"
        )

    def stop(self) -> None:
        for proc in reversed(self.procs):  # worker first, then master
            processes.stop(proc, grace=60, group=True)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    cluster = Standalone(tmp_path_factory.mktemp("spark-standalone"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def stack_env(home: Path, bootstrap: str, master: str) -> dict[str, str]:
    """What the docker stack sets for the pipelines (docker/compose.yaml x-onceflow-env)."""
    return {
        "ONCEFLOW_HOME": str(home),
        "ONCEFLOW_KAFKA_BOOTSTRAP": bootstrap,
        "ONCEFLOW_SPARK_MASTER": master,
        "ONCEFLOW_DRIVER_MEMORY": "1g",
    }


def finished_app(cluster: Standalone, name: str, known: set[str]) -> dict:
    """The app `name` the master lists as completed, other than the `known` ids (bounded wait)."""
    deadline = time.monotonic() + 60
    while True:  # the master files the app under completedapps once the driver has unregistered
        master = get_json(cluster.master_json)
        apps = [a for a in master["completedapps"] if a["name"] == name and a["id"] not in known]
        if apps or time.monotonic() > deadline:
            break
        time.sleep(0.25)  # poll: the master files the app once its driver unregisters
    assert len(apps) == 1, f"the master has no new finished {name} app within 60s: {master}"
    return apps[0]


def assert_ran_on_the_worker(cluster: Standalone, app_id: str) -> int:
    """An executor of the app ran on our worker, and its own log shows it ran tasks;
    it got the stack's cores per app (SPARK_APP_CORES), not the whole 2-core worker."""
    worker = get_json(cluster.worker_json)
    executors = [e for e in worker["executors"] + worker["finishedexecutors"] if e["appid"] == app_id]
    assert executors, f"no executor of {app_id} on the worker: {worker}"
    logs = [log.read_text(errors="replace") for log in (cluster.work_dir / app_id).glob("*/stderr")]
    assert logs and any("Running task" in log for log in logs), f"no task ran in the executor of {app_id}"
    cores = re.findall(r"-Dspark\.deploy\.defaultCores=(\d+)", stack_master_opts())[0]
    # the worker writes the executor's launch command at the top of its stderr: "java" … "--cores" "1" …
    launched = [re.search(r'"--cores" "(\d+)"', log) for log in logs]
    assert [m.group(1) for m in launched if m] == [cores] * len(logs), (
        f"executors of {app_id} should have {cores} core(s) (spark.deploy.defaultCores): "
        f"{[log.splitlines()[:3] for log in logs]}"
    )
    return len(executors)


def assert_delivered_once(pipeline: config.Pipeline, bootstrap: str, produced) -> int:
    """Per partition, bronze + quarantine rows == Kafka's committed records; exactly once."""
    paths = table_paths(pipeline)
    topic = pipeline.source.topic
    committed = Counter(p for p, _, _, _ in consume_all(bootstrap, topic, "read_committed"))
    landed = Counter(
        r["_partition"] for name in ("bronze", "quarantine") for r in table_rows(paths[name], ["_partition"])
    )
    assert landed == committed, f"rows per partition {dict(landed)} != committed records {dict(committed)}"
    assert_exactly_once(pipeline, bootstrap, produced=produced)
    ends = {p: high for p, (low, high) in watermarks(bootstrap, topic).items()}
    assert read_ledger(paths["bronze"]).committed_offsets() == ends
    return sum(committed.values())


def known_apps(cluster: Standalone) -> set[str]:
    master = get_json(cluster.master_json)
    return {a["id"] for a in master["completedapps"] + master["activeapps"]}


def test_ingest_runs_on_a_standalone_cluster_through_the_stack_settings(broker, standalone, tmp_path, monkeypatch):
    topic = config.load(PIPELINE_FILE, env={}).source.topic
    summary = produce(
        broker.bootstrap,
        topic,
        3000,
        schema=PAYMENTS_SCHEMA,
        partitions=4,
        seed=88,
        abort_ratio=0.1,
        malformed_ratio=0.03,
    )
    assert summary.aborted_transactions > 0 and summary.count("committed_malformed") > 0

    # the stack's mechanism: addresses in the environment, the pipeline file unchanged
    env = stack_env(tmp_path / "home", broker.bootstrap, standalone.url)
    pipeline = config.load(PIPELINE_FILE, env=env)
    assert pipeline.spark_master == standalone.url and pipeline.source.bootstrap_servers == broker.bootstrap
    before = known_apps(standalone)

    started = time.monotonic()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "onceflow.cli",
                "ingest",
                "--pipeline",
                str(PIPELINE_FILE),
                "--mode",
                "available-now",
                "--json",
            ],
            env={**os.environ, **env, **SHORT_LIVED_DRIVER, "PYSPARK_PYTHON": sys.executable},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=APP_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"`onceflow ingest` on {standalone.url} did not finish within {APP_TIMEOUT}s:\n"
            f"{(exc.stderr or b'')[-3000:]!r}"
        ) from None
    seconds = time.monotonic() - started
    assert proc.returncode == 0, f"`onceflow ingest` failed on {standalone.url}:\n{proc.stderr[-4000:]}"
    result = json.loads(proc.stdout)
    assert result["status"] == "finished", result

    app = finished_app(standalone, f"onceflow-ingest-{pipeline.name}", before)
    executors = assert_ran_on_the_worker(standalone, app["id"])
    monkeypatch.setenv("ONCEFLOW_HOME", env["ONCEFLOW_HOME"])
    records = assert_delivered_once(pipeline, broker.bootstrap, [summary])
    assert result["input_rows"] == records
    print(
        f"\nonceflow ingest on {standalone.url}: {records} committed records in {seconds:.1f}s "
        f"(app {app['id']}, {executors} executor(s))"
    )


def test_airflow_spark_submit_runs_the_app_on_the_cluster(broker, standalone, tmp_path, monkeypatch):
    """The stack's DAG tasks go through the provider's SparkSubmitHook, whose master is
    the spark_default connection (AIRFLOW_CONN_SPARK_DEFAULT in the stack): client mode,
    the driver here, executors on the worker, onceflow shipped as --py-files."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from onceflow.airflow.submit import submit_settings

    topic = config.load(PIPELINE_FILE, env={}).source.topic
    summary = produce(
        broker.bootstrap,
        topic,
        2000,
        schema=PAYMENTS_SCHEMA,
        partitions=4,
        seed=89,
        abort_ratio=0.1,
        malformed_ratio=0.03,
    )
    env = stack_env(tmp_path / "home", broker.bootstrap, standalone.url)
    for key, value in {**env, **SHORT_LIVED_DRIVER}.items():  # the driver runs one app and exits
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", standalone.url)
    pipeline = config.load(PIPELINE_FILE)

    hook = SparkSubmitHook(conn_id="spark_default")
    master = hook._connection["master"]
    assert master == standalone.url, "spark_default must resolve to the cluster, not yarn"
    settings = submit_settings("ingest", master)
    assert settings.py_files, "a cluster master must ship the onceflow package to the executors"
    before = known_apps(standalone)
    submit = SparkSubmitHook(
        conn_id="spark_default",
        conf=settings.conf,
        jars=settings.jars,
        py_files=settings.py_files,
        env_vars=settings.env_vars,
        name="onceflow-ingest",
        application_args=["--pipeline", str(PIPELINE_FILE), "--mode", "available-now"],
    )
    started = time.monotonic()
    submit.submit(settings.application)  # raises AirflowException on a non-zero exit
    seconds = time.monotonic() - started

    app = finished_app(standalone, f"onceflow-ingest-{pipeline.name}", before)
    executors = assert_ran_on_the_worker(standalone, app["id"])
    records = assert_delivered_once(pipeline, broker.bootstrap, [summary])
    print(
        f"\nspark-submit via spark_default on {standalone.url}: {records} committed records in {seconds:.1f}s "
        f"(app {app['id']}, {executors} executor(s))"
    )
