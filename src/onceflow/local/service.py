"""What the local servers share: one detached Java process kept under <home>/<folder>.

The broker (broker.py, each node of a LocalCluster too) and S3Proxy (s3.py) keep their data in
`data/`, their output in a log file and their pid in a pid file beside it; they start detached
(a session of their own, so a Ctrl-C of the command that started them does not reach them), are
waited for until they answer, and stop with SIGTERM, then SIGKILL. A pid file whose process is
gone means not running. What each server is (its settings, how it answers) stays in its module.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

from onceflow import processes
from onceflow.errors import OnceflowError, SetupError
from onceflow.jvm import classpath_jars
from onceflow.paths import state_dir
from onceflow.polling import wait_for


def free_port() -> int:
    """A port nothing on this machine listens on now (the kernel's pick): for a server of its own on
    localhost (S3Proxy, Airflow's components and UI in tests and drills). A broker, which restarts on
    its ports, takes broker.free_port_pair's instead."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_json(path: Path) -> dict:
    """A small settings file a server wrote at its last start ({} when there is none, or it is torn)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


class LocalService:
    """A local server's process and files in <home>/<FOLDER>: `data_dir`, `log_file`, `pid_file`."""

    FOLDER: ClassVar[str]  # under <home> (the state directory unless given)
    STEM: ClassVar[str]  # the log's and the pid file's name: <STEM>.log, <STEM>.pid
    TITLE: ClassVar[str]  # how messages name it ("the broker", "S3Proxy")
    ERROR: ClassVar[type[OnceflowError]]  # what its failures raise
    NO_JAVA: ClassVar[str]  # the message when `java` is not on PATH, with the fix
    NO_LOG: ClassVar[str]  # what `logs` says before the server wrote any

    def __init__(self, home: Path | None = None):
        self.dir = (home or state_dir()) / self.FOLDER

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_file(self) -> Path:
        return self.dir / f"{self.STEM}.log"

    @property
    def pid_file(self) -> Path:
        return self.dir / f"{self.STEM}.pid"

    def _pid(self) -> int | None:
        """The server's pid while its process lives; None when it never started or is gone."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if processes.alive(pid) else None

    def _java(self, jars: str) -> tuple[str, list[Path]]:
        """`java` and the classpath of the jars `onceflow setup` fetched for `jars` (jvm/<jars>)."""
        java = shutil.which("java")
        if not java:
            raise self.ERROR(self.NO_JAVA)
        try:
            return java, classpath_jars(jars)
        except SetupError as exc:
            raise self.ERROR(str(exc)) from None

    def _launch(self, cmd: list[str], cwd: Path | None = None) -> subprocess.Popen:
        """Start `cmd` detached, its output appended to the log, its pid in the pid file."""
        with open(self.log_file, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd
            )
        self.pid_file.write_text(str(proc.pid))
        return proc

    def _wait_answering(
        self,
        answers: Callable[[], bool],
        timeout: float,
        late: Callable[[], Exception],
        interval: float,
        log_lines: int,
    ) -> None:
        """Wait until `answers()`; ERROR with the log's last `log_lines` lines when the process exits
        first, `late()` after `timeout` seconds."""

        def check() -> bool:
            if not self._pid():
                raise self.ERROR(f"{self.TITLE} exited during start-up. Last log lines:\n{self.logs(log_lines)}")
            return answers()

        wait_for(check, timeout, late, interval=interval)

    def _stop_process(
        self,
        grace: float,
        on_kill: Callable[[], None] | None = None,
        first: int = signal.SIGTERM,
        still_there: Callable[[int], Exception] | None = None,
    ) -> bool:
        """Send `first`, then SIGKILL after `grace` seconds; True if it was running. `still_there(pid)`
        is raised when the process outlives SIGKILL too (the pid file is then kept)."""
        pid = self._pid()
        if not pid:
            self.pid_file.unlink(missing_ok=True)
            return False
        stopped = processes.stop(pid, grace=grace, first=first, on_kill=on_kill)
        if not stopped.gone and still_there is not None:
            raise still_there(pid)
        self.pid_file.unlink(missing_ok=True)
        return True

    def logs(self, lines: int = 50) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return self.NO_LOG

    def status(self) -> Any:
        raise NotImplementedError

    def as_dict(self) -> dict:
        return asdict(self.status())
