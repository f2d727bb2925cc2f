"""The process-list witness (tests/process_list.py) sees what it must: a short-lived process, a
fork that execs its program late, and a process that was running before it started."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

from tests.process_list import Cmdlines


def test_short_lived_late_exec_and_earlier_processes_are_all_seen():
    before = f"canary-before-{uuid.uuid4()}"
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)", before])
    try:
        quick, late = f"canary-quick-{uuid.uuid4()}", f"canary-late-{uuid.uuid4()}"
        with Cmdlines() as cmdlines:
            # a process of about 40 ms (the platform's shortest, a `onceflow` command, lives 100 ms or more)
            subprocess.run([sys.executable, "-c", "import time; time.sleep(0.02)", quick], check=True)
            # a shell that execs its program after 1.5 s, as a launcher script execs its JVM
            subprocess.run(["bash", "-c", f"sleep 1.5; exec -a {late} sleep 0.05"], check=True)
            time.sleep(0.05)
        assert any(quick in c for c in cmdlines.seen)
        assert any(late in c for c in cmdlines.seen)
        assert any(before in c for c in cmdlines.seen)
    finally:
        running.kill()
        running.wait()
