"""Kills through the real scheduler: kill -9 a continuous pipeline's driver JVM under a real
`airflow standalone`, and time kill → first new commit; count the verdicts that were false.

A broker of its own; a payments-shaped pipeline (`airflow.window`, default 60 s) in a folder
given to Airflow as ONCEFLOW_PIPELINES_DIR; `python -m onceflow.local.airflow --no-broker`
on a free port (scheduler, triggerer, dag-processor, api-server; LocalExecutor, SQLite);
`<p>_stream` and `<p>_recover` unpaused through the REST API; a producer at a steady rate
(small transactions); a sampler, `onceflow checkpoint status --json --watch 1` (one process, a
report a line, each line stamped with the time it was read). After the first commit and a
healthy window, --kills times: `kill -9` of the driver JVM (the java SparkSubmit process that is
the parent of the Python driver in run.json), then the seconds to the first new commit (a new
file in the checkpoint's commits/ folder, stamped with its mtime), and the recovery's timeline
from the task instances (the watch's `dead`, route, trigger_recover, the recover run, its tasks,
the app's launch); then a healthy window before the next kill.

False verdicts are judged against what the harness knows on its own (its kill times, the
commit files): before the first commit, a problem verdict or `down`; between a kill and the next
commit, `healthy` or `lagging`; elsewhere, while a commit is at most 15 s old, dead, down,
failed, stalled, unknown, not_started, stopped (or broken, poisoned). A look is judged on the
span from its `checked_at` to the time its line was read: a look that spans a kill or a commit
is counted apart (`straddling`), never as false.

With --standby the pipeline sets `airflow.standby: true`: a warm standby driver waits beside the
app (onceflow.state.standby), each kill waits until one is ready, and the standby, not a recover run,
takes over (a recover run after such a kill is reported).

    .venv/bin/python benchmarks/airflow_kills.py [--kills 3] [--rate 100] [--window 60] [--standby] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from harness import emit

from onceflow.local.service import free_port

WAIT = 600  # seconds: bound on every wait (Airflow and a JVM start on 2 busy cores are slow)
FRESH_COMMIT = 15.0  # seconds: a commit this recent makes a `dead`/`stalled`/... look false
NAME = "bench_af"
# what each window makes false (docs/checkpoint-status.md's verdicts)
FALSE_IN = {
    "startup": {"down", "dead", "failed", "stalled", "broken", "poisoned"},
    "outage": {"healthy", "lagging"},
    "steady": {"dead", "down", "failed", "stalled", "unknown", "not_started", "stopped", "broken", "poisoned"},
}
RECOVER_TASKS = ("begin", "stop", "plan", "execute", "start", "wait_first_batch", "end")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def epoch(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() if iso else None


class Producer(threading.Thread):
    """`rate` events a second, transactional, in transactions of `txn_size`, until stopped (between
    two calls of a second's worth each, so no transaction is left open)."""

    def __init__(self, bootstrap: str, topic: str, rate: int, txn_size: int):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate, self.txn_size = bootstrap, topic, rate, txn_size
        self.halt = threading.Event()
        self.produced = 0
        self.error: Exception | None = None
        self.began = self.ended = 0.0

    def run(self) -> None:
        from devkit.pipelines import PAYMENTS_SCHEMA
        from onceflow.generate.producer import produce

        self.began, seed = time.time(), 0
        try:
            while not self.halt.is_set():
                produce(
                    self.bootstrap,
                    self.topic,
                    self.rate,
                    schema=PAYMENTS_SCHEMA,
                    partitions=2,
                    seed=seed,
                    rate=self.rate,
                    txn_size=self.txn_size,
                    malformed_ratio=0.02,
                    keep_records=False,
                )
                self.produced += self.rate
                seed += 1
        except Exception as exc:  # reported in the figures; a benchmark must not hang on it
            self.error = exc
        self.ended = time.time()


class Commits(threading.Thread):
    """Every file of the checkpoint's commits/ folder, with its mtime (Spark removes old ones: looked
    at every 0.2 s, so none is missed)."""

    def __init__(self, folder: Path):
        super().__init__(daemon=True)
        self.folder = folder
        self.seen: dict[str, float] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.2):
            try:
                names = [p for p in self.folder.iterdir() if p.name.isdigit()]
            except OSError:
                continue
            for p in names:
                if p.name not in self.seen:
                    try:
                        self.seen[p.name] = p.stat().st_mtime
                    except OSError:
                        continue

    def times(self) -> list[float]:
        return sorted(self.seen.values())

    def first_after(self, t: float) -> float | None:
        return next((c for c in self.times() if c > t), None)


class Sampler(threading.Thread):
    """`onceflow checkpoint status --json --watch 1` as one process; each report with the time its
    line was read."""

    def __init__(self, pipeline_file: Path, logs: Path):
        super().__init__(daemon=True)
        cmd = [sys.executable, "-m", "onceflow.cli", "checkpoint", "status", "--pipeline", str(pipeline_file), "--json"]
        help_text = subprocess.run([*cmd[:5], "--help"], capture_output=True, text=True).stdout
        if "--watch" in help_text:
            self.how = "onceflow checkpoint status --json --watch 1"
            cmd += ["--watch", "1"]
        else:  # this checkout's CLI has no --watch yet: the same report, a look a second, in one process
            self.how = "pipeline_health() a second in one process (this CLI has no --watch)"
            cmd = [sys.executable, __file__, "--watch-child", str(pipeline_file)]
        self.err = open(logs / "sampler.err", "ab")  # noqa: SIM115 -- the sampler's, closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.samples: list[dict] = []

    def run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            read = time.time()
            try:
                report = json.loads(line)
            except ValueError:
                continue
            self.samples.append(
                {
                    "checked": epoch(report.get("checked_at")) or read,
                    "read": read,
                    "verdict": report.get("verdict"),
                    "reasons": report.get("reasons") or [],
                }
            )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.err.close()


def watch_child(pipeline_file: str) -> int:
    """The sampler when the CLI has no --watch: a report a line, a look a second."""
    from onceflow.config import load_pipeline
    from onceflow.health import pipeline_health

    pipeline = load_pipeline(pipeline_file)
    while True:
        started = time.monotonic()
        sys.stdout.write(json.dumps(pipeline_health(pipeline).as_json(), separators=(",", ":")) + "\n")
        sys.stdout.flush()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))


class Airflow:
    """A real `airflow standalone` (onceflow's launcher) and its REST API."""

    def __init__(self, home: Path, env: dict[str, str], logs: Path):
        self.port = free_port()
        self.home = home
        self.out = open(logs / "airflow.log", "ab")  # noqa: SIM115 -- Airflow's output, closed in stop()
        cmd = ["-m", "onceflow.local.airflow", "--no-broker", "--port", str(self.port), "--home", str(home)]
        self.proc = subprocess.Popen(
            [sys.executable, *cmd],
            env=env,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.token: str | None = None

    def url(self, path: str) -> str:
        return f"http://localhost:{self.port}{path}"

    def wait_ready(self) -> None:
        from onceflow.local.airflow import password_file

        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"airflow standalone exited {self.proc.returncode}; see {self.out.name}")
            if password_file(self.home).exists():
                try:
                    password = json.loads(password_file(self.home).read_text())["admin"]
                    self.token = self._call(
                        "POST", "/auth/token", {"username": "admin", "password": password}, auth=False
                    )["access_token"]
                    return
                except (OSError, ValueError, KeyError, urllib.error.URLError):
                    pass
            time.sleep(2)
        raise TimeoutError(f"Airflow did not answer within {WAIT}s; see {self.out.name}")

    def _call(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> dict:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url(path), data=data, headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")

    def get(self, path: str) -> dict:
        return self._call("GET", path)

    def unpause(self, dag_id: str) -> None:
        deadline = time.monotonic() + WAIT
        while True:  # the DAG exists once the dag-processor parsed the file
            try:
                self._call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
                return
            except urllib.error.HTTPError as exc:
                if exc.code != 404 or time.monotonic() > deadline:
                    raise
            time.sleep(2)

    def runs(self, dag_id: str) -> list[dict]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=-run_after")["dag_runs"]

    def tasks(self, dag_id: str, run_id: str) -> dict[str, dict]:
        rows = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances")
        return {t["task_id"]: t for t in rows["task_instances"]}

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> dict | None:
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}"
            f"/taskInstances/{task_id}/xcomEntries/return_value?deserialize=true"
        )
        try:
            value = self.get(path).get("value")
        except urllib.error.HTTPError:
            return None
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        return value if isinstance(value, dict) else None

    def stop(self) -> None:
        """SIGINT: standalone stops its components and the apps its stream runs keep running."""
        from onceflow import processes

        processes.stop(self.proc, grace=90, first=signal.SIGINT, group=True)
        self.out.close()


def driver_jvm(pipeline) -> tuple[int, int]:
    """(the driver JVM's pid, the Python driver's pid in run.json): the JVM is the java SparkSubmit
    process the Python driver descends from (spark-submit's PythonRunner starts Python as its child)."""
    import psutil

    from onceflow.state.status import RunLock

    lock = RunLock(pipeline.state_path)
    holder = lock.holder() if lock.is_held() else None
    if not holder or not holder.get("pid"):
        raise RuntimeError("no app holds the run lock")
    py = psutil.Process(int(holder["pid"]))
    for parent in py.parents():
        cmd = " ".join(parent.cmdline())
        if "java" in parent.name() and "SparkSubmit" in cmd:
            return parent.pid, py.pid
    raise RuntimeError(f"no java SparkSubmit parent of the driver {py.pid}")


def wait(what: str, check, timeout: float = WAIT, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")


def recovery_timeline(af: Airflow, kill: float, commit: float | None) -> dict:
    """Seconds after the kill of each step the task instances and XComs record."""
    out: dict[str, Any] = {}

    def at(key: str, iso: str | None) -> None:
        t = epoch(iso)
        out[key] = round(t - kill, 2) if t is not None else None

    stream_id, recover_id = f"{NAME}_stream", f"{NAME}_recover"
    for run in af.runs(stream_id):
        tis = af.tasks(stream_id, run["dag_run_id"])
        trigger = tis.get("trigger_recover") or {}
        if (epoch(trigger.get("end_date")) or 0) > kill and trigger.get("state") == "success":
            watch = af.xcom(stream_id, run["dag_run_id"], "watch") or {}
            out["watch_verdict_time"] = round(watch["time"] - kill, 2) if watch.get("time") else None
            out["dead_verdict"] = watch.get("verdict")
            at("watch_task_end", tis["watch"].get("end_date"))
            if "route" in tis:  # the DAG before issue 48: a branch, then the trigger
                at("route_start", tis["route"].get("start_date"))
                at("route_end", tis["route"].get("end_date"))
            at("trigger_recover_start", trigger.get("start_date"))
            at("trigger_recover_end", trigger.get("end_date"))
            break
    runs = [r for r in af.runs(recover_id) if (epoch(r.get("run_after")) or 0) > kill - 1]
    if runs:
        run = min(runs, key=lambda r: epoch(r["run_after"]) or 0)
        at("recover_run_created", run.get("queued_at") or run.get("run_after"))
        at("recover_run_started", run.get("start_date"))
        tis = af.tasks(recover_id, run["dag_run_id"])
        for task in RECOVER_TASKS:
            at(f"{task}_start", (tis.get(task) or {}).get("start_date"))
            at(f"{task}_end", (tis.get(task) or {}).get("end_date"))
        start = af.xcom(recover_id, run["dag_run_id"], "start") or {}
        out["app_launched"] = round(start["since"] - kill, 2) if start.get("since") else None
        out["recover_run_id"] = run["dag_run_id"]
    out["first_commit"] = round(commit - kill, 2) if commit else None
    return out


def steady(pipeline, af: Airflow, commits: Commits, window: float, standby: bool = False) -> bool:
    """The app holds the run lock, no recovery is at work or queued, it committed within 5 s, and a
    stream run's watch has watched for 5 s and has 30 s of its window left: the kill is the watch's
    to see (one at a window's end is seen by the next run's `stream` task, which relaunches the app
    as for `down`, without a recovery: another path, timed apart)."""
    from onceflow.airflow.hooks import OnceflowHook

    hook = OnceflowHook(pipeline.file)
    if hook.running_job() is None or hook.recovery_in_progress():
        return False
    if standby:
        from onceflow.state.standby import Standby

        if Standby(pipeline.state_path).ready() is None:
            return False
    if any(r["state"] in ("queued", "running") for r in af.runs(f"{NAME}_recover")):
        return False
    times = commits.times()
    if not times or time.time() - times[-1] > 5:
        return False
    for run in af.runs(f"{NAME}_stream"):  # every running one: the queued ones wait at the guard
        if run["state"] != "running":
            continue
        watch = af.tasks(f"{NAME}_stream", run["dag_run_id"]).get("watch") or {}
        began = epoch(watch.get("start_date"))
        if watch.get("state") == "deferred" and began and 5 <= time.time() - began <= window - 30:
            return True
    return False


def kill_once(
    n: int, pipeline, af: Airflow, commits: Commits, kills: list[float], window: float, standby: bool = False
) -> dict:
    """kill -9 the driver JVM; wait for the first new commit and the recover run's end; the figures."""
    try:
        wait("a steady app, in a window", lambda: steady(pipeline, af, commits, window, standby), every=1)
        was_steady = True
    except TimeoutError:
        was_steady = False
    jvm, py = driver_jvm(pipeline)
    os.kill(jvm, signal.SIGKILL)
    kill = time.time()
    kills.append(kill)
    log(f"kill {n}: kill -9 the driver JVM {jvm} (Python driver {py})")
    try:
        py_gone = wait("the Python driver's exit", lambda: not _alive(py) and time.time(), timeout=120, every=0.1)
    except TimeoutError:
        py_gone = None
    commit = wait(f"a commit after kill {n}", lambda: commits.first_after(kill), timeout=WAIT, every=0.2)
    log(f"kill {n}: first new commit after {commit - kill:.1f}s")

    def recovered() -> dict | None:
        ended = ("success", "failed")
        runs = af.runs(f"{NAME}_recover")
        return next((r for r in runs if (epoch(r.get("run_after")) or 0) > kill - 1 and r["state"] in ended), None)

    try:  # with a standby none is expected: a short look for one that should not be
        rec = wait("the recover run's end", recovered, timeout=30 if standby else 240, every=2)
    except TimeoutError:  # relaunched by the next stream run (a kill at a window's end), or a recovery stuck
        rec = {"state": "none within 30 s (the standby took over)" if standby else "none within 240 s"}
    timeline = recovery_timeline(af, kill, commit)
    log(f"kill {n}: {json.dumps(timeline)}")
    return {
        "kill": n,
        "steady_before_the_kill": was_steady,
        "seconds": round(commit - kill, 2),
        "python_driver_exited_after": round(py_gone - kill, 2) if py_gone else None,
        "recover_run_state": rec["state"],
        "load_average_1m": round(os.getloadavg()[0], 2),
        "timeline": timeline,
    }


def unprompted_recoveries(af: Airflow, kills: list[float]) -> list[dict]:
    """Recover runs no kill explains (none began within 120 s after a kill): what started them."""
    out = []
    for run in af.runs(f"{NAME}_recover"):
        began = epoch(run.get("queued_at") or run.get("run_after")) or 0
        if not any(0 <= began - k <= 120 for k in kills):
            conf = run.get("conf") or {}
            out.append(
                {"at": began, "verdict": conf.get("verdict"), "reasons": conf.get("reasons"), "state": run["state"]}
            )
    return out


def judge(samples: list[dict], first_commit: float, kills: list[float], commits: list[float]) -> dict:
    """Each look's window by the harness's own facts, and whether its verdict was false there."""

    def window(t: float) -> tuple[str, int | None]:
        if t < first_commit:
            return "startup", None
        for i, k in enumerate(kills):
            nxt = next((c for c in commits if c > k), float("inf"))
            if k <= t < nxt:
                return "outage", i
        last = max((c for c in commits if c <= t), default=None)
        if last is not None and t - last <= FRESH_COMMIT:
            return "steady", None
        return "unjudged", None

    per_window: dict[str, Counter] = {}
    false: list[dict] = []
    straddling = 0
    for s in samples:
        a, b = window(s["checked"]), window(s["read"])
        name = a[0]
        per_window.setdefault(name, Counter())[s["verdict"]] += 1
        if a != b:  # the look spans a kill or a commit: it may be right for either side
            straddling += s["verdict"] in FALSE_IN.get(a[0], set()) | FALSE_IN.get(b[0], set())
            continue
        if s["verdict"] in FALSE_IN.get(name, set()):
            false.append(
                {
                    "at": round(s["read"], 3),
                    "window": name,
                    "kill": a[1] + 1 if a[1] is not None else None,
                    "verdict": s["verdict"],
                    "reasons": s["reasons"],
                    "seconds_after_kill": round(s["read"] - kills[a[1]], 2) if a[1] is not None else None,
                }
            )
    return {
        "samples": len(samples),
        "per_window": {w: dict(c) for w, c in per_window.items()},
        "false_total": len(false),
        "false_per_verdict": dict(Counter(f["verdict"] for f in false)),
        "false_per_window": dict(Counter(f["window"] for f in false)),
        "straddling_wrong_looks_not_counted": straddling,
        "false_samples": false,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=3, help="kills of the driver JVM (at least 3)")
    ap.add_argument("--rate", type=int, default=100, help="events a second the producer writes")
    ap.add_argument("--txn-size", type=int, default=10, help="events per transaction")
    ap.add_argument("--window", type=int, default=60, help="the pipeline's airflow.window, seconds")
    ap.add_argument(
        "--stalled-after-triggers",
        type=int,
        default=60,
        help="the pipeline's health.stalled_after_triggers (onceflow's default is 10: on a loaded machine a "
        "batch can take longer, and the recoveries `stalled` starts then overlap the kills)",
    )
    ap.add_argument("--standby", action="store_true", help="airflow.standby: true (a warm standby driver)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, tables)")
    ap.add_argument("--watch-child", metavar="PIPELINE_FILE", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.watch_child:
        return watch_child(args.watch_child)
    if args.kills < 3:
        ap.error("--kills must be at least 3")
    # a stop request (Ctrl-C, SIGTERM) runs the clean-up below; started in the background, this process
    # may have SIGINT ignored, which Airflow's components would inherit (standalone stops them with it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    from devkit.kafka import scratch_broker
    from devkit.pipelines import write_pipeline
    from onceflow import config

    with scratch_broker("onceflow-bench-airflow-") as (work, broker):
        logs = work / "logs"
        logs.mkdir()
        topic = f"bench-af-{uuid.uuid4().hex[:8]}"
        file = write_pipeline(
            work / "pipelines",
            broker.bootstrap,
            topic,
            name=NAME,
            max_offsets=2000,
            data=str(work / "data"),
            airflow={"window": f"{args.window} seconds", **({"standby": True} if args.standby else {})},
            health={"stalled_after_triggers": args.stalled_after_triggers},
        )
        pipeline = config.load(file)
        env = {
            **os.environ,
            "ONCEFLOW_PIPELINES_DIR": str(file.parent),
            "ONCEFLOW_SPARK_MASTER": "local[2]",
            "ONCEFLOW_REPORTS": str(work / "reports"),
            # the log servers of the scheduler and the triggerer: ports of their own, so this Airflow
            # does not collide with another one on the machine
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        }
        producer = Producer(broker.bootstrap, topic, args.rate, args.txn_size)
        commits = Commits(Path(pipeline.checkpoint_path) / "commits")
        sampler: Sampler | None = None
        af: Airflow | None = None
        report: dict = {}
        try:
            log(f"broker {broker.bootstrap}; starting airflow standalone (logs in {logs})")
            t0 = time.time()
            af = Airflow(work / "airflow", env, logs)
            af.wait_ready()
            report["airflow_ready_seconds"] = round(time.time() - t0, 1)
            producer.start()
            commits.start()
            sampler = Sampler(file, logs)
            sampler.start()
            af.unpause(f"{NAME}_recover")
            af.unpause(f"{NAME}_stream")
            unpaused = time.time()
            log("unpaused the stream and recover DAGs; waiting for the first commit")
            first_commit = wait("the first commit", lambda: commits.first_after(0), timeout=WAIT)
            report["unpause_to_first_commit_seconds"] = round(first_commit - unpaused, 2)
            log(f"first commit {first_commit - unpaused:.1f}s after the unpause; a healthy window")
            time.sleep(args.window)
            kills: list[float] = []
            runs: list[dict] = []
            try:
                for i in range(args.kills):
                    runs.append(kill_once(i + 1, pipeline, af, commits, kills, args.window, args.standby))
                    time.sleep(args.window)  # healthy again, a window before the next kill
            except KeyboardInterrupt:  # stopped early: the kills so far are still figures
                report["interrupted_after_kills"] = len(runs)
                if not runs:
                    raise
            sampler.stop()
            time.sleep(1)
            seconds = [r["seconds"] for r in runs]
            report.update(
                {
                    "benchmark": "airflow_kills",
                    "cpus": os.cpu_count(),
                    "load_average_1m_end": round(os.getloadavg()[0], 2),
                    "rate": args.rate,
                    "window_seconds": args.window,
                    "standby": args.standby,
                    "stalled_after_triggers": args.stalled_after_triggers,
                    "first_commit_from": "a new file in the checkpoint's commits/ folder (its mtime)",
                    "sampler": sampler.how,
                    "kill_to_first_commit": {
                        "median_seconds": statistics.median(seconds),
                        "min_seconds": min(seconds),
                        "max_seconds": max(seconds),
                    },
                    "runs": runs,
                    "verdicts": judge(sampler.samples, first_commit, kills, commits.times()),
                    "recoveries_no_kill_explains": unprompted_recoveries(af, kills),
                    "events_produced": producer.produced,
                    "producer_error": str(producer.error) if producer.error else None,
                }
            )
            emit(report, args.json)
            print_summary(report)
            return 0
        finally:
            producer.halt.set()
            commits.halt.set()
            if sampler is not None:
                sampler.stop()
            if af is not None:
                log("stopping Airflow (and the app its stream runs keep)")
                af.stop()
            _stop_leftover_app(pipeline)
            if producer.is_alive():
                producer.join(30)
            if not args.keep:
                import shutil

                shutil.rmtree(work, ignore_errors=True)
            else:
                log(f"kept {work}")


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _stop_leftover_app(pipeline) -> None:
    """An app still holding the run lock after Airflow stopped (a recovery's hand-over lease)."""
    from onceflow.airflow.hooks import OnceflowHook

    hook = OnceflowHook(pipeline.file)
    hook.wanted.clear()
    try:
        hook.stop_running(30, log=log)
    except RuntimeError as exc:
        log(f"could not stop the app: {exc}")


def print_summary(report: dict) -> None:
    k = report["kill_to_first_commit"]
    print(f"\nkill -9 of the driver JVM → first new commit, through the scheduler ({len(report['runs'])} kills):")
    print(f"  median {k['median_seconds']:.1f}s, min {k['min_seconds']:.1f}s, max {k['max_seconds']:.1f}s")
    keys = ["watch_verdict_time", "watch_task_end", "trigger_recover_start", "recover_run_started"]
    keys += [f"{t}_start" for t in ("begin", "stop", "plan", "execute", "start")] + ["app_launched", "first_commit"]
    print("  " + "".join(f"{k.removesuffix('_start')[:14]:>15}" for k in keys))
    for r in report["runs"]:
        print("  " + "".join(f"{r['timeline'].get(k) if r['timeline'].get(k) is not None else '—':>15}" for k in keys))
    v = report["verdicts"]
    print(
        f"verdicts: {v['samples']} looks; false {v['false_total']} {v['false_per_verdict']}"
        f" by window {v['false_per_window']}"
    )
    for f in v["false_samples"]:
        print(
            f"  false {f['verdict']} in {f['window']} (kill {f['kill']}, +{f['seconds_after_kill']}s): {f['reasons']}"
        )
    for r in report["recoveries_no_kill_explains"]:
        print(f"  a recovery no kill explains ({r['state']}): {r['verdict']}: {r['reasons']}")
    print(f"({report['cpus']} CPUs, 1-minute load average {report['load_average_1m_end']} at the end)")


if __name__ == "__main__":
    sys.exit(main())
