"""Carrying out a recovery plan, one recorded action at a time.

Order matters for a recovery that is itself interrupted: the old checkpoint is
moved aside first (a re-plan then sees a missing checkpoint and plans the same
new generation again), LOSS entries next (idempotent per generation), and the new
checkpoint's identity last — until it exists, `onceflow ingest` refuses to start.
Nothing is ever deleted: checkpoints and leftover files are moved beside the
checkpoint with a time stamp.
"""

from __future__ import annotations

from collections.abc import Callable

from onceflow import offsets
from onceflow.errors import RecoveryError
from onceflow.ledger import loss_entry, write_loss
from onceflow.recovery.cases import ActionKind
from onceflow.recovery.plan import Action, Plan
from onceflow.recovery.record import ActionStatus, RecoveryRecord
from onceflow.state.generation import new_identity, read_identity, write_identity
from onceflow.storage.files import StorePath

Log = Callable[[str], None]


def _free_path(path: StorePath) -> StorePath:
    """`path`, or `path-1`, `path-2`… if taken (never overwrite what was moved aside before)."""
    candidate, n = path, 1
    while candidate.exists():
        candidate, n = StorePath(f"{path.location.uri}-{n}"), n + 1
    return candidate


def _move_checkpoint(plan: Plan, action: Action, record: RecoveryRecord) -> dict:
    src = StorePath(action.params["from"])
    if not src.exists():
        raise RecoveryError(
            f"{src} disappeared between planning and moving it aside; nothing was changed. "
            "Fix: run `onceflow recover` again to plan from what is there now."
        )
    dst = _free_path(StorePath(action.params["to"]))
    src.move_to(dst)
    return {"from": str(src), "to": str(dst)}


def _move_leftovers(plan: Plan, action: Action, record: RecoveryRecord) -> dict:
    root = str(StorePath(plan.checkpoint_path)).rstrip("/")
    dest_root = _free_path(StorePath(f"{plan.checkpoint_path}.leftovers-{record.id}"))
    moved, gone = [], []
    for name in action.params["files"]:
        path = StorePath(name)
        if not path.exists():
            gone.append(name)
            continue
        folder, _, base = str(path).rpartition("/")
        for file in (path, StorePath(f"{folder}/.{base}.crc")):
            if file.exists():
                target = StorePath(f"{dest_root}{str(file).removeprefix(root)}")
                file.move_to(target)
                moved.append({"from": str(file), "to": str(target)})
    return {"moved": moved, "already_gone": gone}


def _write_loss(plan: Plan, action: Action, record: RecoveryRecord) -> dict:
    p = action.params
    if not StorePath(p["table"]).exists():
        return {"written": False, "why": "the table does not exist; the loss is in this record only"}
    entry = loss_entry(
        plan.pipeline,
        p["sink"],
        int(p["generation"]),
        plan.topic,
        offsets.from_json(p["start"]),
        offsets.from_json(p["end"]),
        extra={
            **(p.get("extra") or {}),
            "recovery": record.id,
            "reason": "offsets deleted by Kafka retention before this sink got them; accepted with --accept-loss",
        },
    )
    version = write_loss(p["table"], entry)
    return {
        "written": version is not None,
        "table_version": version,
        **({} if version is not None else {"why": "already recorded by an earlier attempt"}),
    }


def _write_identity(plan: Plan, action: Action, record: RecoveryRecord) -> dict:
    p = action.params
    cp = StorePath(p["checkpoint"])
    if cp.has_files():
        raise RecoveryError(
            f"{cp} is not empty after the old checkpoint was moved aside (another process wrote "
            "to it?); the new generation was not started. Fix: stop whatever writes there and run "
            "`onceflow recover` again."
        )
    identity = new_identity(
        plan.pipeline,
        int(p["generation"]),
        p["starting_offsets"],
        f"onceflow recover {record.id}: {p['reason']}",
        p["sink_floors"],
    )
    write_identity(str(cp), identity)
    check = read_identity(str(cp))
    if check is None or check.generation != identity.generation:
        raise RecoveryError(f"{cp}/_onceflow.json does not read back as generation {identity.generation}")
    return {"checkpoint": str(cp), "generation": identity.generation, "starting_offsets": identity.starting_offsets}


HANDLERS: dict[str, Callable[[Plan, Action, RecoveryRecord], dict]] = {
    ActionKind.MOVE_CHECKPOINT: _move_checkpoint,
    ActionKind.MOVE_LEFTOVERS: _move_leftovers,
    ActionKind.WRITE_LOSS: _write_loss,
    ActionKind.WRITE_IDENTITY: _write_identity,
}


def execute(plan: Plan, record: RecoveryRecord, log: Log = lambda msg: None) -> None:
    """Run the plan's actions in order; each is logged and recorded. The first failure stops
    the rest (recorded as failed, then raised as RecoveryError)."""
    for i, action in enumerate(plan.actions, start=1):
        log(f"[{i}/{len(plan.actions)}] {action.description}")
        try:
            result = HANDLERS[action.kind](plan, action, record)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            record.add_action(action.kind, action.description, ActionStatus.FAILED, error=error)
            for later in plan.actions[i:]:
                record.add_action(later.kind, later.description, ActionStatus.NOT_RUN)
            if isinstance(exc, RecoveryError):
                raise
            raise RecoveryError(
                f"recovery action {action.kind} failed: {error}. What was done so far is in "
                f"{record.path}. Fix: correct the cause and run `onceflow recover` again "
                "(it plans from what is there now)."
            ) from exc
        record.add_action(action.kind, action.description, ActionStatus.DONE, result=result)
        log(f"      done: {result}")
