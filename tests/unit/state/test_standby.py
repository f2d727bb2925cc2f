"""The warm standby's place (onceflow.state.standby): one standby at a time, ready only while it
holds its lock and its processes live."""

from __future__ import annotations

import os

from onceflow.state.standby import Standby


def test_one_standby_at_a_time_and_ready_only_while_it_holds(tmp_path):
    first, second = Standby(tmp_path), Standby(tmp_path)
    assert first.ready() is None
    assert first.hold(jvm_pid=os.getpid(), since="now")
    assert not second.hold(jvm_pid=os.getpid(), since="now"), "a second standby must leave"
    assert (first.ready() or {}).get("pid") == os.getpid()
    first.release()
    assert first.ready() is None, "a standby that left is not ready, whatever its file says"


def test_a_standby_whose_jvm_is_gone_is_not_ready(tmp_path):
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    standby = Standby(tmp_path)
    assert standby.hold(jvm_pid=gone.pid, since="now")
    try:
        assert standby.ready() is None
    finally:
        standby.release()
