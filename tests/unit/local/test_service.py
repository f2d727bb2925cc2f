"""The process-keeping the local servers share (LocalService), on a plain Python process: no JVM."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass

import pytest

from onceflow import processes
from onceflow.errors import BrokerError
from onceflow.local.service import LocalService, read_json


@dataclass
class _Status:
    running: bool
    pid: int | None


class _Sleeper(LocalService):
    FOLDER = "sleeper"
    STEM = "sleeper"
    TITLE = "the sleeper"
    ERROR = BrokerError
    NO_JAVA = "no java"
    NO_LOG = "(no sleeper log yet)"

    def status(self) -> _Status:
        pid = self._pid()
        return _Status(running=pid is not None, pid=pid)

    def start(self, code: str) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        return self._launch([sys.executable, "-c", code], cwd=self.dir).pid


def test_its_files_live_in_its_folder_and_a_stale_pid_file_means_not_running(tmp_path):
    s = _Sleeper(tmp_path)
    assert (s.data_dir, s.log_file, s.pid_file) == (
        tmp_path / "sleeper" / "data",
        tmp_path / "sleeper" / "sleeper.log",
        tmp_path / "sleeper" / "sleeper.pid",
    )
    assert s.as_dict() == {"running": False, "pid": None} and s.logs() == "(no sleeper log yet)"
    s.dir.mkdir()
    s.pid_file.write_text("999999999")  # left by a server that died
    assert s._pid() is None and s._stop_process(5) is False and not s.pid_file.exists()


def test_a_launched_process_is_detached_logged_and_stopped(tmp_path):
    s = _Sleeper(tmp_path)
    pid = s.start("import time; print('up', flush=True); time.sleep(60)")
    assert s.status().pid == pid and s.pid_file.read_text() == str(pid)
    s._wait_answering(lambda: s.logs() == "up", 10, lambda: BrokerError("late"), interval=0.05, log_lines=5)
    assert s._stop_process(5) is True and s._pid() is None and not s.pid_file.exists()


def test_a_process_that_outlives_its_stop_is_named_and_its_pid_file_kept(tmp_path, monkeypatch):
    s = _Sleeper(tmp_path)
    pid = s.start("import time; time.sleep(60)")
    real_stop = processes.stop
    # a process SIGKILL does not end (uninterruptible sleep): what processes.stop then reports
    monkeypatch.setattr(processes, "stop", lambda *a, **kw: processes.Stopped(running=True, killed=True, gone=False))
    with pytest.raises(BrokerError, match=f"pid {pid} stays"):
        s._stop_process(0.1, still_there=lambda p: BrokerError(f"pid {p} stays"))
    assert s.pid_file.exists()
    monkeypatch.setattr(processes, "stop", real_stop)
    assert s._stop_process(5, first=signal.SIGKILL) is True and not s.pid_file.exists()


def test_a_process_that_exits_during_start_up_is_refused_with_its_last_log_lines(tmp_path):
    s = _Sleeper(tmp_path)
    s.start("print('bad settings', flush=True)")
    with pytest.raises(BrokerError, match=r"the sleeper exited during start-up\. Last log lines:\nbad settings"):
        s._wait_answering(lambda: False, 10, lambda: BrokerError("late"), interval=0.05, log_lines=5)


def test_a_missing_or_torn_settings_file_reads_as_empty(tmp_path):
    assert read_json(tmp_path / "none.json") == {}
    (tmp_path / "torn.json").write_text('{"port": 1')
    assert read_json(tmp_path / "torn.json") == {}
    (tmp_path / "ports.json").write_text('{"port": 1}')
    assert read_json(tmp_path / "ports.json") == {"port": 1}
