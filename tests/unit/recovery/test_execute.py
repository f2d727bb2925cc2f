"""Carrying out a plan: each action recorded; nothing deleted; the first failure stops the rest."""

from __future__ import annotations

import pytest

from onceflow.errors import RecoveryError
from onceflow.recovery.cases import ActionKind, Case, Decision
from onceflow.recovery.execute import execute
from onceflow.recovery.plan import Action, Plan
from onceflow.recovery.record import RecoveryRecord, read_record
from onceflow.state.generation import read_identity

OPTIONS = {"dry_run": False, "force": False, "accept_loss": False}  # the record's required options


def _plan(cp: str, actions: list[Action]) -> Plan:
    return Plan("p", "p.yaml", "t", cp, Case.CORRUPT, Decision.NEW_GENERATION, "new generation 1", [], actions)


def test_a_new_generation_moves_the_checkpoint_aside_and_writes_the_identity(tmp_path):
    cp = tmp_path / "checkpoint"
    (cp / "offsets").mkdir(parents=True)
    (cp / "offsets" / "0").write_text("v1")
    aside = f"{cp}.broken-S"
    actions = [
        Action(ActionKind.MOVE_CHECKPOINT, "move it aside", {"from": str(cp), "to": aside}),
        Action(
            ActionKind.WRITE_LOSS,
            "record the loss",
            {"sink": "bronze", "table": str(tmp_path / "none"), "generation": 1, "start": {"0": 5}, "end": {"0": 9}},
        ),
        Action(
            ActionKind.WRITE_IDENTITY,
            "start generation 1",
            {
                "checkpoint": str(cp),
                "generation": 1,
                "starting_offsets": '{"t":{"0":5}}',
                "reason": "corrupt",
                "sink_floors": {"bronze": {"0": 9}},
            },
        ),
    ]
    record = RecoveryRecord(tmp_path / "records", "p", "S", OPTIONS)
    lines: list[str] = []
    execute(_plan(str(cp), actions), record, lines.append)
    assert (tmp_path / "checkpoint.broken-S" / "offsets" / "0").read_text() == "v1"  # kept, never deleted
    identity = read_identity(str(cp))
    assert identity is not None and identity.generation == 1 and identity.floor("bronze") == {0: 9}
    done = read_record(record.path)["actions"]
    assert [a["status"] for a in done] == ["done"] * 3 and done[1]["result"]["written"] is False
    assert lines[0] == "[1/3] move it aside"


def test_the_first_failure_stops_the_rest_and_says_where_the_record_is(tmp_path):
    gone = tmp_path / "gone"
    actions = [
        Action(ActionKind.MOVE_CHECKPOINT, "move it aside", {"from": str(gone), "to": f"{gone}.broken-S"}),
        Action(ActionKind.MOVE_LEFTOVERS, "move leftovers", {"files": []}),
    ]
    record = RecoveryRecord(tmp_path / "records", "p", "S", OPTIONS)
    with pytest.raises(RecoveryError, match="disappeared between planning and moving it aside"):
        execute(_plan(str(gone), actions), record)
    assert [a["status"] for a in read_record(record.path)["actions"]] == ["failed", "not_run"]
