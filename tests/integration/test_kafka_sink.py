"""The transactional Kafka sink against a real broker and a real Spark.

Each test uses its own pipeline name (so its own transactional ids and ledger
keys) and its own output and ledger topics. Outputs are read back by an
independent confluent-kafka consumer, never by the sink's own code.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import pytest
from confluent_kafka import KafkaException, Producer

from devkit.kafka import consume_all, value_json
from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow.config import KafkaSink
from onceflow.faults import kafka_sink as faults
from onceflow.generate.producer import VALID, produce
from onceflow.kafka.admin import ensure_topic
from onceflow.kafka.ledger import KafkaLedgerRecord, read_kafka_ledger
from onceflow.spark.kafka_read import read_committed_batch
from onceflow.spark.parse import bronze_rows, parse_events
from onceflow.spark.sinks.kafka_txn import (
    SHARD,
    KafkaSinkError,
    KafkaTxnSink,
    transaction_timeout_ms,
    transactional_id,
    write_task,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

GENERATION = 1


@pytest.fixture(scope="module")
def source(broker, spark):
    """One input topic with aborted transactions and malformed records, and its bronze rows."""
    topic = "t-kafka-sink-source"
    summary = produce(
        broker.bootstrap,
        topic,
        3000,
        schema=PAYMENTS_SCHEMA,
        partitions=4,
        seed=7,
        abort_ratio=0.15,
        malformed_ratio=0.03,
        txn_size=50,
    )
    bronze = bronze_rows(
        parse_events(read_committed_batch(spark, broker.bootstrap, topic), PAYMENTS_SCHEMA),
        PAYMENTS_SCHEMA,
        0,
        GENERATION,
    ).cache()
    end = {p: max(r.offset for r in summary.records if r.partition == p) + 1 for p in range(4)}
    return {
        "topic": topic,
        "summary": summary,
        "bronze": bronze,
        "start": {p: 0 for p in range(4)},
        "end": end,
        "valid": sorted(r.event_id for r in summary.records if r.kind == VALID and not r.aborted),
        "aborted": {r.event_id for r in summary.records if r.aborted and r.event_id},
    }


def _sink(broker, source, name: str, **config) -> KafkaTxnSink:
    cfg = KafkaSink(topic=f"{name}-out", ledger_topic=f"{name}-ledger", **{"key": "account_id", **config})
    return KafkaTxnSink(name, GENERATION, cfg, broker.bootstrap, trigger_seconds=1, source_topic=source["topic"])


def _event_ids(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[str]:
    return [value_json(value)["event_id"] for _, _, _, value in consume_all(bootstrap, topic, isolation)]


def _write(sink, source, batch_id: int):
    return sink.write(source["bronze"], batch_id, source["start"], source["end"])


def test_a_batch_lands_exactly_once_and_its_replay_is_a_no_op(broker, source):
    sink = _sink(broker, source, "ks-once")
    first = _write(sink, source, 0)
    assert first.written == [0, 1, 2, 3] and first.skipped == []
    assert first.rows_written == len(source["valid"])

    ids = _event_ids(broker.bootstrap, sink.output_topic)
    assert sorted(ids) == source["valid"], "the output must hold each committed valid event exactly once"
    assert not set(ids) & source["aborted"], "nothing from aborted input transactions"

    replay = _write(sink, source, 0)
    assert replay.written == [] and replay.skipped == [0, 1, 2, 3]
    assert replay.rows_skipped == len(source["valid"])
    assert sorted(_event_ids(broker.bootstrap, sink.output_topic)) == source["valid"], "replay added records"

    ledger = read_kafka_ledger(broker.bootstrap, sink.ledger_topic, "ks-once")
    assert [(e.batch_id, e.rows, e.sink) for e in ledger.entries] == [(0, len(source["valid"]), "kafka")]
    assert ledger.committed_offsets() == source["end"]
    assert ledger.partial == [] and ledger.problems() == []
    assert sorted(sink.committed()) == [(0, t) for t in range(4)]
    records = sink.committed()
    assert {r.transactional_id for r in records.values()} == {
        transactional_id("ks-once", GENERATION, t) for t in range(4)
    }


def test_output_records_keep_their_key_and_source_order(broker, source):
    sink = _sink(broker, source, "ks-order")
    _write(sink, source, 0)
    out = consume_all(broker.bootstrap, sink.output_topic)
    by_key: dict[bytes, list[tuple[int, int]]] = {}
    for _, _, key, value in sorted(out, key=lambda r: (r[0], r[1])):
        event = value_json(value)
        assert key is not None and key.decode() == event["account_id"], "the key is the configured key expression"
        by_key.setdefault(key, []).append((event["_partition"], event["_offset"]))
    assert all(seq == sorted(seq) for seq in by_key.values()), "each key's records keep their source order"


def test_task_partitioning_does_not_depend_on_how_spark_split_the_batch(broker, source):
    from pyspark.sql import functions as F

    sink = _sink(broker, source, "ks-determinism")
    bronze = source["bronze"]
    shuffled = bronze.repartition(7).orderBy(F.rand(seed=3)).coalesce(3)

    def layout(df):
        rows = (
            sink.prepared(df)
            .withColumn("spark_partition", F.spark_partition_id())
            .select(SHARD, "spark_partition", "_partition", "_offset")
            .collect()
        )
        assert all(r[SHARD] == r["spark_partition"] for r in rows), "one task partition per Spark partition"
        per_task: dict[int, list] = {}
        for r in rows:
            per_task.setdefault(r[SHARD], []).append((r["_partition"], r["_offset"]))
        return per_task

    original, replay = layout(bronze), layout(shuffled)
    assert original == replay, "a replayed batch must give every task exactly the same rows in the same order"
    assert sorted(original) == [0, 1, 2, 3]
    assert all(seq == sorted(seq) for seq in original.values())


def test_replay_after_a_partial_commit_writes_only_the_missing_tasks(broker, source):
    """The state a crash leaves when task 0 committed batch 1 and the others did not."""
    sink = _sink(broker, source, "ks-partial")
    _write(sink, source, 0)
    spec = sink.spec(1, source["end"], source["end"], source["topic"])
    task0 = sink.prepared(source["bronze"]).where(f"{SHARD} = 0").toArrow().to_batches()
    write_task(spec, 0, task0, sum(b.num_rows for b in task0))  # batch 1 = the same rows again, task 0 only

    ledger = read_kafka_ledger(broker.bootstrap, sink.ledger_topic, "ks-partial")
    assert [(p.batch_id, p.committed, p.missing) for p in ledger.partial] == [(1, [0], [1, 2, 3])]
    assert [e.batch_id for e in ledger.entries] == [0], "a partial batch is not a committed batch"
    assert ledger.problems() == [], "a partial last batch is the normal state after a crash"

    replay = sink.write(source["bronze"], 1, source["end"], source["end"])
    assert replay.skipped == [0] and replay.written == [1, 2, 3]
    counts = Counter(_event_ids(broker.bootstrap, sink.output_topic))
    assert set(counts) == set(source["valid"])
    assert set(counts.values()) == {2}, "batch 0 and batch 1 each hold every event once (batch 1 = same rows)"
    ledger = read_kafka_ledger(broker.bootstrap, sink.ledger_topic, "ks-partial")
    assert [e.batch_id for e in ledger.entries] == [0, 1] and ledger.partial == []


def test_a_zombie_producer_with_the_same_transactional_id_is_fenced(broker, source):
    sink = _sink(broker, source, "ks-zombie")
    sink.prepare()
    zombie = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "log_level": 0,
            "transactional.id": transactional_id("ks-zombie", GENERATION, 0),
        }
    )
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(25):
        zombie.produce(sink.output_topic, json.dumps({"event_id": f"zombie-{i}"}).encode(), b"acct-zombie")
    zombie.flush(30)

    result = _write(sink, source, 0)  # task 0's init_transactions fences the zombie
    assert result.written == [0, 1, 2, 3]
    with pytest.raises(KafkaException) as caught:
        zombie.commit_transaction(30)
    assert caught.value.args[0].fatal(), f"the zombie's commit must fail fatally, got {caught.value}"

    committed = _event_ids(broker.bootstrap, sink.output_topic, "read_committed")
    assert sorted(committed) == source["valid"]
    assert not [i for i in committed if i.startswith("zombie-")], "nothing the zombie wrote is visible"
    uncommitted = _event_ids(broker.bootstrap, sink.output_topic, "read_uncommitted")
    assert len([i for i in uncommitted if i.startswith("zombie-")]) == 25, (
        "the zombie's records are in the log (aborted), which shows the fencing was real"
    )


def test_a_transaction_the_broker_rejects_is_aborted_retried_and_fails_clearly(broker, source):
    name = "ks-toolarge"
    ensure_topic(broker.bootstrap, f"{name}-out", 4, {"max.message.bytes": "2000"})
    sink = _sink(broker, source, name, value="concat(to_json(struct(*)), repeat('x', 5000))")
    with pytest.raises(KafkaSinkError) as caught:
        _write(sink, source, 0)
    message = str(caught.value)
    assert "aborted 3 times" in message and "MSG_SIZE_TOO_LARGE" in message, message
    assert "batch 0" in message and "Fix:" in message
    assert consume_all(broker.bootstrap, sink.output_topic, "read_committed") == []
    assert read_kafka_ledger(broker.bootstrap, sink.ledger_topic, name).records == []


def test_batch_ids_going_backwards_within_a_generation_are_refused(broker, source):
    sink = _sink(broker, source, "ks-backwards")
    _write(sink, source, 5)
    with pytest.raises(KafkaSinkError, match="went backwards"):
        _write(sink, source, 3)


def test_changing_the_task_partitions_within_a_generation_is_refused(broker, source):
    _write(_sink(broker, source, "ks-resplit"), source, 0)
    with pytest.raises(KafkaSinkError, match="task partitions"):
        _write(_sink(broker, source, "ks-resplit", partitions=3), source, 1)


def test_bad_key_expression_names_the_field(broker, source):
    with pytest.raises(KafkaSinkError, match=r"sinks\.kafka\.key 'no_such_column'"):
        _write(_sink(broker, source, "ks-badkey", key="no_such_column"), source, 0)


def test_a_ledger_topic_that_expires_records_is_refused(broker, source):
    ensure_topic(broker.bootstrap, "ks-expiring-ledger", 4, {"retention.ms": "3600000"})
    sink = KafkaTxnSink(
        "ks-expiring",
        GENERATION,
        KafkaSink(topic="ks-expiring-out", ledger_topic="ks-expiring-ledger", key="account_id"),
        broker.bootstrap,
    )
    with pytest.raises(KafkaSinkError, match=r"retention\.ms=3600000"):
        sink.prepare()


def test_a_ledger_reader_stuck_on_a_partition_renews_its_consumer_and_fails_by_its_deadline(broker, monkeypatch):
    """A consumer whose metadata keeps saying "unknown partition" (seen after a whole cluster
    restarted) is replaced within the reader's timeout; a partition that really is missing still
    fails with the broker's own error once the timeout passes, never hangs."""
    from onceflow.kafka import ledger

    ensure_topic(broker.bootstrap, "ks-one-partition", 1)
    monkeypatch.setattr(ledger, "_FRESH_CONSUMER_AFTER", 1.0)
    with ledger.LedgerReader(broker.bootstrap, timeout=4) as reader:
        assert reader.stable_end("ks-one-partition", 0)[1] == 0
        assert reader.renewed == 0
        with pytest.raises(KafkaException, match="Unknown partition"):
            reader.stable_end("ks-one-partition", 3)
        assert reader.renewed >= 2
        assert reader.stable_end("ks-one-partition", 0)[1] == 0  # the new consumers read


# -- pure logic (no broker needed) ----------------------------------------------
def test_transaction_timeout_follows_the_trigger_within_broker_limits():
    assert transaction_timeout_ms(1) == 60_000
    assert transaction_timeout_ms(30) == 300_000
    assert transaction_timeout_ms(3600) == 900_000


def test_fault_specs_parse_or_fail_with_the_fix(monkeypatch):
    assert faults.parse("crash_after_tasks:2@batch:3") == faults.Fault(faults.FaultPoint.AFTER_TASKS, 3, 2)
    assert faults.parse("crash_after_write@batch:5").crashes_after_write(5)
    with pytest.raises(faults.FaultSpecError, match="Fix"):
        faults.parse("crash_after_tasks@batch:3")
    monkeypatch.setenv(faults.ENV_FAULT, "crash_after_write@batch:1")
    monkeypatch.setenv(faults.ENV_KILL_PGID, "0")
    with pytest.raises(faults.FaultSpecError, match="does not name a process group"):
        faults.from_env()
    monkeypatch.setenv(faults.ENV_KILL_PGID, "self")
    if os.getpgrp() == os.getpid():  # started by a shell with job control: this process leads its group
        fault = faults.from_env()
        assert fault is not None and fault.pgid == os.getpid()
    else:  # "self" would kill whoever leads the group (the shell, the CI runner): refused
        with pytest.raises(faults.FaultSpecError, match="does not lead its process group"):
            faults.from_env()


def test_ledger_records_round_trip_and_foreign_values_are_ignored():
    record = KafkaLedgerRecord(
        pipeline="p",
        generation=2,
        batch_id=9,
        task_partition=1,
        task_partitions=4,
        topic="in",
        start={0: 5},
        end={0: 9},
        rows=3,
        output_topic="out",
        key_expr="account_id",
        transactional_id="onceflow.p.g2.p1",
        written_at=1,
    )
    assert KafkaLedgerRecord.from_json(record.to_json()) == record
    assert KafkaLedgerRecord.from_json(b"not json") is None
    assert KafkaLedgerRecord.from_json(b'{"onceflow_kafka_ledger": 1}') is None


def test_a_new_generation_skips_what_the_previous_one_delivered(broker, source):
    """Recovery may restart a new generation below what the Kafka sink holds, after
    the old one died inside a batch: its complete batches and the committed task
    partitions of its last batch must not be written again."""
    from pyspark.sql import functions as F

    name, bronze, end = "ks-generations", source["bronze"], source["end"]
    mid = {p: e // 2 for p, e in end.items()}
    below = F.lit(False)
    for p, o in mid.items():
        below = below | ((F.col("_partition") == p) & (F.col("_offset") < o))
    old = _sink(broker, source, name)  # generation 1
    old.write(bronze.where(below), 0, source["start"], mid)
    spec = old.spec(1, mid, end, source["topic"])
    task0 = old.prepared(bronze.where(~below)).where(f"{SHARD} = 0").toArrow().to_batches()
    write_task(spec, 0, task0, sum(b.num_rows for b in task0))  # then generation 1 dies in batch 1

    cfg = KafkaSink(topic=f"{name}-out", ledger_topic=f"{name}-ledger", key="account_id")
    new = KafkaTxnSink(name, 2, cfg, broker.bootstrap, trigger_seconds=1, source_topic=source["topic"])
    result = new.write(bronze, 0, source["start"], end)  # the worst case: restarted from the very beginning
    assert sorted(_event_ids(broker.bootstrap, new.output_topic)) == source["valid"], (
        "each event exactly once across both generations"
    )
    assert new.carry is not None
    assert new.carry.floor == mid and [i["tasks"] for i in new.carry.partial] == [[0]]
    assert result.rows_written == len(source["valid"]) - bronze.where(below).count() - sum(b.num_rows for b in task0)

    ledger = read_kafka_ledger(broker.bootstrap, new.ledger_topic, name)
    assert [(e.generation, e.batch_id, e.start) for e in ledger.entries] == [(1, 0, source["start"]), (2, 0, mid)]
    assert ledger.problems() == [], "generation 2's ledger range starts where generation 1's complete batches end"
    assert ledger.committed_offsets() == end

    restarted = KafkaTxnSink(name, 2, cfg, broker.bootstrap, trigger_seconds=1, source_topic=source["topic"])
    assert restarted.write(bronze, 0, source["start"], end).skipped == [0, 1, 2, 3]
    assert sorted(_event_ids(broker.bootstrap, new.output_topic)) == source["valid"]

    stale = KafkaTxnSink(name, 1, cfg, broker.bootstrap)
    with pytest.raises(KafkaSinkError, match="outdated checkpoint"):
        stale.prepare()


def test_the_audit_checks_the_output_like_any_other_sink(broker, source, tmp_path):
    from devkit.pipelines import load_pipeline
    from onceflow.audit.kafka_output import output_checks
    from onceflow.reconcile import CheckStatus

    pipeline = load_pipeline(
        tmp_path,
        broker.bootstrap,
        source["topic"],
        name="ks_audit",
        sinks={
            "bronze": {"path": str(tmp_path / "b")},
            "quarantine": {"path": str(tmp_path / "q")},
            "kafka": {"topic": "ks-audit-out", "ledger_topic": "ks-audit-ledger"},
        },
    )
    sink = KafkaTxnSink.for_pipeline(pipeline, GENERATION)
    _write(sink, source, 0)
    checks = {c.name: c for c in output_checks(pipeline)}
    assert all(c.status == CheckStatus.PASSED for c in checks.values()), {n: c.as_dict() for n, c in checks.items()}
    assert set(checks) == {
        "kafka_ledger",
        "kafka_output_loss",
        "kafka_output_phantoms",
        "kafka_output_duplicates",
        "kafka_output_values",
    }

    # a copy of one output record, and a record claiming to come from an aborted input transaction
    one = consume_all(broker.bootstrap, "ks-audit-out")[0]
    aborted = next(r for r in source["summary"].records if r.aborted and r.kind == VALID)
    forged = {**value_json(one[3]), "_partition": aborted.partition, "_offset": aborted.offset}
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("ks-audit-out", one[3], one[2])
    producer.produce("ks-audit-out", json.dumps(forged).encode(), one[2])
    producer.flush(30)
    checks = {c.name: c for c in output_checks(pipeline)}
    assert checks["kafka_output_duplicates"].status == "failed"
    assert checks["kafka_output_duplicates"].observed["duplicate_keys"] == 1
    assert checks["kafka_output_phantoms"].status == "failed" and checks["kafka_output_phantoms"].observed == 1
    assert checks["kafka_output_loss"].status == CheckStatus.PASSED


def test_a_value_that_cuts_timestamps_to_milliseconds_fails_the_audit(broker, source, tmp_path):
    """A bare `to_json(struct(*))` writes Spark's default JSON timestamps, milliseconds: the
    output no longer carries bronze's values, and the audit says which field."""
    from devkit.pipelines import load_pipeline
    from onceflow.audit.kafka_output import output_checks

    pipeline = load_pipeline(
        tmp_path,
        broker.bootstrap,
        source["topic"],
        name="ks_millis",
        sinks={
            "bronze": {"path": str(tmp_path / "b")},
            "quarantine": {"path": str(tmp_path / "q")},
            "kafka": {"topic": "ks-millis-out", "ledger_topic": "ks-millis-ledger", "value": "to_json(struct(*))"},
        },
    )
    _write(KafkaTxnSink.for_pipeline(pipeline, GENERATION), source, 0)
    values = next(c for c in output_checks(pipeline) if c.name == "kafka_output_values")
    assert values.status == "failed", values.as_dict()
    assert set(values.observed) == {"event_time"}, values.observed
    cut = [
        e
        for e in source["summary"].records
        if e.kind == VALID and not e.aborted and e.values["event_time"][23:26] != "000"
    ]
    assert values.observed["event_time"] == len(cut), "each event whose microseconds are not zero"
    assert re.search(r'"event_time":"[^"]*:\d\d\.\d{3}Z"', values.samples[0]["output"]), values.samples[0]


def test_recovery_and_audit_read_the_kafka_sink_ledger(broker, spark, tmp_path):
    """A Kafka sink added to a running pipeline is behind the Delta sinks: after the
    checkpoint is lost, recovery must resume from the Kafka sink's point (the lowest),
    the Delta sinks skip what they hold, and the audit checks the output topic."""
    import shutil

    from devkit.pipelines import write_pipeline
    from onceflow.audit.run import run_audit
    from onceflow.config import load
    from onceflow.recovery import plan_recovery, recover
    from onceflow.spark.ingest import run_ingest
    from tests.exactly_once import assert_exactly_once

    topic = "t-kafka-sink-recovery"
    summary = produce(
        broker.bootstrap,
        topic,
        2500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=31,
        abort_ratio=0.1,
        malformed_ratio=0.03,
    )
    source = {
        "bootstrap_servers": broker.bootstrap,
        "topic": topic,
        "starting_offsets": "earliest",
        "max_offsets_per_trigger": 1500,
    }
    sinks = {"bronze": {"path": str(tmp_path / "bronze")}, "quarantine": {"path": str(tmp_path / "quarantine")}}
    before = load(write_pipeline(tmp_path, broker.bootstrap, topic, name="ks_recovery", source=source, sinks=sinks))
    run_ingest(before, spark=spark)
    shutil.rmtree(before.checkpoint_path)
    kafka = {"topic": "ks-recovery-out", "ledger_topic": "ks-recovery-ledger", "partitions": 2}
    after = load(
        write_pipeline(
            tmp_path, broker.bootstrap, topic, name="ks_recovery", source=source, sinks={**sinks, "kafka": kafka}
        )
    )

    plan = plan_recovery(after)
    floors = plan.sink_floors or {}
    assert "kafka" in floors, plan.as_dict()
    assert set((plan.resume or {}).values()) == {0}, "the Kafka sink holds nothing: resume from the beginning"
    assert floors["bronze"] != floors["kafka"]
    assert recover(after).outcome == "done"
    resumed = run_ingest(after, spark=spark)
    assert resumed.generation == 1

    assert_exactly_once(after, broker.bootstrap, produced=[summary])  # the Delta sinks skipped what they held
    valid = sorted(r.event_id for r in summary.records if r.kind == VALID and not r.aborted)
    assert sorted(_event_ids(broker.bootstrap, "ks-recovery-out")) == valid
    ledger = read_kafka_ledger(broker.bootstrap, "ks-recovery-ledger", "ks_recovery")
    assert ledger.problems() == [] and {e.generation for e in ledger.entries} == {1}

    outcome = run_audit(after, report_dir=tmp_path / "reports")
    checks = {c["name"]: c["status"] for c in outcome.summary["checks"]}
    assert {
        checks[n] for n in ("kafka_ledger", "kafka_output_loss", "kafka_output_phantoms", "kafka_output_duplicates")
    } == {"passed"}, outcome.summary["checks"]
