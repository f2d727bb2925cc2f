"""A user's state from before the upgrade keeps working on the current engines.

tests/data/state_spark_4_0/state.tar.gz holds a pipeline's tables, checkpoint and status log as
onceflow left them on Spark 4.0.0 and Delta 4.0.0 (built by make.py there). The same records
are produced again at the same offsets (same transactions, same aborts), more follow, and the
current engines continue from the old checkpoint, audit everything, and recover from a lost
checkpoint: exactly once against an independent reader each time.
"""

from __future__ import annotations

import base64
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from confluent_kafka import Producer

from devkit.pipelines import PAYMENTS_SCHEMA, write_pipeline
from onceflow import config
from onceflow.audit.run import run_audit
from onceflow.generate.producer import produce
from onceflow.kafka.admin import ensure_topic
from onceflow.recovery import recover
from onceflow.spark.ingest import run_ingest
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DATA = Path(__file__).resolve().parents[1] / "data" / "state_spark_4_0"
NAME, TOPIC = "oldstate", "oldstate-payments"


def _produce_again(bootstrap: str) -> None:
    """records.jsonl as it was produced: each transaction committed or aborted as then."""
    ensure_topic(bootstrap, TOPIC, 2)
    records = [json.loads(line) for line in (DATA / "records.jsonl").read_text().splitlines()]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "oldstate-replay"})
    producer.init_transactions(30)
    for txn in sorted({r["txn"] for r in records}):
        batch = [r for r in records if r["txn"] == txn]
        producer.begin_transaction()
        for r in batch:
            key = base64.b64decode(r["key"]) if r["key"] is not None else None
            producer.produce(TOPIC, base64.b64decode(r["value"]), key, partition=r["partition"])
        producer.flush(30)
        if batch[0]["aborted"]:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def test_state_from_spark_4_0_ingests_audits_and_recovers_on_the_current_engines(broker, spark, tmp_path):
    _produce_again(broker.bootstrap)
    with tarfile.open(DATA / "state.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    state = tmp_path / "state"
    pipeline = config.load(write_pipeline(state, broker.bootstrap, TOPIC, name=NAME, max_offsets=150))
    pipeline.state_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(state / "status.jsonl", pipeline.state_path / "status.jsonl")
    before = assert_exactly_once(pipeline, broker.bootstrap)
    assert before["bronze"] > 400, before

    produce(broker.bootstrap, TOPIC, 300, schema=PAYMENTS_SCHEMA, partitions=2, seed=39, malformed_ratio=0.03)
    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished" and result.generation == 0, result
    after = assert_exactly_once(pipeline, broker.bootstrap)
    assert after["bronze"] > before["bronze"], (before, after)
    assert_ledgers_contiguous(pipeline)
    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    assert outcome.status == "passed", outcome.summary["failed_checks"]

    shutil.rmtree(pipeline.checkpoint_path)  # the old checkpoint lost: recovery from the old ledgers
    produce(broker.bootstrap, TOPIC, 200, schema=PAYMENTS_SCHEMA, partitions=2, seed=40)
    done = recover(pipeline)
    assert done.outcome == "done", done.record
    assert run_ingest(pipeline, spark=spark).status == "finished"
    assert_exactly_once(pipeline, broker.bootstrap)
    assert_ledgers_contiguous(pipeline)
