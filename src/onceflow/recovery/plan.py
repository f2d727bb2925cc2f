"""The recovery decision: from the facts to a plan that says what it found and what it will do.

Pure (no I/O), so every case is unit-tested on hand-made facts. The rules, first
match wins (docs/recovery.md):

1. the job runs                                   → refuse (stop it first)
1b. the newest runs all failed on one batch       → refuse: a restart fails the same way; the batch's
                                                    offsets go to quarantine by hand (`onceflow quarantine`)
2. the sinks were written from another topic      → refuse (offsets of one topic mean nothing in another)
3. no checkpoint state and no sink batches        → nothing to do (a first run)
4. checkpoint healthy and in step with the sinks  → restart from the checkpoint; a replayed batch is
                                                    skipped by the sinks that hold it (Delta txn ids),
                                                    so sinks that disagree by one batch need nothing more;
                                                    aggregates that trail bronze catch up from bronze
5. checkpoint ahead of a sink ledger              → refuse without --force; with it, case 6
6. checkpoint corrupt, missing, unidentified, of an older generation than the sinks, behind the
   sinks, or its resume point deleted by Kafka    → move it aside and start a new writer generation at
                                                    the lowest committed point of all sink ledgers,
                                                    each sink skipping what it already holds (sink floors)
7. Kafka no longer holds offsets a sink needs     → refuse and report the exact lost ranges; with
                                                    --accept-loss record them as LOSS ledger entries and
                                                    resume at Kafka's log start
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from onceflow import offsets
from onceflow.checkpoint import Checkpoint
from onceflow.errors import OnceflowError
from onceflow.ledger import BATCH, Ledger, LedgerEntry, follower_lag
from onceflow.recovery.facts import Facts
from onceflow.sinks import FOLLOWS
from onceflow.status import ended, ended_cleanly

# decisions
RESTART, NEW_GENERATION, NOTHING, REFUSE = "restart", "new_generation", "nothing", "refuse"
DECISIONS = (RESTART, NEW_GENERATION, NOTHING, REFUSE)

# what can be found (one Finding per fact worth telling; Plan.case is the one that decided)
RUNNING = "running"
FRESH = "fresh"
DEAD_QUERY = "dead_query"
STOPPED = "stopped"  # the last run ended cleanly (finished or stopped) and every batch it planned committed
CORRUPT = "corrupt_checkpoint"
MISSING = "missing_checkpoint"
UNUSABLE = "unusable_checkpoint"
SINKS_DISAGREE = "sinks_disagree"
AHEAD = "checkpoint_ahead_of_sink"
RETENTION = "retention_loss"
KAFKA_BEHIND = "kafka_behind_ledger"
LEDGER_GAP = "ledger_gap"
LEFTOVERS = "leftover_files"
FOLLOWER_LAG = "follower_lag"  # the aggregates trail bronze: the next run merges the rest from bronze
FOLLOWER_AHEAD = "follower_ahead"  # the aggregates hold offsets bronze does not (bronze restored from a copy)
POISONED = "poisoned_batch"  # the newest runs all failed on the same batch: a restart fails again
CASES = (
    RUNNING,
    POISONED,
    FRESH,
    STOPPED,
    DEAD_QUERY,
    CORRUPT,
    MISSING,
    UNUSABLE,
    SINKS_DISAGREE,
    AHEAD,
    RETENTION,
    KAFKA_BEHIND,
    LEDGER_GAP,
    LEFTOVERS,
    FOLLOWER_LAG,
    FOLLOWER_AHEAD,
)

# actions the executor knows
MOVE_CHECKPOINT = "move_checkpoint_aside"
MOVE_LEFTOVERS = "move_leftovers_aside"
WRITE_LOSS = "write_loss_entry"
WRITE_IDENTITY = "write_identity"

EARLIEST = -2  # Kafka startingOffsets for "the log start"


@dataclass
class Finding:
    case: str
    detail: str


@dataclass
class Action:
    kind: str
    description: str
    params: dict = field(default_factory=dict)


@dataclass
class LostRange:
    """Offsets [start, end) of one partition that Kafka deleted before the sinks named got them."""

    partition: int
    start: int
    end: int
    sinks: list[str]

    @property
    def count(self) -> int:
        return self.end - self.start


@dataclass
class Plan:
    pipeline: str
    pipeline_file: str
    topic: str
    checkpoint_path: str
    case: str  # the finding that decided
    decision: str
    summary: str  # one sentence: what recovery does
    findings: list[Finding]
    actions: list[Action]
    next_step: str | None = None
    refusal: str | None = None  # why it will not act, and the fix
    override: str | None = None  # the flag that lifts the refusal, if one does
    generation: int | None = None  # the writer generation of the next run
    previous_generation: int | None = None
    resume: dict[int, int] | None = None  # where the next run starts, per partition (-2: log start)
    starting_offsets: str | None = None  # Kafka startingOffsets JSON of a new generation
    sink_floors: dict[str, dict[str, int]] | None = None
    lost: list[LostRange] = field(default_factory=list)
    force: bool = False
    accept_loss: bool = False
    facts: dict = field(default_factory=dict)  # what was read, for the record

    @property
    def refused(self) -> bool:
        return self.decision == REFUSE

    def as_dict(self) -> dict:
        d = asdict(self)
        d["resume"] = offsets.as_json(self.resume)
        d["lost"] = [{**asdict(r), "count": r.count} for r in self.lost]
        return d


# -- small helpers ---------------------------------------------------------------------
def _fmt(offsets: dict[int, int] | None) -> str:
    if not offsets:
        return "{}"
    return "{" + ", ".join(f"{p}: {o}" for p, o in sorted(offsets.items())) + "}"


def _last_batch(ledger: Ledger) -> LedgerEntry | None:
    return next((e for e in reversed(ledger.entries) if e.kind == BATCH), None)


def _position_key(ledger: Ledger) -> tuple[int, int]:
    """(generation, batch id) of the newest batch a sink holds; (-1, -1) when none."""
    last = _last_batch(ledger)
    return (last.generation, last.batch_id) if last else (-1, -1)


def _where(ledger: Ledger) -> str:
    last = _last_batch(ledger)
    if last is None:
        return "no batch"
    return f"batch {last.batch_id} of generation {last.generation} (up to {_fmt(ledger.committed_offsets())})"


def _leftover_files(ck: Checkpoint) -> list[str]:
    return sorted(p.path for p in ck.problems if p.path.endswith(".tmp"))


def facts_summary(f: Facts) -> dict:
    """The facts as JSON, for the plan and the recovery record."""
    ck = f.checkpoint
    try:
        committed = offsets.as_json(ck.committed_offsets(f.topic)) if ck.usable else None
    except OnceflowError:
        committed = None
    return {
        "checkpoint": {
            "path": ck.path,
            "exists": ck.exists,
            "empty": ck.empty,
            "usable": ck.usable,
            "unusable_reasons": list(ck.unusable_reasons),
            "problems": [p.as_dict() for p in ck.problems][:50],
            "last_committed": ck.last_committed,
            "uncommitted": ck.uncommitted,
            "committed_offsets": committed,
            "generation": f.identity.generation if f.identity else None,
            "identity_error": f.identity_error,
        },
        "sinks": {
            name: {
                "path": led.table,
                "exists": led.exists,
                "entries": len(led.entries),
                "generation": led.generation,
                "last_batch": (last.batch_id if (last := _last_batch(led)) else None),
                "committed_offsets": offsets.as_json(led.committed_offsets()),
                "problems": led.problems(),
            }
            for name, led in f.ledgers.items()
        },
        "kafka": {
            "topic": f.topic,
            "earliest": offsets.as_json(f.kafka.earliest),
            "latest": offsets.as_json(f.kafka.latest),
        },
        "run": {"running": f.running, "holder": f.holder, "last_run": f.last_run},
    }


# -- the checkpoint's state ------------------------------------------------------------
HEALTHY, PREPARED = "healthy", "prepared"


def checkpoint_state(f: Facts) -> tuple[str, str]:
    """(state, why): healthy | prepared (identity only: a recovery or first run set it up) |
    missing | corrupt | unusable."""
    ck, ident = f.checkpoint, f.identity
    written = f.written
    newest = max((led.entries[-1].generation for led in written.values()), default=None)
    if f.identity_error:
        return CORRUPT, f"its identity file is unreadable: {f.identity_error}"
    if not ck.exists:
        return MISSING, "the directory does not exist" + ("; a file is in its place" if ck.problems else "")
    if ck.unusable_reasons:
        return CORRUPT, "; ".join(ck.unusable_reasons)
    if ck.topics and f.topic not in ck.topics:
        return UNUSABLE, (
            f"it reads topic(s) {', '.join(ck.topics)}, not {f.topic!r} (the query changed: Spark "
            "cannot continue it for another topic)"
        )
    if ident is None:
        if ck.empty:
            return MISSING, f"{ck.path} holds no batches and no onceflow identity"
        if written:
            return UNUSABLE, (
                "it has no onceflow identity (_onceflow.json), so its writer generation is unknown; "
                "it was not made by onceflow or lost that file"
            )
        return HEALTHY, "no batch was written to any sink yet"
    if newest is not None and newest > ident.generation:
        return UNUSABLE, (
            f"it is generation {ident.generation}, but the sinks were written by generation {newest}: "
            "it is older than the tables (restored from a copy?)"
        )
    latest = ck.latest_planned if ck.latest_planned is not None else -1
    ahead = {
        n: last.batch_id
        for n, led in written.items()
        if (last := _last_batch(led)) and last.generation == ident.generation and last.batch_id > latest
    }
    if ahead:
        return UNUSABLE, (
            f"the sinks hold batches of generation {ident.generation} it never planned "
            f"({', '.join(f'{n}: batch {b}' for n, b in ahead.items())}; its newest batch is "
            f"{latest if latest >= 0 else 'none'}): it is older than the tables, and a restart would "
            "reuse those batch ids for other offsets, which Delta would skip"
        )
    if ck.empty:
        return PREPARED, (f"generation {ident.generation} is set up ({ident.reason}) and has not run yet")
    return HEALTHY, "every file a restart reads is present and parses"


def _restart_position(f: Facts) -> dict[int, int] | None:
    """Where Spark resumes a healthy checkpoint: the last committed batch's end offsets (an
    uncommitted batch is re-run from there), else the initial offsets, else the identity's."""
    ck = f.checkpoint
    try:
        if ck.last_committed is not None:
            return ck.committed_offsets(f.topic) or None
    except OnceflowError:
        return None
    if ck.initial_offsets and f.topic in ck.initial_offsets:
        return dict(ck.initial_offsets[f.topic])
    return offsets.from_spark_json(f.identity.starting_offsets if f.identity else None, f.topic)


# -- the decision ----------------------------------------------------------------------
def decide(f: Facts, *, force: bool = False, accept_loss: bool = False, stamp: str = "now") -> Plan:
    """The plan for these facts. `stamp` names the moved-aside checkpoint (`<checkpoint>.broken-<stamp>`)."""
    ck = f.checkpoint
    written = f.written
    plan = Plan(
        pipeline=f.pipeline,
        pipeline_file=f.pipeline_file,
        topic=f.topic,
        checkpoint_path=ck.path,
        case=DEAD_QUERY,
        decision=RESTART,
        summary="",
        findings=[],
        actions=[],
        force=force,
        accept_loss=accept_loss,
        facts=facts_summary(f),
        previous_generation=f.identity.generation if f.identity else None,
    )
    fix_cmd = f"onceflow recover --pipeline {f.pipeline_file or f.pipeline}"

    def refuse(case: str, why: str, override: str | None = None) -> Plan:
        plan.case, plan.decision, plan.refusal, plan.override = case, REFUSE, why, override
        plan.actions, plan.next_step = [], None
        plan.summary = f"refused ({case}): nothing was changed"
        return plan

    if f.running:
        h = f.holder or {}
        plan.findings.append(
            Finding(RUNNING, f"the job runs (pid {h.get('pid')} on {h.get('host')}, started {h.get('started')})")
        )
        return refuse(
            RUNNING,
            f"the pipeline's query is running (pid {h.get('pid')} on {h.get('host')}); recovery "
            "would race with it on the checkpoint and the tables. Fix: stop it first (SIGTERM "
            f"stops it at a batch boundary), then run `{fix_cmd}` again.",
        )
    if f.poisoned:
        b = f.poisoned
        plan.findings.append(Finding(POISONED, b.describe()))
        return refuse(
            POISONED,
            f"{b.describe()}. A restart re-runs the same offsets and fails the same way, so recovery will "
            f"not restart it. Fix: `onceflow quarantine --pipeline {f.pipeline_file or f.pipeline} --batch "
            f"{b.batch_id}` moves those offsets to quarantine (reason unprocessable, raw bytes kept; "
            "docs/runbooks/poison-batch.md), then start the job again.",
        )

    foreign = {n: led.last.topic for n, led in f.ledgers.items() if led.last and led.last.topic != f.topic}
    if foreign:
        detail = ", ".join(f"{n} from {t!r}" for n, t in foreign.items())
        plan.findings.append(Finding(UNUSABLE, f"the sinks were written from another topic: {detail}"))
        return refuse(
            UNUSABLE,
            f"the sinks were written from another topic ({detail}), but the pipeline reads "
            f"{f.topic!r}: offsets of one topic say nothing about another. Fix: give the new "
            "topic new tables and a new checkpoint, or set source.topic back.",
        )

    # facts worth a line whatever happens
    for n, led in f.ledgers.items():
        for problem in led.problems():
            plan.findings.append(Finding(LEDGER_GAP, f"{n} ledger: {problem}"))
    positions = {n: (_position_key(led), led.committed_offsets()) for n, led in f.fed.items()}
    if written and len({(k, tuple(sorted(o.items()))) for k, o in positions.values()}) > 1:
        plan.findings.append(
            Finding(
                SINKS_DISAGREE,
                "the sinks stopped at different points: "
                + "; ".join(f"{n} holds {_where(led)}" for n, led in f.fed.items()),
            )
        )
    plan.findings += _follower_findings(f)
    leftovers = _leftover_files(ck) if ck.exists else []

    state, why = checkpoint_state(f)
    if not written and (state in (MISSING, PREPARED) or (state == HEALTHY and ck.empty)):
        plan.findings.insert(0, Finding(FRESH, f"no sink holds a batch; the checkpoint: {why}"))
        plan.case, plan.decision = FRESH, NOTHING
        plan.summary = "nothing to recover: the next run starts as a first run"
        start = (f.identity.starting_offsets if f.identity else None) or f.default_starting_offsets
        plan.next_step = f"start the query (`onceflow ingest --pipeline {f.pipeline}`): it reads from {start}"
        plan.generation = f.identity.generation if f.identity else 0
        return plan

    reason: str | None = None  # why a new generation is needed; None: restart from the checkpoint
    if state in (CORRUPT, MISSING, UNUSABLE):
        plan.findings.insert(0, Finding(state, f"the checkpoint {ck.path}: {why}"))
        plan.case, reason = state, f"{state.replace('_', ' ')}: {why}"
    else:
        clean = _stopped_cleanly(f) and ck.uncommitted is None
        plan.case = STOPPED if clean else DEAD_QUERY
        plan.findings.insert(0, Finding(plan.case, _run_text(f) + f"; the checkpoint is {state}: {why}"))
        ident = f.identity
        key = (ident.generation if ident else 0, ck.last_committed if ck.last_committed is not None else -1)
        behind = {n: led for n, led in f.fed.items() if ck.last_committed is not None and _position_key(led) < key}
        if behind:
            committed = _restart_position(f)
            detail = "; ".join(f"{n} holds {_where(led)}" for n, led in behind.items())
            text = (
                f"the checkpoint committed batch {ck.last_committed} of generation {key[0]} (up to "
                f"{_fmt(committed)}), but {detail}: the rows in between are missing from "
                f"{', '.join(behind)} (was a table restored from an older copy?). A restart from the checkpoint "
                "would continue after them and never write them"
            )
            plan.findings.append(Finding(AHEAD, text))
            if not force:
                return refuse(
                    AHEAD,
                    f"{text}. Fix: restore the table(s) from a newer copy and recover again, or run "
                    f"`{fix_cmd} --force` to start a new generation from the sink ledgers, which "
                    "re-reads the missing rows from Kafka (if it still holds them) while the other "
                    "sinks skip what they have.",
                    override="--force",
                )
            plan.case, reason = AHEAD, f"checkpoint ahead of the sink ledger ({', '.join(behind)}), --force"
        else:
            position = _restart_position(f) or {}
            past = {p: o for p, o in position.items() if o > f.kafka.latest.get(p, o)}
            if past:
                return _kafka_behind(plan, refuse, f, {"checkpoint": past})
            gone = {
                p: (o, f.kafka.earliest[p])
                for p, o in position.items()
                if o >= 0 and p in f.kafka.earliest and f.kafka.earliest[p] > o
            }
            if gone:
                text = ", ".join(f"partition {p}: resume at {o}, log starts at {low}" for p, (o, low) in gone.items())
                plan.findings.append(
                    Finding(
                        RETENTION,
                        f"Kafka deleted offsets the checkpoint resumes from ({text}); "
                        "Spark would fail on restart (failOnDataLoss)",
                    )
                )
                plan.case, reason = RETENTION, f"Kafka no longer holds the checkpoint's resume point ({text})"

    if reason is None:
        return _restart(plan, f, state, leftovers)
    return _new_generation(plan, refuse, f, reason, fix_cmd, accept_loss, stamp)


def _follower_findings(f: Facts) -> list[Finding]:
    """How each follower (the aggregates) stands against the sink it follows: the next run merges
    what it lacks from that sink's table, without reading Kafka, and skips what it already holds."""
    out = []
    for name, ledger in f.followers.items():
        leader = f.ledgers.get(FOLLOWS[name])
        if leader is None or not ledger.exists:
            continue
        missing, ahead = follower_lag(leader, ledger)
        if ahead:
            out.append(
                Finding(
                    FOLLOWER_AHEAD,
                    (
                        f"{name} holds offsets {FOLLOWS[name]} does not ({_fmt(ahead)}; {FOLLOWS[name]} holds "
                        f"{_where(leader)}): once {FOLLOWS[name]} has them again, the next runs merge only its rows "
                        f"from {name}'s point on, so none is counted twice"
                    ),
                )
            )
        if missing:
            out.append(
                Finding(
                    FOLLOWER_LAG,
                    (
                        f"{name} trails {FOLLOWS[name]} by {len(missing)} batch(es) (it holds {_where(ledger)}): "
                        f"the next run merges them from {FOLLOWS[name]}, without reading Kafka again"
                    ),
                )
            )
    return out


def _start_hint(f: Facts) -> str:
    """What to run next, with the pipeline's own name and DAG id."""
    return (
        f"start the query: `onceflow ingest --pipeline {f.pipeline}` (or `onceflow recover --pipeline "
        f"{f.pipeline} --resume`); in Airflow the {f.pipeline}_recover DAG resubmits it"
    )


def _stopped_cleanly(f: Facts) -> bool:
    """The last run has a final event saying it finished or was stopped (not failed, not killed)."""
    return ended_cleanly(((f.last_run or {}).get("final") or {}).get("status"))


def _run_text(f: Facts) -> str:
    run = f.last_run
    if not run:
        return "the query is not running (no run in the status log)"
    final = run.get("final")
    if final is None:
        return f"the query is not running: its last run ({run.get('run_id')}) has no final event (killed or crashed)"
    when = f" at {final['time']}" if final.get("time") else ""
    text = f"the query is not running: its last run ({run.get('run_id')}) {ended(final.get('status'))}{when}"
    return text + (f": {final['error'][:300]}" if final.get("error") else "")


def _kafka_behind(plan: Plan, refuse, f: Facts, past: dict[str, dict[int, int]]) -> Plan:
    detail = "; ".join(f"{who} at {_fmt(o)}" for who, o in past.items())
    text = (
        f"committed offsets are past Kafka's end ({detail}; Kafka ends at {_fmt(f.kafka.latest)}): the topic "
        "was deleted and recreated, or the pipeline points at another cluster"
    )
    plan.findings.append(Finding(KAFKA_BEHIND, text))
    return refuse(
        KAFKA_BEHIND,
        f"{text}. Recovery cannot map old offsets onto a new log. Fix: check "
        "source.bootstrap_servers and source.topic; if the topic was recreated on purpose, "
        "give the pipeline new tables and a new checkpoint.",
    )


def _restart(plan: Plan, f: Facts, state: str, leftovers: list[str]) -> Plan:
    ck, ident = f.checkpoint, f.identity
    plan.decision = RESTART
    plan.generation = ident.generation if ident else 0
    plan.resume = _restart_position(f)
    if leftovers:
        plan.findings.append(
            Finding(
                LEFTOVERS, f"{len(leftovers)} temp file(s) left by an interrupted write: " + ", ".join(leftovers[:5])
            )
        )
        plan.actions.append(
            Action(
                MOVE_LEFTOVERS,
                f"move {len(leftovers)} leftover temp file(s) out of the "
                "checkpoint (kept, not deleted; Spark ignores them)",
                {"files": leftovers},
            )
        )
    if state == PREPARED:
        plan.summary = (
            f"restart: generation {plan.generation} is prepared; the next run starts at "
            f"{_fmt(plan.resume) if plan.resume else f.default_starting_offsets}"
        )
    elif ck.uncommitted is not None:
        plan.summary = (
            f"restart from the checkpoint: Spark re-runs batch {ck.uncommitted} with the offsets it "
            f"planned; sinks that already hold it skip it (Delta txn ids)"
        )
    else:
        nxt = ck.last_committed + 1 if ck.last_committed is not None else 0
        plan.summary = f"restart from the checkpoint: the next batch is {nxt}, from {_fmt(plan.resume)}"
    if any(x.case == SINKS_DISAGREE for x in plan.findings):
        plan.summary += "; the sinks that are behind catch up in the replay, the others skip it"
    elif plan.case == STOPPED and not plan.actions and state != PREPARED and ck.uncommitted is None:
        plan.decision = NOTHING
        plan.summary = "nothing to recover: the last run ended cleanly; " + plan.summary.replace(
            "restart from the checkpoint: ", "the next run continues from the checkpoint: "
        )
    plan.next_step = _start_hint(f)
    return plan


def _new_generation(plan: Plan, refuse, f: Facts, reason: str, fix_cmd: str, accept_loss: bool, stamp: str) -> Plan:
    ck, written, kafka = f.checkpoint, f.written, f.kafka
    newest = max((led.entries[-1].generation for led in written.values()), default=-1)
    plan.generation = max(newest, f.identity.generation if f.identity else -1) + 1
    plan.decision = NEW_GENERATION

    starting: dict[int, int] = {}
    lost_by_sink: dict[str, dict[int, tuple[int, int]]] = {}
    if written:
        origin: dict[int, int] = {}  # per partition, where the pipeline began reading
        for ledger in f.fed.values():
            for entry in ledger.entries:
                for p, o in entry.start.items():
                    origin[p] = min(origin.get(p, o), o)
        parts = sorted(origin)
        points = {n: {p: led.committed_offsets().get(p, origin[p]) for p in parts} for n, led in f.fed.items()}
        missing = [p for p in parts if p not in kafka.latest]
        past = {
            n: {p: o for p, o in pts.items() if p in kafka.latest and o > kafka.latest[p]} for n, pts in points.items()
        }
        past = {n: o for n, o in past.items() if o}
        if missing or past:
            if missing:
                past[f"partitions {missing} (absent from Kafka)"] = {p: origin[p] for p in missing}
            return _kafka_behind(plan, refuse, f, past)
        resume = {p: min(pts[p] for pts in points.values()) for p in parts}
        for n, pts in points.items():
            for p, o in pts.items():
                low = kafka.earliest.get(p, 0)
                if o < low:
                    lost_by_sink.setdefault(n, {})[p] = (o, low)
        lost: dict[int, LostRange] = {}
        for n, ranges in lost_by_sink.items():
            for p, (start, end) in ranges.items():
                if p in lost:
                    lost[p] = LostRange(p, min(lost[p].start, start), end, [*lost[p].sinks, n])
                else:
                    lost[p] = LostRange(p, start, end, [n])
        plan.lost = [lost[p] for p in sorted(lost)]
        starting = {p: max(resume[p], kafka.earliest.get(p, 0)) for p in parts}
        for p in kafka.partitions:
            if p not in starting:
                starting[p] = EARLIEST
                if kafka.earliest.get(p, 0) > 0:
                    plan.findings.append(
                        Finding(
                            RETENTION,
                            f"partition {p} appears in no sink ledger and its log starts at "
                            f"{kafka.earliest[p]}: the new generation reads it from there",
                        )
                    )
        plan.resume = dict(sorted(starting.items()))
        plan.starting_offsets = offsets.spark_json(f.topic, starting)
        plan.sink_floors = {n: offsets.as_json(pts) for n, pts in points.items()}
        if plan.lost:
            text = "; ".join(
                f"partition {r.partition}: offsets [{r.start}, {r.end}) = {r.count} offsets ({', '.join(r.sinks)})"
                for r in plan.lost
            )
            plan.findings.append(Finding(RETENTION, f"Kafka deleted offsets the sinks have not got: {text}"))
            if not accept_loss:
                return refuse(
                    RETENTION,
                    f"Kafka no longer holds offsets the resume needs (retention deleted them "
                    f"before the sinks got them): {text}. They cannot be read again. Fix: if a "
                    "copy of those records exists, load it first; otherwise run "
                    f"`{fix_cmd} --accept-loss`, which records exactly these ranges as lost "
                    "in the sink ledgers (the audit shows them as accepted loss) and resumes "
                    "at Kafka's log start.",
                    override="--accept-loss",
                )

    if ck.exists or any(p.path == ck.path for p in ck.problems):  # a directory, or a file in its place
        aside = f"{ck.path}.broken-{stamp}"
        plan.actions.append(
            Action(
                MOVE_CHECKPOINT,
                f"move the checkpoint aside to {aside} (kept, never deleted)",
                {"from": ck.path, "to": aside},
            )
        )
    for n, ranges in lost_by_sink.items():
        ledger = f.ledgers[n]
        plan.actions.append(
            Action(
                WRITE_LOSS,
                f"record the loss in the {n} ledger: "
                + ", ".join(f"partition {p} [{a}, {b})" for p, (a, b) in sorted(ranges.items()))
                + ("" if ledger.exists else " (the table does not exist: kept in the recovery record only)"),
                {
                    "sink": n,
                    "table": ledger.table,
                    "generation": plan.generation,
                    "start": offsets.as_json({p: a for p, (a, b) in ranges.items()}),
                    "end": offsets.as_json({p: b for p, (a, b) in ranges.items()}),
                    "extra": {},
                },
            )
        )
    floors = ""
    resume = plan.resume or {}
    if plan.sink_floors and any(o > resume.get(int(p), o) for fl in plan.sink_floors.values() for p, o in fl.items()):
        floors = "; each sink keeps only rows from its own point: " + ", ".join(
            f"{n} {_fmt(offsets.from_json(fl))}" for n, fl in plan.sink_floors.items()
        )
    plan.actions.append(
        Action(
            WRITE_IDENTITY,
            f"start generation {plan.generation} in a fresh checkpoint at {ck.path}, reading from "
            + (_fmt(plan.resume) if plan.resume is not None else f.default_starting_offsets)
            + floors,
            {
                "checkpoint": ck.path,
                "generation": plan.generation,
                "starting_offsets": plan.starting_offsets,
                "reason": reason,
                "sink_floors": plan.sink_floors,
            },
        )
    )
    if plan.resume is None:
        plan.summary = (
            f"new generation {plan.generation} ({reason}); no sink holds a batch, so it starts from "
            f"source.starting_offsets ({f.default_starting_offsets})"
        )
    else:
        if plan.lost:
            plan.summary = (
                f"new generation {plan.generation} ({reason}), resuming at Kafka's log start "
                f"{_fmt(plan.resume)} where the sinks' committed point is no longer held"
            )
        else:
            plan.summary = (
                f"new generation {plan.generation} ({reason}), resuming at the lowest committed point "
                f"of the sink ledgers {_fmt(plan.resume)}"
            )
        if any(x.case == SINKS_DISAGREE for x in plan.findings):
            plan.summary += "; each sink skips the rows it already holds (sink floors)"
        if plan.lost:
            plan.summary += f"; {sum(r.count for r in plan.lost)} offsets accepted as lost"
    plan.next_step = _start_hint(f)
    return plan
