"""Is a pipeline's streaming job healthy? One JSON-ready answer from four files and Kafka.

`pipeline_health` is what `onceflow checkpoint status` prints and what the Airflow
trigger polls every few seconds, so it starts no JVM and no Spark: it reads the
Spark checkpoint (onceflow.checkpoint), the sink ledgers in the Delta logs
(delta-rs), the job's status log and run lock (onceflow.state.status), and asks Kafka for
its last stable offsets. The verdict rules are documented in
docs/checkpoint-status.md. The report is a `HealthReport` (onceflow.wire): its `as_json()` is the
output, and docs/schemas/checkpoint-status.schema.json is generated from it (`python -m devkit.schemas`).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, Field, WithJsonSchema

from onceflow import processes
from onceflow.checkpoint import COMMITS, OFFSETS, Checkpoint
from onceflow.config import Pipeline
from onceflow.errors import KafkaAccessError, OnceflowError
from onceflow.facts import PipelineFacts, read_facts
from onceflow.kafka.client import KafkaClient
from onceflow.ledger import follower_lag, rows_by_reason
from onceflow.paths import state_dir
from onceflow.sink_kinds import FOLLOWS, SinkName
from onceflow.sinks import lease_folder
from onceflow.state.control import Launching, RecoveryMarker, Wanted
from onceflow.state.poison import poisoned_batch
from onceflow.state.standby import Standby
from onceflow.state.status import IngestMode, LockWork, RunLock, RunStatus, StatusLog, ended
from onceflow.state.unprocessable import Unprocessable
from onceflow.storage.files import StorePath
from onceflow.storage.lease import LEASE_KEY, read_lease
from onceflow.verdicts import ALERTS, EXIT_CODES, STATUS_VERDICTS, Verdict
from onceflow.wire import Count, IsoTime, OpenWire, Wire

SLOW_BATCHES = 3  # `stalled` waits at least this many of the run's average batch durations
RATE_WINDOW = 20  # progress events the commit rate and batch duration are averaged over
KAFKA_TIMEOUT = 5.0  # seconds; a trigger polls often, a dead broker must not hold it long
SNAPSHOT_TRIES = 5  # reads of the lock and the status log until they agree (_run_facts)

# {"earliest": {p: o}, "latest": {p: o}} or an exception; replaceable in tests of the pure logic
EndOffsets = Callable[[KafkaClient, str], dict[str, dict[int, int]]]


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- the report ---------------------------------------------------------------------
def _a_status_verdict(v: Verdict) -> Verdict:
    if v not in STATUS_VERDICTS:
        raise ValueError(f"{v!r} is no verdict of `onceflow checkpoint status`")
    return v


# a verdict `onceflow checkpoint status` gives (not one only the Airflow trigger adds)
StatusVerdict = Annotated[
    Verdict, AfterValidator(_a_status_verdict), WithJsonSchema({"enum": [str(v) for v in STATUS_VERDICTS]})
]
Offset = Annotated[int | None, Field(ge=0)]
Time = Annotated[str | None, Field(json_schema_extra={"format": "date-time"})]
Rate = Annotated[int | float | None, Field(ge=0)]
Seconds = int | float  # as the pipeline file gave it (90 stays 90 in the JSON)


class Thresholds(Wire):
    """The pipeline's health settings the verdict was judged by (config.Health, the trigger)."""

    max_lag: Count
    stalled_after_triggers: int = Field(ge=1)
    trigger_seconds: Seconds = Field(gt=0)
    stalled_after_seconds: Seconds = Field(gt=0)
    dead_after_seconds: Seconds = Field(gt=0)
    start_grace_seconds: Seconds = Field(
        gt=0, description="how long a new run may take to commit its first batch while lag > 0"
    )
    recovery_grace_seconds: Seconds = Field(
        gt=0,
        description="how long a recovery may be at work (`recovering`) before the verdict is the problem it "
        "did not fix",
    )


class CheckpointProblem(Wire):
    path: str
    reason: str


class CheckpointFacts(Wire):
    """The Spark checkpoint, read without a JVM. `empty` and `topic_in_checkpoint` are left out when it
    could not be read at all (`error`: a remote URI), `error` when it could."""

    path: str
    exists: bool | None
    usable: bool | None
    empty: bool | None = Field(default=None, description="no batch planned yet (missing or empty directory)")
    error: str | None = Field(default=None, description="the checkpoint could not be read at all")
    unusable_reasons: list[str]
    problems: list[CheckpointProblem]
    query_id: str | None
    last_committed: Offset
    uncommitted: Offset = Field(description="planned batch without a commit; Spark re-runs it on restart")
    last_commit_at: Time
    topic_in_checkpoint: bool | None = None
    commit_epoch: float | None = Field(default=None, exclude=True)  # when the last commit was written
    planned_epoch: float | None = Field(default=None, exclude=True)  # when the open batch was planned


class KafkaFacts(Wire):
    bootstrap: str
    topic: str
    error: str | None = Field(description="why Kafka's offsets are unknown (lag is then null)")
    refused: bool = Field(False, exclude=True)  # Kafka refused the client (ACLs): no restart helps


class PartitionLag(Wire):
    partition: int = Field(ge=0)
    committed: Offset = Field(
        description="next offset to read after the last committed batch (or the query's initial offset)"
    )
    latest: Offset = Field(description="Kafka's last stable offset (READ_COMMITTED)")
    earliest: Offset = Field(description="Kafka's log start offset")
    lag: Offset = Field(description="latest - committed (offsets, including transaction markers)")
    behind_retention: bool
    ahead_of_kafka: bool


class Lag(Wire):
    total: Offset
    max_partition: Offset


class SinkFacts(Wire):
    """One Delta sink's ledger; only `path`, `exists` and `error` when its log could not be read."""

    path: str
    exists: bool | None
    error: str | None = Field(description="why the sink's Delta log could not be read")
    entries: Count | None = Field(default=None, description="ledger entries in the table's history")
    last_batch: Offset = None
    generation: Offset = None
    version: Offset = Field(default=None, description="Delta version holding the last entry")
    last_commit_at: Time = None
    rows: Count | None = Field(default=None, description="rows the ledger's entries say the sink took, all batches")
    rows_by_reason: dict[str, int] | None = Field(
        default=None,
        description="the quarantine only: its rows per reason (`unrecorded`: entries older than the count)",
    )
    trails_batches: Count | None = Field(
        default=None,
        description="only for a sink derived from another (the aggregates follow bronze): that sink's batches "
        "it does not hold yet; a running job merges them every sinks.aggregates.merge_every, the next run "
        "merges what a killed one left",
    )


class Poisoned(Wire):
    """The batch the newest runs all failed on (onceflow.state.poison)."""

    batch_id: Count
    generation: int | None
    topic: str
    ranges: dict[str, list[int]] = Field(description="per partition, [start, end) of the batch")
    runs: int = Field(ge=1)
    error: str
    since: str


class FinalEvent(Wire):
    status: RunStatus
    error: str | None
    time: Time


class WantedFacts(OpenWire):
    """wanted.json while valid: who wants the stream running (a stream DAG run) and until when (epoch)."""

    by: str | None = None
    until: float


class RecoveringFacts(OpenWire):
    """recovering.json while valid: the recovery run at work and until when its mark holds (epoch)."""

    run_id: str | None = None
    since: str | None = None
    until: float


class LaunchingFacts(OpenWire):
    """launching.json while valid and its process lives: a stream run launched the app, which has not
    taken the run lock yet (`starting`)."""

    by: str | None = None
    since: float
    until: float
    pid: int | None = None
    host: str | None = None


class StandbyFacts(OpenWire):
    """standby.json while a warm standby driver waits and its processes live (onceflow.state.standby):
    it takes over the moment the run dies, so a death reads `starting`, not `dead`."""

    pid: int | None = None
    host: str | None = None
    jvm_pid: int | None = None
    since: str | None = None


class RunFacts(Wire):
    """The newest run of the status log, the run lock, and the pipeline's control files."""

    running: bool = Field(description="a process holds the pipeline's run lock")
    holder: dict[str, Any] | None = Field(description="run.json of the lock holder (pid, host, started, ...)")
    events: Count = Field(description="status events of the newest run")
    run_id: str | None
    mode: IngestMode | None
    generation: int | None
    started_at: Time
    final: FinalEvent | None
    last_progress_batch: int | None
    last_progress_at: Time
    last_heartbeat_at: Time
    heartbeat_age_seconds: float | None
    commits_per_minute: Rate
    avg_batch_duration_ms: Rate
    last_batch_duration_ms: Rate
    input_rows_per_second: Rate
    processed_rows_per_second: Rate
    poisoned: Poisoned | None
    wanted: WantedFacts | None
    recovering: RecoveringFacts | None
    launching: LaunchingFacts | None
    standby: StandbyFacts | None = None
    # when (epoch) this run started, last progressed, last beat, and its lock was taken: the verdict's clocks
    started_epoch: float | None = Field(default=None, exclude=True)
    progress_epoch: float | None = Field(default=None, exclude=True)
    beat_epoch: float | None = Field(default=None, exclude=True)
    holder_epoch: float | None = Field(default=None, exclude=True)
    # run.json as the last run to take the lock left it, when no process holds the lock now
    last_holder: dict | None = Field(default=None, exclude=True)


class LeaseFacts(Wire):
    """The pipeline's driver lease in the object store (docs/storage.md)."""

    uri: str
    live: bool = Field(description="not released, and renewed within two ttls by this machine's clock")
    here: bool = Field(description="the holder ran on this machine, with this ONCEFLOW_HOME")
    host: str | None = None
    pid: int | None = None
    renewed_at: Time = None
    released: bool | None = None
    error: str | None = None


class HealthReport(Wire):
    """The output of `onceflow checkpoint status --json` and of onceflow.health.pipeline_health().
    See docs/checkpoint-status.md."""

    model_config = Wire.model_config | {"title": "onceflow pipeline health"}

    pipeline: str
    checked_at: IsoTime
    verdict: StatusVerdict
    exit_code: int = Field(json_schema_extra={"enum": list(sorted(set(EXIT_CODES.values())))})
    reasons: list[str] = Field(min_length=1, description="why this verdict was chosen")
    notes: list[str] = Field(description="facts worth knowing that did not change the verdict")
    thresholds: Thresholds
    checkpoint: CheckpointFacts
    kafka: KafkaFacts
    partitions: list[PartitionLag]
    lag: Lag
    sinks: dict[str, SinkFacts]
    run: RunFacts
    lease: LeaseFacts | None = Field(
        description="the pipeline's driver lease in the object store (docs/storage.md); null when its tables "
        "and checkpoint are on a file system"
    )


# -- the facts ---------------------------------------------------------------------
def _checkpoint_facts(pipeline: Pipeline, facts: PipelineFacts) -> tuple[Checkpoint | None, CheckpointFacts]:
    ck = facts.checkpoint
    topic = pipeline.source.topic
    if ck is None:  # a remote URI: not readable without a JVM
        return None, CheckpointFacts(
            path=pipeline.checkpoint_path,
            exists=None,
            usable=None,
            error=str(facts.checkpoint_error),
            unusable_reasons=[],
            problems=[],
            query_id=None,
            last_committed=None,
            uncommitted=None,
            last_commit_at=None,
        )
    commit_epoch = planned_epoch = None
    if ck.last_committed is not None:
        commit_epoch = (StorePath(ck.path) / COMMITS / str(ck.last_committed)).mtime()
    if ck.uncommitted is not None:  # a batch that began (or a killed run's open one): when it was planned
        planned_epoch = (StorePath(ck.path) / OFFSETS / str(ck.uncommitted)).mtime()
    return ck, CheckpointFacts(
        path=ck.path,
        exists=ck.exists,
        usable=ck.usable if not ck.empty else True,
        empty=ck.empty,
        unusable_reasons=list(ck.unusable_reasons),
        problems=[CheckpointProblem(path=p.path, reason=p.reason) for p in ck.problems],
        query_id=ck.query_id,
        last_committed=ck.last_committed,
        uncommitted=ck.uncommitted,
        last_commit_at=_iso(commit_epoch),
        commit_epoch=commit_epoch,
        planned_epoch=planned_epoch,
        topic_in_checkpoint=(topic in ck.topics) if ck.topics else None,
    )


def _position(ck: Checkpoint | None, topic: str) -> dict[int, int] | None:
    """Per partition, the next offset the query reads; None when unknown."""
    if ck is None or not ck.usable or ck.empty:
        return None
    try:
        pos = ck.position(topic)
    except OnceflowError:
        return None
    return pos or None


def _kafka_facts(
    pipeline: Pipeline, position: dict[int, int] | None, fresh: bool, facts: PipelineFacts
) -> tuple[KafkaFacts, list[PartitionLag]]:
    """Kafka's offsets, and one row per partition: committed / latest / lag.

    A partition the query has no position in is read from the log start (Spark
    starts new partitions at earliest); so is every partition of a query that has
    not started (`fresh`) with starting_offsets=earliest. Otherwise no position
    means no lag (a broken checkpoint gives no trustworthy position)."""
    src = pipeline.source
    # unreachable, unknown topic: reported, never raised
    kafka = KafkaFacts(
        bootstrap=src.bootstrap_servers or f"(connection {src.kafka_connection})",
        topic=src.topic,
        error=str(facts.kafka_error) if facts.kafka_error is not None else None,
        refused=isinstance(facts.kafka_error, KafkaAccessError),
    )
    offsets = facts.kafka
    rows = []
    parts = sorted(set(position or {}) | set((offsets or {}).get("latest", {})))
    for p in parts:
        committed = (position or {}).get(p)
        latest = offsets["latest"].get(p) if offsets else None
        earliest = offsets["earliest"].get(p) if offsets else None
        from_start = position is not None or (fresh and src.starting_offsets == "earliest")
        start = committed if committed is not None else (earliest if from_start else None)
        lag = None if latest is None or start is None else max(0, latest - start)
        rows.append(
            PartitionLag(
                partition=p,
                committed=committed,
                latest=latest,
                earliest=earliest,
                lag=lag,
                behind_retention=(committed is not None and earliest is not None and committed < earliest),
                ahead_of_kafka=(committed is not None and latest is not None and committed > latest),
            )
        )
    return kafka, rows


def _sink_facts(facts: PipelineFacts) -> dict[str, SinkFacts]:
    """Each Delta sink's ledger: the last batch it holds (the sink's own account)."""
    out: dict[str, SinkFacts] = {}
    for name, path in facts.paths.items():
        ledger = facts.ledgers.get(name)
        if ledger is None:  # a damaged Delta log: report, keep checking the rest
            out[name] = SinkFacts(path=path, exists=None, error=facts.ledger_errors[name].cause)
            continue
        last = ledger.last
        leader = facts.ledgers.get(FOLLOWS.get(name, ""))
        # the aggregates trail bronze by up to `merge_every` while the job runs
        trails = {"trails_batches": len(follower_lag(leader, ledger)[0])} if leader is not None else {}
        out[name] = SinkFacts(
            path=path,
            exists=ledger.exists,
            error=None,
            entries=len(ledger.entries),
            last_batch=last.batch_id if last else None,
            generation=last.generation if last else None,
            version=last.version if last else None,
            last_commit_at=_iso(last.timestamp / 1000) if last and last.timestamp else None,
            rows=sum(e.rows for e in ledger.entries),
            rows_by_reason=rows_by_reason(ledger.entries) if name == SinkName.QUARANTINE else None,
            **trails,
        )
    return out


def _run_facts(pipeline: Pipeline, facts: PipelineFacts, now: float) -> RunFacts:
    """The newest run from the status log, the lock, and rates from recent progress events.

    The lock was read with the other facts, before the sink ledgers and Kafka (seconds on an object
    store); a recovery may have released it and a new run logged its start since. So the lock is read
    again after the status log, until both reads agree: the holder and the run are of one moment."""
    status = StatusLog(pipeline.state_path, pipeline.name)
    lock = RunLock(pipeline.state_path)
    running, holder = facts.running, facts.holder
    for _ in range(SNAPSHOT_TRIES):
        run = status.newest_run()
        seen = lock.state()
        if seen == (running, holder):
            break
        running, holder = seen
    started, progress, beats = run.started or {}, run.progress, run.beats
    recent = progress[-RATE_WINDOW:]
    rate = None
    if len(recent) >= 2 and recent[-1]["epoch"] > recent[0]["epoch"]:
        rate = round((len(recent) - 1) / (recent[-1]["epoch"] - recent[0]["epoch"]) * 60, 2)
    durations = [e["batch_duration_ms"] for e in recent if isinstance(e.get("batch_duration_ms"), (int, float))]
    poisoned = poisoned_batch(status, Unprocessable.load(pipeline.state_path))
    wanted = Wanted(pipeline.state_path).current(now)
    marker = RecoveryMarker(pipeline.state_path).current(now)
    launching = _launch(pipeline, now)
    return RunFacts(
        running=running,
        holder=holder,
        events=len(run.events),
        run_id=run.run_id,
        mode=started.get("mode"),
        generation=started.get("generation"),
        started_at=started.get("time"),
        final=FinalEvent.model_validate(final) if (final := run.final_summary()) else None,
        last_progress_batch=progress[-1].get("batch_id") if progress else None,
        last_progress_at=progress[-1].get("time") if progress else None,
        last_heartbeat_at=beats[-1].get("time") if beats else None,
        heartbeat_age_seconds=round(now - beats[-1]["epoch"], 3) if beats else None,
        commits_per_minute=rate,
        avg_batch_duration_ms=round(sum(durations) / len(durations), 1) if durations else None,
        last_batch_duration_ms=durations[-1] if durations else None,
        input_rows_per_second=recent[-1].get("input_rows_per_second") if recent else None,
        processed_rows_per_second=recent[-1].get("processed_rows_per_second") if recent else None,
        started_epoch=started.get("epoch"),
        progress_epoch=progress[-1]["epoch"] if progress else None,
        beat_epoch=beats[-1]["epoch"] if beats else None,
        holder_epoch=iso_epoch((holder or {}).get("started")),
        last_holder=None if running else lock.holder(),
        poisoned=Poisoned.model_validate(poisoned.as_dict()) if poisoned else None,
        wanted=WantedFacts.model_validate(wanted.as_dict()) if wanted else None,
        recovering=RecoveringFacts.model_validate(marker.as_dict()) if marker else None,
        launching=LaunchingFacts.model_validate(launching) if launching else None,
        standby=StandbyFacts.model_validate(standby) if (standby := Standby(pipeline.state_path).ready()) else None,
    )


def _launch(pipeline: Pipeline, now: float) -> dict | None:
    """launching.json while it holds and the launched process lives (onceflow.state.control.Launching)."""
    lease = Launching(pipeline.state_path).current(now)
    if lease is None:
        return None
    info = lease.as_dict()
    pid = info.get("pid")
    if isinstance(pid, int) and info.get("host") == socket.gethostname() and not processes.alive(pid):
        return None  # it exited before it took the lock: the launch failed
    return info


def iso_epoch(text: str | None) -> float | None:
    """An ISO time as the status files write it (`Z` or an offset) in epoch seconds; None if absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _lease_facts(pipeline: Pipeline, now: float) -> LeaseFacts | None:
    """The driver lease in the store (None: the pipeline keeps nothing in one): who holds it, and
    whether it looks live (renewed within two ttls by our clock, not released)."""
    folder = lease_folder(pipeline)
    if folder is None:
        return None
    uri = folder.child(LEASE_KEY).object_uri
    try:
        body = read_lease(folder)
    except OnceflowError as exc:
        return LeaseFacts(uri=uri, error=str(exc), live=False, here=False)
    if not body:
        return LeaseFacts(uri=uri, live=False, here=False)
    renewed = iso_epoch(body.get("renewed_at"))
    ttl = float(body.get("ttl_seconds") or 0)
    return LeaseFacts(
        uri=uri,
        live=not body.get("released") and renewed is not None and now - renewed <= 2 * ttl,
        here=body.get("host") == socket.gethostname() and body.get("home") == str(state_dir()),
        **{k: body.get(k) for k in ("host", "pid", "renewed_at", "released")},
    )


# -- the verdict --------------------------------------------------------------------
def verdict_of(report: HealthReport, now: float) -> tuple[Verdict, list[str]]:
    """The verdict and why, from the gathered facts (pure: no I/O; `report`'s own verdict is not read).
    Rules in order, first match wins (_verdict); then what is under way may say more (UNDER_WAY, in
    order, the first that speaks wins): a standby taking over, a launch, a recovery at work."""
    ck, run = report.checkpoint, report.run
    if ck.error:
        return Verdict.UNKNOWN, [f"could not read the checkpoint: {ck.error}"]
    holder = run.holder or {}
    if run.running and holder.get("mode") == LockWork.BACKFILL:
        return Verdict.BACKFILLING, [
            f"a backfill (pid {holder.get('pid')} on {holder.get('host')}) holds the run lock since "
            f"{holder.get('started')}: no query runs until it ends (its Airflow task's execution timeout bounds it)"
        ]
    verdict, reasons = _verdict(report, now)
    for under_way in UNDER_WAY:
        said = under_way(report, now, verdict, reasons)
        if said is not None:
            return said
    return verdict, reasons


Said = tuple[Verdict, list[str]]


def _standby_takes_over(report: HealthReport, now: float, verdict: Verdict, reasons: list[str]) -> Said | None:
    """Rule S: a run's death reads `starting` when a warm standby is ready: it takes the run lock within
    a second of it (onceflow.state.standby). Bounded: once the run's last sign of life is older than
    dead_after_seconds the verdict is the death again (a standby that does not take over is no help)."""
    run, standby = report.run, report.run.standby
    if standby is None or verdict not in (Verdict.DEAD, Verdict.DOWN, Verdict.FAILED):
        return None
    signs = [e for e in (run.beat_epoch, run.progress_epoch, run.started_epoch, run.holder_epoch) if e is not None]
    if not signs or now - max(signs) > report.thresholds.dead_after_seconds:
        return None
    return Verdict.STARTING, [
        f"the run is gone and the warm standby driver (pid {standby.pid}, JVM {standby.jvm_pid}, ready since "
        f"{standby.since}) takes over: it starts the query from the last commit (a restart, without the cold start)",
        *reasons,
    ]


def _launching(report: HealthReport, now: float, verdict: Verdict, reasons: list[str]) -> Said | None:
    """Rule L: an app launched (Airflow's stream or recover task) that has not taken the run lock yet
    reads `starting`, until its launch lapses or its process exits."""
    run, launching = report.run, report.run.launching
    if run.running or not launching or verdict in (Verdict.REMOTE, Verdict.UNKNOWN):
        return None
    return Verdict.STARTING, [
        f"{launching.by} launched the app {now - launching.since:.0f}s ago (pid "
        f"{launching.pid}); it has not taken the run lock yet (a launch that has not by "
        f"{_iso(launching.until)}, or whose process exits, reads as what the pipeline is without it)",
        *reasons,
    ]


def _verdict(report: HealthReport, now: float) -> tuple[Verdict, list[str]]:
    ck, run = report.checkpoint, report.run
    if ck.exists and not ck.empty and ck.unusable_reasons:
        return Verdict.BROKEN, ["checkpoint is unusable: " + r for r in ck.unusable_reasons]
    if not run.running:
        verdict, reasons = _not_running(report)
        if report.kafka.refused:  # said first: no restart helps until it is fixed
            reasons = [f"Kafka refuses this pipeline's client: {report.kafka.error}", *reasons]
        lease = report.lease
        if lease is not None and lease.live and not lease.here:  # whatever this machine's status log says
            return Verdict.REMOTE, [
                f"no query runs on this machine, but a driver elsewhere holds the pipeline's lease {lease.uri} "
                f"(pid {lease.pid} on {lease.host}, renewed {lease.renewed_at}); its progress "
                "is in its own machine's status log, its commits in the checkpoint",
                *reasons,
            ]
        wanted = run.wanted
        if verdict in (Verdict.STOPPED, Verdict.NOT_STARTED) and wanted:
            return Verdict.DOWN, [
                f"no query runs, but {wanted.by} wants it running (until {_iso(wanted.until)}): "
                "an outage; the stream DAG's next run starts it",
                *reasons,
            ]
        return verdict, reasons
    holder = run.holder or {}
    if holder.get("mode") == LockWork.RECOVERY:  # `recovering` while within its grace (_during_recovery)
        return Verdict.STALLED, [
            f"no query runs: a recovery ({holder.get('run_id')}, pid {holder.get('pid')}) holds the run lock "
            f"since {holder.get('started')}"
        ]
    return _running(report, now)


def _recovery(run: RunFacts) -> dict | None:
    """The recovery at work, if any: it holds the run lock, or its marker (recovering.json) holds.
    `since` is when it began (the earlier of its marker's start and its taking the lock)."""
    holder = run.holder or {}
    held = bool(run.running) and holder.get("mode") == LockWork.RECOVERY
    marker = run.recovering
    if not held and not marker:
        return None
    starts = [iso_epoch(marker.since if marker else None), run.holder_epoch if held else None]
    known = [s for s in starts if s is not None]
    return {
        "held": held,
        "since": min(known) if known else None,
        "name": (marker.run_id if marker else None) or holder.get("run_id"),
    }


def _during_recovery(report: HealthReport, now: float, verdict: Verdict, reasons: list[str]) -> Said | None:
    """Rule R: while a recovery works on the pipeline, what it repairs reads `recovering` (exit 0): the
    problem that started it has been told already, and an alert on the exit code must not fire on a
    normal recovery. It is bounded: past health.recovery_grace_seconds the verdict is the problem
    again (a recovery that holds the lock that long is `stalled`), so a stuck recovery is caught.
    A run started after the recovery began (its new app) is judged as itself: the recover DAG's
    sensor must see that app fail."""
    run = report.run
    rec = _recovery(run)
    if rec is None or verdict in (Verdict.UNKNOWN, Verdict.REMOTE):
        return None
    if not rec["held"]:
        if run.running and verdict not in ALERTS:  # a query runs and is well: it is what it says
            return None
        started = run.started_epoch
        if rec["since"] is not None and started is not None and started >= rec["since"] - 1:
            return None  # the recovery's own app (or a later run)
    grace = report.thresholds.recovery_grace_seconds
    age = now - rec["since"] if rec["since"] is not None else 0.0
    what = f"recovery {rec['name']}" + (" (holding the run lock)" if rec["held"] else "")
    if age <= grace:
        return Verdict.RECOVERING, [
            f"{what} is at work since {_iso(rec['since'])} ({age:.0f}s, within "
            f"recovery_grace_seconds={grace:g}); it starts the query when it is done",
            *reasons,
        ]
    return verdict, [
        *reasons,
        f"{what} has been at work for {age:.0f}s, more than recovery_grace_seconds={grace:g}: it is stuck "
        "or failed without clearing its mark (docs/runbooks/stuck-recovery.md)",
    ]


# What is under way, after the rules (verdict_of): in this order, the first that speaks wins
UNDER_WAY: tuple[Callable[[HealthReport, float, Verdict, list[str]], Said | None], ...] = (
    _standby_takes_over,
    _launching,
    _during_recovery,
)


def _not_running(report: HealthReport) -> tuple[Verdict, list[str]]:
    """No process holds the run lock: how did the last run end?"""
    ck, run = report.checkpoint, report.run
    no_checkpoint = not ck.exists or ck.empty
    final = run.final
    gone = died_starting(run)
    if gone is not None:
        return Verdict.DEAD, [
            f"the last run to take the run lock ({gone.get('run_id')}, pid {gone.get('pid')} on "
            f"{gone.get('host')}, at {gone.get('started')}) left no status event and no process holds the lock: "
            "it died (killed or crashed) while starting"
        ]
    if run.events == 0:
        if no_checkpoint:
            return Verdict.NOT_STARTED, ["no checkpoint and no run recorded in the status log; the job does not run"]
        return Verdict.STOPPED, [
            f"not running; the checkpoint holds batches up to {ck.last_committed} but the status log records no run"
        ]
    if final is None:
        return Verdict.DEAD, [
            f"the last run ({run.run_id}) has no final event and no process holds the run "
            "lock: the job died (killed or crashed) without stopping"
        ]
    if final.status == RunStatus.FAILED and run.poisoned:
        b = run.poisoned
        return Verdict.POISONED, [
            f"batch {b.batch_id} (generation {b.generation}; offsets "
            + ", ".join(f"partition {p} [{a}, {z})" for p, (a, z) in b.ranges.items())
            + f") failed {b.runs} runs in a row since {b.since}: {b.error}",
            f"a restart re-runs the same offsets and fails the same way. Fix: `onceflow quarantine "
            f"--pipeline {report.pipeline} --batch {b.batch_id}` moves them to quarantine "
            "(reason unprocessable, raw bytes kept), then start the job again "
            "(docs/runbooks/poison-batch.md)",
        ]
    if final.status == RunStatus.FAILED:
        return Verdict.FAILED, [f"the last run failed at {final.time}: {final.error}"]
    return Verdict.STOPPED, [f"not running; the last run {ended(final.status)} at {final.time}"]


def died_starting(run: RunFacts) -> dict | None:
    """run.json of a query's run that took the run lock after the status log's newest run started, and
    let go of it without logging its own start (its driver was killed while it started): else None.
    Work that is no query (a recovery, a backfill) logs no run, so it never counts."""
    gone = run.last_holder
    if not gone or gone.get("mode") in set(LockWork) or not gone.get("run_id") or gone.get("run_id") == run.run_id:
        return None
    took = iso_epoch(gone.get("started"))
    if took is None or (run.started_epoch is not None and took <= run.started_epoch):
        return None
    return gone


def _running(report: HealthReport, now: float) -> tuple[Verdict, list[str]]:
    """A process holds the run lock. Every age counts from this run's own start and commits, never
    from the run before it: the holder may be a new run that has not logged `started` yet."""
    th, ck, run, total = report.thresholds, report.checkpoint, report.run, report.lag.total
    holder = run.holder or {}
    jvm = holder.get("jvm_pid")
    if jvm and holder.get("host") == socket.gethostname() and not processes.alive(int(jvm)):
        return Verdict.DEAD, [
            f"the run lock is held (pid {holder.get('pid')}) but its driver JVM (pid {jvm}) is gone: the job "
            "died (killed or crashed); its process releases the lock as it exits"
        ]
    own = holder.get("run_id") is not None and holder.get("run_id") == run.run_id and run.final is None
    beat = run.beat_epoch if own else None
    started_epoch = run.started_epoch if own else None
    run_start = started_epoch if own else run.holder_epoch
    # the checkpoint is a sign of life too: a commit, or a batch planned, since this run began (its
    # progress event follows a commit through Spark's listener bus, and a long batch logs none)
    committed, planned = (
        e if own and e is not None and run_start is not None and e >= run_start else None
        for e in (ck.commit_epoch, ck.planned_epoch)
    )
    written = [e for e in (committed, planned) if e is not None]
    signs = [e for e in (beat, started_epoch, *written) if e is not None]
    alive_since = max(signs) if signs else run.holder_epoch
    if alive_since is not None and now - alive_since > th.dead_after_seconds:
        what = (
            "heartbeat (progress or idle event) or checkpoint write"
            if beat is not None or written
            else "sign of life since the lock was taken"
        )
        return Verdict.DEAD, [
            f"the run lock is held (pid {holder.get('pid')}) but the last {what} is "
            f"{now - alive_since:.0f}s old, more than dead_after_seconds={th.dead_after_seconds:g}: "
            "the job hangs"
        ]
    age = now - run_start if run_start is not None else 0.0
    if not own and holder.get("mode") in tuple(IngestMode):
        return Verdict.STARTING, [
            f"a new run ({holder.get('run_id')}, pid {holder.get('pid')}) took the run lock {age:.0f}s ago "
            "and is starting its query"
        ]
    if not own:  # never judged as the stream: what holds the lock is not a query onceflow knows
        return Verdict.UNKNOWN, [
            f"the run lock is held (pid {holder.get('pid')}, mode {holder.get('mode')!r}) by no query of the "
            f"status log: its run.json ({'unreadable' if not holder else 'not an ingest run'}) does not say what runs"
        ]
    # this run's last commit: its progress event, or the checkpoint's commit its event has not followed yet
    progress_epoch = max([e for e in (run.progress_epoch, committed) if e is not None], default=None)
    if total is None:
        if progress_epoch is None and not report.kafka.error and age <= th.start_grace_seconds:
            return Verdict.STARTING, [
                f"run {run.run_id} started {age:.0f}s ago; its position in the topic is known at its first batch"
            ]
        why = report.kafka.error or "the query's position in the topic is not known yet"
        return Verdict.UNKNOWN, [f"the job runs, but its lag cannot be measured: {why}"]
    if progress_epoch is None:  # this run has committed nothing yet
        if total == 0:
            return Verdict.HEALTHY, [f"running for {age:.0f}s; nothing to read (lag 0)"]
        if age <= th.start_grace_seconds:
            return Verdict.STARTING, [
                f"run {run.run_id} started {age:.0f}s ago; its first batch has not committed yet "
                f"(lag {total}; start_grace_seconds={th.start_grace_seconds:g})"
            ]
        return Verdict.STALLED, [
            f"run {run.run_id} started {age:.0f}s ago and has committed no batch while lag is "
            f"{total}, more than start_grace_seconds={th.start_grace_seconds:g}"
        ]
    since = max([e for e in (progress_epoch, run_start) if e is not None], default=now)
    quiet = now - since
    # a batch that takes as long as this run's batches do is not a stall: 10 triggers of 1 s are 10 s,
    # and under load a batch took 47 s, so `stalled` stopped working apps through a recovery (issue 48)
    batch = (run.avg_batch_duration_ms or 0.0) / 1000
    if total > 0 and quiet > max(th.stalled_after_seconds, SLOW_BATCHES * batch):
        limit = (
            f"{th.stalled_after_triggers} triggers × {th.trigger_seconds:g}s"
            if th.stalled_after_seconds >= SLOW_BATCHES * batch
            else f"{SLOW_BATCHES} × this run's average batch ({batch:.0f}s)"
        )
        return Verdict.STALLED, [f"lag is {total} but no batch committed for {quiet:.0f}s, more than {limit}"]
    if total > th.max_lag:
        return Verdict.LAGGING, [
            f"lag {total} is above max_lag={th.max_lag}; batches still commit (last {quiet:.0f}s ago)"
        ]
    return Verdict.HEALTHY, [f"running; lag {total} ≤ max_lag={th.max_lag}" + f"; last commit {quiet:.0f}s ago"]


def _notes(report: HealthReport) -> list[str]:
    """Facts worth a line whatever the verdict (they do not change it)."""
    notes = []
    for row in report.partitions:
        if row.behind_retention:
            notes.append(
                f"partition {row.partition}: committed offset {row.committed} is below Kafka's log "
                f"start {row.earliest}: records were deleted unread (a restart fails with "
                "failOnDataLoss=true; see `onceflow recover`)"
            )
        if row.ahead_of_kafka:
            notes.append(
                f"partition {row.partition}: committed offset {row.committed} is past Kafka's "
                f"latest {row.latest} (was the topic deleted and recreated?)"
            )
    ck = report.checkpoint
    if ck.problems and not ck.unusable_reasons:
        notes.append(
            f"checkpoint has {len(ck.problems)} problem(s) that do not block a restart (see `onceflow checkpoint show`)"
        )
    if ck.topic_in_checkpoint is False:
        notes.append(
            f"the checkpoint does not read topic {report.kafka.topic!r}: it belongs to another "
            "query or the source topic was changed"
        )
    return notes


def pipeline_health(
    pipeline: Pipeline, *, now: float | None = None, end_offsets: EndOffsets | None = None
) -> HealthReport:
    """The pipeline's health report (see module doc). Never raises for what it finds:
    an unreachable Kafka or a damaged file becomes part of the report."""
    now = time.time() if now is None else now
    trigger_seconds = pipeline.trigger.seconds
    h = pipeline.health
    thresholds = Thresholds(
        max_lag=h.max_lag,
        stalled_after_triggers=h.stalled_after_triggers,
        trigger_seconds=trigger_seconds,
        stalled_after_seconds=round(h.stalled_after_triggers * trigger_seconds, 3),
        dead_after_seconds=h.dead_after_seconds,
        start_grace_seconds=h.start_grace_seconds,
        recovery_grace_seconds=h.recovery_grace_seconds,
    )
    facts = read_facts(pipeline, with_kafka_ledger=False, kafka_timeout=KAFKA_TIMEOUT, kafka_offsets=end_offsets)
    ck, ck_facts = _checkpoint_facts(pipeline, facts)
    fresh = ck is not None and (not ck.exists or ck.empty)
    kafka, rows = _kafka_facts(pipeline, _position(ck, pipeline.source.topic), fresh, facts)
    lags = [r.lag for r in rows]
    total = sum(x for x in lags if x is not None) if rows and all(x is not None for x in lags) else None
    sections: dict[str, Any] = {
        "thresholds": thresholds,
        "checkpoint": ck_facts,
        "kafka": kafka,
        "partitions": rows,
        "lag": Lag(total=total, max_partition=max(x for x in lags if x is not None) if total is not None else None),
        "sinks": _sink_facts(facts),
        "run": _run_facts(pipeline, facts, now),
        "lease": _lease_facts(pipeline, now),
    }
    # the facts without a verdict yet: what the (pure) verdict rules read
    draft = HealthReport.model_construct(pipeline=pipeline.name, checked_at=str(_iso(now)), **sections)
    verdict, reasons = verdict_of(draft, now)
    return HealthReport(
        pipeline=pipeline.name,
        checked_at=str(_iso(now)),
        verdict=verdict,
        exit_code=EXIT_CODES[verdict],
        reasons=reasons,
        notes=_notes(draft),
        **sections,
    )
