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

from onceflow import offsets
from onceflow.checkpoint import Checkpoint
from onceflow.errors import OnceflowError
from onceflow.ledger import follower_lag
from onceflow.recovery.cases import ActionKind, Case, CheckpointState, Decision
from onceflow.recovery.describe import (
    facts_summary,
    last_batch,
    offsets_text,
    position_key,
    run_text,
    start_hint,
    where,
)
from onceflow.recovery.facts import Facts
from onceflow.recovery.new_generation import kafka_behind, new_generation
from onceflow.recovery.plan import Action, Finding, Plan
from onceflow.sink_kinds import FOLLOWS
from onceflow.state.status import ended_cleanly


def _leftover_files(ck: Checkpoint) -> list[str]:
    return sorted(p.path for p in ck.problems if p.path.endswith(".tmp"))


def checkpoint_state(f: Facts) -> tuple[CheckpointState, str]:
    """(state, why): healthy | prepared (identity only: a recovery or first run set it up) |
    missing | corrupt | unusable."""
    ck, ident = f.checkpoint, f.identity
    written = f.written
    newest = max((led.entries[-1].generation for led in written.values()), default=None)
    if f.identity_error:
        return CheckpointState.CORRUPT, f"its identity file is unreadable: {f.identity_error}"
    if not ck.exists:
        return CheckpointState.MISSING, "the directory does not exist" + (
            "; a file is in its place" if ck.problems else ""
        )
    if ck.unusable_reasons:
        return CheckpointState.CORRUPT, "; ".join(ck.unusable_reasons)
    if ck.topics and f.topic not in ck.topics:
        return CheckpointState.UNUSABLE, (
            f"it reads topic(s) {', '.join(ck.topics)}, not {f.topic!r} (the query changed: Spark "
            "cannot continue it for another topic)"
        )
    if ident is None:
        if ck.empty:
            return CheckpointState.MISSING, f"{ck.path} holds no batches and no onceflow identity"
        if written:
            return CheckpointState.UNUSABLE, (
                "it has no onceflow identity (_onceflow.json), so its writer generation is unknown; "
                "it was not made by onceflow or lost that file"
            )
        return CheckpointState.HEALTHY, "no batch was written to any sink yet"
    if newest is not None and newest > ident.generation:
        return CheckpointState.UNUSABLE, (
            f"it is generation {ident.generation}, but the sinks were written by generation {newest}: "
            "it is older than the tables (restored from a copy?)"
        )
    latest = ck.latest_planned if ck.latest_planned is not None else -1
    ahead = {
        n: last.batch_id
        for n, led in written.items()
        if (last := last_batch(led)) and last.generation == ident.generation and last.batch_id > latest
    }
    if ahead:
        return CheckpointState.UNUSABLE, (
            f"the sinks hold batches of generation {ident.generation} it never planned "
            f"({', '.join(f'{n}: batch {b}' for n, b in ahead.items())}; its newest batch is "
            f"{latest if latest >= 0 else 'none'}): it is older than the tables, and a restart would "
            "reuse those batch ids for other offsets, which Delta would skip"
        )
    if ck.empty:
        return CheckpointState.PREPARED, (
            f"generation {ident.generation} is set up ({ident.reason}) and has not run yet"
        )
    return CheckpointState.HEALTHY, "every file a restart reads is present and parses"


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


def decide(f: Facts, *, force: bool = False, accept_loss: bool = False, stamp: str = "now") -> Plan:
    """The plan for these facts. `stamp` names the moved-aside checkpoint (`<checkpoint>.broken-<stamp>`)."""
    ck = f.checkpoint
    written = f.written
    plan = Plan(
        pipeline=f.pipeline,
        pipeline_file=f.pipeline_file,
        topic=f.topic,
        checkpoint_path=ck.path,
        case=Case.DEAD_QUERY,
        decision=Decision.RESTART,
        summary="",
        findings=[],
        actions=[],
        force=force,
        accept_loss=accept_loss,
        facts=facts_summary(f),
        previous_generation=f.identity.generation if f.identity else None,
    )
    fix_cmd = f"onceflow recover --pipeline {f.pipeline_file or f.pipeline}"

    if f.running:
        h = f.holder or {}
        plan.findings.append(
            Finding(Case.RUNNING, f"the job runs (pid {h.get('pid')} on {h.get('host')}, started {h.get('started')})")
        )
        return plan.refuse(
            Case.RUNNING,
            f"the pipeline's query is running (pid {h.get('pid')} on {h.get('host')}); recovery "
            "would race with it on the checkpoint and the tables. Fix: stop it first (SIGTERM "
            f"stops it at a batch boundary), then run `{fix_cmd}` again.",
        )
    if f.poisoned:
        b = f.poisoned
        plan.findings.append(Finding(Case.POISONED, b.describe()))
        return plan.refuse(
            Case.POISONED,
            f"{b.describe()}. A restart re-runs the same offsets and fails the same way, so recovery will "
            f"not restart it. Fix: `onceflow quarantine --pipeline {f.pipeline_file or f.pipeline} --batch "
            f"{b.batch_id}` moves those offsets to quarantine (reason unprocessable, raw bytes kept; "
            "docs/runbooks/poison-batch.md), then start the job again.",
        )

    foreign = {n: led.last.topic for n, led in f.ledgers.items() if led.last and led.last.topic != f.topic}
    if foreign:
        detail = ", ".join(f"{n} from {t!r}" for n, t in foreign.items())
        plan.findings.append(Finding(Case.UNUSABLE, f"the sinks were written from another topic: {detail}"))
        return plan.refuse(
            Case.UNUSABLE,
            f"the sinks were written from another topic ({detail}), but the pipeline reads "
            f"{f.topic!r}: offsets of one topic say nothing about another. Fix: give the new "
            "topic new tables and a new checkpoint, or set source.topic back.",
        )

    # facts worth a line whatever happens
    for n, led in f.ledgers.items():
        for problem in led.problems():
            plan.findings.append(Finding(Case.LEDGER_GAP, f"{n} ledger: {problem}"))
    positions = {n: (position_key(led), led.committed_offsets()) for n, led in f.fed.items()}
    if written and len({(k, tuple(sorted(o.items()))) for k, o in positions.values()}) > 1:
        plan.findings.append(
            Finding(
                Case.SINKS_DISAGREE,
                "the sinks stopped at different points: "
                + "; ".join(f"{n} holds {where(led)}" for n, led in f.fed.items()),
            )
        )
    plan.findings += _follower_findings(f)
    leftovers = _leftover_files(ck) if ck.exists else []

    state, why = checkpoint_state(f)
    if not written and (
        state in (CheckpointState.MISSING, CheckpointState.PREPARED) or (state == CheckpointState.HEALTHY and ck.empty)
    ):
        plan.findings.insert(0, Finding(Case.FRESH, f"no sink holds a batch; the checkpoint: {why}"))
        plan.case, plan.decision = Case.FRESH, Decision.NOTHING
        plan.summary = "nothing to recover: the next run starts as a first run"
        start = (f.identity.starting_offsets if f.identity else None) or f.default_starting_offsets
        plan.next_step = f"start the query (`onceflow ingest --pipeline {f.pipeline}`): it reads from {start}"
        plan.generation = f.identity.generation if f.identity else 0
        return plan

    reason: str | None = None  # why a new generation is needed; None: restart from the checkpoint
    if state in (CheckpointState.CORRUPT, CheckpointState.MISSING, CheckpointState.UNUSABLE):
        plan.case, reason = Case(state), f"{state.replace('_', ' ')}: {why}"
        plan.findings.insert(0, Finding(plan.case, f"the checkpoint {ck.path}: {why}"))
    else:
        clean = _stopped_cleanly(f) and ck.uncommitted is None
        plan.case = Case.STOPPED if clean else Case.DEAD_QUERY
        plan.findings.insert(0, Finding(plan.case, run_text(f) + f"; the checkpoint is {state}: {why}"))
        ident = f.identity
        key = (ident.generation if ident else 0, ck.last_committed if ck.last_committed is not None else -1)
        behind = {n: led for n, led in f.fed.items() if ck.last_committed is not None and position_key(led) < key}
        if behind:
            committed = _restart_position(f)
            detail = "; ".join(f"{n} holds {where(led)}" for n, led in behind.items())
            text = (
                f"the checkpoint committed batch {ck.last_committed} of generation {key[0]} (up to "
                f"{offsets_text(committed)}), but {detail}: the rows in between are missing from "
                f"{', '.join(behind)} (was a table restored from an older copy?). A restart from the checkpoint "
                "would continue after them and never write them"
            )
            plan.findings.append(Finding(Case.AHEAD, text))
            if not force:
                return plan.refuse(
                    Case.AHEAD,
                    f"{text}. Fix: restore the table(s) from a newer copy and recover again, or run "
                    f"`{fix_cmd} --force` to start a new generation from the sink ledgers, which "
                    "re-reads the missing rows from Kafka (if it still holds them) while the other "
                    "sinks skip what they have.",
                    override="--force",
                )
            plan.case, reason = Case.AHEAD, f"checkpoint ahead of the sink ledger ({', '.join(behind)}), --force"
        else:
            position = _restart_position(f) or {}
            past = {p: o for p, o in position.items() if o > f.kafka.latest.get(p, o)}
            if past:
                return kafka_behind(plan, f, {"checkpoint": past})
            gone = {
                p: (o, f.kafka.earliest[p])
                for p, o in position.items()
                if o >= 0 and p in f.kafka.earliest and f.kafka.earliest[p] > o
            }
            if gone:
                text = ", ".join(f"partition {p}: resume at {o}, log starts at {low}" for p, (o, low) in gone.items())
                plan.findings.append(
                    Finding(
                        Case.RETENTION,
                        f"Kafka deleted offsets the checkpoint resumes from ({text}); "
                        "Spark would fail on restart (failOnDataLoss)",
                    )
                )
                plan.case, reason = Case.RETENTION, f"Kafka no longer holds the checkpoint's resume point ({text})"

    if reason is None:
        return _restart(plan, f, state, leftovers)
    return new_generation(plan, f, reason, fix_cmd, accept_loss, stamp)


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
                    Case.FOLLOWER_AHEAD,
                    (
                        f"{name} holds offsets {FOLLOWS[name]} does not ({offsets_text(ahead)}; {FOLLOWS[name]} holds "
                        f"{where(leader)}): once {FOLLOWS[name]} has them again, the next runs merge only its rows "
                        f"from {name}'s point on, so none is counted twice"
                    ),
                )
            )
        if missing:
            out.append(
                Finding(
                    Case.FOLLOWER_LAG,
                    (
                        f"{name} trails {FOLLOWS[name]} by {len(missing)} batch(es) (it holds {where(ledger)}): "
                        f"the next run merges them from {FOLLOWS[name]}, without reading Kafka again"
                    ),
                )
            )
    return out


def _stopped_cleanly(f: Facts) -> bool:
    """The last run has a final event saying it finished or was stopped (not failed, not killed)."""
    return ended_cleanly(((f.last_run or {}).get("final") or {}).get("status"))


def _restart(plan: Plan, f: Facts, state: CheckpointState, leftovers: list[str]) -> Plan:
    ck, ident = f.checkpoint, f.identity
    plan.decision = Decision.RESTART
    plan.generation = ident.generation if ident else 0
    plan.resume = _restart_position(f)
    if leftovers:
        plan.findings.append(
            Finding(
                Case.LEFTOVERS,
                f"{len(leftovers)} temp file(s) left by an interrupted write: " + ", ".join(leftovers[:5]),
            )
        )
        plan.actions.append(
            Action(
                ActionKind.MOVE_LEFTOVERS,
                f"move {len(leftovers)} leftover temp file(s) out of the "
                "checkpoint (kept, not deleted; Spark ignores them)",
                {"files": leftovers},
            )
        )
    if state == CheckpointState.PREPARED:
        plan.summary = (
            f"restart: generation {plan.generation} is prepared; the next run starts at "
            f"{offsets_text(plan.resume) if plan.resume else f.default_starting_offsets}"
        )
    elif ck.uncommitted is not None:
        plan.summary = (
            f"restart from the checkpoint: Spark re-runs batch {ck.uncommitted} with the offsets it "
            f"planned; sinks that already hold it skip it (Delta txn ids)"
        )
    else:
        nxt = ck.last_committed + 1 if ck.last_committed is not None else 0
        plan.summary = f"restart from the checkpoint: the next batch is {nxt}, from {offsets_text(plan.resume)}"
    if any(x.case == Case.SINKS_DISAGREE for x in plan.findings):
        plan.summary += "; the sinks that are behind catch up in the replay, the others skip it"
    elif (
        plan.case == Case.STOPPED and not plan.actions and state != CheckpointState.PREPARED and ck.uncommitted is None
    ):
        plan.decision = Decision.NOTHING
        plan.summary = "nothing to recover: the last run ended cleanly; " + plan.summary.replace(
            "restart from the checkpoint: ", "the next run continues from the checkpoint: "
        )
    plan.next_step = start_hint(f)
    return plan
