"""The recovery decision on hand-made facts (pure logic: no broker, Spark or files).

Each case of issue 4 gets its decision, its resume offsets, its sink floors and
its lost ranges checked exactly; the integration tests prove the same cases end
to end against the real components.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from onceflow.checkpoint import BatchOffsets, Checkpoint, Problem
from onceflow.ledger import EntryKind, LedgerEntry, contiguity_problems
from onceflow.recovery.cases import ActionKind, Case, Decision
from onceflow.recovery.decide import decide
from onceflow.state.generation import CheckpointIdentity
from tests.unit.recovery.made_facts import (
    CP,
    FED,
    MISSING_CK,
    SINKS,
    B,
    T,
    all_sinks,
    checkpoint,
    entries,
    facts,
    ledgers,
)


def action(plan, kind):
    return [a for a in plan.actions if a.kind == kind]


# -- refusals that protect a running job or another topic --------------------------------
def test_a_running_job_is_never_touched():
    plan = decide(facts(checkpoint(B, 2), all_sinks(), running=True))
    assert plan.decision == Decision.REFUSE and plan.case == Case.RUNNING and plan.actions == []
    assert "pid 4242" in (plan.refusal or "") and "stop it first" in (plan.refusal or "")
    assert plan.override is None  # no flag lifts this one


def test_a_batch_that_failed_every_run_is_not_restarted_and_the_fix_names_the_batch():
    from onceflow.state.poison import PoisonedBatch

    f = facts(checkpoint(B, 1), all_sinks(B[:2]))
    f.poisoned = PoisonedBatch(2, 0, T, {0: (200, 300), 1: (120, 160)}, 3, "[USER_RAISED_EXCEPTION] boom", "t0")
    plan = decide(f)
    assert (
        plan.decision == Decision.REFUSE and plan.case == Case.POISONED and plan.actions == [] and plan.override is None
    )
    assert plan.refusal is not None
    assert "batch 2 (generation 0; partition 0 [200, 300), partition 1 [120, 160)) failed 3 runs" in plan.refusal
    assert "onceflow quarantine --pipeline pipelines/payments.yaml --batch 2" in plan.refusal
    assert decide(facts(checkpoint(B, 1), all_sinks(B[:2]))).decision != Decision.REFUSE, "without it: a restart"


def test_sinks_written_from_another_topic_are_refused():
    led = ledgers(bronze=[LedgerEntry(T, "bronze", 0, 0, "other", {0: 0}, {0: 5})])
    plan = decide(facts(MISSING_CK, led, generation=None))
    assert plan.decision == Decision.REFUSE and "'other'" in (plan.refusal or "") and plan.actions == []


# -- nothing to do -------------------------------------------------------------------------
def test_no_checkpoint_and_no_sink_batches_is_a_first_run():
    plan = decide(facts(MISSING_CK, ledgers(), generation=None))
    assert plan.decision == Decision.NOTHING and plan.case == Case.FRESH and plan.actions == []
    assert "earliest" in (plan.next_step or "")


# -- dead query, healthy checkpoint: restart -----------------------------------------------
def test_dead_query_with_healthy_checkpoint_restarts_from_it():
    plan = decide(facts(checkpoint(B, 2), all_sinks()))
    assert plan.decision == Decision.RESTART and plan.case == Case.DEAD_QUERY
    assert plan.generation == 0 and plan.previous_generation == 0  # same generation: Delta dedups replays
    assert plan.resume == {0: 300, 1: 160}
    assert plan.actions == [] and plan.starting_offsets is None
    assert "no final event" in plan.findings[0].detail and "next batch is 3" in plan.summary


# -- a run that ended cleanly: nothing to recover -------------------------------------------------
CLEAN: dict[str, Any] = {
    "run_id": "r1",
    "final": {"status": "finished", "error": None, "time": "2026-11-22T14:08:44.824Z"},
}


@pytest.mark.parametrize(
    "status, words", [("finished", "finished at"), ("stopped", "was stopped (at a batch boundary) at")]
)
def test_a_cleanly_stopped_pipeline_is_not_a_dead_query_and_needs_nothing(status, words):
    run = {"run_id": "r1", "final": {**CLEAN["final"], "status": status}}
    plan = decide(facts(checkpoint(B, 2), all_sinks(), last_run=run))
    assert plan.decision == Decision.NOTHING and plan.case == Case.STOPPED and plan.actions == []
    assert [f.case for f in plan.findings] == [Case.STOPPED]
    assert f"its last run (r1) {words} 2026-11-22T14:08:44.824Z" in plan.findings[0].detail
    assert "ended" not in plan.findings[0].detail and Case.DEAD_QUERY not in repr(plan.findings)
    assert plan.summary.startswith(
        "nothing to recover: the last run ended cleanly; the next run continues from "
        "the checkpoint: the next batch is 3"
    )


def test_a_clean_stop_with_leftover_files_still_moves_them_aside():
    tmp = f"{CP}/offsets/.3.1b2c.tmp"
    ck = checkpoint(B, 2, problems=(Problem(tmp, "leftover temp file from an interrupted write"),))
    plan = decide(facts(ck, all_sinks(), last_run=CLEAN))
    assert plan.decision == Decision.RESTART and plan.case == Case.STOPPED and action(plan, ActionKind.MOVE_LEFTOVERS)


def test_a_finished_run_whose_last_batch_did_not_commit_is_still_a_restart():
    plan = decide(facts(checkpoint(B, 1), all_sinks(), last_run=CLEAN))  # batch 2 planned, commits/2 missing
    assert plan.decision == Decision.RESTART and plan.case == Case.DEAD_QUERY and "re-runs batch 2" in plan.summary


def test_crash_between_sinks_restarts_and_the_replay_absorbs_the_disagreement():
    # batch 2 planned, bronze committed it, quarantine/aggregates and commits/2 did not
    led = ledgers(
        bronze=entries("bronze", B), quarantine=entries("quarantine", B[:2]), aggregates=entries("aggregates", B[:2])
    )
    plan = decide(facts(checkpoint(B, 1), led))
    assert plan.decision == Decision.RESTART and plan.generation == 0
    assert plan.resume == {0: 200, 1: 120}  # Spark re-runs batch 2 from batch 1's end
    assert any(f.case == Case.SINKS_DISAGREE for f in plan.findings)
    assert "re-runs batch 2" in plan.summary


def test_leftover_temp_files_are_moved_aside_on_restart():
    tmp = f"{CP}/offsets/.3.1b2c.tmp"
    ck = checkpoint(B, 2, problems=(Problem(tmp, "leftover temp file from an interrupted write"),))
    plan = decide(facts(ck, all_sinks()))
    assert plan.decision == Decision.RESTART and any(f.case == Case.LEFTOVERS for f in plan.findings)
    assert [a.params["files"] for a in action(plan, ActionKind.MOVE_LEFTOVERS)] == [[tmp]]


# -- corrupt / missing / unusable checkpoint: new generation from the ledgers -------------------
def test_corrupt_checkpoint_starts_a_new_generation_at_the_ledgers_point():
    ck = checkpoint(B, 2, unusable_reasons=("the newest offsets file offsets/2 is unreadable",))
    plan = decide(facts(ck, all_sinks()), stamp="STAMP")
    assert plan.decision == Decision.NEW_GENERATION and plan.case == Case.CORRUPT
    assert plan.generation == 1 and plan.previous_generation == 0
    assert plan.resume == {0: 300, 1: 160}
    assert json.loads(plan.starting_offsets or "null") == {T: {"0": 300, "1": 160}}
    assert [a.kind for a in plan.actions] == [ActionKind.MOVE_CHECKPOINT, ActionKind.WRITE_IDENTITY]
    assert action(plan, ActionKind.MOVE_CHECKPOINT)[0].params == {"from": CP, "to": f"{CP}.broken-STAMP"}
    ident = action(plan, ActionKind.WRITE_IDENTITY)[0].params
    assert ident["generation"] == 1 and ident["starting_offsets"] == plan.starting_offsets
    assert ident["sink_floors"] == {s: {"0": 300, "1": 160} for s in FED}


def test_missing_checkpoint_moves_nothing_and_names_every_kafka_partition():
    # partition 2 exists in Kafka but no batch has read it yet: it is started explicitly at earliest (-2)
    plan = decide(
        facts(MISSING_CK, all_sinks(), generation=None, earliest={0: 0, 1: 0, 2: 0}, latest={0: 1000, 1: 1000, 2: 10})
    )
    assert plan.decision == Decision.NEW_GENERATION and plan.case == Case.MISSING and plan.generation == 1
    assert [a.kind for a in plan.actions] == [ActionKind.WRITE_IDENTITY]
    assert json.loads(plan.starting_offsets or "null") == {T: {"0": 300, "1": 160, "2": -2}}


def test_identity_unreadable_is_corrupt_and_generation_follows_the_ledgers():
    plan = decide(
        facts(checkpoint(B, 2), all_sinks(generation=3), generation=None, identity_error="_onceflow.json is unreadable")
    )
    assert plan.decision == Decision.NEW_GENERATION and plan.case == Case.CORRUPT and plan.generation == 4


def test_checkpoint_of_an_older_generation_than_the_sinks_is_replaced():
    plan = decide(facts(checkpoint(B, 2), all_sinks(generation=2), generation=1))
    assert plan.decision == Decision.NEW_GENERATION and plan.case == Case.UNUSABLE and plan.generation == 3
    assert "older than the tables" in plan.findings[0].detail


def test_checkpoint_behind_the_sinks_in_one_generation_is_replaced():
    # restored from an older copy: it planned batches 0-1, the sinks hold 0-2 of the same generation
    plan = decide(facts(checkpoint(B[:2], 1), all_sinks()))
    assert plan.decision == Decision.NEW_GENERATION and plan.case == Case.UNUSABLE
    assert plan.resume == {0: 300, 1: 160}


def test_checkpoint_of_another_topic_is_unusable():
    ck = checkpoint(B, 2)
    ck = Checkpoint(
        **{
            **ck.__dict__,
            "batches": {b: BatchOffsets(b, {}, ({"old": o},)) for b, o in enumerate(B)},
            "initial_offsets": {"old": {0: 0}},
        }
    )
    plan = decide(facts(ck, all_sinks()))
    assert (
        plan.decision == Decision.NEW_GENERATION
        and plan.case == Case.UNUSABLE
        and "'payments'" in plan.findings[0].detail
    )


def test_corrupt_checkpoint_with_nothing_written_restarts_from_the_pipeline_default():
    ck = checkpoint(B[:1], None, unusable_reasons=("offsets/0 is unreadable",))
    plan = decide(facts(ck, ledgers()))
    assert plan.decision == Decision.NEW_GENERATION and plan.generation == 1
    assert plan.starting_offsets is None and plan.resume is None and "source.starting_offsets" in plan.summary


# -- sinks disagree: the lowest committed point, per-sink floors --------------------------------
def test_sinks_that_disagree_resume_from_the_lowest_point_with_per_sink_floors():
    led = ledgers(
        bronze=entries("bronze", B), quarantine=entries("quarantine", B[:2]), aggregates=entries("aggregates", B[:1])
    )
    plan = decide(facts(MISSING_CK, led, generation=None))
    assert plan.decision == Decision.NEW_GENERATION and any(f.case == Case.SINKS_DISAGREE for f in plan.findings)
    assert plan.resume == {0: 200, 1: 120}  # quarantine is the furthest behind of the sinks Kafka feeds
    assert plan.sink_floors == {"bronze": {"0": 300, "1": 160}, "quarantine": {"0": 200, "1": 120}}
    assert "sink floors" in plan.summary
    # the aggregates trail bronze by two batches: merged from bronze by the next run, not re-read from Kafka
    lag = [f.detail for f in plan.findings if f.case == Case.FOLLOWER_LAG]
    assert len(lag) == 1 and "aggregates trails bronze by 2 batch(es)" in lag[0] and "from bronze" in lag[0]


def test_an_empty_sink_beside_written_ones_is_read_from_the_pipelines_origin():
    led = ledgers(
        bronze=entries("bronze", B, start={0: 10, 1: 5}), aggregates=entries("aggregates", B, start={0: 10, 1: 5})
    )
    plan = decide(facts(MISSING_CK, led, generation=None))
    assert plan.resume == {0: 10, 1: 5} and (plan.sink_floors or {})["quarantine"] == {"0": 10, "1": 5}


# -- checkpoint ahead of a sink ----------------------------------------------------------------
def test_checkpoint_ahead_of_a_sink_is_refused_without_force():
    led = ledgers(
        bronze=entries("bronze", B[:1]), quarantine=entries("quarantine", B), aggregates=entries("aggregates", B)
    )
    plan = decide(facts(checkpoint(B, 2), led))
    assert plan.decision == Decision.REFUSE and plan.case == Case.AHEAD and plan.override == "--force"
    assert "bronze holds batch 0" in (plan.refusal or "") and "--force" in (plan.refusal or "") and plan.actions == []


def test_checkpoint_ahead_with_force_rereads_what_the_sink_lost():
    led = ledgers(
        bronze=entries("bronze", B[:1]), quarantine=entries("quarantine", B), aggregates=entries("aggregates", B)
    )
    plan = decide(facts(checkpoint(B, 2), led), force=True)
    assert plan.decision == Decision.NEW_GENERATION and plan.case == Case.AHEAD and plan.generation == 1
    assert plan.resume == {0: 100, 1: 50}
    floors = plan.sink_floors or {}
    assert floors["bronze"] == {"0": 100, "1": 50} and floors["quarantine"] == {"0": 300, "1": 160}
    assert [a.kind for a in plan.actions] == [ActionKind.MOVE_CHECKPOINT, ActionKind.WRITE_IDENTITY]


# -- Kafka retention -----------------------------------------------------------------------------
def test_retention_past_the_resume_point_is_refused_with_the_exact_lost_ranges():
    plan = decide(facts(checkpoint(B, 2), all_sinks(), earliest={0: 340, 1: 160}))
    assert plan.decision == Decision.REFUSE and plan.case == Case.RETENTION and plan.override == "--accept-loss"
    assert [(r.partition, r.start, r.end, r.sinks) for r in plan.lost] == [(0, 300, 340, list(FED))]
    assert "[300, 340)" in (plan.refusal or "") and plan.actions == []


def test_accepted_loss_records_loss_entries_and_resumes_at_the_log_start():
    plan = decide(facts(checkpoint(B, 2), all_sinks(), earliest={0: 340, 1: 160}), accept_loss=True)
    assert plan.decision == Decision.NEW_GENERATION and plan.generation == 1
    assert plan.resume == {0: 340, 1: 160}
    losses = action(plan, ActionKind.WRITE_LOSS)
    # the aggregates get none: their follower copies bronze's LOSS entry when it reaches it
    assert [(a.params["sink"], a.params["start"], a.params["end"]) for a in losses] == [
        (s, {"0": 300}, {"0": 340}) for s in FED
    ]
    assert [a.kind for a in plan.actions] == [
        ActionKind.MOVE_CHECKPOINT,
        *[ActionKind.WRITE_LOSS] * 2,
        ActionKind.WRITE_IDENTITY,
    ]
    # the loss entry keeps each ledger contiguous: old batch → loss → the new generation's batch 0
    for a in losses:
        loss = LedgerEntry(T, a.params["sink"], 1, -1, T, {0: 300}, {0: 340}, kind=EntryKind.LOSS)
        new0 = LedgerEntry(T, a.params["sink"], 1, 0, T, {0: 340, 1: 160}, {0: 400, 1: 200})
        assert contiguity_problems([*entries(a.params["sink"], B), loss, new0]) == []


def test_loss_is_per_sink_when_the_sinks_disagree():
    led = ledgers(
        bronze=entries("bronze", B), quarantine=entries("quarantine", B[:2]), aggregates=entries("aggregates", B[:2])
    )
    plan = decide(facts(checkpoint(B, 1), led, earliest={0: 250, 1: 0}), accept_loss=True)
    # bronze holds up to 300 > 250: it lost nothing; quarantine lost [200, 250); the aggregates trail
    # bronze, which still holds those rows: they lose nothing either
    assert [(r.partition, r.start, r.end, r.sinks) for r in plan.lost] == [(0, 200, 250, ["quarantine"])]
    assert [a.params["sink"] for a in action(plan, ActionKind.WRITE_LOSS)] == ["quarantine"]
    assert plan.resume == {0: 250, 1: 120}


def test_checkpoint_past_retention_but_sinks_not_needs_no_loss():
    # the checkpoint resumes at 200 (batch 2 uncommitted) but every sink already holds batch 2 (to 300)
    plan = decide(facts(checkpoint(B, 1), all_sinks(), earliest={0: 250, 1: 0}))
    assert plan.decision == Decision.NEW_GENERATION and plan.case == Case.RETENTION and plan.lost == []
    assert plan.resume == {0: 300, 1: 160} and not action(plan, ActionKind.WRITE_LOSS)


def test_offsets_past_kafkas_end_are_refused():
    plan = decide(facts(checkpoint(B, 2), all_sinks(), latest={0: 40, 1: 40}))
    assert plan.decision == Decision.REFUSE and plan.case == Case.KAFKA_BEHIND and "recreated" in (plan.refusal or "")


# -- a recovery run twice is a restart of the prepared generation ---------------------------------
def test_a_prepared_generation_is_restarted_not_replaced():
    ident = CheckpointIdentity(
        T,
        1,
        "t",
        starting_offsets=json.dumps({T: {"0": 300, "1": 160}}),
        reason="recover",
        sink_floors={s: {"0": 300, "1": 160} for s in SINKS},
    )
    empty = Checkpoint(path=CP, exists=True)
    plan = decide(facts(empty, all_sinks(), identity=ident))
    assert plan.decision == Decision.RESTART and plan.generation == 1 and plan.resume == {0: 300, 1: 160}
    # ...unless Kafka deleted its starting point since
    plan = decide(facts(empty, all_sinks(), identity=ident, earliest={0: 310, 1: 0}))
    assert plan.decision == Decision.REFUSE and plan.case == Case.RETENTION
    assert [(r.partition, r.start, r.end) for r in plan.lost] == [(0, 300, 310)]


def test_the_plan_is_json_ready():
    plan = decide(facts(checkpoint(B, 2), all_sinks(), earliest={0: 340, 1: 160}), accept_loss=True)
    body = json.loads(json.dumps(plan.as_dict()))
    assert body["decision"] == "new_generation" and body["resume"] == {"0": 340, "1": 160}
    assert body["lost"] == [{"partition": 0, "start": 300, "end": 340, "sinks": list(FED), "count": 40}]


@pytest.mark.parametrize("flags", [{}, {"force": True}, {"accept_loss": True}])
def test_flags_never_change_a_healthy_restart(flags):
    plan = decide(facts(checkpoint(B, 2), all_sinks()), **flags)
    assert plan.decision == Decision.RESTART and plan.actions == []


# -- the recovery record matches its schema ------------------------------------------------------
def test_records_of_every_decision_match_the_schema(tmp_path):
    import jsonschema

    from onceflow.recovery.record import RecoveryRecord, read_record

    schema = json.loads(
        (
            __import__("pathlib").Path(__file__).resolve().parents[3] / "docs/schemas/recovery-record.schema.json"
        ).read_text()
    )
    ck_bad = checkpoint(B, 2, unusable_reasons=("offsets/2 is unreadable",))
    plans = [
        decide(facts(checkpoint(B, 2), all_sinks(), running=True)),
        decide(facts(MISSING_CK, ledgers(), generation=None)),
        decide(facts(checkpoint(B, 2), all_sinks())),
        decide(facts(checkpoint(B, 2), all_sinks(), last_run=CLEAN)),
        decide(facts(ck_bad, all_sinks(), earliest={0: 340, 1: 160})),
        decide(facts(ck_bad, all_sinks(), earliest={0: 340, 1: 160}), accept_loss=True),
    ]
    assert [p.decision for p in plans] == [
        Decision.REFUSE,
        Decision.NOTHING,
        Decision.RESTART,
        Decision.NOTHING,
        Decision.REFUSE,
        Decision.NEW_GENERATION,
    ]
    for i, plan in enumerate(plans):
        record = RecoveryRecord(
            tmp_path,
            T,
            f"2026010{i}T000000000000Z",
            {"dry_run": False, "force": False, "accept_loss": plan.accept_loss},
        )
        record.set_plan(plan.as_dict())
        for a in plan.actions:
            record.add_action(a.kind, a.description, "done", result={"ok": True})
        record.finish("refused" if plan.refused else "done", plan.refusal)
        jsonschema.validate(read_record(record.path), schema)
    # a record whose planning failed (Kafka down) has no plan, and is still valid
    failed = RecoveryRecord(
        tmp_path, T, "20260109T000000000000Z", {"dry_run": True, "force": False, "accept_loss": False}
    )
    failed.finish("failed", "cannot plan a recovery without Kafka's offsets")
    jsonschema.validate(read_record(failed.path), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**read_record(failed.path), "outcome": "maybe"}, schema)


# -- LOSS entries, written with delta-rs ----------------------------------------------------------
def test_a_loss_entry_is_an_idempotent_empty_commit_under_its_own_txn_app_id(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from onceflow.ledger import app_id, loss_app_id, loss_entry, read_ledger, write_loss

    path = str(tmp_path / "bronze")
    write_deltalake(
        path,
        pa.table({"_partition": pa.array([0], pa.int32()), "_offset": pa.array([1], pa.int64())}),
        commit_properties=__import__("deltalake").CommitProperties(
            custom_metadata={"userMetadata": entries("bronze", B[:1])[0].to_json()}
        ),
    )
    entry = loss_entry(T, "bronze", 1, T, {0: 100}, {0: 140}, extra={"recovery": "r1"})
    assert write_loss(path, entry) == 1
    assert write_loss(path, entry) is None  # a second attempt finds its txn and writes nothing
    table = DeltaTable(path)
    assert table.version() == 1 and table.to_pyarrow_table().num_rows == 1  # no rows added
    assert table.transaction_version(loss_app_id(T, "bronze", 1)) == 0
    assert table.transaction_version(app_id(T, "bronze", 1)) is None  # batch 0 of generation 1 stays writable
    ledger = read_ledger(path)
    loss = ledger.entries[-1]
    assert (loss.kind, loss.generation, loss.batch_id, loss.start, loss.end) == (
        EntryKind.LOSS,
        1,
        -1,
        {0: 100},
        {0: 140},
    )
    assert loss.extra == {"recovery": "r1"} and ledger.committed_offsets()[0] == 140


def test_a_loss_entry_needs_a_real_range():
    from onceflow.ledger import loss_entry

    with pytest.raises(ValueError, match="start <= end"):
        loss_entry(T, "bronze", 1, T, {0: 150}, {0: 140})
    with pytest.raises(ValueError):
        loss_entry(T, "bronze", 1, T, {}, {0: 140})


def test_aggregates_holding_offsets_bronze_lacks_are_named():
    """Bronze restored from an older copy: the aggregates hold more. --force re-reads what bronze
    lost; the follower then skips the rows below its own point (ledger.follower_lag)."""
    led = ledgers(
        bronze=entries("bronze", B[:1]), quarantine=entries("quarantine", B), aggregates=entries("aggregates", B)
    )
    plan = decide(facts(checkpoint(B, 2), led), force=True)
    assert plan.decision == Decision.NEW_GENERATION and plan.sink_floors == {
        "bronze": {"0": 100, "1": 50},
        "quarantine": {"0": 300, "1": 160},
    }
    ahead = [f.detail for f in plan.findings if f.case == Case.FOLLOWER_AHEAD]
    assert len(ahead) == 1 and "aggregates holds offsets bronze does not ({0: 300, 1: 160}" in ahead[0]
    assert not [f for f in plan.findings if f.case == Case.FOLLOWER_LAG]


def test_the_plan_names_sink_floors_only_where_a_sink_is_ahead():
    led = ledgers(
        bronze=entries("bronze", B), quarantine=entries("quarantine", B[:2]), aggregates=entries("aggregates", B[:2])
    )
    ahead = decide(facts(MISSING_CK, led, generation=None))
    assert "bronze {0: 300, 1: 160}" in action(ahead, ActionKind.WRITE_IDENTITY)[0].description
    level = decide(facts(MISSING_CK, all_sinks(), generation=None))
    assert "own point" not in action(level, ActionKind.WRITE_IDENTITY)[0].description
    lost = decide(facts(checkpoint(B, 2), all_sinks(), earliest={0: 340, 1: 160}), accept_loss=True)
    assert "own point" not in action(lost, ActionKind.WRITE_IDENTITY)[0].description
    assert "Kafka's log start {0: 340, 1: 160}" in lost.summary and "40 offsets accepted as lost" in lost.summary


def test_recovery_hints_name_the_real_dag_and_command():
    plan = decide(facts(checkpoint(B, 2), all_sinks()))
    assert "<" not in (plan.next_step or "")
    assert plan.next_step == (
        f"start the query: `onceflow ingest --pipeline {plan.pipeline}` (or `onceflow recover "
        f"--pipeline {plan.pipeline} --resume`); in Airflow the {plan.pipeline}_recover DAG "
        "starts it"
    )
