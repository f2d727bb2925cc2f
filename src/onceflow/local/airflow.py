"""`make airflow`: `airflow standalone` for this checkout, sized for a small machine.

Starts the embedded Kafka broker (unless ONCEFLOW_KAFKA_BOOTSTRAP points elsewhere),
then `airflow standalone` (scheduler, dag-processor, api-server, triggerer; SQLite,
LocalExecutor, SimpleAuthManager) with the project's dags/ and plugins/, the
`spark_default` connection defined (a missing one silently means `yarn`) and
parallelism for 2 cores; waits until the API answers and prints the URL and the
login. Ctrl-C stops every component.

    python -m onceflow.local.airflow [--port 8080] [--home DIR] [--no-broker] [--keep-streams]

The streaming apps the stream DAGs keep running outlive their tasks (onceflow.airflow.stream).
When Airflow stops, so do they, each at a batch boundary, and the output says which; with
--keep-streams they are handed over instead: each runs on until its lease ends (a restarted
Airflow's next stream run adopts it), and the output says until when.

Exit code: 0 when it was asked to stop (Ctrl-C, SIGTERM) and every app it stopped stopped at a
batch boundary; 1 when an app could not be stopped; else `airflow standalone`'s own code, when
that exited by itself.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from onceflow import processes
from onceflow.paths import jars_dir, project_root, state_dir
from onceflow.polling import wait_for


def standalone_env(home: Path, port: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment `airflow standalone` runs with (also used by the browser e2e test)."""
    env = dict(os.environ if base is None else base)
    root = project_root()
    venv_bin = str(Path(sys.executable).parent)
    master = env.get("ONCEFLOW_SPARK_MASTER", "local[*]")
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(root / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # 2 cores: a stream window, a watcher or two and an audit at a time
            "AIRFLOW__CORE__PARALLELISM": env.get("AIRFLOW__CORE__PARALLELISM", "4"),
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": env.get("AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG", "3"),
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW_CONN_SPARK_DEFAULT": env.get("AIRFLOW_CONN_SPARK_DEFAULT")
            or json.dumps({"conn_type": "spark", "host": master, "extra": {"deploy-mode": "client"}}),
            "ONCEFLOW_HOME": str(state_dir()),
            "ONCEFLOW_JARS": str(jars_dir()),
            "ONCEFLOW_PROJECT": str(root),
            # standalone starts its components by calling `airflow` from PATH; spark-submit is here too
            "PATH": os.pathsep.join([venv_bin, env.get("PATH", "")]),
        }
    )
    return env


def password_file(home: Path) -> Path:
    return home / "simple_auth_manager_passwords.json.generated"


def wait_ready(port: int, home: Path, proc: subprocess.Popen, timeout: float = 300) -> str:
    """Block until the API server answers and the admin password exists; returns the password."""
    url = f"http://localhost:{port}/api/v2/version"
    last = ["no answer yet"]

    def password() -> str | None:
        if proc.poll() is not None:
            raise RuntimeError(f"airflow standalone exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200 and password_file(home).exists():
                    return json.loads(password_file(home).read_text())["admin"]
        except Exception as exc:  # not up yet
            last[0] = str(exc)
        return None

    return wait_for(
        password,
        timeout,
        lambda: TimeoutError(
            f"Airflow did not answer on {url} within {timeout:.0f}s (last: {last[0]}). "
            f"Fix: look at the standalone output above; is port {port} free?"
        ),
        interval=2,
    )


def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGINT is how standalone stops its components; then the process group, by its id.
    Airflow 3.3's idle scheduler (with its LocalExecutor workers) and triggerer outlive both
    the SIGINT and standalone's SIGTERM, long after the other components are gone (docs/testing.md,
    "Figures the code's comments rest on"). So 10 s, not longer, before the group is killed: a
    longer wait changes nothing but the time Ctrl-C takes."""
    processes.stop(proc, grace=timeout, first=signal.SIGINT, group=True)  # the group: components that outlive it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onceflow.local.airflow", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("ONCEFLOW_AIRFLOW_PORT", "8080")))
    parser.add_argument("--home", type=Path, default=None, help="AIRFLOW_HOME (default <state>/airflow)")
    parser.add_argument("--no-broker", action="store_true", help="do not start the embedded Kafka broker")
    parser.add_argument(
        "--keep-streams",
        action="store_true",
        help="on exit, leave the streaming apps running until their leases end (for a restart)",
    )
    args = parser.parse_args(argv)
    home = (args.home or state_dir() / "airflow").resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not args.no_broker and not os.environ.get("ONCEFLOW_KAFKA_BOOTSTRAP"):
        from onceflow.local.broker import LocalBroker

        status = LocalBroker().start(log=lambda m: print(f"onceflow: {m}", flush=True))
        os.environ["ONCEFLOW_KAFKA_BOOTSTRAP"] = status.bootstrap
    env = standalone_env(home, args.port)
    # SIGTERM is a request to stop, as Ctrl-C is: the same clean stop, the same exit code
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(f"onceflow: starting airflow standalone (AIRFLOW_HOME={home}, port {args.port})", flush=True)
    proc = subprocess.Popen(airflow_command(), env=env, start_new_session=True)
    code = 0
    try:
        password = wait_ready(args.port, home, proc)
        print(
            f"\nonceflow: Airflow is ready at http://localhost:{args.port}\n"
            f"onceflow: log in as admin / {password} (kept in {password_file(home)})\n"
            f"onceflow: the onceflow page: http://localhost:{args.port}/plugin/onceflow\n"
            f"onceflow: DAGs start paused; unpause {_stream_dags()} to stream. Ctrl-C stops Airflow.\n",
            flush=True,
        )
        code = proc.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second request must not cut the stops short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop(proc)
        unstopped: list[str] = []
        stop_streams(keep=args.keep_streams, failed=unstopped)
    return 1 if unstopped else code


def airflow_command() -> list[str]:
    """`airflow standalone` from this environment's bin/."""
    return [str(Path(sys.executable).parent / "airflow"), "standalone"]


def stop_streams(
    keep: bool = False, log=lambda m: print(f"onceflow: {m}", flush=True), failed: list[str] | None = None
) -> list[str]:
    """The apps the stream DAGs keep running (those with a lease): stop each at a batch boundary,
    or with `keep` leave it to its lease. Says which, and returns the pipelines' names; those whose
    app could not be stopped (or needed SIGKILL) are appended to `failed`."""
    from onceflow import config
    from onceflow.airflow.hooks import OnceflowHook
    from onceflow.state.status import now_iso

    names = []
    for file in sorted(config.pipelines_dir().glob("*.yaml")):
        try:
            hook = OnceflowHook(file)
            lease, holder = hook.wanted.current(), hook.running_job()
        except Exception:  # an invalid pipeline file has no app
            continue
        if lease is None:
            continue
        names.append(hook.name)
        if holder is None:
            hook.wanted.clear()
            continue
        if keep:
            until = lease.as_dict()["until"]
            log(f"{hook.name}: the app (pid {holder.get('pid')}) runs on, wanted until epoch {until:.0f}; "
                "the next stream run adopts it, or it stops by itself then")  # fmt: skip
            continue
        hook.wanted.clear()  # nobody wants it: it stops at its next look, and the verdict is `stopped`
        killed: list[bool] = []
        try:
            hook.stop_running(log=log, on_kill=functools.partial(killed.append, True))
        except RuntimeError as exc:
            log(f"{hook.name}: could not stop the app: {exc}")
            killed.append(True)
        else:
            how = "killed the app (SIGKILL)" if killed else "stopped the app"
            log(f"{hook.name}: {how} (pid {holder.get('pid')}) at {now_iso()}")
        if killed and failed is not None:
            failed.append(hook.name)
    return names


def _stream_dags() -> str:
    """The real `<name>_stream` DAG ids of the pipelines folder, for the hint printed at start."""
    from onceflow import config
    from onceflow.airflow.dag_kinds import DagKind, dag_id

    names = []
    for file in sorted(config.pipelines_dir().glob("*.yaml")):
        try:
            names.append(dag_id(config.load(file).name, DagKind.STREAM))
        except Exception:  # an invalid file shows as its own DAG in the UI
            continue
    return " or ".join(names) or "a pipeline's _stream DAG"


if __name__ == "__main__":
    sys.exit(main())
