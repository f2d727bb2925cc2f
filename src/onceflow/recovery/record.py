"""Recovery records: one JSON file per `onceflow recover`, under `<state>/pipelines/<name>/recoveries/`.

A recovery changes the state exactly-once rests on (checkpoint, generations, ledgers),
so every run leaves a record of what it found, what it planned and what each action
did — rewritten atomically after every step, so even a recovery killed halfway says
how far it got. Schema: docs/schemas/recovery-record.schema.json.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from onceflow.state.status import now_iso

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
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        os.replace(tmp, self.path)


def list_records(state_path: Path) -> list[Path]:
    """The pipeline's recovery records, oldest first."""
    return sorted((Path(state_path) / RECORDS_DIR).glob("[0-9]*.json"))


def read_record(path: Path) -> dict:
    return json.loads(Path(path).read_text())
