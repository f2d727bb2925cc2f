"""SIGTERM and SIGINT are a request to stop at the next batch boundary, not an interruption."""

from __future__ import annotations

import os
import signal
import threading

from onceflow.spark.signals import StopRequest


def test_sigterm_and_sigint_become_the_reason_to_stop():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        request = StopRequest()
        request.install()
        assert request.reason is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert request.reason == "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)
        assert request.reason == "SIGINT"
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_off_the_main_thread_it_installs_nothing():
    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=StopRequest().install)
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGTERM) is before
