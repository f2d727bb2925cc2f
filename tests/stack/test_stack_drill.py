"""The stack drill: the docker dev stack (docker/compose.yaml) assembled as a team runs it — a
SASL_SSL broker with ACLs, tables and checkpoints on the `s3` service, Spark standalone, Airflow 3
on Postgres — streams payments through Airflow while events flow at a steady rate, and in turn
the Spark driver, the Spark worker, Kafka, the object store and the Airflow scheduler are killed
(SIGKILL) and restarted as compose restarts them. Then, read from the host with no code of the
stack's: every committed record (an independent read_committed consumer, as User:onceflow over
the published SASL_SSL listener) is in bronze or quarantine exactly once and the aggregates equal
a recomputation (delta-rs reading the store over its published port), payments_audit passes
through Airflow, and no secret of docker/.env is in any container's log, the task and app logs
or the reports. For each kill: the seconds to the next commit of bronze. Meanwhile payments_avro
goes through the stack's schema registry, which is killed between two producer runs: its batch DAG,
run after the kills beside the catch-up and the audit, succeeds and every record lands exactly
once, no real schema id forgotten. The drill reads Airflow's runs through its REST API (an Airflow
CLI call is seconds of CPU on the machine's two cores).

Runs with `make stack-test` (engine up, images built, torn down after): it starts 12
containers and takes minutes, so it is opt-in (ONCEFLOW_STACK_TEST=1) and skipped, saying why,
without an engine. The figures go to test-artifacts/stack-drill.json.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ["docker", "compose", "-f", str(ROOT / "docker" / "compose.yaml")]
ARTIFACTS = ROOT / "test-artifacts"
PRODUCER = "onceflow-drill-producer"
RATE, BURST = 40, 400  # events/s, and events per producer run (one transaction stream of 10 s)
STEADY_SECONDS = 10  # commits before each kill (after the last kill's recovery committed): ten triggers of 1 s
IN_FLIGHT_SECONDS = 3  # a Delta commit's PUT already sent when its driver is killed
COMMIT_TIMEOUT = 900  # a kill's recovery: the watcher's verdict, a recovery DAG, a new driver

pytestmark = [pytest.mark.stack]


def _engine_problem() -> str | None:
    """Why no stack can run here, or None."""
    if os.environ.get("ONCEFLOW_STACK_TEST") != "1":
        return (
            "the stack drill builds images and starts 12 containers (minutes): it runs with `make stack-test`, "
            "or set ONCEFLOW_STACK_TEST=1"
        )
    if not shutil.which("docker"):
        return "no docker client. Fix: docker/engine.sh (Debian 12) or install Docker Engine with compose v2"
    check = subprocess.run([str(ROOT / "docker" / "engine.sh"), "check"], capture_output=True, text=True)
    return None if check.returncode == 0 else f"no usable Docker engine: {check.stderr.strip()}"


def stack_env() -> dict[str, str]:
    """This process's environment without what docker/.env sets: the `pipeline` fixture points this
    process at the stack's published ports, and compose would let those win over docker/.env in the
    containers (docker/stack.sh's `dc` runs compose the same way)."""
    names = set(env_file()) if (ROOT / "docker" / ".env").exists() else set()
    return {k: v for k, v in os.environ.items() if k not in names}


def run(*cmd: str, check: bool = True, timeout: float = 600) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=stack_env())
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd[:6])} … exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return proc.stdout


def compose(*args: str, check: bool = True, timeout: float = 600) -> str:
    return run(*COMPOSE, *args, check=check, timeout=timeout)


def env_file() -> dict[str, str]:
    lines = (ROOT / "docker" / ".env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#") and "=" in line)


def wait(what: str, condition: Callable[[], object], timeout: float, interval: float = 2.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f}s"
        time.sleep(interval)


_TOKEN: dict[str, str] = {}


def api(method: str, path: str, body: dict | None = None) -> tuple[int, Any]:
    """Airflow's REST API at the api-server's published port, as the admin user (one JWT from
    /auth/token, kept): the drill polls DAG runs through it, where each Airflow CLI call is a
    process in the api-server's container costing seconds of the machine's two cores."""
    if not _TOKEN:  # docker/.env read once, with the login
        env = env_file()
        _TOKEN["base"] = f"http://127.0.0.1:{env['AIRFLOW_UI_PORT']}"
        login = {"username": env["AIRFLOW_ADMIN_USER"], "password": env["AIRFLOW_ADMIN_PASSWORD"]}
        status, answer = _http("POST", f"{_TOKEN['base']}/auth/token", login)
        assert status in (200, 201), f"Airflow's /auth/token refused the admin login: {status} {answer}"
        _TOKEN["access_token"] = answer["access_token"]
    return _http(method, f"{_TOKEN['base']}{path}", body, _TOKEN["access_token"])


def _http(method: str, url: str, body: dict | None = None, token: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def parsed(dag: str) -> bool:
    """Whether the dag-processor has parsed the DAG: the services are healthy before it has read the
    DAG folder, and Airflow refuses to unpause or trigger a DAG it does not know yet."""
    return api("GET", f"/api/v2/dags/{dag}")[0] == 200


def set_paused(dag: str, paused: bool) -> None:
    status, answer = api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": paused})
    assert status == 200, f"{'pausing' if paused else 'unpausing'} {dag}: {status} {answer}"


def trigger(dag: str, run_id: str) -> None:
    """Unpause `dag` and trigger a run `run_id`, as the UI's trigger button does."""
    set_paused(dag, False)
    status, answer = api("POST", f"/api/v2/dags/{dag}/dagRuns", {"dag_run_id": run_id, "logical_date": None})
    assert status in (200, 201), f"triggering {dag}: {status} {answer}"


def finished(dag: str, run_id: str) -> str | None:
    """The run's state once it has ended (success or failed), else None."""
    status, answer = api("GET", f"/api/v2/dags/{dag}/dagRuns/{run_id}")
    state = answer.get("state") if status == 200 and isinstance(answer, dict) else None
    return state if state in ("success", "failed") else None


def triggered_run(dag: str, run_id: str) -> str:
    """Trigger a run `run_id` of `dag` and wait (up to 30 min) until it ends; its state."""
    trigger(dag, run_id)
    return str(wait(f"{dag} to finish", functools.partial(finished, dag, run_id), 1800, 5))


def container_of(service: str) -> str:
    return compose("ps", "-a", "-q", service).strip()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    problem = _engine_problem()
    if problem:
        pytest.skip(problem)
    timings: dict[str, float] = {}
    start = time.monotonic()
    subprocess.run([str(ROOT / "docker" / "stack.sh"), "up"], check=True)
    timings["stack up (build warm + start to healthy)"] = round(time.monotonic() - start, 1)
    env = env_file()
    ca = tmp_path_factory.mktemp("kafka-ca") / "ca.pem"
    compose("cp", "kafka:/data/kafka-ca/ca.pem", str(ca))
    yield {"env": env, "ca": ca, "timings": timings}
    compose("stop", "-t", "30", check=False)


@pytest.fixture(scope="module")
def pipeline(stack, monkeypatch_module):
    """payments as the host reaches the stack: the published SASL_SSL listener as User:onceflow,
    the store's published port; the same file the stack runs."""
    from onceflow import config

    env = stack["env"]
    host_env = {
        "ONCEFLOW_KAFKA_BOOTSTRAP": f"localhost:{env['KAFKA_HOST_PORT']}",
        "ONCEFLOW_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "ONCEFLOW_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "ONCEFLOW_KAFKA_USERNAME": "onceflow",
        "ONCEFLOW_KAFKA_PASSWORD": env["KAFKA_ONCEFLOW_PASSWORD"],
        "ONCEFLOW_KAFKA_CA": str(stack["ca"]),
        "ONCEFLOW_DATA_ROOT": env["ONCEFLOW_DATA_ROOT"],
        "AWS_ENDPOINT_URL": f"http://localhost:{env['S3_HOST_PORT']}",
        "AWS_REGION": env["AWS_REGION"],
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
    }
    for key, value in host_env.items():
        monkeypatch_module.setenv(key, value)
    return config.load(ROOT / "pipelines" / "payments.yaml")


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def bronze_version(pipeline) -> int:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from onceflow.sinks import table_paths

    try:
        return DeltaTable(table_paths(pipeline)["bronze"]).version()
    except (TableNotFoundError, OSError, Exception):  # the store may be down mid-kill
        return -1


def start_producer() -> None:
    """User:producer writes at a steady RATE: bounded runs of BURST events, one after the other, so
    that stopping it (a file) ends with every transaction closed."""
    loop = (
        "rm -f /tmp/stop; while [ ! -f /tmp/stop ]; do onceflow produce --pipeline pipelines/payments.yaml "
        f"--kafka-connection kafka_producer --count {BURST} --rate {RATE} --abort-ratio 0.05 --malformed-ratio 0.01 "
        ">/tmp/produce.log 2>&1 || { cat /tmp/produce.log >>/tmp/failed.log; sleep 2; }; done"
    )
    run("docker", "rm", "-f", PRODUCER, check=False)
    compose("run", "-d", "--name", PRODUCER, "onceflow", "sh", "-c", loop)


def producer_failures() -> str:
    """What the producer's failed runs said (empty when none failed)."""
    return run("docker", "exec", PRODUCER, "sh", "-c", "tail -n 20 /tmp/failed.log 2>/dev/null", check=False)


def stop_producer() -> None:
    run("docker", "exec", PRODUCER, "touch", "/tmp/stop", check=False)
    run("docker", "wait", PRODUCER, check=False, timeout=120)
    run("docker", "rm", "-f", PRODUCER, check=False)


def kill_driver() -> None:
    """SIGKILL the streaming app's driver (spark-submit's JVM in the scheduler's container, where
    LocalExecutor's task launched it): the pid in its run.json."""
    scheduler = container_of("airflow-scheduler")
    pid = run(
        "docker",
        "exec",
        scheduler,
        "python",
        "-c",
        "import json; print(json.load(open('/data/onceflow/pipelines/payments/run.json'))['pid'])",
    ).strip()
    run("docker", "exec", scheduler, "kill", "-9", pid)


def kill_container(service: str) -> Callable[[], None]:
    def kill() -> None:
        run("docker", "kill", "--signal", "KILL", container_of(service))

    return kill


def restart(service: str) -> None:
    """As compose restarts it: `docker compose start` of the killed container (a `docker kill` is a
    manual stop, which restart policies leave alone), then wait until compose reports it healthy."""
    compose("start", service, check=False)
    compose("up", "-d", "--no-build", "--no-recreate", "--wait", "--wait-timeout", "600", timeout=700)


def newer_than(pipeline, version: int) -> Callable[[], int]:
    """A condition: bronze's version once it is past `version` (0 until then)."""

    def newer() -> int:
        now = bronze_version(pipeline)
        return now if now > version else 0

    return newer


def test_stack_drill_kills_every_container_and_keeps_exactly_once(stack, pipeline, monkeypatch_module):
    from onceflow.kafka.client import source_client
    from tests.exactly_once import assert_exactly_once

    figures: dict = {"timings": stack["timings"], "kills": []}
    for dag in ("payments_stream", "payments_audit", "payments_avro_batch"):
        wait(f"the dag-processor to parse {dag}", functools.partial(parsed, dag), 300, 5)
    set_paused("payments_stream", False)
    start_producer()
    try:
        first, start_version = time.monotonic(), bronze_version(pipeline)

        def produced_and_committed() -> int:  # of this drill's events (the volumes may hold an earlier run's)
            failures = producer_failures()
            assert not failures, f"the producer fails:\n{failures}"
            return newer_than(pipeline, start_version)()

        wait("a first commit of bronze", produced_and_committed, COMMIT_TIMEOUT, 5)
        steady_since = time.monotonic()
        figures["seconds to the first commit"] = round(steady_since - first, 1)
        # while payments streams: Avro through the stack's registry, which is killed between two
        # producer runs (its batch runs after the kills, beside the payments catch-up and audit)
        avro = avro_across_a_registry_kill(stack["env"], monkeypatch_module, figures)
        kills = [
            ("the Spark driver (in airflow-scheduler)", kill_driver, None),
            ("spark-worker", kill_container("spark-worker"), "spark-worker"),
            ("kafka", kill_container("kafka"), "kafka"),
            ("s3 (the object store)", kill_container("s3"), "s3"),
            ("airflow-scheduler", kill_container("airflow-scheduler"), "airflow-scheduler"),
        ]
        for what, kill, service in kills:
            time.sleep(max(0.0, STEADY_SECONDS - (time.monotonic() - steady_since)))
            before = bronze_version(pipeline)
            killed = time.monotonic()
            kill()
            # a commit the killed driver had already sent to the store lands in these seconds; the
            # figure is for the first commit made after the kill (with the store down this reads -1)
            time.sleep(IN_FLIGHT_SECONDS)
            before = max(before, bronze_version(pipeline))
            if service:
                restart(service)
            restarted = round(time.monotonic() - killed, 1)
            version = wait(f"a commit of bronze after killing {what}", newer_than(pipeline, before), COMMIT_TIMEOUT, 1)
            steady_since = time.monotonic()
            kill_figure = {
                "killed": what,
                "healthy again (s)": restarted,
                "seconds to the next commit": round(steady_since - killed, 1),
                "bronze version": version,
            }
            figures["kills"].append(kill_figure)
            print(f"drill: {kill_figure}")
    finally:
        stop_producer()

    # the Avro batch through Airflow, on the cluster's other core while payments catches up
    avro_started, avro_run = time.monotonic(), f"drill-avro-{int(time.time())}"
    trigger("payments_avro_batch", avro_run)

    # everything committed lands: the stream catches up, then the checks
    phase = time.monotonic()
    cluster = source_client(pipeline)
    deadline = time.monotonic() + COMMIT_TIMEOUT
    while True:
        try:
            counts = assert_exactly_once(pipeline, cluster)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(5)
    figures["records"] = counts
    figures["timings"]["catch up and the exactly-once read (s)"] = round(time.monotonic() - phase, 1)
    print(f"drill: exactly once: {counts}")

    # the audit, through Airflow
    phase = time.monotonic()
    state = triggered_run("payments_audit", f"drill-{int(time.time())}")
    figures["timings"]["payments_audit through Airflow (s)"] = round(time.monotonic() - phase, 1)
    set_paused("payments_stream", True)
    figures["audit"] = state
    assert state == "success", "payments_audit failed: see its task logs in the Airflow UI"
    phase = time.monotonic()
    figures["pages"] = pages_in_a_browser(stack["env"])
    figures["timings"]["pages in Chromium (s)"] = round(time.monotonic() - phase, 1)

    state = str(
        wait("payments_avro_batch to finish", functools.partial(finished, "payments_avro_batch", avro_run), 1800, 5)
    )
    set_paused("payments_avro_batch", True)
    figures["timings"]["payments_avro_batch through Airflow, from after the kills (s)"] = round(
        time.monotonic() - avro_started, 1
    )
    assert state == "success", "payments_avro_batch failed: see its task logs in the Airflow UI"
    figures["avro"] = avro_landed_exactly_once(avro)

    # no secret anywhere it could leak to: container logs, task and app logs, the reports
    secrets = {
        k: v
        for k, v in stack["env"].items()
        if v and k.endswith(("_PASSWORD", "_SECRET", "_SECRET_KEY", "_SECRET_ACCESS_KEY", "_FERNET_KEY"))
    }
    phase = time.monotonic()
    found = secrets_in_logs_and_reports(secrets)
    figures["timings"]["secrets searched (s)"] = round(time.monotonic() - phase, 1)
    figures["secrets searched"] = sorted(secrets)
    figures["secrets found"] = found
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "stack-drill.json").write_text(json.dumps(figures, indent=2, default=str))
    print(json.dumps(figures, indent=2, default=str))
    assert not found, f"secrets found: {found}"


def avro_across_a_registry_kill(env: dict[str, str], monkeypatch_module, figures: dict):
    """payments_avro written through the stack's own registry by User:producer (two schema versions
    and malformed records), the registry killed (SIGKILL) and restarted as compose restarts it, then
    written again: the restarted registry still lists every version it had acknowledged (its H2
    file, written at each commit). The pipeline as the host reaches the registry."""
    from onceflow import config

    host_registry = f"http://localhost:{env['REGISTRY_HOST_PORT']}/apis/ccompat/v7"
    monkeypatch_module.setenv("ONCEFLOW_REGISTRY_URL", host_registry)
    avro = config.load(ROOT / "pipelines" / "payments_avro.yaml")
    produce = [
        "run", "--rm", "onceflow", "onceflow", "produce", "--pipeline", "pipelines/payments_avro.yaml",
        "--kafka-connection", "kafka_producer", "--count", "1500", "--abort-ratio", "0.05", "--malformed-ratio", "0.02",
    ]  # fmt: skip
    phase = time.monotonic()
    compose(*produce, timeout=300)
    versions_url = f"{host_registry}/subjects/{avro.source.topic}-value/versions"
    with urllib.request.urlopen(versions_url, timeout=10) as reply:
        versions = json.loads(reply.read())
    assert len(versions) >= 2, versions  # the first version and the evolved one (and the unsupported)
    kill_container("registry")()
    restart("registry")
    with urllib.request.urlopen(versions_url, timeout=10) as reply:
        assert json.loads(reply.read()) == versions, "the restarted registry forgot a version it had acknowledged"
    compose(*produce, timeout=300)
    figures["timings"]["avro produced, registry killed and restarted, produced (s)"] = round(
        time.monotonic() - phase, 1
    )
    return avro


def avro_landed_exactly_once(avro) -> dict:
    """Read from the host: every committed Avro record is in bronze or quarantine exactly once, and
    the only unknown schema id is the producer's deliberate one (no real id was forgotten)."""
    from deltalake import DeltaTable

    from onceflow.generate.avro_events import UNKNOWN_ID
    from onceflow.kafka.client import source_client
    from onceflow.registry import unframe
    from onceflow.sinks import table_paths
    from tests.exactly_once import assert_exactly_once

    counts = assert_exactly_once(avro, source_client(avro))
    rows = DeltaTable(table_paths(avro)["quarantine"]).to_pyarrow_table(columns=["reason", "_value"]).to_pylist()
    reasons = Counter(r["reason"] for r in rows)
    found = {"records": counts, "quarantine reasons": dict(sorted(reasons.items()))}
    print(f"drill: avro: {json.dumps(found)}")
    assert reasons, "the producer's malformed records must be quarantined"
    unknown = {unframe(bytes(r["_value"]))[0] for r in rows if r["reason"] == "avro_unknown_schema"}  # type: ignore[index]
    assert unknown <= {UNKNOWN_ID}, unknown
    return found


def pages_in_a_browser(env: dict[str, str]) -> dict[str, str]:
    """As a person sees it: headless Chromium logs in to the stack's Airflow UI (its published
    port), then the DAG list and the onceflow page, whose payments row shows a verdict and the
    audit that just passed. Screenshots in test-artifacts/stack/."""
    from tests.browser import CHROMIUM, Browser

    assert CHROMIUM, "chromium is not installed. Fix: apt-get install chromium (.ci/run does)"
    url = f"http://localhost:{env['AIRFLOW_UI_PORT']}"
    shots = ARTIFACTS / "stack"
    browser = Browser()
    try:
        browser.login_to_airflow(url, env["AIRFLOW_ADMIN_USER"], env["AIRFLOW_ADMIN_PASSWORD"])
        browser.goto(f"{url}/dags")
        browser.wait_for("document.body.innerText.includes('payments_stream')", "the DAG list")
        browser.screenshot(shots / "dag-list.png")
        browser.goto(f"{url}/plugin/onceflow")
        row = "document.querySelector('iframe').contentDocument.querySelector('tr[data-pipeline=payments]')"
        browser.wait_for(
            f"!!document.querySelector('iframe') && !!document.querySelector('iframe').contentDocument && !!{row}",
            "the onceflow page",
        )
        browser.wait_for(f"{row}.querySelector('td.audit.ok') !== null", "the payments row's passed audit", timeout=60)
        browser.settle(2)
        text = browser.js(f"{row}.innerText")
        browser.screenshot(shots / "onceflow-page.png")
    finally:
        browser.close()
    assert (shots / "onceflow-page.png").stat().st_size > 10_000
    return {"payments row": " ".join(text.split()), "screenshots": str(shots.relative_to(ROOT))}


def secrets_in_logs_and_reports(secrets: dict[str, str]) -> list[str]:
    """Where each secret's value appears: `docker logs` of every container of the stack, and the
    files of the airflow-logs, state (app logs, status) and reports volumes."""
    found = []
    for cid in compose("ps", "-a", "-q").split():
        name = run("docker", "inspect", "-f", "{{.Name}}", cid).strip()
        proc = subprocess.run(["docker", "logs", cid], capture_output=True, text=True, errors="replace")
        text = proc.stdout + proc.stderr
        found += [f"{key} in the log of {name}" for key, value in secrets.items() if value in text]
    scheduler = container_of("airflow-scheduler")
    for folder in ("/opt/airflow/logs", "/data/onceflow"):
        listing = subprocess.run(  # the patterns on stdin, not on a command line
            ["docker", "exec", "-i", scheduler, "grep", "-rlF", "-f", "-", folder],
            input="\n".join(secrets.values()) + "\n",
            capture_output=True,
            text=True,
        ).stdout
        found += [f"a secret in {path}" for path in listing.split()]
    return found
