"""Every process's command line, sampled from /proc while a block runs: the proof that no secret
reaches a process list (issue 40)."""

from __future__ import annotations

import os
import threading
import time


class Cmdlines:
    """Command lines of every process between enter and exit (`seen`), sampled every 5 ms.

    A process is read when it first appears and on every pass while it is young (its first
    YOUNG_SECONDS: a fork's child execs its program in that time, a launcher script its JVM);
    every process again every FULL_SECONDS (one that retitles itself, as Airflow's do, or execs
    later). Reading every process on every pass took a third of a core for as long as a test ran
    (py-spy over the suite, 2026-11-30); this takes a few hundredths."""

    INTERVAL = 0.005
    YOUNG_SECONDS = 5.0
    FULL_SECONDS = 0.5

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._running: list[str] = []

    def _read(self, pid: str) -> None:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                self.seen.add(f.read().replace(b"\0", b" ").decode())
        except (OSError, UnicodeDecodeError):  # a process gone meanwhile
            pass

    def _sample(self) -> None:
        # those running at enter are read by the first pass, not as young ones on every pass
        first_seen = {p: time.monotonic() - self.YOUNG_SECONDS for p in self._running}
        last_full = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            full = now - last_full >= self.FULL_SECONDS
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            for pid in pids:
                if full or now - first_seen.setdefault(pid, now) < self.YOUNG_SECONDS:
                    self._read(pid)
            if full:
                last_full = now
                alive = set(pids)
                first_seen = {p: t for p, t in first_seen.items() if p in alive}  # a pid used again is new
            time.sleep(self.INTERVAL)

    def __enter__(self) -> Cmdlines:
        self._running = [p for p in os.listdir("/proc") if p.isdigit()]  # before any process the block starts
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        for pid in pids:  # the last look: every process still there
            self._read(pid)
