"""A poisoned batch: the newest runs all failed on the same batch, unless an operator moved it aside."""

from __future__ import annotations

from onceflow.state.poison import POISON_AFTER, poisoned_batch
from onceflow.state.status import RunEvent, RunStatus, StatusLog
from onceflow.state.unprocessable import Declared, Unprocessable

BATCH = {"id": 4, "generation": 0, "topic": "t", "ranges": {"0": [100, 200], "1": [50, 60]}}


def _run(log: StatusLog, status: str = RunStatus.FAILED, batch: dict | None = BATCH) -> None:
    log.append(RunEvent.STARTED, run_id="r")
    log.append(RunEvent.FINAL, run_id="r", status=status, error="boom", **({"batch": batch} if batch else {}))


def test_three_failed_runs_on_one_batch_are_poisoned(tmp_path):
    log = StatusLog(tmp_path, "p")
    for _ in range(POISON_AFTER - 1):
        _run(log)
    assert poisoned_batch(log) is None, "two failures are not yet a pattern"
    _run(log)
    found = poisoned_batch(log)
    assert found is not None and found.batch_id == 4 and found.runs == POISON_AFTER and found.error == "boom"
    assert found.ranges == {0: (100, 200), 1: (50, 60)}
    assert "partition 0 [100, 200)" in found.describe()
    assert found.as_dict()["ranges"] == {"0": [100, 200], "1": [50, 60]}


def test_a_success_another_batch_or_a_run_without_a_batch_breaks_the_pattern(tmp_path):
    for last in (
        dict(status=RunStatus.FINISHED, batch=None),
        dict(batch={**BATCH, "id": 5}),
        dict(batch=None),
        dict(batch={**BATCH, "generation": 1}),
    ):
        log = StatusLog(tmp_path / str(len(str(last))) / str(id(last)), "p")
        for _ in range(POISON_AFTER - 1):
            _run(log)
        _run(log, **last)
        assert poisoned_batch(log) is None, last


def test_a_batch_moved_aside_is_no_longer_poisoned_but_a_part_of_it_is_not_enough(tmp_path):
    log = StatusLog(tmp_path / "log", "p")
    for _ in range(POISON_AFTER):
        _run(log)
    handled = Unprocessable.load(tmp_path / "state")
    handled.add(Declared("t", {0: (100, 150)}))
    assert poisoned_batch(log, handled) is not None
    handled.add(Declared("t", {0: (150, 200), 1: (50, 60)}))
    assert poisoned_batch(log, Unprocessable.load(tmp_path / "state")) is None
