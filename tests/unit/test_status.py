"""The run lock admits one process and dies with it; the status log survives a torn line."""

from __future__ import annotations

import multiprocessing
import os

from onceflow.errors import AlreadyRunningError
from onceflow.status import RunLock, StatusLog


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
