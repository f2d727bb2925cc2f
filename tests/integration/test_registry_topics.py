"""Avro topics in the Confluent wire format, through a real schema registry (Apicurio) and the job.

A topic written with two versions of its schema (the second adds a field with a default, as a
producer upgraded mid-stream would), beside records that are broken in each way docs/registry.md
names, is ingested available-now: every record of either version lands in bronze, every broken one
in quarantine with its reason, the audit's judge (fastavro, not Spark) agrees record for record, and
the audit passes. The tables are read with delta-rs, not Spark."""

from __future__ import annotations

import copy
import io
import json
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import fastavro
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable

from devkit.pipelines import PAYMENTS_SCHEMA_BODY, pipeline_file
from onceflow.audit.run import run_audit
from onceflow.kafka.admin import ensure_topic
from onceflow.registry import Registry, frame
from onceflow.schema.avro import install_minimal_decimals
from onceflow.schema.avro_reference import AvroJudge
from onceflow.sinks import table_paths
from onceflow.spark.ingest import run_ingest

pytestmark = [pytest.mark.integration, pytest.mark.spark]

install_minimal_decimals()  # the records' decimals written as Java's Avro writes them

V1: dict[str, Any] = {
    "type": "record",
    "name": "Payment",
    "namespace": "dev.onceflow",
    "fields": [
        {"name": "event_id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "account_id", "type": "string"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 2}},
        {"name": "currency", "type": "string"},
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}
V2 = copy.deepcopy(V1)
V2["fields"].append({"name": "channel", "type": ["null", "string"], "default": None})
OTHER = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]}


def _avro(schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def _payment(i: int, **changes) -> dict:
    base = {
        "event_id": str(uuid.UUID(int=i + 1)),
        "account_id": f"acct-{i % 7}",
        "amount": Decimal(f"{i}.{i % 100:02d}"),
        "currency": ("EUR", "USD", "GBP")[i % 3],
        "event_time": datetime(2026, 11, 29, 12, tzinfo=UTC) + timedelta(seconds=i),
    }
    return {**base, **changes}


def test_two_schema_versions_land_and_every_broken_record_is_quarantined_as_the_judge_says(
    broker, spark, registry, topic, tmp_path
):
    fields = [*PAYMENTS_SCHEMA_BODY["fields"], {"name": "channel", "type": "string", "required": False}]
    schema = {**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": registry.url}, "fields": fields}
    _, pipeline = pipeline_file(tmp_path / "pipeline", broker.bootstrap, topic, schema=schema)
    subject = pipeline.registry_subject
    assert subject == f"{topic}-value"
    client = Registry(pipeline.schema.registry)  # type: ignore[arg-type]
    v1 = client.register(subject, json.dumps(V1))
    v2 = client.register(subject, json.dumps(V2))  # compatible: a field with a default
    other = client.register(f"{topic}-other-value", json.dumps(OTHER))
    assert len({v1, v2, other}) == 3

    good = [frame(v1, _avro(V1, _payment(i))) for i in range(40)]
    good += [frame(v2, _avro(V2, _payment(i, channel=("web", None)[i % 2]))) for i in range(40, 80)]
    payload = _avro(V1, _payment(99))
    broken = {
        "not_allowed": frame(v2, _avro(V2, _payment(100, currency="XYZ", channel="web"))),
        "below_min": frame(v1, _avro(V1, _payment(101, amount=Decimal("-1.00")))),
        "avro_not_framed": json.dumps({"event_id": str(uuid.uuid4())}).encode(),
        "avro_unknown_schema": frame(987654, payload),
        "avro_other_subject": frame(other, _avro(OTHER, {"x": 1})),
        "avro_undecodable": frame(v1, payload[:-3]),  # cut short
    }
    extra = {
        "avro_undecodable": [
            frame(v1, payload + b"\x00"),  # a byte left over
            # a string that is not UTF-8: the Avro spec's strings are
            frame(v1, _avro(V1, _payment(102, account_id="acct-Z")).replace(b"acct-Z", b"acct-\xff")),
        ],
    }
    values = good + list(broken.values()) + [v for vs in extra.values() for v in vs] + [b"\x00\x00"]
    ensure_topic(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for v in values:
        producer.produce(topic, v, key=b"k")
    assert producer.flush(30) == 0

    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished", result
    paths = table_paths(pipeline)
    bronze = DeltaTable(paths["bronze"]).to_pyarrow_table().to_pylist()
    quarantine = DeltaTable(paths["quarantine"]).to_pyarrow_table().to_pylist()
    assert len(bronze) == len(good), (len(bronze), Counter(r["reason"] for r in quarantine))
    assert {r["event_id"] for r in bronze} == {str(uuid.UUID(int=i + 1)) for i in range(80)}
    by_id = {r["event_id"]: r for r in bronze}
    assert by_id[str(uuid.UUID(int=41))]["channel"] == "web" and by_id[str(uuid.UUID(int=1))]["channel"] is None
    assert by_id[str(uuid.UUID(int=8))]["amount"] == Decimal("7.07")

    # the judge (fastavro) gives every record the reason the job gave it
    judge = AvroJudge(pipeline.schema, Registry(pipeline.schema.registry), subject)  # type: ignore[arg-type]
    job = {bytes(r["_value"]): r["reason"] for r in quarantine}
    for v in values:
        verdict = judge.judge(v)
        assert verdict.reason == job.get(v), (v[:12], verdict.reason, job.get(v))
    reasons = Counter(r["reason"] for r in quarantine)
    expected = Counter({**{k: 1 for k in broken}, "avro_undecodable": 1 + len(extra["avro_undecodable"])})
    expected["avro_not_framed"] += 1  # the two bytes b"\x00\x00": shorter than the header
    assert reasons == expected, reasons

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports", spark=spark)
    failed = {c["name"]: c["detail"] for c in outcome.summary["checks"] if c["status"] == "failed"}
    assert outcome.status == "passed", failed
