"""The run lock admits one process and dies with it; the status log survives a torn line."""

from __future__ import annotations

import multiprocessing
import os

from onceflow.errors import AlreadyRunningError
from onceflow.state.status import IngestMode, RunEvent, RunLock, RunStatus, StatusLog, ended, ended_cleanly


def _try_lock(path: str, queue) -> None:
    try:
        RunLock(path).acquire()
        queue.put("acquired")
    except AlreadyRunningError as exc:
        queue.put(str(exc))


def test_run_lock_admits_one_process_and_dies_with_it(tmp_path):
    lock = RunLock(tmp_path)
    lock.acquire(run_id="r1")
    try:
        holder = lock.holder()
        assert lock.is_held() and holder is not None and holder["pid"] == os.getpid()
        queue = multiprocessing.get_context("fork").Queue()
        p = multiprocessing.get_context("fork").Process(target=_try_lock, args=(str(tmp_path), queue))
        p.start()
        p.join(30)
        message = queue.get(timeout=5)
        assert "already running" in message and "Fix" in message
    finally:
        lock.release()
    assert not lock.is_held()


def test_status_log_keeps_the_last_run_and_skips_torn_lines(tmp_path):
    log = StatusLog(tmp_path, "p")
    log.append("started", run_id="a")
    log.append("final", run_id="a", status="finished")
    log.append("started", run_id="b")
    with open(log.path, "a") as f:
        f.write('{"event": "progr')  # a reader racing a writer sees a torn last line
    assert [e["run_id"] for e in log.last_run()] == ["b"]


def _log_of_two_runs(tmp_path) -> StatusLog:
    log = StatusLog(tmp_path, "p")
    log.append(RunEvent.STARTED, run_id="a", mode=IngestMode.AVAILABLE_NOW, generation=0)
    log.append(RunEvent.PROGRESS, run_id="a", batch_id=0, input_rows=5)
    log.append(RunEvent.FINAL, run_id="a", status=RunStatus.FAILED, error="boom", batch={"id": 1, "generation": 0})
    log.append(RunEvent.STARTED, run_id="b", mode=IngestMode.CONTINUOUS, generation=1)
    log.append(RunEvent.PROGRESS, run_id="b", batch_id=1, input_rows=3)
    log.append(RunEvent.IDLE, run_id="b")
    log.append(RunEvent.PROGRESS, run_id="b", batch_id=2, input_rows=4)
    return log


def test_the_newest_run_tells_how_far_it_got_while_it_runs(tmp_path):
    run = _log_of_two_runs(tmp_path).newest_run()
    assert run.run_id == "b" and run.started is not None and run.started["mode"] == "continuous"
    assert run.final is None and run.status is None and run.error is None and run.failed_batch is None
    assert [e["batch_id"] for e in run.progress] == [1, 2] and len(run.beats) == 3
    assert run.final_summary() is None
    brief = run.as_dict()
    assert brief == {
        "run_id": "b",
        "started_epoch": run.started["epoch"],
        "mode": "continuous",
        "batches": 2,
        "rows": 7,
        "last_batch_id": 2,
        "final_status": None,
        "error": None,
    }


def test_a_run_that_ended_says_how_and_a_failed_one_names_its_batch(tmp_path):
    log = _log_of_two_runs(tmp_path)
    first, second = log.newest_runs(2)
    assert log.newest_runs(5) == [first, second] and log.newest_runs(1) == [second]
    assert (
        first.status == RunStatus.FAILED and first.error == "boom" and first.failed_batch == {"id": 1, "generation": 0}
    )
    assert first.final_summary() == {"status": "failed", "error": "boom", "time": first.events[-1]["time"]}
    assert first.summary() == {"run_id": "a", "started_at": first.events[0]["time"], "final": first.final_summary()}
    assert not ended_cleanly(first.status) and ended(first.status) == "failed"
    assert ended_cleanly(RunStatus.FINISHED) and ended_cleanly(RunStatus.STOPPED) and not ended_cleanly(None)
    assert ended(RunStatus.STOPPED) == "was stopped (at a batch boundary)" and ended("odd") == "ended odd"


def test_no_run_is_an_empty_run(tmp_path):
    run = StatusLog(tmp_path, "p").newest_run()
    assert run.events == () and run.run_id is None and run.summary() == {} and run.as_dict()["batches"] == 0


def test_a_probe_holding_the_lock_for_an_instant_does_not_make_a_start_refuse(tmp_path):
    """is_held() takes the lock for microseconds to see whether it is free; health polls it every
    second, and a query starting in that instant refused as if a copy ran. It retries briefly."""
    import fcntl
    import threading

    from onceflow.state.status import RunLock

    tmp_path.mkdir(exist_ok=True)
    probe = open(tmp_path / "run.lock", "a+")  # noqa: SIM115 -- released by the timer below
    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    threading.Timer(0.1, probe.close).start()  # the probe lets go 0.1 s later
    lock = RunLock(tmp_path)
    lock.acquire(run_id="r", mode="continuous")
    try:
        assert (lock.holder() or {})["run_id"] == "r"
    finally:
        lock.release()
