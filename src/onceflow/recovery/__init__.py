"""Recovery from the last committed offsets: `onceflow recover`.

    plan = plan_recovery(pipeline)                 # what was found, what would be done (no changes)
    result = recover(pipeline, accept_loss=True)   # plan + execute, under the run lock, recorded

Modules: `facts` (read checkpoint, identity, ledgers, Kafka, run lock), `decide` (the pure
decision; a new writer generation in `new_generation`, its words in `describe`), `plan` (what it
decided), `cases` (the vocabulary), `execute` (the actions), `record` (the JSON record under
`<state>/pipelines/<name>/recoveries/`). The cases and runbooks: docs/recovery.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from onceflow.config import Pipeline
from onceflow.errors import OnceflowError, RecoveryError
from onceflow.recovery.cases import Decision
from onceflow.recovery.decide import decide
from onceflow.recovery.execute import execute
from onceflow.recovery.facts import Facts, gather
from onceflow.recovery.plan import Plan
from onceflow.recovery.record import Outcome, RecoveryRecord, new_stamp
from onceflow.sinks import driver_lease
from onceflow.state.status import AlreadyRunningError, LockWork, RunLock

__all__ = ["Facts", "Plan", "RecoveryResult", "decide", "execute", "gather", "plan_recovery", "recover"]


@dataclass
class RecoveryResult:
    plan: Plan | None
    outcome: Outcome
    record_path: Path
    record: dict


def plan_recovery(
    pipeline: Pipeline, *, force: bool = False, accept_loss: bool = False, stamp: str | None = None
) -> Plan:
    """The plan for the pipeline as it is now; changes nothing and writes no record."""
    return decide(gather(pipeline), force=force, accept_loss=accept_loss, stamp=stamp or new_stamp())


def recover(
    pipeline: Pipeline,
    *,
    dry_run: bool = False,
    force: bool = False,
    accept_loss: bool = False,
    log: Callable[[str], None] = lambda msg: None,
) -> RecoveryResult:
    """Plan and (unless dry_run or refused) execute, holding the pipeline's run lock so the
    job cannot start halfway; every step goes to a recovery record."""
    stamp = new_stamp()
    lock = RunLock(pipeline.state_path)
    held = False
    if not dry_run:
        try:
            lock.acquire(run_id=f"recovery-{stamp}", mode=LockWork.RECOVERY, pipeline=pipeline.name)
            held = True
        except AlreadyRunningError:
            held = False
    record = RecoveryRecord(
        pipeline.state_path, pipeline.name, stamp, {"dry_run": dry_run, "force": force, "accept_loss": accept_loss}
    )
    lease = contextlib.ExitStack()
    try:
        if held:  # another machine's driver of this pipeline: wait for its lease to lapse, or refuse
            lease.enter_context(driver_lease(pipeline, log))
        facts = gather(pipeline, running=False if held else None)
        plan = decide(facts, force=force, accept_loss=accept_loss, stamp=record.id)
        record.set_plan(plan.as_dict())
        if plan.decision == Decision.REFUSE:
            record.finish(Outcome.REFUSED, plan.refusal)
        elif dry_run:
            record.finish(Outcome.DRY_RUN)
        elif plan.decision == Decision.NOTHING and not plan.actions:
            record.finish(Outcome.NOTHING_TO_DO)
        else:
            execute(plan, record, log)
            record.finish(Outcome.DONE)
        return RecoveryResult(plan, Outcome(record.data["outcome"]), record.path, record.data)
    except OnceflowError as exc:
        record.finish(Outcome.FAILED, str(exc))
        raise
    except Exception as exc:  # a bug or an unexpected state: recorded, then told without a traceback
        record.finish(Outcome.FAILED, f"{type(exc).__name__}: {exc}")
        raise RecoveryError(
            f"recovery failed unexpectedly ({type(exc).__name__}: {exc}); the record is "
            f"{record.path}. Fix: report it with that file; nothing after the failed step "
            "was changed."
        ) from exc
    finally:
        lease.close()
        if held:
            lock.release()
