"""`onceflow checkpoint status`'s table: no empty total row."""

from __future__ import annotations

from onceflow.cli.checkpoint import print_status
from onceflow.health import HealthReport, LeaseFacts
from tests.unit import test_health
from tests.unit.test_health import check, committed_checkpoint, kafka, started, status, unreachable

pipeline = test_health.pipeline  # the fixture, shared


def _status_text(report: dict, capsys) -> str:
    print_status(HealthReport.model_validate(report))  # the JSON reads back as the report it was
    return capsys.readouterr().out


def _total(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if " all " in line]


def test_the_total_row_sums_what_is_known_and_is_left_out_when_nothing_is(pipeline, capsys):
    status(pipeline, started(100), ("final", 80, {"status": "stopped", "error": None}))
    # nothing committed yet: every partition is read from the start; committed unknown, latest and lag known
    assert _total(_status_text(check(pipeline, kafka({0: 300, 1: 235})), capsys)) == [["all", "—", "535", "535"]]
    committed_checkpoint(pipeline)
    assert _total(_status_text(check(pipeline, kafka({0: 300, 1: 235})), capsys)) == [["all", "65", "535", "470"]]
    assert _total(_status_text(check(pipeline, unreachable), capsys)) == [["all", "65", "—", "—"]]
    report = check(pipeline, kafka({0: 300}))
    report["partitions"] = report["partitions"][:1]
    assert _total(_status_text(report, capsys)) == []  # one partition: its row is the total


def test_the_driver_lease_reads_in_one_line():
    from onceflow.cli.checkpoint import lease_line

    def lease_line_of(fields: dict) -> str:
        return lease_line(LeaseFacts.model_validate(fields))

    uri = "s3://lake/p/_onceflow/p/driver-lease.json"
    live = {
        "uri": uri,
        "live": True,
        "here": False,
        "host": "worker-2",
        "pid": 41,
        "renewed_at": "2026-11-28T06:00:00Z",
    }
    assert lease_line_of(live) == f"live, pid 41 on worker-2, renewed 2026-11-28T06:00:00Z ({uri})"
    assert lease_line_of({**live, "live": False, "released": True, "here": True}).startswith(
        "released, pid 41 on this machine"
    )
    assert lease_line_of({**live, "live": False}).startswith("lapsed")
    assert lease_line_of({"uri": uri, "live": False, "here": False}) == f"never taken ({uri})"
    assert lease_line_of({"uri": uri, "live": False, "here": False, "error": "no answer"}) == "unreadable (no answer)"
