"""A new writer generation, planned on its own: where it starts, what each sink keeps, what is lost."""

from __future__ import annotations

import json

from onceflow.recovery.cases import EARLIEST, ActionKind, Case, Decision
from onceflow.recovery.new_generation import kafka_behind, new_generation
from onceflow.recovery.plan import Plan
from tests.unit.recovery.made_facts import CP, MISSING_CK, B, T, checkpoint, entries, facts, ledgers


def _plan(f) -> Plan:
    return Plan(T, "pipelines/payments.yaml", T, CP, Case.MISSING, Decision.RESTART, "", [], [])


def test_it_starts_at_the_lowest_committed_point_and_each_sink_keeps_its_own_floor():
    led = ledgers(bronze=entries("bronze", B), quarantine=entries("quarantine", B[:2]))
    f = facts(MISSING_CK, led, generation=None, latest={0: 1000, 1: 1000, 2: 0})
    plan = new_generation(_plan(f), f, "missing checkpoint: gone", "onceflow recover", False, "S")
    assert plan.decision == Decision.NEW_GENERATION and plan.generation == 1
    assert plan.resume == {0: 200, 1: 120, 2: EARLIEST}  # a partition no sink saw: from its log start
    assert json.loads(plan.starting_offsets or "") == {T: {"0": 200, "1": 120, "2": -2}}
    assert plan.sink_floors == {"bronze": {"0": 300, "1": 160}, "quarantine": {"0": 200, "1": 120}}
    assert [a.kind for a in plan.actions] == [ActionKind.WRITE_IDENTITY]  # no directory to move aside
    assert "each sink keeps only rows from its own point" in plan.actions[0].description
    assert plan.next_step and f"onceflow ingest --pipeline {T}" in plan.next_step


def test_offsets_kafka_deleted_are_refused_without_accept_loss_and_recorded_with_it():
    fed = {s: entries(s, B[:1]) for s in ("bronze", "quarantine")}
    f = facts(checkpoint(B, 2), ledgers(**fed), earliest={0: 150, 1: 0})
    refused = new_generation(_plan(f), f, "corrupt", "onceflow recover --pipeline p", False, "S")
    assert refused.decision == Decision.REFUSE and refused.case == Case.RETENTION
    assert refused.override == "--accept-loss" and "onceflow recover --pipeline p --accept-loss" in (
        refused.refusal or ""
    )
    accepted = new_generation(_plan(f), f, "corrupt", "onceflow recover --pipeline p", True, "S")
    assert [(r.partition, r.start, r.end, r.sinks) for r in accepted.lost] == [(0, 100, 150, ["bronze", "quarantine"])]
    kinds = [a.kind for a in accepted.actions]
    assert kinds == [
        ActionKind.MOVE_CHECKPOINT,
        ActionKind.WRITE_LOSS,
        ActionKind.WRITE_LOSS,
        ActionKind.WRITE_IDENTITY,
    ]
    assert accepted.actions[0].params == {"from": CP, "to": f"{CP}.broken-S"}
    assert "50 offsets accepted as lost" in accepted.summary


def test_committed_offsets_past_kafkas_end_are_refused():
    f = facts(MISSING_CK, ledgers(bronze=entries("bronze", B)), generation=None, latest={0: 10, 1: 10})
    plan = kafka_behind(_plan(f), f, {"bronze": {0: 300}})
    assert plan.decision == Decision.REFUSE and plan.case == Case.KAFKA_BEHIND and plan.actions == []
    assert "bronze at {0: 300}; Kafka ends at {0: 10, 1: 10}" in (plan.refusal or "")
    again = new_generation(_plan(f), f, "missing", "onceflow recover", False, "S")
    assert again.decision == Decision.REFUSE and again.case == Case.KAFKA_BEHIND
