"""The health verdicts, from synthetic status files, checkpoint dirs and Kafka offsets.

Kafka is replaced by a dict of offsets (pure logic); the run lock is a real flock
taken in this process; every report is validated against the published JSON Schema.
The real-broker counterpart is tests/integration/test_checkpoint_real.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest

from devkit.pipelines import PAYMENTS_SCHEMA_BODY
from onceflow.config import Pipeline
from onceflow.health import EXIT_CODES, pipeline_health
from onceflow.state.status import RunLock, ended
from tests.unit.test_checkpoint import TOPIC, write_checkpoint

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs/schemas/checkpoint-status.schema.json").read_text())
NOW = 1_800_000_000.0
RUN = "run-1"


def validate(report: dict) -> dict:
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(report)
    json.dumps(report)
    return report


@pytest.fixture
def pipeline(tmp_path, monkeypatch) -> Pipeline:
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    return Pipeline.model_validate(
        {
            "name": "pay",
            "checkpoint": str(tmp_path / "ck"),
            "source": {"bootstrap_servers": "localhost:1", "topic": TOPIC},
            "schema": PAYMENTS_SCHEMA_BODY,
            "sinks": {"bronze": {"path": str(tmp_path / "bronze")}, "quarantine": {"path": str(tmp_path / "quar")}},
            "trigger": {"processing_time": "2 seconds"},
            "health": {"max_lag": 100, "stalled_after_triggers": 5, "dead_after_seconds": 60},
        }
    )  # stalled after 10 s without a commit, dead after 60 s without a heartbeat


def kafka(latest: dict[int, int], earliest: dict[int, int] | None = None):
    return lambda bootstrap, topic: {"earliest": earliest or {p: 0 for p in latest}, "latest": latest}


def unreachable(bootstrap, topic):
    raise RuntimeError(f"Kafka at {bootstrap} did not answer")


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def status(pipeline: Pipeline, *events: tuple[str, float, dict], base: float = NOW) -> None:
    """Write status events with chosen times (seconds before `base`)."""
    pipeline.state_path.mkdir(parents=True, exist_ok=True)
    with open(pipeline.state_path / "status.jsonl", "a") as f:
        for kind, ago, fields in events:
            f.write(
                json.dumps(
                    {
                        "event": kind,
                        "time": iso(base - ago),
                        "epoch": base - ago,
                        "pipeline": pipeline.name,
                        "run_id": RUN,
                        **fields,
                    }
                )
                + "\n"
            )


def started(ago: float):
    return ("started", ago, {"query_id": "q", "pid": 1, "mode": "continuous", "generation": 0, "trigger_seconds": 2.0})


def progress(ago: float, batch: int, duration_ms: int = 400):
    return (
        "progress",
        ago,
        {
            "batch_id": batch,
            "input_rows": 10,
            "input_rows_per_second": 5.0,
            "processed_rows_per_second": 25.0,
            "batch_duration_ms": duration_ms,
            "topic": TOPIC,
            "end_offsets": {"0": 10},
        },
    )


def committed_checkpoint(pipeline: Pipeline, end: dict[int, int] | None = None) -> Path:
    end = end or {0: 30, 1: 35}
    return write_checkpoint(Path(pipeline.checkpoint_path), {0: 0, 1: 0}, {0: {0: 10, 1: 15}, 1: dict(end)}, [0, 1])


@pytest.fixture
def held(pipeline):
    """The run lock, held as a running job holds it."""
    lock = RunLock(pipeline.state_path)
    lock.acquire(run_id=RUN, mode="continuous")
    info = json.loads(lock.info_path.read_text())
    lock.info_path.write_text(json.dumps({**info, "started": iso(NOW - 5)}))  # taken 5 s before NOW
    yield lock
    lock.release()


def check(pipeline, offsets=None, now_offset: float = 0, **kw) -> dict:
    now = NOW + now_offset
    report = validate(pipeline_health(pipeline, now=now, end_offsets=offsets or kafka({0: 30, 1: 35}), **kw).as_json())
    assert report["exit_code"] == EXIT_CODES[report["verdict"]]
    return report


def test_not_started_reports_everything_still_to_read(pipeline):
    r = check(pipeline, kafka({0: 40, 1: 2}, {0: 5, 1: 0}))
    assert r["verdict"] == "not_started" and r["exit_code"] == 0
    assert r["lag"]["total"] == 35 + 2
    assert r["checkpoint"]["exists"] is False and r["run"]["running"] is False
    assert r["sinks"]["bronze"]["exists"] is False


def test_broken_checkpoint_wins_over_everything(pipeline, held):
    ck = committed_checkpoint(pipeline)
    (ck / "offsets" / "1").write_text('v1\n{"batchWat')
    status(pipeline, started(30), progress(1, 1))
    r = check(pipeline)
    assert r["verdict"] == "broken" and r["exit_code"] == 2
    assert "offsets/1 is unreadable" in r["reasons"][0]
    assert r["lag"]["total"] is None, "no trustworthy position from a broken checkpoint"


def test_failed_run_reports_its_error(pipeline):
    committed_checkpoint(pipeline)
    status(
        pipeline,
        started(100),
        progress(90, 1),
        ("final", 80, {"status": "failed", "error": "StreamingQueryException: boom"}),
    )
    r = check(pipeline)
    assert r["verdict"] == "failed" and r["exit_code"] == 1
    assert "boom" in r["reasons"][0] and r["run"]["final"]["status"] == "failed"


def test_runs_that_all_failed_on_one_batch_are_poisoned_until_it_is_moved_aside(pipeline):
    from onceflow.state.unprocessable import Declared, Unprocessable

    committed_checkpoint(pipeline)
    batch = {"id": 2, "generation": 0, "topic": TOPIC, "ranges": {"0": [30, 40], "1": [35, 41]}}
    failed = ("final", 0, {"status": "failed", "error": "[USER_RAISED_EXCEPTION] boom", "batch": batch})
    for ago in (300, 200, 100):
        status(pipeline, started(ago), (failed[0], ago - 10, failed[2]))
    r = check(pipeline)
    assert r["verdict"] == "poisoned" and r["exit_code"] == 1, r["reasons"]
    assert r["run"]["poisoned"]["batch_id"] == 2 and r["run"]["poisoned"]["runs"] == 3
    assert "partition 0 [30, 40), partition 1 [35, 41)" in r["reasons"][0] and "boom" in r["reasons"][0]
    assert f"onceflow quarantine --pipeline {pipeline.name} --batch 2" in r["reasons"][1]
    Unprocessable.load(pipeline.state_path).add(Declared(TOPIC, {0: (30, 40), 1: (35, 41)}))
    r = check(pipeline)
    assert r["verdict"] == "failed" and r["run"]["poisoned"] is None, "moved aside: a restart gets past it"


def test_run_without_final_and_without_lock_is_dead(pipeline):
    committed_checkpoint(pipeline)
    status(pipeline, started(100), progress(5, 1))
    r = check(pipeline)
    assert r["verdict"] == "dead" and r["exit_code"] == 1
    assert "no final event" in r["reasons"][0]


def test_lock_held_but_heartbeat_too_old_is_dead(pipeline, held):
    committed_checkpoint(pipeline)
    status(pipeline, started(500), progress(400, 1), ("idle", 61, {}))
    r = check(pipeline)
    assert r["verdict"] == "dead" and "61s old" in r["reasons"][0]
    assert r["run"]["heartbeat_age_seconds"] == pytest.approx(61, abs=0.01)


def test_running_with_lag_and_no_commit_for_too_long_is_stalled(pipeline, held):
    committed_checkpoint(pipeline)
    status(pipeline, started(500), progress(30, 1), ("idle", 3, {}))
    # the commit file's mtime is now: pretend it was written 30 s ago too
    commit = Path(pipeline.checkpoint_path) / "commits" / "1"
    os.utime(commit, (NOW - 30, NOW - 30))
    r = check(pipeline, kafka({0: 31, 1: 35}))
    assert r["verdict"] == "stalled" and r["exit_code"] == 1
    assert r["lag"]["total"] == 1
    assert "no batch committed for 30s" in r["reasons"][0]


def test_recent_commit_file_keeps_it_from_stalling(pipeline, held):
    committed_checkpoint(pipeline)  # commits/1 written "now" (mtime) even if the status log lags behind
    os.utime(Path(pipeline.checkpoint_path) / "commits" / "1", (NOW - 1, NOW - 1))
    status(pipeline, started(500), progress(30, 1), ("idle", 3, {}))
    assert check(pipeline, kafka({0: 31, 1: 35}))["verdict"] == "healthy"


def test_running_with_lag_above_max_while_committing_is_lagging(pipeline, held):
    committed_checkpoint(pipeline)
    status(pipeline, started(60), *(progress(10 - 2 * i, i) for i in range(5)))
    r = check(pipeline, kafka({0: 130, 1: 36}))
    assert r["verdict"] == "lagging" and r["exit_code"] == 0
    assert r["lag"] == {"total": 101, "max_partition": 100}
    assert [row["lag"] for row in r["partitions"]] == [100, 1]


def test_running_and_caught_up_is_healthy_with_rates(pipeline, held):
    committed_checkpoint(pipeline)
    status(pipeline, started(60), *(progress(10 - 2 * i, i, duration_ms=300 + 100 * i) for i in range(5)))
    r = check(pipeline)
    assert r["verdict"] == "healthy" and r["exit_code"] == 0
    assert r["lag"]["total"] == 0
    assert r["run"]["commits_per_minute"] == 30.0  # 4 intervals over 8 s
    assert r["run"]["avg_batch_duration_ms"] == 500.0 and r["run"]["last_batch_duration_ms"] == 700
    assert r["run"]["running"] and r["run"]["holder"]["run_id"] == RUN
    assert r["checkpoint"]["last_committed"] == 1


def test_nothing_to_do_for_long_is_healthy_not_stalled(pipeline, held):
    committed_checkpoint(pipeline)
    os.utime(Path(pipeline.checkpoint_path) / "commits" / "1", (NOW - 50, NOW - 50))
    status(pipeline, started(100), progress(50, 1), ("idle", 2, {}))
    r = check(pipeline)
    assert r["verdict"] == "healthy", r["reasons"]


def test_finished_run_is_stopped(pipeline):
    committed_checkpoint(pipeline)
    status(pipeline, started(100), progress(90, 1), ("final", 80, {"status": "finished", "error": None}))
    r = check(pipeline, kafka({0: 500, 1: 35}))
    assert r["verdict"] == "stopped" and r["exit_code"] == 0
    assert r["lag"]["total"] == 470, "lag is reported even when stopped"


def test_checkpoint_without_status_log_is_stopped(pipeline):
    committed_checkpoint(pipeline)
    assert check(pipeline)["verdict"] == "stopped"


def test_new_run_holding_the_lock_before_logging_started_is_starting_not_dead(pipeline, held):
    committed_checkpoint(pipeline)
    status(pipeline, started(1000), progress(900, 1), ("final", 800, {"status": "stopped", "error": None}))
    r = check(pipeline)
    assert r["verdict"] == "starting" and r["exit_code"] == 0, r["reasons"]
    assert "took the run lock 5s ago" in r["reasons"][0]


def _new_holder(pipeline, run_id: str, ago: float) -> RunLock:
    """The run lock, held by a run that has not logged `started` yet (taken `ago` s before NOW)."""
    lock = RunLock(pipeline.state_path)
    lock.acquire(run_id=run_id, mode="continuous")
    lock.info_path.write_text(json.dumps({**json.loads(lock.info_path.read_text()), "started": iso(NOW - ago)}))
    return lock


def test_a_run_killed_while_starting_is_dead_not_the_run_before_it(pipeline):
    """A driver killed after it took the run lock and before it logged `started` (the docker drill: the
    scheduler killed with the app it had just launched): the lock is free and run.json names the new
    run. It reads `dead`, not the older run's `failed`, and a recovery's run.json never counts."""
    committed_checkpoint(pipeline)
    status(pipeline, started(1000), progress(900, 1), ("final", 800, {"status": "failed", "error": "boom"}))
    assert check(pipeline)["verdict"] == "failed"
    _new_holder(pipeline, "run-new", ago=5).release()
    r = check(pipeline)
    assert r["verdict"] == "dead" and r["exit_code"] == 1, r["reasons"]
    assert "run-new" in r["reasons"][0] and "while starting" in r["reasons"][0]
    lock = RunLock(pipeline.state_path)
    lock.acquire(run_id="recovery-1", mode="recovery")
    lock.info_path.write_text(json.dumps({**json.loads(lock.info_path.read_text()), "started": iso(NOW - 3)}))
    lock.release()
    assert check(pipeline)["verdict"] == "failed"


def test_a_killed_runs_old_commits_never_make_the_recovered_run_stalled(pipeline):
    """The issue's case: right after a recovery's app takes the lock, the age was counted from the
    killed run's last commit (`stalled`, exit 1, for seconds)."""
    committed_checkpoint(pipeline)
    os.utime(Path(pipeline.checkpoint_path) / "commits" / "1", (NOW - 40, NOW - 40))
    status(pipeline, started(300), progress(40, 1))  # killed: no final event
    lock = _new_holder(pipeline, "run-2", ago=3)
    try:
        r = check(pipeline, kafka({0: 80, 1: 35}))
    finally:
        lock.release()
    assert r["verdict"] == "starting" and r["exit_code"] == 0, r["reasons"]


def test_a_run_is_starting_until_its_first_commit_then_healthy_and_stalled_past_the_grace(pipeline, held):
    committed_checkpoint(pipeline)
    os.utime(Path(pipeline.checkpoint_path) / "commits" / "1", (NOW - 40, NOW - 40))  # the run before's
    status(pipeline, ("final", 400, {"status": "stopped", "error": None}), started(6), ("idle", 1, {}))
    r = check(pipeline, kafka({0: 80, 1: 35}))
    assert r["verdict"] == "starting" and "first batch has not committed yet" in r["reasons"][0], r["reasons"]
    # nothing to read: no commit is due, and the run is healthy
    assert check(pipeline)["verdict"] == "healthy"


def test_a_run_without_a_commit_past_its_start_grace_is_stalled(pipeline, held):
    committed_checkpoint(pipeline)
    status(pipeline, started(95), ("idle", 1, {}))  # start_grace_seconds defaults to 90
    r = check(pipeline, kafka({0: 80, 1: 35}))
    assert r["verdict"] == "stalled" and "more than start_grace_seconds=90" in r["reasons"][0], r["reasons"]


def test_a_wanted_stream_with_no_app_is_down_and_an_unwanted_one_stopped(pipeline):
    from onceflow.state.control import RecoveryMarker, Wanted

    committed_checkpoint(pipeline)
    status(pipeline, started(100), progress(90, 1), ("final", 80, {"status": "stopped", "error": None}))
    assert check(pipeline)["verdict"] == "stopped"
    Wanted(pipeline.state_path).want(300, by="pay_stream/run-7", now=NOW - 10)
    r = check(pipeline)
    assert r["verdict"] == "down" and r["exit_code"] == 1, r["reasons"]
    assert "pay_stream/run-7 wants it running" in r["reasons"][0] and r["run"]["wanted"]["by"] == "pay_stream/run-7"
    RecoveryMarker(pipeline.state_path).begin("rec-1", now=NOW - 5)
    r = check(pipeline)
    assert r["verdict"] == "recovering" and "recovery rec-1 is at work" in r["reasons"][0], r["reasons"]
    RecoveryMarker(pipeline.state_path).clear()
    Wanted(pipeline.state_path).want(300, by="old", now=NOW - 400)  # never shortens: still wanted
    assert check(pipeline)["verdict"] == "down"
    Wanted(pipeline.state_path).clear()
    assert check(pipeline)["verdict"] == "stopped"
    Wanted(pipeline.state_path).want(300, by="old", now=NOW - 400)  # a lease that ran out
    assert check(pipeline)["verdict"] == "stopped"


def test_a_failed_run_stays_failed_when_wanted(pipeline):
    from onceflow.state.control import Wanted

    committed_checkpoint(pipeline)
    status(pipeline, started(100), ("final", 80, {"status": "failed", "error": "boom"}))
    Wanted(pipeline.state_path).want(300, by="pay_stream/run-7", now=NOW - 10)
    assert check(pipeline)["verdict"] == "failed"


def test_kafka_unreachable_while_running_is_unknown(pipeline, held):
    committed_checkpoint(pipeline)
    status(pipeline, started(60), progress(1, 1))
    r = check(pipeline, unreachable)
    assert r["verdict"] == "unknown" and r["exit_code"] == 2
    assert "did not answer" in r["kafka"]["error"] and r["lag"]["total"] is None
    assert [row["committed"] for row in r["partitions"]] == [30, 35]
    assert all(row["latest"] is None and row["lag"] is None for row in r["partitions"])


def test_kafka_unreachable_does_not_change_a_stopped_verdict(pipeline):
    committed_checkpoint(pipeline)
    status(pipeline, started(100), ("final", 80, {"status": "stopped", "error": None}))
    r = check(pipeline, unreachable)
    assert r["verdict"] == "stopped" and r["kafka"]["error"]


def test_a_refused_login_is_said_first_not_left_to_read_as_a_dead_job(pipeline):
    """A pipeline whose cluster refuses it (a rotated password, a revoked ACL): the verdict stays what
    the status log says, and its first reason says why no restart helps."""
    from onceflow.errors import KafkaAccessError

    def refused(cluster, topic):
        raise KafkaAccessError("Kafka at b:9093 (SASL_SSL) refused the login: SASL authentication failed. Fix: …")

    committed_checkpoint(pipeline)
    status(pipeline, started(100), ("final", 80, {"status": "failed", "error": "KafkaException: …"}))
    r = check(pipeline, refused)
    assert r["verdict"] == "failed"
    assert r["reasons"][0].startswith(
        "Kafka refuses this pipeline's client: Kafka at b:9093 (SASL_SSL) refused the login"
    )
    assert "_refused" not in r["kafka"]
    assert not check(pipeline, unreachable)["reasons"][0].startswith("Kafka refuses")


def test_offsets_deleted_by_retention_are_noted(pipeline):
    committed_checkpoint(pipeline)
    r = check(pipeline, kafka({0: 90, 1: 35}, {0: 50, 1: 0}))
    row = r["partitions"][0]
    assert row["behind_retention"] and row["lag"] == 60
    assert any("deleted unread" in n for n in r["notes"])


def test_real_client_against_a_closed_port_reports_instead_of_raising(pipeline):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    p = pipeline.model_copy(
        update={"source": pipeline.source.model_copy(update={"bootstrap_servers": f"127.0.0.1:{port}"})}
    )
    committed_checkpoint(p)
    r = validate(pipeline_health(p, now=NOW).as_json())
    assert r["verdict"] == "stopped"
    assert f"127.0.0.1:{port}" in r["kafka"]["error"] and "Fix:" in r["kafka"]["error"]
    # told by the refused connection itself, not by a request that timed out
    assert "Connection refused" in r["kafka"]["error"], r["kafka"]["error"]


def test_cli_status_json_and_exit_codes(pipeline, tmp_path, capsys, held):
    from onceflow import cli

    ck = committed_checkpoint(pipeline)
    status(pipeline, started(100), progress(90, 1), base=time.time())  # the CLI checks at real time
    os.utime(ck / "commits" / "1", (time.time() - 90, time.time() - 90))  # committed with its progress event
    yaml_file = tmp_path / "pay.yaml"
    yaml_file.write_text(json.dumps(json.loads(pipeline.model_dump_json())))  # JSON is YAML
    code = cli.main(["checkpoint", "status", "--pipeline", str(yaml_file), "--json"])
    report = validate(json.loads(capsys.readouterr().out))
    assert code == report["exit_code"]
    # the lock is held, the last heartbeat is 90 s old > dead_after_seconds=60
    assert report["verdict"] == "dead" and code == 1

    held.release()
    code = cli.main(["checkpoint", "status", "--pipeline", str(yaml_file)])
    text = capsys.readouterr().out
    assert code == 1 and "DEAD" in text and "no final event" in text  # no lock, no final: died
    assert "partition" in text and "30" in text and "35" in text


def test_cli_status_watch_looks_again_in_one_process(pipeline, tmp_path, capsys, held):
    """`--watch`: one process, a report a line with --json, the exit code the last look's."""
    from onceflow import cli

    committed_checkpoint(pipeline)
    status(pipeline, started(100), progress(90, 1), base=time.time())
    yaml_file = tmp_path / "pay.yaml"
    yaml_file.write_text(json.dumps(json.loads(pipeline.model_dump_json())))
    args = ["checkpoint", "status", "--pipeline", str(yaml_file), "--json", "--watch", "0.1", "--count", "3"]
    code = cli.main(args)
    lines = capsys.readouterr().out.splitlines()
    reports = [validate(json.loads(line)) for line in lines]
    assert len(reports) == 3 and code == reports[-1]["exit_code"], lines


def test_a_status_poll_imports_no_other_command():
    """`onceflow checkpoint status` builds only its own command's parser: the audit's, the demo's and
    the producer's imports are not paid by a poll."""
    code = (
        "import sys; from onceflow.cli.app import build_parser; "
        "build_parser(['checkpoint', 'status']).parse_args(['checkpoint', 'status']); "
        "print(sorted(m for m in sys.modules if m.startswith('onceflow.cli.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['onceflow.cli.app', 'onceflow.cli.checkpoint', 'onceflow.cli.console']", loaded


def test_cli_show_reports_problems_and_exit_codes(pipeline, capsys):
    from onceflow import cli

    ck = committed_checkpoint(pipeline)
    assert cli.main(["checkpoint", "show", "--path", str(ck)]) == 0
    text = capsys.readouterr().out
    assert "usable" in text and "last committed 1" in text
    (ck / "offsets" / ".9.abc.tmp").write_text("x")
    assert cli.main(["checkpoint", "show", "--path", str(ck), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["usable"] and "leftover temp file" in data["problems"][0]["reason"]
    assert [b["batch_id"] for b in data["batches"]] == [0, 1] and data["batches"][1]["committed"]
    (ck / "commits" / "1").write_text("")
    assert cli.main(["checkpoint", "show", "--path", str(ck)]) == 2
    assert "UNUSABLE" in capsys.readouterr().out


def test_a_run_that_ended_is_told_in_plain_words(pipeline):
    assert [ended(s) for s in ("finished", "stopped", "failed")] == [
        "finished",
        "was stopped (at a batch boundary)",
        "failed",
    ]
    committed_checkpoint(pipeline)
    status(pipeline, started(100), ("final", 80, {"status": "finished", "error": None}))
    reason = check(pipeline)["reasons"][0]
    assert reason.startswith("not running; the last run finished at ") and "ended" not in reason


def test_a_new_run_whose_position_is_not_known_yet_is_starting_not_unknown(pipeline, held):
    """A first run starting at `latest` learns its position at its first batch: until then (within
    the start grace) it is starting, not `unknown` (exit 2)."""
    latest = pipeline.model_copy(update={"source": pipeline.source.model_copy(update={"starting_offsets": "latest"})})
    status(latest, started(5))
    r = check(latest, kafka({0: 80, 1: 35}))
    assert r["lag"]["total"] is None and r["verdict"] == "starting", r["reasons"]
    assert check(latest, unreachable)["verdict"] == "unknown"  # Kafka down: not a start-up matter


# -- issue 48: verdicts that never lie, not even for one poll ------------------------------------
def _holder(pipeline, ago: float, **info) -> RunLock:
    """The run lock, held by a process whose run.json says `info` (taken `ago` s before NOW)."""
    lock = RunLock(pipeline.state_path)
    lock.acquire(**info)
    lock.info_path.write_text(json.dumps({**json.loads(lock.info_path.read_text()), "started": iso(NOW - ago)}))
    return lock


def test_a_recovery_holding_the_lock_is_recovering_never_a_healthy_stream(pipeline):
    """The issue's case: `onceflow recover` held the run lock and the verdict was `healthy`, exit 0
    ("nothing committed yet"); past dead_after_seconds it became `dead` ("the job hangs")."""
    from onceflow.config import Health

    committed_checkpoint(pipeline)
    status(pipeline, started(300), progress(200, 1))  # the killed run: no final event
    lock = _holder(pipeline, 5, run_id="recovery-1", mode="recovery")
    try:
        r = check(pipeline, kafka({0: 31, 1: 35}))  # was: healthy, "lag 1 ≤ max_lag=100; nothing committed yet"
        assert r["verdict"] == "recovering" and r["exit_code"] == 0, r["reasons"]
        assert "holding the run lock" in r["reasons"][0] and "no query runs" in r["reasons"][1]
        lock.info_path.write_text(json.dumps({**(lock.holder() or {}), "started": iso(NOW - 100)}))
        assert check(pipeline)["verdict"] == "recovering", "past dead_after_seconds: a recovery is no hung job"
        lock.info_path.write_text(json.dumps({**(lock.holder() or {}), "started": iso(NOW - 1000)}))
        r = check(pipeline)
        assert r["verdict"] == "stalled" and r["exit_code"] == 1, "a stuck recovery is caught"
        assert "more than recovery_grace_seconds=900" in r["reasons"][-1]
    finally:
        lock.release()
    assert Health().recovery_grace_seconds == r["thresholds"]["recovery_grace_seconds"]


def test_what_a_recovery_at_work_repairs_is_recovering_and_its_own_apps_failure_is_told(pipeline):
    from onceflow.state.control import RecoveryMarker

    committed_checkpoint(pipeline)
    status(pipeline, started(300), progress(200, 1))  # killed
    assert check(pipeline)["verdict"] == "dead"
    RecoveryMarker(pipeline.state_path).begin("p_recover/run-1", now=NOW - 60)  # the Airflow recovery, lock free
    r = check(pipeline)
    assert r["verdict"] == "recovering" and r["exit_code"] == 0 and "no final event" in r["reasons"][1]
    assert check(pipeline, now_offset=2000)["verdict"] == "dead"  # past the grace: the problem again
    # the app the recovery started fails: its sensor must see `failed`, not `recovering`
    status(pipeline, started(30), ("final", 20, {"status": "failed", "error": "boom"}))
    assert check(pipeline)["verdict"] == "failed"


def test_a_backfill_holding_the_lock_is_backfilling(pipeline):
    committed_checkpoint(pipeline)
    status(pipeline, started(300), progress(200, 1), ("final", 100, {"status": "stopped", "error": None}))
    lock = _holder(pipeline, 500, mode="backfill")
    try:
        r = check(pipeline)
    finally:
        lock.release()
    assert r["verdict"] == "backfilling" and r["exit_code"] == 0 and "a backfill" in r["reasons"][0], r["reasons"]


def test_a_holder_whose_driver_jvm_is_gone_is_dead_at_once(pipeline, held):
    """A kill -9 of the driver JVM: its Python process still holds the run lock for the seconds it
    takes to notice (1.5-3.3 s through a real scheduler, benchmarks/airflow_kills.py), and the
    commits are recent, so the run read `healthy`. The JVM's pid in run.json tells."""
    committed_checkpoint(pipeline)
    status(pipeline, started(100), progress(1, 1))
    assert check(pipeline)["verdict"] != "dead"
    gone = subprocess.Popen(["true"])
    gone.wait()
    held.note(jvm_pid=gone.pid, host=socket.gethostname())
    r = check(pipeline)
    assert r["verdict"] == "dead" and "driver JVM" in r["reasons"][0], r["reasons"]
    held.note(jvm_pid=os.getpid())  # a JVM that lives: judged as before
    assert check(pipeline)["verdict"] != "dead"


def test_a_holder_read_before_a_restart_never_judges_the_new_run(pipeline):
    """The issue's `dead` "the last sign of life since the lock was taken is 190 s old" while the new
    app had committed: the lock was read with the other facts (the recovery's, taken 190 s before),
    the status log after the sink ledgers and Kafka, by which time the recovery had released the lock
    and the new app had started and committed. The lock is read again until both reads agree."""
    committed_checkpoint(pipeline)
    status(pipeline, started(400), progress(300, 1))  # killed
    recovery = _holder(pipeline, 190, run_id="recovery-1", mode="recovery")
    app: list[RunLock] = []

    def restart_meanwhile(cluster, topic):  # Kafka is asked between the lock and the status log
        recovery.release()
        app.append(_holder(pipeline, 12, run_id="run-2", mode="continuous"))
        status(pipeline, *((*e[:2], {**e[2], "run_id": "run-2"}) for e in (started(12), progress(1, 2))))
        return {"earliest": {0: 0, 1: 0}, "latest": {0: 30, 1: 35}}

    try:
        r = check(pipeline, restart_meanwhile)
    finally:
        for lock in app:
            lock.release()
    assert r["verdict"] == "healthy" and r["run"]["holder"]["run_id"] == "run-2", r["reasons"]


def test_a_commit_its_progress_event_has_not_followed_yet_is_a_sign_of_life(pipeline, held):
    """A run whose first batch took long: started 190 s ago, no progress or idle event yet, but the
    checkpoint committed the batch a second ago (Spark's listener bus posts the event after)."""
    ck = committed_checkpoint(pipeline)
    status(pipeline, started(190))
    os.utime(ck / "commits" / "1", (NOW - 1, NOW - 1))
    r = check(pipeline, kafka({0: 31, 1: 35}))
    assert r["verdict"] == "healthy" and "last commit 1s ago" in r["reasons"][0], r["reasons"]
    # a batch planned 10 s ago and still running is alive too; one planned 190 s ago is not
    (ck / "offsets" / "2").write_text((ck / "offsets" / "1").read_text())
    os.utime(ck / "commits" / "1", (NOW - 185, NOW - 185))
    os.utime(ck / "offsets" / "2", (NOW - 10, NOW - 10))
    assert check(pipeline)["verdict"] != "dead"
    os.utime(ck / "offsets" / "2", (NOW - 184, NOW - 184))
    assert check(pipeline)["verdict"] == "dead"


def test_a_launch_in_progress_is_starting_not_down_until_its_process_exits_or_its_bound(pipeline):
    """The issue's case: `down` (exit 1) for 2-3 s at every first launch, before the app takes its lock."""
    import subprocess
    import sys

    from onceflow.state.control import Launching, Wanted

    Wanted(pipeline.state_path).want(300, by="pay_stream/run-1", now=NOW - 1)
    assert check(pipeline)["verdict"] == "down"  # never started, wanted, nothing on its way
    launched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        Launching(pipeline.state_path).begin(
            180, by="pay_stream/run-1", pid=launched.pid, host=socket.gethostname(), now=NOW - 2
        )
        r = check(pipeline)
        assert r["verdict"] == "starting" and r["exit_code"] == 0, r["reasons"]
        assert "pay_stream/run-1 launched the app 2s ago" in r["reasons"][0]
        assert check(pipeline, now_offset=200)["verdict"] == "down", "a launch that never comes up"
    finally:
        launched.kill()
        launched.wait()
    assert check(pipeline)["verdict"] == "down", "the launched process exited before it took the lock"


def test_a_death_with_a_warm_standby_ready_is_starting_until_the_death_is_old(pipeline, held):
    """A warm standby takes the run lock within a second of a death (onceflow.state.standby): the
    watcher must not read `dead` or `failed` and start a recovery that would stop it as it takes
    over. Bounded by dead_after_seconds from the run's last sign of life."""
    from onceflow.state.standby import Standby

    committed_checkpoint(pipeline)
    status(pipeline, started(100), progress(1, 1))
    gone = subprocess.Popen(["true"])
    gone.wait()
    held.note(jvm_pid=gone.pid, host=socket.gethostname())
    assert check(pipeline)["verdict"] == "dead"
    standby = Standby(pipeline.state_path)
    assert standby.hold(jvm_pid=os.getpid(), since=iso(NOW - 30))
    try:
        r = check(pipeline)  # the holder's JVM is gone, its process not yet
        assert r["verdict"] == "starting" and r["exit_code"] == 0, r["reasons"]
        assert "warm standby" in r["reasons"][0] and r["run"]["standby"]["pid"] == os.getpid()
        held.release()  # the holder's process exits: no lock, no final event
        assert check(pipeline)["verdict"] == "starting"
        status(pipeline, ("final", 0.5, {"status": "failed", "error": "the Spark driver JVM exited"}))
        assert check(pipeline)["verdict"] == "starting", "a failed run the standby replaces"
        assert check(pipeline, now_offset=120)["verdict"] == "failed", "a standby that never takes over"
    finally:
        standby.release()
    assert check(pipeline)["verdict"] == "failed", "no standby: the death as it is"


def test_a_batch_as_long_as_the_runs_usual_batches_is_not_a_stall(pipeline, held):
    """Seen in the docker stack on two busy cores: batches of 47 s on average, a 1 s trigger × 10
    triggers: `stalled` at 10 s started a recovery that stopped a working app. A stall is a gap of
    more than 3 of the run's average batches (and more than the triggers' bound: 5 × 2 s here)."""
    committed_checkpoint(pipeline)
    status(pipeline, started(500), progress(60, 0, duration_ms=15_000), progress(30, 1, duration_ms=15_000))
    commit = Path(pipeline.checkpoint_path) / "commits" / "1"
    os.utime(commit, (NOW - 30, NOW - 30))
    r = check(pipeline, kafka({0: 31, 1: 35}))
    assert r["verdict"] == "healthy", r["reasons"]  # 30 s: more than 10 s, less than 3 × 15 s
    r = check(pipeline, kafka({0: 31, 1: 35}), now_offset=20)  # 50 s without a commit
    assert r["verdict"] == "stalled", r["reasons"]
    assert "more than 3 × this run's average batch (15s)" in r["reasons"][0], r["reasons"]
