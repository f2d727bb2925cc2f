"""Who may start a pipeline's query (onceflow.state.control): the recovery marker, the wanted lease, the
control lock, and the check a new query makes, including an interleaving of a query's start with
a recovery's begin that must never leave both at work."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from onceflow.errors import AlreadyRunningError, RecoveryInProgressError
from onceflow.state.control import (
    RECOVERY_LEASE_SECONDS,
    Lease,
    RecoveryMarker,
    StreamRun,
    Wanted,
    control_lock,
    keep_watching,
    require_no_recovery,
)
from onceflow.state.status import RunLock


def test_a_recovery_marker_refuses_a_second_recovery_is_renewed_and_expires(tmp_path):
    marker = RecoveryMarker(tmp_path)
    first = marker.begin("rec-1", now=1000.0)
    current = marker.current(now=1001.0)
    assert first.until == 1000.0 + RECOVERY_LEASE_SECONDS and current and current.info["run_id"] == "rec-1"
    with pytest.raises(RecoveryInProgressError, match="rec-1 is already in progress"):
        marker.begin("rec-2", now=1001.0)
    renewed = marker.begin("rec-1", now=2000.0)  # a later step of the same recovery
    assert renewed.until == 2000.0 + RECOVERY_LEASE_SECONDS and renewed.info["since"] == first.info["since"]
    # a recovery whose Airflow stopped: its mark holds no longer than the lease, not for hours
    assert marker.current(now=2000.0 + RECOVERY_LEASE_SECONDS + 1) is None
    assert marker.begin("rec-2", now=2000.0 + RECOVERY_LEASE_SECONDS + 1).info["run_id"] == "rec-2"
    marker.clear("rec-1")  # a late step of the old recovery clears nothing of the new one's
    assert marker.path.exists()
    marker.clear("rec-2")
    assert not marker.path.exists()


def test_the_wanted_lease_is_renewed_never_shortened_and_runs_out(tmp_path):
    wanted = Wanted(tmp_path)
    assert wanted.current() is None
    wanted.want(600, by="p_stream/a", now=1000.0)
    assert wanted.want(60, by="p_recover/b", now=1010.0).until == 1600.0  # a shorter want keeps the longer
    lease = wanted.current(now=1599.0)
    assert lease is not None and lease.info["by"] == "p_recover/b"
    assert wanted.current(now=1600.0) is None
    json.loads(wanted.path.read_text())  # written whole (atomically)
    wanted.clear()
    assert not wanted.path.exists()


def test_one_stream_run_at_a_time_claims_renews_releases_and_lapses(tmp_path):
    """Airflow may run two `<p>_stream` runs at once (a queued manual run and a scheduled one):
    the second waits for the first's claim, which its watcher renews, its last task releases, and
    which lapses by itself when the run is gone."""
    claim = StreamRun(tmp_path)
    first = claim.claim("p_stream/manual", 60, now=1000.0)
    assert first is not None and first.until == 1060.0
    assert claim.claim("p_stream/scheduled", 60, now=1001.0) is None  # refused, nothing written
    assert _info(claim.current(now=1001.0))["run"] == "p_stream/manual"
    renewed = claim.claim("p_stream/manual", 60, now=1050.0)
    assert renewed is not None and renewed.until == 1110.0 and renewed.info["since"] == first.info["since"]
    # a run gone without releasing: its claim lapses after the grace and the next run proceeds
    assert claim.claim("p_stream/scheduled", 60, now=1111.0) is not None
    claim.release("p_stream/manual")  # a late release of the old run frees nothing of the new one's
    assert _info(claim.current(now=1112.0))["run"] == "p_stream/scheduled"
    claim.release("p_stream/scheduled")
    assert claim.holder() is None and claim.claim("p_stream/next", 60) is not None


def test_the_watcher_keeps_the_app_wanted_only_in_short_steps(tmp_path):
    """The lease is renewed for the grace at each look, never for a window: once the looks stop
    (the DAG paused, the triggerer gone) the app is unwanted within the grace."""
    assert keep_watching(tmp_path, "p_stream/a", 30) is not None
    lease = Wanted(tmp_path).current()
    assert lease is not None and lease.until <= time.time() + 30 and lease.info["by"] == "p_stream/a"
    assert Wanted(tmp_path).current(now=lease.until) is None  # no look for the grace: not wanted
    assert keep_watching(tmp_path, "p_stream/b", 30) is None  # b does not hold the claim: renews nothing
    assert _info(Wanted(tmp_path).current())["by"] == "p_stream/a"


def test_a_new_query_is_refused_while_another_recovery_works_and_allowed_for_its_own(tmp_path):
    require_no_recovery(tmp_path)
    RecoveryMarker(tmp_path).begin("rec-1")
    with pytest.raises(RecoveryInProgressError, match="rec-1 is in progress") as refused:
        require_no_recovery(tmp_path)
    assert "Fix:" in str(refused.value)
    require_no_recovery(tmp_path, allowed_run="rec-1")


def test_the_control_lock_excludes_and_times_out(tmp_path):
    with (
        control_lock(tmp_path),
        pytest.raises(TimeoutError, match=r"control\.lock was held"),
        control_lock(tmp_path, timeout=0.2),
    ):
        pass
    with control_lock(tmp_path, timeout=0.2):
        pass


def _app_start(state, out: dict, pause: float) -> None:
    """What a new query does (spark/ingest.py): take the run lock, then look for a recovery."""
    lock = RunLock(state)
    try:
        lock.acquire(run_id="app", mode="continuous")
    except AlreadyRunningError:
        out["app"] = "locked out"
        return
    time.sleep(pause)
    try:
        require_no_recovery(state)
    except RecoveryInProgressError:
        lock.release()
        out["app"] = "refused"
        return
    out["app"] = "runs"
    out["lock"] = lock


def _recovery_begin(state, out: dict, pause: float) -> None:
    """What a recovery does (airflow/recovery.py): mark itself under the control lock, then stop
    whatever holds the run lock."""
    with control_lock(state):
        RecoveryMarker(state).begin("rec")
    time.sleep(pause)
    out["recovery_saw_app"] = RunLock(state).is_held()


def test_a_query_start_and_a_recovery_begin_never_both_proceed_unseen(tmp_path):
    """Interleaved at random, 100 times: either the query refuses to start, or the recovery sees it
    running (and stops it). Never a query running unseen while the recovery works on its files."""
    rng = random.Random(42)
    outcomes = set()
    for i in range(100):
        state = tmp_path / str(i)
        state.mkdir()
        out: dict = {}
        app = threading.Thread(target=_app_start, args=(state, out, rng.random() * 0.002))
        rec = threading.Thread(target=_recovery_begin, args=(state, out, rng.random() * 0.002))
        first, second = (app, rec) if rng.random() < 0.5 else (rec, app)
        first.start()
        time.sleep(rng.random() * 0.003)
        second.start()
        app.join(10)
        rec.join(10)
        if out.get("app") == "runs":
            assert out["recovery_saw_app"], f"round {i}: the query runs and the recovery did not see it"
            out["lock"].release()
        outcomes.add((out.get("app"), out.get("recovery_saw_app")))
    assert ("refused", False) in outcomes and ("runs", True) in outcomes, outcomes  # both orders happened


def _info(lease: Lease | None) -> dict:
    assert lease is not None, "no lease holds"
    return lease.info
