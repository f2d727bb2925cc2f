"""Stop the streaming query at a batch boundary (SIGTERM, --max-seconds, --until-idle).

Spark 4.0 has no graceful stop: `query.stop()` cancels the query's jobs and
interrupts its stream thread wherever it is. Under a backlog the triggers run
back to back, so there is no idle moment to aim at: a poll of `isTriggerActive`
rarely sees False, and a stop from the listener lands in the next batch (its
progress event arrives after `commits/N`, by which time `offsets/N+1` is already
written; docs/testing.md, "Figures the code's comments rest on"). A stop that
lands in the sinks' writes leaves the batch planned and uncommitted, and the
Python traceback it raises is long enough to overflow the stack of the regex
Spark matches it with (`java.lang.StackOverflowError` in the stream thread).

So the job makes its own boundary. Once a stop is requested, the gate at the
start of `BatchWriter.__call__` lets no new batch write: the batch in flight
finishes and commits, the next one Spark plans is *held* in the gate before any
sink is touched, and only then is the query stopped. The held batch waits in an
interruptible JVM sleep on the stream thread (py4j runs a callback's JVM calls on
the thread that called Python), so `query.stop()`'s interrupt ends it with an
`InterruptedException`, which the gate re-raises in the short form Spark
recognises as "interrupted by stop" (StreamExecution.isInterruptionException):
the query ends cleanly, and no exception is recorded. The held batch's
`offsets/N` is then removed, after checking that no commit and no sink ledger
holds batch N: no sink wrote it, and the next run plans it again. When the
stream is idle (no batch to hold), it is stopped while its thread waits for the
next trigger. See docs/exactly-once.md, "Stopping".
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from onceflow.checkpoint import COMMITS, OFFSETS, read_checkpoint
from onceflow.errors import BatchHeld
from onceflow.ledger import read_ledger
from onceflow.polling import Deadline
from onceflow.storage.files import StorePath

_POLL = 0.05
_INTERRUPTED = "java.lang.InterruptedException"


class StopGate:
    """Shared by the supervisor (the driver's main thread) and foreachBatch (Spark's
    stream thread, through py4j): which batch is writing, which one is held."""

    def __init__(self, checkpoint: str, planned_before: int, hold_limit: float):
        self.checkpoint = _local(checkpoint)
        self.planned_before = planned_before  # batches up to here were planned by an earlier run
        self.hold_limit = hold_limit
        self.reason: str | None = None
        self.passed: int | None = None  # the last batch let through to its sinks
        self.held: int | None = None  # the batch held at the gate, planned but not written
        self.stopping = threading.Event()  # the supervisor is calling query.stop()
        self.query = None  # the StreamingQuery, to see that a stop has begun
        self._lock = threading.Lock()

    # -- the stream thread -------------------------------------------------------
    def enter(self, batch_id: int, spark) -> None:
        """Called first thing in foreachBatch: return to write the batch, or hold it
        (no sink touched) until the query is stopped, then raise BatchHeld.

        A batch an earlier run planned (a replay after a crash) always passes: its
        sinks may hold part of it, so it must finish with the offsets it has."""
        with self._lock:
            if self.reason is None or batch_id <= self.planned_before:
                self.passed = batch_id
                return
            self.held = batch_id
        self._hold(batch_id, spark)

    def _hold(self, batch_id: int, spark) -> None:
        from py4j.protocol import Py4JJavaError

        jvm = spark.sparkContext._jvm
        deadline = Deadline(self.hold_limit)
        while not deadline.passed:
            try:
                jvm.java.lang.Thread.sleep(200)  # on the stream thread: query.stop() interrupts it
            except Py4JJavaError as exc:
                if exc.java_exception.getClass().getName() != _INTERRUPTED:
                    raise
                raise BatchHeld(self._released(batch_id)) from None
            # the interrupt was consumed elsewhere, but the stop has begun: Spark's state is TERMINATED
            if self.stopping.is_set() and self.query is not None and not self.query.isActive:
                raise BatchHeld(self._released(batch_id)) from None
        raise RuntimeError(
            f"batch {batch_id} was held at the stop gate for {self.hold_limit:g}s and the query "
            "was not stopped; it wrote nothing, and the next run re-plans it"
        )

    @staticmethod
    def _released(batch_id: int) -> str:
        return (
            f"batch {batch_id} held at the stop gate, nothing written; query.stop(): "
            f"py4j.protocol.Py4JJavaError: An error occurred while calling Thread.sleep: {_INTERRUPTED}"
        )

    # -- the supervisor ----------------------------------------------------------
    def close(self, reason: str) -> None:
        with self._lock:
            self.reason = reason

    def snapshot(self) -> tuple[int | None, int | None]:
        """(the last batch let through, the batch held), read together."""
        with self._lock:
            return self.passed, self.held

    def committed(self, batch_id: int) -> bool:
        """commits/N exists: Spark finished batch N (foreachBatch returned, the commit written)."""
        return (self.checkpoint / COMMITS / str(batch_id)).exists()

    def writing(self) -> int | None:
        """The batch let through to its sinks and not committed yet, if any."""
        passed = self.passed
        return passed if passed is not None and not self.committed(passed) else None


def _local(checkpoint: str) -> StorePath:
    """The checkpoint folder, local or in an object store."""
    return StorePath(checkpoint)


# one gate per checkpoint, found by BatchWriter (a query is built before its run registers the gate)
_GATES: dict[str, StopGate] = {}
_GATES_LOCK = threading.Lock()


def register(gate: StopGate) -> None:
    with _GATES_LOCK:
        _GATES[str(gate.checkpoint)] = gate


def unregister(gate: StopGate) -> None:
    with _GATES_LOCK:
        if _GATES.get(str(gate.checkpoint)) is gate:
            del _GATES[str(gate.checkpoint)]


def enter_batch(checkpoint: str, batch_id: int, spark) -> None:
    """The gate of foreachBatch: returns at once unless a stop of this checkpoint's run is requested."""
    with _GATES_LOCK:
        gate = _GATES.get(str(_local(checkpoint)))
    if gate is not None:
        gate.enter(batch_id, spark)


def planned_before(checkpoint: str) -> int:
    """The newest batch already planned in the checkpoint (-1 if none)."""
    latest = read_checkpoint(checkpoint).latest_planned
    return -1 if latest is None else latest


@dataclass
class StopOutcome:
    clean: bool  # False: no boundary within the bound, or the query failed while stopping
    stopped: bool  # query.stop() was called (False: it ended by itself, or we gave up)
    seconds: float  # from the request to the query's end (or to giving up)
    message: str
    reason: str = ""
    requested_epoch: float = 0.0
    held: int | None = None  # the batch held at the gate (planned, nothing written)

    def as_dict(self) -> dict:
        """For the run's `final` status event."""
        return {
            "reason": self.reason,
            "requested_epoch": round(self.requested_epoch, 3),
            "seconds": round(self.seconds, 3),
            "clean": self.clean,
            "held_batch": self.held,
        }


def stop_at_batch_boundary(
    query, gate: StopGate, reason: str, trigger_seconds: float | None, timeout: float, log: Callable[[str], None]
) -> StopOutcome:
    """Let the batch in flight commit, start no new one, stop the query. Never
    calls `query.stop()` while a batch writes: if none reaches a boundary within
    `timeout` seconds, gives up and says so (the caller exits non-zero).

    `trigger_seconds`: the processing-time trigger interval (None for available-now,
    whose triggers never wait: it ends at the gate or by itself)."""
    outcome = _wait_for_boundary(query, gate, reason, trigger_seconds, timeout, log)
    outcome.reason, outcome.held = reason, gate.held
    outcome.requested_epoch = time.time() - outcome.seconds
    return outcome


def _wait_for_boundary(
    query, gate: StopGate, reason: str, trigger_seconds: float | None, timeout: float, log: Callable[[str], None]
) -> StopOutcome:
    started = time.monotonic()
    gate.close(reason)
    deadline = Deadline(timeout)
    told = None
    while True:
        if not query.isActive:  # it ended by itself (available-now ran out of data, or it failed)
            return StopOutcome(True, False, time.monotonic() - started, "the query ended by itself")
        passed, held = gate.snapshot()
        writing = gate.writing()
        if held is not None:
            last = f"batch {passed} committed last" if passed is not None else "no batch of this run committed"
            return _stop(query, gate, started, f"{last}, batch {held} held before its writes")
        if writing is not None and told != writing:
            log(f"batch {writing} is writing: waiting for its commit; no new batch starts")
            told = writing
        if writing is None and trigger_seconds is not None and _between_triggers(query, trigger_seconds):
            return _stop(query, gate, started, "between triggers")
        if deadline.passed:
            what = "no batch boundary was reached" if writing is None else f"batch {writing} is still writing its sinks"
            return StopOutcome(
                False,
                False,
                time.monotonic() - started,
                f"could not stop at a batch boundary within {timeout:g}s of the request: {what}. "
                "It is not stopped mid-batch: the run ends as a crash would end it, and the next "
                "run re-runs the open batch (its sinks skip what they already hold). Fix: give "
                "the stop more time (--stop-timeout) than the longest batch takes",
            )
        time.sleep(_POLL)


def _stop(query, gate: StopGate, started: float, where: str) -> StopOutcome:
    gate.stopping.set()
    try:
        query.stop()
    except Exception as exc:  # spark.sql.streaming.stopTimeout: the stream thread did not end
        return StopOutcome(
            False,
            True,
            time.monotonic() - started,
            f"query.stop() did not end the stream thread ({where}): {str(exc).splitlines()[0]}",
        )
    seconds = time.monotonic() - started
    failure = query.exception()
    if failure is not None:
        return StopOutcome(
            False, True, seconds, f"the query failed while stopping ({where}): {str(failure).splitlines()[0]}"
        )
    return StopOutcome(True, True, seconds, f"stopped at a batch boundary: {where}")


def _between_triggers(query, trigger_seconds: float) -> bool:
    """True when the stream thread waits for its next trigger, far enough from it
    that `query.stop()` lands in the wait.

    Two readings of "no trigger active" 30 ms apart rule out the instant between
    two back-to-back triggers (a trigger that plans a batch lasts seconds). And
    processing-time triggers start at whole multiples of the interval
    (ProcessingTimeExecutor.nextBatchTime), so with `guard` ms left before the next
    start, and `guard` ms after the last one was due, the stop's state change (a
    py4j round trip away) lands in the wait, not in a trigger's planning."""
    if query.status.get("isTriggerActive", True):
        return False
    time.sleep(0.03)
    if query.status.get("isTriggerActive", True):
        return False
    interval = trigger_seconds * 1000
    if interval < 40:  # no wait worth aiming at: the two readings are all there is
        return True
    guard = min(100.0, interval / 4)
    phase = (time.time() * 1000) % interval
    return guard <= phase <= interval - guard


def discard_held_batch(checkpoint: str, batch_id: int, generation: int, tables: Iterable[str]) -> str:
    """Remove the held batch's `offsets/N` (and its checksum) so the checkpoint ends
    at the last committed batch, after checking that it is the newest planned
    batch, has no commit, and that no sink table's ledger holds batch N of this
    generation. What was done, or why it was left, as a sentence."""
    cp = read_checkpoint(checkpoint)
    if cp.latest_planned != batch_id or batch_id in cp.commit_files:
        return (
            f"offsets/{batch_id} left in place: the newest planned batch is {cp.latest_planned}, "
            f"commits {'hold' if batch_id in cp.commit_files else 'lack'} batch {batch_id}"
        )
    for table in tables:
        if any(e.batch_id == batch_id and e.generation == generation for e in read_ledger(table).entries):
            return (
                f"offsets/{batch_id} left in place: {table} holds batch {batch_id}; the next run re-runs it "
                "with the same offsets"
            )
    root = StorePath(cp.path) / OFFSETS
    for name in (str(batch_id), f".{batch_id}.crc"):
        with contextlib.suppress(FileNotFoundError):
            (root / name).delete()
    return f"batch {batch_id} (planned, held at the gate, nothing written) removed from the checkpoint"
