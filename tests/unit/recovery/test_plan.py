"""The plan recovery returns: a refusal changes nothing and names its override; the record's form."""

from __future__ import annotations

from onceflow.recovery.cases import Case, Decision
from onceflow.recovery.plan import Finding, LostRange
from tests.unit.recovery.made_facts import made_plan


def test_a_refusal_drops_the_actions_and_the_next_step_and_names_the_flag_that_lifts_it():
    plan = made_plan()
    assert not plan.refused
    assert plan.refuse(Case.AHEAD, "why; Fix: restore", override="--force") is plan
    assert plan.refused and plan.decision == Decision.REFUSE and plan.case == Case.AHEAD
    assert plan.actions == [] and plan.next_step is None
    assert plan.refusal == "why; Fix: restore" and plan.override == "--force"
    assert plan.summary == "refused (checkpoint_ahead_of_sink): nothing was changed"
    assert plan.findings == [Finding(Case.DEAD_QUERY, "killed")]  # what was found stays


def test_the_record_keeps_resume_offsets_by_partition_string_and_each_lost_range_with_its_count():
    plan = made_plan(resume={1: 7, 0: -2}, lost=[LostRange(0, 10, 25, ["bronze", "quarantine"])])
    d = plan.as_dict()
    assert d["resume"] == {"0": -2, "1": 7} and list(d["resume"]) == ["0", "1"]
    assert d["lost"] == [{"partition": 0, "start": 10, "end": 25, "sinks": ["bronze", "quarantine"], "count": 15}]
    assert d["case"] == "dead_query" and d["decision"] == "restart"
    assert d["actions"] == [
        {"kind": "move_leftovers_aside", "description": "move 1 file", "params": {"files": ["/cp/.x.tmp"]}}
    ]
    assert made_plan().as_dict()["resume"] is None
