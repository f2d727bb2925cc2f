"""The kit's driver process: its log, waits that fail with the log's tail, a stop by SIGTERM to the
driver alone, and kill -9 of the whole group (here with a small Python stand-in for the driver)."""

from __future__ import annotations

import sys

import pytest

from devkit.driver import DriverProcess
from onceflow.polling import wait_until
from onceflow.processes import alive

# a "driver" that starts a child of its own (its "JVM"), logs, and stops cleanly on SIGTERM
DRIVER = (
    "import signal, subprocess, sys, time\n"
    "jvm = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print('jvm', jvm.pid, flush=True)\n"
    "def stop(*_):\n"
    "    print('stopping at a batch boundary', flush=True); jvm.terminate(); jvm.wait(); sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "print('batch 0 committed', flush=True)\n"
    "time.sleep(60)\n"
)


def _jvm(driver: DriverProcess) -> int:
    return int(next(line for line in driver.tail().splitlines() if line.startswith("jvm")).split()[1])


def test_a_driver_is_awaited_on_its_log_and_stopped_at_a_batch_boundary(tmp_path):
    driver = DriverProcess([sys.executable, "-c", DRIVER], tmp_path, "driver").start()
    driver.wait_until(lambda: "batch 0 committed" in driver.tail(), "a committed batch", timeout=30)
    assert driver.log == tmp_path / "driver-1.log"
    jvm = _jvm(driver)
    assert driver.terminate(timeout=30) == 0 and "stopping at a batch boundary" in driver.tail()
    assert wait_until(lambda: not alive(jvm), 10)
    again = DriverProcess([sys.executable, "-c", DRIVER], tmp_path, "driver").start()
    assert again.log == tmp_path / "driver-2.log"  # a folder shared by several drivers keeps each log
    again.kill9()
    assert again.process.returncode == -9


def test_a_wait_fails_with_the_log_when_the_driver_exits_or_the_time_runs_out(tmp_path):
    quitter = DriverProcess([sys.executable, "-c", "print('no broker'); raise SystemExit(3)"], tmp_path, "q").start()
    with pytest.raises(AssertionError, match="q exited with 3 before a committed batch:\nno broker"):
        quitter.wait_until(lambda: False, "a committed batch", timeout=30)
    sleeper = DriverProcess([sys.executable, "-c", DRIVER], tmp_path, "s").start()
    try:
        with pytest.raises(AssertionError, match="waited 1s for a second batch from s"):
            sleeper.wait_until(lambda: False, "a second batch", timeout=1)
    finally:
        sleeper.kill9()
