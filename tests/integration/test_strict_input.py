"""Bad input never passes as good, through the real broker, job, tables and audit.

The corpus of tests/integration/test_validation.py (every strict-input case:
trailing content, concatenated objects, invalid and overlong UTF-8, duplicate
keys, lone surrogates, ambiguous timestamps, and every declared rule) is
produced to a topic; the job must quarantine each malformed record with its
reason and its raw bytes, whitespace trailers stay valid, and the audit, which
judges the same records with its own implementation, passes. Then a record the
job rightly refused is slipped into bronze by hand, as a job with the old
lenient parser would have written it: the audit fails and names its offset.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable

from devkit.delta_history import write_engines
from devkit.pipelines import write_pipeline
from onceflow import config
from onceflow.audit.run import run_audit
from onceflow.errors import ConfigError
from onceflow.kafka.admin import ensure_topic
from onceflow.ledger import read_ledger
from onceflow.sinks import table_paths
from onceflow.spark.ingest import run_ingest
from tests.integration.test_validation import MALFORMED, SCHEMA, VALID

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

# the corpus's valid records share one id: uniqueness is not what this test is about
NO_ID = {**SCHEMA.model_dump(mode="json", exclude_none=True), "event_id": None}
AGGREGATES = {
    "group_by": ["site"],
    # big_sum: two longs of 2^63-1 sum past a bigint (issue #36): the merge must not overflow
    "metrics": {"events": "count", "total": "sum(amount)", "top": "max(n)", "big_sum": "sum(big)"},
}


@pytest.fixture(scope="module")
def ingested(broker, spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("strict")
    topic = "t-strict-input"
    ensure_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 1_000_000})
    values = VALID + [v for v, _ in MALFORMED]
    for v in values:
        producer.produce(topic, value=v, partition=0)
    producer.flush(30)
    pipeline = config.load(write_pipeline(folder, broker.bootstrap, topic, schema=NO_ID, aggregates=AGGREGATES))
    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished", result
    return {"pipeline": pipeline, "values": values, "folder": folder, "topic": topic, "bootstrap": broker.bootstrap}


def copy_of(ingested, dest: Path, schema: dict = NO_ID) -> config.Pipeline:
    """The ingested tables and checkpoint, copied, under a pipeline file declaring `schema`."""
    shutil.copytree(ingested["folder"], dest, ignore=shutil.ignore_patterns("*.yaml"))
    return config.load(
        write_pipeline(
            dest,
            ingested["bootstrap"],
            ingested["topic"],
            schema=schema,
            aggregates=AGGREGATES,
            name=ingested["pipeline"].name,
        )
    )


def _rows(path: str, columns: list[str]) -> list[dict]:
    from deltalake import QueryBuilder

    sql = "SELECT " + ", ".join(f'"{c}"' for c in columns) + " FROM t"
    return pa.table(QueryBuilder().register("t", DeltaTable(path)).execute(sql).read_all()).to_pylist()


def test_every_malformed_kind_is_quarantined_with_its_reason_and_raw_bytes(ingested, spark, tmp_path):
    paths = table_paths(ingested["pipeline"])
    quarantine = {r["_offset"]: r for r in _rows(paths["quarantine"], ["_offset", "_value", "reason", "detail"])}
    bronze = {r["_offset"] for r in _rows(paths["bronze"], ["_offset"])}
    assert bronze == set(range(len(VALID))), "valid records (whitespace trailers too) land in bronze"
    wrong = {}
    for i, (value, reason) in enumerate(MALFORMED, start=len(VALID)):
        row = quarantine.get(i)
        if row is None or row["reason"] != reason or row["_value"] != value or not row["detail"]:
            wrong[i] = (value[:60], reason, row and (row["reason"], row["detail"], row["_value"] == value))
    assert not wrong, wrong

    outcome = run_audit(ingested["pipeline"], report_dir=tmp_path / "reports")
    assert outcome.status == "passed", outcome.summary["failed_checks"]


def test_a_record_slipped_into_bronze_fails_the_audit_with_its_offset(ingested, spark, tmp_path):
    """As the old parser did: `{valid} xyz` accepted as the valid object it starts with."""
    pipeline = copy_of(ingested, tmp_path / "copy")
    paths = table_paths(pipeline)
    offset = next(i for i, (v, r) in enumerate(MALFORMED, start=len(VALID)) if r == "trailing_content")
    from pyspark.sql import functions as F

    bronze = spark.read.format("delta").load(paths["bronze"])
    slipped = bronze.where(F.col("_offset") == 0).withColumn("_offset", F.lit(offset).cast("bigint"))
    slipped.write.format("delta").mode("append").save(paths["bronze"])
    spark.sql(f"DELETE FROM delta.`{paths['quarantine']}` WHERE _offset = {offset}")

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    checks = {c["name"]: c for c in outcome.summary["checks"]}
    assert outcome.status == "failed" and checks["accounting"]["status"] == "failed"
    assert checks["content"]["status"] == "failed"
    assert any(s["_offset"] == offset for s in checks["content"]["samples"]), checks["content"]


def test_compatible_evolution_is_applied_and_audited_and_a_breaking_one_is_refused(ingested, spark, tmp_path):
    evolved = json.loads(json.dumps(NO_ID))
    small = next(f for f in evolved["fields"] if f["name"] == "small")
    small["type"] = "long"  # int widened to long
    evolved["fields"].append({"name": "battery", "type": "double", "required": False, "path": "$.meta.battery"})
    site = next(f for f in evolved["fields"] if f["name"] == "site")
    site["allowed"] = [*site["allowed"], "z"]  # a new allowed value: nothing to change in the tables
    pipeline = copy_of(ingested, tmp_path / "evolved", evolved)
    producer = Producer({"bootstrap.servers": ingested["bootstrap"]})
    producer.produce(ingested["topic"], value=VALID[0], partition=0)  # a batch after the evolution
    producer.flush(30)
    assert run_ingest(pipeline, spark=spark).status == "finished"
    paths = table_paths(pipeline)
    types = {f.name: f.dataType.simpleString() for f in spark.read.format("delta").load(paths["bronze"]).schema}
    assert types["small"] == "bigint" and types["battery"] == "double", types
    # the widened table stays one delta-rs reads and writes (the driver committed the new batch with it)
    table = DeltaTable(paths["bronze"])
    assert not set(table.protocol().reader_features or []) - {"deletionVectors"}, table.protocol()
    offsets = {r["_offset"] for r in _rows(paths["bronze"], ["_offset"])}
    assert len(ingested["values"]) in offsets and len(offsets) == len(VALID) + 1, sorted(offsets)
    assert write_engines(paths["bronze"])[-1] == "delta-rs", write_engines(paths["bronze"])
    ledger = read_ledger(paths["bronze"])
    assert len(ledger.maintenance) >= 2 and not ledger.foreign_commits, (ledger.maintenance, ledger.foreign_commits)
    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    assert outcome.status == "passed", outcome.summary["failed_checks"]

    broken = json.loads(json.dumps(evolved))
    broken["fields"] = [f for f in broken["fields"] if f["name"] != "code"]  # a field removed
    for f in broken["fields"]:
        if f["name"] == "n":
            f["type"] = "int"  # a type narrowed
    pipeline = config.load(
        write_pipeline(
            tmp_path / "evolved",
            ingested["bootstrap"],
            ingested["topic"],
            schema=broken,
            aggregates=AGGREGATES,
            name=ingested["pipeline"].name,
        )
    )
    with pytest.raises(ConfigError) as refused:
        run_ingest(pipeline, spark=spark)
    text = str(refused.value)
    assert (
        "column `code` (string) is no longer declared" in text
        and "`n` is bigint in the table but declared int" in text
        and "Fix:" in text
    )
