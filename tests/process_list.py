"""Every process's command line, sampled from /proc while a block runs: the proof that no secret
reaches a process list (issue 40)."""

from __future__ import annotations

import os
import threading
import time
from contextlib import suppress
from pathlib import Path


class Cmdlines:
    """Command lines of every process, sampled every 10 ms between enter and exit (`seen`)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    with suppress(OSError, UnicodeDecodeError):  # a process gone meanwhile
                        self.seen.add(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            time.sleep(0.01)

    def __enter__(self) -> Cmdlines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
