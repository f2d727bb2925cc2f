"""Recovery records: one JSON file per `onceflow recover`, under `<state>/pipelines/<name>/recoveries/`.

A recovery changes the state exactly-once rests on (checkpoint, generations, ledgers),
so every run leaves a record of what it found, what it planned and what each action
did — rewritten atomically after every step, so even a recovery killed halfway says
how far it got. The file is a `RecordDocument` (onceflow.wire), written through the model;
docs/schemas/recovery-record.schema.json is generated from it (`python -m devkit.schemas`).
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from onceflow.recovery.cases import ActionKind, Case, Decision
from onceflow.state.status import now_iso
from onceflow.wire import IsoTime, OpenWire, Wire

RECORD_FORMAT = 1
RECORDS_DIR = "recoveries"


class Outcome(StrEnum):
    """How one `onceflow recover` ended (the record's `outcome`)."""

    IN_PROGRESS = "in_progress"  # still working, or killed halfway: the actions say how far it got
    DRY_RUN = "dry_run"  # planned only
    REFUSED = "refused"  # the plan refused; nothing was changed
    NOTHING_TO_DO = "nothing_to_do"
    DONE = "done"  # every action done
    FAILED = "failed"  # an action or the planning failed; `error` says why


class ActionStatus(StrEnum):
    """How one recorded action went."""

    DONE = "done"
    FAILED = "failed"
    NOT_RUN = "not_run"  # an earlier action failed


# -- the record's model (docs/schemas/recovery-record.schema.json is generated from it) --------
# partition (as a string) -> Kafka offset; -2 means the log start (Kafka startingOffsets 'earliest')
Offsets = dict[Annotated[str, Field(pattern="^[0-9]+$")], Annotated[int, Field(ge=-2)]]


class Finding(Wire):
    case: Case
    detail: str


class PlannedAction(Wire):
    kind: ActionKind
    description: str
    params: dict[str, Any]


class Lost(Wire):
    """Offsets [start, end) Kafka deleted before the named sinks got them."""

    partition: int = Field(ge=0)
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    sinks: list[str] = Field(min_length=1)
    count: int = Field(ge=1)


class PlanFacts(OpenWire):
    """What recovery read (onceflow.recovery.facts), for the record."""

    checkpoint: dict[str, Any]
    sinks: dict[str, dict[str, Any]]
    kafka: dict[str, Any]
    run: dict[str, Any]


class PlanDocument(Wire):
    """A recovery plan (onceflow.recovery.plan.Plan.as_dict)."""

    pipeline: str
    pipeline_file: str
    topic: str
    checkpoint_path: str
    case: Case = Field(description="the finding that decided")
    decision: Decision
    summary: str = Field(description="one sentence: what recovery does")
    findings: list[Finding]
    actions: list[PlannedAction]
    next_step: str | None
    refusal: str | None = Field(description="why recovery will not act, and the fix")
    override: Literal["--force", "--accept-loss"] | None = Field(description="the flag that lifts the refusal")
    generation: int | None = Field(ge=0, description="writer generation of the next run")
    previous_generation: int | None = Field(ge=0)
    resume: Offsets | None = Field(description="where the next run starts reading")
    starting_offsets: str | None = Field(description="Kafka startingOffsets JSON of a new generation")
    sink_floors: dict[str, Offsets] | None = Field(
        description="sink -> its own committed point: the new generation drops rows below it for that sink"
    )
    lost: list[Lost] = Field(description="offsets [start, end) Kafka deleted before the named sinks got them")
    force: bool
    accept_loss: bool
    facts: PlanFacts | dict[str, Any]


class RecordOptions(Wire):
    dry_run: bool
    force: bool
    accept_loss: bool


class DoneAction(Wire):
    action: ActionKind
    description: str
    status: ActionStatus
    time: IsoTime
    result: dict[str, Any]
    error: str | None


class RecordDocument(Wire):
    """One `onceflow recover` run: what it found, what it planned, what each action did. Written to
    <state>/pipelines/<name>/recoveries/<id>.json and rewritten after every step; `onceflow recover --json`
    prints it."""

    model_config = Wire.model_config | {"title": "onceflow recovery record"}

    format: Literal[1]
    id: str = Field(description="UTC time stamp; also names a moved-aside checkpoint (<checkpoint>.broken-<id>)")
    pipeline: str
    host: str
    pid: int
    started_at: IsoTime
    finished_at: IsoTime | None
    options: RecordOptions
    outcome: Outcome
    error: str | None = Field(description="the refusal or the failure")
    plan: PlanDocument | None = Field(description="null when planning itself failed")
    actions: list[DoneAction]


def new_stamp() -> str:
    """A UTC time stamp that sorts, names files and moved-aside checkpoints: 20261121T101502123456Z."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


class RecoveryRecord:
    def __init__(self, state_path: Path, pipeline: str, stamp: str, options: dict):
        folder = Path(state_path) / RECORDS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        path, n = folder / f"{stamp}.json", 1
        while path.exists():  # two recoveries in one microsecond: keep both
            path, n = folder / f"{stamp}-{n}.json", n + 1
        self.path = path
        self.data: dict = {
            "format": RECORD_FORMAT,
            "id": path.stem,
            "pipeline": pipeline,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": now_iso(),
            "finished_at": None,
            "options": options,
            "outcome": Outcome.IN_PROGRESS,
            "error": None,
            "plan": None,
            "actions": [],
        }
        self.save()

    @property
    def id(self) -> str:
        return self.data["id"]

    def set_plan(self, plan: dict) -> None:
        self.data["plan"] = plan
        self.save()

    def add_action(
        self, kind: str, description: str, status: str, result: dict | None = None, error: str | None = None
    ) -> None:
        self.data["actions"].append(
            {
                "action": kind,
                "description": description,
                "status": status,
                "time": now_iso(),
                "result": result or {},
                "error": error,
            }
        )
        self.save()

    def finish(self, outcome: str, error: str | None = None) -> None:
        self.data.update(outcome=outcome, error=error, finished_at=now_iso())
        self.save()

    def save(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        body = RecordDocument.model_validate(self.data).as_json()  # its contract, checked at every write
        tmp.write_text(json.dumps(body, indent=2) + "\n")
        os.replace(tmp, self.path)


def list_records(state_path: Path) -> list[Path]:
    """The pipeline's recovery records, oldest first."""
    return sorted((Path(state_path) / RECORDS_DIR).glob("[0-9]*.json"))


def read_record(path: Path) -> dict:
    return json.loads(Path(path).read_text())
