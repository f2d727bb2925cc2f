"""Stopping a process: asked first, killed after the grace, a group's leftovers too; and who descends from whom."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from onceflow import processes
from onceflow.polling import wait_until


def test_only_the_submits_own_descendants_are_signalled():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert processes.descends_from(child.pid, os.getpid())
        assert processes.descends_from(os.getpid(), os.getpid())
        assert not processes.descends_from(os.getpid(), child.pid)
    finally:
        child.kill()
        child.wait()


SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
# exits 0 on SIGTERM, as a program that stops cleanly does
POLITE = [
    sys.executable,
    "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); time.sleep(60)",
]
# ignores SIGTERM: only SIGKILL ends it
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)",
]


def test_a_process_that_stops_when_asked_is_not_killed():
    child = subprocess.Popen(POLITE)
    time.sleep(0.5)  # its handler is installed
    stopped = processes.stop(child, grace=10)
    assert stopped == processes.Stopped(running=True, killed=False, gone=True, exit_code=0)
    assert processes.stop(child, grace=1) == processes.Stopped(running=False, exit_code=0)


def test_a_process_that_ignores_the_request_is_killed_after_the_grace():
    child = subprocess.Popen(STUBBORN, stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline()  # SIGTERM is ignored from here on
    notes: list[str] = []
    began = time.monotonic()
    stopped = processes.stop(child, grace=1, on_kill=lambda: notes.append("kill"))
    assert stopped.killed and stopped.gone and stopped.exit_code == -signal.SIGKILL and notes == ["kill"]
    assert time.monotonic() - began < 10


def test_a_pid_of_our_own_child_is_stopped_and_collected():
    child = subprocess.Popen(SLEEPER)
    stopped = processes.stop(child.pid, grace=10)
    assert stopped.running and not stopped.killed and stopped.gone and stopped.exit_code is None
    assert not processes.alive(child.pid)  # collected: no zombie left behind
    assert processes.stop(child.pid, grace=1) == processes.Stopped(running=False)


def test_a_group_goes_whole_and_the_first_signal_may_spare_the_leaders_children():
    # a leader (its own session) whose child ignores SIGTERM; the leader stops cleanly on it
    code = (
        "import signal, subprocess, sys, time; "
        f"child = subprocess.Popen({STUBBORN!r}, stdout=subprocess.DEVNULL); "
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); print(child.pid, flush=True); time.sleep(60)"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert leader.stdout is not None
    grandchild = int(leader.stdout.readline())
    time.sleep(0.5)
    stopped = processes.stop(leader, grace=10, group=True, first_to_group=False)
    assert stopped.running and not stopped.killed and stopped.exit_code == 0
    assert wait_until(lambda: not processes.alive(grandchild), 10), "the group's leftover was killed"


def test_the_done_condition_decides_when_a_process_counts_as_stopped():
    child = subprocess.Popen(SLEEPER)
    try:
        stopped = processes.stop(child, grace=5, first=0, done=lambda: True)  # signal 0: nothing sent
        assert stopped == processes.Stopped(running=False, exit_code=None) and child.poll() is None
    finally:
        child.kill()
        child.wait()
