"""A recovery leaves a record of what it found, planned and did, rewritten after every step."""

from __future__ import annotations

from onceflow.recovery.plan import Plan
from onceflow.recovery.record import ActionStatus, Outcome, RecoveryRecord, list_records, new_stamp, read_record

OPTIONS = {"dry_run": False, "force": False, "accept_loss": False}  # the record's required options


def test_the_record_is_rewritten_after_every_step(tmp_path):
    stamp = new_stamp()
    record = RecoveryRecord(tmp_path, "p", stamp, OPTIONS)
    assert read_record(record.path)["outcome"] == Outcome.IN_PROGRESS  # even a recovery killed now says so
    plan = Plan("p", "p.yaml", "t", "/ck", "stopped", "restart", "restart from the checkpoint", [], []).as_dict()
    record.set_plan(plan)
    record.add_action("move_leftovers_aside", "move 1 file", ActionStatus.DONE, result={"moved": 1})
    record.finish(Outcome.DONE)
    data = read_record(record.path)
    assert data["plan"] == plan and data["outcome"] == "done" and data["finished_at"]
    assert data["actions"][0]["status"] == "done" and data["actions"][0]["result"] == {"moved": 1}
    assert record.id == stamp and list_records(tmp_path) == [record.path]


def test_two_recoveries_in_one_stamp_keep_both_records(tmp_path):
    first = RecoveryRecord(tmp_path, "p", "20261121T101502123456Z", OPTIONS)
    second = RecoveryRecord(tmp_path, "p", "20261121T101502123456Z", OPTIONS)
    assert first.path != second.path and second.id == "20261121T101502123456Z-1"
    assert list_records(tmp_path) == sorted([first.path, second.path])
