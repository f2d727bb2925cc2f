"""The warm standby's wait (`onceflow ingest --standby`; onceflow.state.standby says why).

Its Spark session is built and warmed first (a small job, the sinks' Delta tables read once, so the
classes the first batch needs are loaded and compiled), then it waits on the run lock. It takes
over exactly as a restart does: the query starts from the checkpoint's last commit, and a
recovery at work keeps it waiting (the recovery starts its own app; this one waits for the next
death). A leased standby (`--lease`) leaves when nobody wants the stream any more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from onceflow.config import Pipeline
from onceflow.errors import RecoveryInProgressError
from onceflow.sinks import table_paths
from onceflow.state.control import RecoveryMarker, Wanted, require_no_recovery
from onceflow.state.standby import STANDBY_POLL_SECONDS, Standby
from onceflow.state.status import RunLock, now_iso

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def warm(spark: SparkSession, pipeline: Pipeline, log: Callable[[str], None]) -> None:
    """Pay ahead what a fresh driver's first batch pays: a Spark job, and each Delta sink read once."""
    began = time.monotonic()
    spark.range(1000).selectExpr("sum(id)").collect()
    for name, path in table_paths(pipeline).items():
        try:
            spark.read.format("delta").load(path).limit(1).collect()
        except Exception as exc:  # a table not made yet, a store down: the query says so when it runs
            log(f"{pipeline.name}: standby: {name} not read ahead ({type(exc).__name__})")
    log(f"{pipeline.name}: standby: session warm in {time.monotonic() - began:.1f}s")


def wait_for_turn(
    pipeline: Pipeline,
    lock: RunLock,
    lock_info: dict,
    jvm_pid: int,
    leased: bool,
    recovery_run: str | None,
    log: Callable[[str], None],
) -> bool:
    """Hold the standby's place until the run lock is ours and no recovery forbids a start (True),
    or the stream is no longer wanted or another standby is ready (False)."""
    standby = Standby(pipeline.state_path)
    if not standby.hold(jvm_pid=jvm_pid, since=now_iso(), **{k: lock_info[k] for k in ("log",) if k in lock_info}):
        log(f"{pipeline.name}: standby: another standby is ready ({standby.info_path}); this one leaves")
        return False
    wanted, recovery = Wanted(pipeline.state_path), RecoveryMarker(pipeline.state_path)
    waiting_since = time.monotonic()
    log(f"{pipeline.name}: standby: ready, waiting for the run lock")
    try:
        while True:
            if leased and wanted.current() is None:
                log(f"{pipeline.name}: standby: the stream is no longer wanted (wanted.json lapsed); leaving")
                return False
            marker = recovery.current()
            if marker is not None and marker.info.get("run_id") != recovery_run:
                time.sleep(STANDBY_POLL_SECONDS)  # not even a moment's hold of the lock the recovery needs
                continue
            if lock.try_acquire(STANDBY_POLL_SECONDS, **lock_info):
                try:
                    require_no_recovery(pipeline.state_path, allowed_run=recovery_run)
                except RecoveryInProgressError:
                    lock.release()  # the recovery starts its own app; wait for the next turn
                    time.sleep(STANDBY_POLL_SECONDS)
                    continue
                log(
                    f"{pipeline.name}: standby: took the run lock after {time.monotonic() - waiting_since:.1f}s "
                    "of waiting; starting the query"
                )
                return True
    finally:
        standby.release()
