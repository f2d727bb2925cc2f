"""SIGTERM and SIGINT ask the streaming job to stop at the next batch boundary, not mid-batch."""

from __future__ import annotations

import signal
import threading


class StopRequest:
    """SIGTERM/SIGINT → stop at the next batch boundary instead of mid-batch."""

    def __init__(self):
        self.reason: str | None = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: setattr(self, "reason", signal.Signals(signum).name))
