"""Topics in the Confluent wire format, through a real schema registry (Apicurio) and the job: Avro,
and JSON Schema.

An Avro topic written with two versions of its schema (the second adds a field with a default, as a
producer upgraded mid-stream would), beside records that are broken in each way docs/registry.md
names, is ingested available-now: every record of either version lands in bronze, every broken one
in quarantine with its reason, the audit's judge (fastavro, not Spark) agrees record for record, and
the audit passes. The tables are read with delta-rs, not Spark. A JSON Schema topic the same way:
two versions, every broken header and payload quarantined with the reason the audit's judge gives."""

from __future__ import annotations

import base64
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
from onceflow.generate.producer import ProduceSummary
from onceflow.kafka.admin import ensure_topic
from onceflow.ledger import read_ledger
from onceflow.registry import Registry, frame
from onceflow.schema.avro import install_minimal_decimals
from onceflow.schema.avro_reference import AvroJudge
from onceflow.schema.framed import FramedJsonJudge
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


def _produced(broker, pipeline, count: int, seed: int, **extra) -> ProduceSummary:
    """`onceflow produce`'s stream for the pipeline's topic: a quarter malformed (every kind the
    format can hold), a tenth of the transactions aborted, in 2 partitions."""
    from onceflow.generate.producer import produce

    return produce(
        broker.bootstrap,
        pipeline.source.topic,
        count,
        schema=pipeline.schema,
        seed=seed,
        partitions=2,
        malformed_ratio=0.25,
        abort_ratio=0.1,
        txn_size=40,
        **extra,
    )


def _landed(broker, spark, pipeline, topic: str, values: list[bytes]) -> tuple[list[dict], list[dict]]:
    """`values` written to the topic, ingested available-now; bronze's and quarantine's rows, read by
    delta-rs."""
    ensure_topic(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for v in values:
        producer.produce(topic, v, key=b"k")
    assert producer.flush(30) == 0
    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished", result
    paths = table_paths(pipeline)
    bronze, quarantine = (DeltaTable(paths[s]).to_pyarrow_table().to_pylist() for s in ("bronze", "quarantine"))
    return bronze, quarantine


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
    bronze, quarantine = _landed(broker, spark, pipeline, topic, values)
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

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    failed = {c["name"]: c["detail"] for c in outcome.summary["checks"] if c["status"] == "failed"}
    assert outcome.status == "passed", failed


JSON_V1: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Payment",
    "type": "object",
    "properties": {
        "event_id": {"type": "string"},
        "account_id": {"type": "string"},
        "amount": {"type": "number"},
        "currency": {"type": "string"},
        "event_time": {"type": "string", "format": "date-time"},
    },
    "required": ["event_id", "account_id", "amount", "currency", "event_time"],
    # closed: adding an optional property is then a BACKWARD-compatible change (on an open object the
    # registry refuses it as a narrowing)
    "additionalProperties": False,
}
JSON_V2 = copy.deepcopy(JSON_V1)
JSON_V2["properties"]["channel"] = {"type": ["null", "string"]}


def _json_payment(i: int, **changes) -> bytes:
    base = {
        "event_id": str(uuid.UUID(int=i + 1)),
        "account_id": f"acct-{i % 7}",
        "amount": float(f"{i}.{i % 100:02d}"),
        "currency": ("EUR", "USD", "GBP")[i % 3],
        "event_time": (datetime(2026, 11, 29, 12, tzinfo=UTC) + timedelta(seconds=i)).isoformat(),
    }
    return json.dumps({**base, **changes}).encode()


def test_json_schema_records_land_by_their_payload_and_each_broken_header_has_its_reason(
    broker, spark, registry, topic, tmp_path
):
    """A JSON Schema serializer's records: the header names a JSON Schema of the subject, the payload
    is JSON judged by the declared fields. Ids of another subject, unknown ids, an Avro schema's id,
    unframed JSON and broken payloads are quarantined with the reason the judge (plain Python)
    gives; the audit passes."""
    fields = [*PAYMENTS_SCHEMA_BODY["fields"], {"name": "channel", "type": "string", "required": False}]
    schema = {**PAYMENTS_SCHEMA_BODY, "format": "json_schema", "registry": {"url": registry.url}, "fields": fields}
    _, pipeline = pipeline_file(tmp_path / "pipeline", broker.bootstrap, topic, schema=schema)
    subject = str(pipeline.registry_subject)
    client = Registry(pipeline.schema.registry)  # type: ignore[arg-type]
    v1 = client.register(subject, json.dumps(JSON_V1), "JSON")
    v2 = client.register(subject, json.dumps(JSON_V2), "JSON")
    other_schema = {
        "$schema": JSON_V1["$schema"],
        "title": "Other",
        "type": "object",
        "properties": {"x": {"type": "integer"}},
    }
    other = client.register(f"{topic}-other-value", json.dumps(other_schema), "JSON")
    avro_id = client.register(f"{topic}-avro-value", json.dumps(OTHER))
    assert len({v1, v2, other, avro_id}) == 4
    assert (client.schema_type(v1), client.schema_type(avro_id)) == ("JSON", "AVRO")

    good = [frame(v1, _json_payment(i)) for i in range(30)]
    good += [frame(v2, _json_payment(i, channel=("web", None)[i % 2])) for i in range(30, 60)]
    broken = {
        "not_allowed": frame(v2, _json_payment(100, currency="XYZ")),
        "below_min": frame(v1, _json_payment(101, amount=-1.0)),
        "json_schema_not_framed": _json_payment(102),  # plain JSON, no header
        "json_schema_unknown_schema": frame(987654, _json_payment(103)),
        "json_schema_other_subject": frame(other, _json_payment(104)),
        "invalid_json": frame(v1, _json_payment(105)[:-3]),  # cut short
        "not_an_object": frame(v1, b"[1, 2]"),
        "invalid_utf8": frame(v1, _json_payment(106, account_id="acct-Z").replace(b"acct-Z", b"acct-\xff")),
    }
    # an Avro schema's id: its own subject says so first (Apicurio refuses an Avro schema under a JSON
    # subject, so `json_schema_unsupported_schema` needs a registry that lets a subject hold both)
    values = good + list(broken.values()) + [frame(avro_id, _json_payment(107)), frame(v1, b""), b"\x00\x00"]
    bronze, quarantine = _landed(broker, spark, pipeline, topic, values)
    assert len(bronze) == len(good), (len(bronze), Counter(r["reason"] for r in quarantine))
    by_id = {r["event_id"]: r for r in bronze}
    assert by_id[str(uuid.UUID(int=31))]["channel"] == "web" and by_id[str(uuid.UUID(int=32))]["channel"] is None
    assert by_id[str(uuid.UUID(int=8))]["amount"] == Decimal("7.07")

    judge = FramedJsonJudge(pipeline.schema, Registry(pipeline.schema.registry), subject)  # type: ignore[arg-type]
    job = {bytes(r["_value"]): r["reason"] for r in quarantine}
    for v in values:
        verdict = judge.judge(v)
        assert verdict.reason == job.get(v), (v[:12], verdict.reason, job.get(v))
    reasons = Counter(r["reason"] for r in quarantine)
    expected = Counter(dict.fromkeys(broken, 1))
    expected["json_schema_other_subject"] += 1  # the Avro schema's id, under its own subject
    expected["invalid_json"] += 1  # a header and no payload
    expected["json_schema_not_framed"] += 1  # the two bytes: shorter than the header
    assert reasons == expected, reasons

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    failed = {c["name"]: c["detail"] for c in outcome.summary["checks"] if c["status"] == "failed"}
    assert outcome.status == "passed", failed

    # `fields: registry` reads the subject's latest version (JSON_V2): its object's properties
    _, from_registry = pipeline_file(
        tmp_path / "from-registry", broker.bootstrap, topic, schema={**schema, "fields": "registry"}
    )
    assert [(f.name, f.type, f.required) for f in from_registry.schema.fields] == [
        ("event_id", "string", True),
        ("account_id", "string", True),
        ("amount", "double", True),
        ("currency", "string", True),
        ("event_time", "timestamp", True),
        ("channel", "string", False),
    ]


def test_produce_frames_a_json_schema_pipelines_events_with_the_declared_fields_schema(
    broker, registry, topic, tmp_path, capsys
):
    """`onceflow produce` on a `json_schema` pipeline whose subject is empty registers the declared
    fields' JSON Schema and frames every event with its id, large ones of exactly max_bytes with the
    header included: the judge (plain Python) finds each committed record valid or with the reason
    the generator broke it for."""
    from onceflow.cli import main
    from onceflow.kafka.client import KafkaClient
    from onceflow.kafka.consume import read_records

    schema = {**PAYMENTS_SCHEMA_BODY, "format": "json_schema", "registry": {"url": registry.url}}
    file, pipeline = pipeline_file(tmp_path / "pipeline", broker.bootstrap, topic, schema=schema)
    args = ["produce", "--pipeline", str(file), "--count", "400", "--seed", "5", "--json"]
    assert main([*args, "--malformed-ratio", "0.2", "--abort-ratio", "0.1", "--large-ratio", "0.1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    subject = str(pipeline.registry_subject)
    client = Registry(pipeline.schema.registry)  # type: ignore[arg-type]
    sid = client.latest(subject)
    assert sid is not None and client.schema_type(sid) == "JSON"
    assert json.loads(str(client.schema(sid)))["title"] == pipeline.name

    judge = FramedJsonJudge(pipeline.schema, client, subject)
    records = read_records(KafkaClient(broker.bootstrap), topic)
    assert all(v is None or v[:5] == frame(sid, b"") for _, _, _, v in records)
    reasons = Counter(judge.judge(v).reason for _, _, _, v in records)
    expected: Counter = Counter()
    for part in summary["partitions"].values():
        expected.update({k.removeprefix("malformed:"): n for k, n in part.items() if k.startswith("malformed:")})
    expected[None] = summary["totals"]["committed_valid"]
    assert summary["totals"]["committed_large"] > 0 and reasons == expected, (reasons, expected)


def test_onceflow_produce_writes_avro_in_two_versions_and_every_kind_lands_with_its_reason(
    broker, spark, registry, topic, tmp_path
):
    """`onceflow produce` for an avro pipeline (generate/avro_events.py): the declared fields' schema
    registered in two versions (the second adds the optional field), half the stream written with
    each; one record of every malformed kind at least. Every committed valid record lands in bronze
    (the added field only in the second half's), every malformed one in quarantine with its kind as
    reason, aborted ones nowhere, and the audit passes. Then rows deleted from both tables are
    re-written by a backfill of the whole range exactly as the stream wrote them (the same parse of
    the framed records), and the audit passes again."""
    from onceflow.generate.avro_events import framed_kinds
    from onceflow.generate.framing import registry_framing
    from onceflow.generate.records import Generator
    from onceflow.registry import unframe
    from onceflow.spark.backfill import run_backfill

    fields = [*PAYMENTS_SCHEMA_BODY["fields"], {"name": "channel", "type": "string", "required": False}]
    schema = {**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": registry.url}, "fields": fields}
    _, pipeline = pipeline_file(tmp_path / "pipeline", broker.bootstrap, topic, schema=schema)
    framing = registry_framing(pipeline, malformed=True)
    writers = framing["writers"]
    assert writers.first.schema_id != writers.evolved.schema_id
    assert registry_framing(pipeline, malformed=True)["writers"] == writers  # registered once: the ids again
    summary = _produced(broker, pipeline, 800, seed=11, **framing)
    committed = [r for r in summary.records if not r.aborted]
    kinds = Counter(r.kind for r in committed if r.kind != "valid")
    assert set(kinds) == set(framed_kinds(Generator(pipeline.schema))), kinds
    valid = [r for r in committed if r.kind == "valid"]
    ids = Counter(unframe(r.value)[0] for r in valid if r.value is not None)  # type: ignore[index]
    assert set(ids) == {writers.first.schema_id, writers.evolved.schema_id}, ids

    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished", result
    paths = table_paths(pipeline)
    bronze, quarantine = (DeltaTable(paths[s]).to_pyarrow_table().to_pylist() for s in ("bronze", "quarantine"))
    assert sorted(r["event_id"] for r in bronze) == sorted(r.event_id for r in valid)
    assert Counter(r["reason"] for r in quarantine) == kinds
    first = {r.event_id for r in valid if unframe(r.value)[0] == writers.first.schema_id}  # type: ignore[index,arg-type]
    assert all(r["channel"] is None for r in bronze if r["event_id"] in first)
    assert any(r["channel"] is not None for r in bronze if r["event_id"] not in first)

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    failed = {c["name"]: c["detail"] for c in outcome.summary["checks"] if c["status"] == "failed"}
    assert outcome.status == "passed", failed

    # a backfill of the whole range re-writes what was deleted, as the stream wrote it
    data = ["_partition", "_offset", "event_id", "channel", "amount", "reason", "_value"]
    before = {s: _rows(paths[s], data) for s in ("bronze", "quarantine")}
    DeltaTable(paths["bronze"]).delete("_partition = 1")
    DeltaTable(paths["quarantine"]).delete("_partition = 0")
    end = read_ledger(paths["bronze"]).committed_offsets()
    backfilled = run_backfill(pipeline, {p: 0 for p in end}, end, spark=spark)
    lost = {
        "bronze": sum(r["_partition"] == 1 for r in before["bronze"]),
        "quarantine": sum(r["_partition"] == 0 for r in before["quarantine"]),
    }
    assert backfilled.added_by_sink == lost and all(lost.values()), backfilled
    assert {s: _rows(paths[s], data) for s in ("bronze", "quarantine")} == before
    again = run_audit(pipeline, report_dir=tmp_path / "reports")
    assert again.status == "passed", [c["detail"] for c in again.summary["checks"] if c["status"] == "failed"]


def test_fields_from_the_registry_follow_its_latest_version_into_bronze(broker, spark, registry, topic, tmp_path):
    """`schema.fields: registry` (schema/registry_fields.py): the fields are read from the subject's
    latest version at each load. Records of a first version land in bronze with its fields; a second
    version that adds an optional field is registered, the next load reads it, and records of it land
    with the new column while the first ones keep it empty. The audit passes over both declarations,
    each batch judged by the fields it had. The fields read last are kept for the loads made while
    the registry does not answer."""
    from onceflow import config
    from onceflow.generate.avro_events import RegistryWriters, Writer
    from onceflow.generate.producer import produce
    from onceflow.paths import state_dir
    from onceflow.schema.avro_declared import declared_avro_schema
    from onceflow.schema.model import RegistrySpec, Schema
    from onceflow.schema.registry_fields import CACHE_FILE

    fields = [*PAYMENTS_SCHEMA_BODY["fields"], {"name": "channel", "type": "string", "required": False}]
    full = Schema.model_validate({**PAYMENTS_SCHEMA_BODY, "fields": fields})
    first_schema = declared_avro_schema(full, "orders", leave_out=("channel",))
    client, subject = Registry(RegistrySpec(url=registry.url)), f"{topic}-value"
    first = Writer(client.register(subject, json.dumps(first_schema)), first_schema, ("channel",))
    body = {**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": registry.url}, "fields": "registry"}
    file, before = pipeline_file(tmp_path / "pipeline", broker.bootstrap, topic, schema=body)
    assert [f.name for f in before.schema.fields] == [f.name for f in full.fields if f.name != "channel"]
    assert json.loads((state_dir() / "pipelines" / before.name / CACHE_FILE).read_text())["id"] == first.schema_id
    old = produce(
        broker.bootstrap, topic, 300, schema=full, seed=5, partitions=2, writers=RegistryWriters(first, first)
    )
    assert run_ingest(before, spark=spark).status == "finished"

    evolved_schema = declared_avro_schema(full, "orders")
    evolved = Writer(client.register(subject, json.dumps(evolved_schema)), evolved_schema)
    after = config.load(file)
    channel = after.schema.field("channel")
    assert channel is not None and channel.type == "string" and not channel.required
    new = produce(
        broker.bootstrap, topic, 300, schema=full, seed=6, partitions=2, writers=RegistryWriters(evolved, evolved)
    )
    assert run_ingest(after, spark=spark).status == "finished"

    bronze = DeltaTable(table_paths(after)["bronze"]).to_pyarrow_table(columns=["event_id", "channel"]).to_pylist()
    written = {r.event_id: r for s in (old, new) for r in s.records if not r.aborted and r.kind == "valid"}
    assert sorted(r["event_id"] for r in bronze) == sorted(written)
    firsts = {r.event_id for r in old.records}
    assert all(r["channel"] is None for r in bronze if r["event_id"] in firsts)
    assert any(r["channel"] is not None for r in bronze if r["event_id"] not in firsts)
    outcome = run_audit(after, report_dir=tmp_path / "reports")
    assert outcome.status == "passed", [c["detail"] for c in outcome.summary["checks"] if c["status"] == "failed"]


def _rows(path: str, columns: list[str]) -> list[dict]:
    """The table's rows (the columns it has of `columns`), sorted: a comparable snapshot."""
    table = DeltaTable(path)
    names = [c for c in columns if c in table.schema().to_arrow().names]
    rows = table.to_pyarrow_table(columns=names).to_pylist()
    return sorted(rows, key=lambda r: (r["_partition"], r["_offset"]))


def test_an_incompatible_version_is_refused_by_the_registry_with_the_fix(registry, topic):
    """The registry checks BACKWARD compatibility (onceflow registry start sets it): a required field
    added without a default is refused, and the refusal says so and how to fix it."""
    from onceflow.errors import RegistryError
    from onceflow.schema.model import RegistrySpec

    client = Registry(RegistrySpec(url=registry.url))
    subject = f"{topic}-value"
    client.register(subject, json.dumps(V1))
    breaking = copy.deepcopy(V1)
    breaking["fields"].append({"name": "region", "type": "string"})  # no default: old records cannot be read
    with pytest.raises(RegistryError, match=r"refused the schema .* as incompatible .*Fix: make the new version"):
        client.register(subject, json.dumps(breaking))


def test_protobuf_records_of_two_versions_and_both_registration_forms_land_and_every_kind_has_its_reason(
    broker, spark, registry, topic, tmp_path
):
    """A protobuf pipeline (spark/protobuf.py): `onceflow produce` registers the declared fields as
    proto3 `.proto` text in two versions and writes half the stream with each, one record of every
    malformed kind at least; beside them, records framed with the same message registered as a base64
    descriptor, as confluent-kafka's Python serializer registers it. Every committed valid record
    lands in bronze (the added field only in the second half's), every malformed one in quarantine
    with its kind as reason, the audit's own decoder (schema/protobuf_reference.py) gives the job's
    reason for every record, and the audit passes."""
    from google.protobuf import descriptor_pb2

    from onceflow.generate.avro_events import framed_kinds
    from onceflow.generate.framing import registry_framing
    from onceflow.generate.protobuf_events import ProtoWriter
    from onceflow.generate.records import Generator
    from onceflow.kafka.client import KafkaClient
    from onceflow.kafka.consume import read_records
    from onceflow.registry import unframe
    from onceflow.schema.protobuf import PROTOBUF_TYPE, file_set
    from onceflow.schema.protobuf_reference import ProtobufJudge
    from onceflow.schema.reasons import PROTOBUF_REASONS

    fields = [*PAYMENTS_SCHEMA_BODY["fields"], {"name": "channel", "type": "string", "required": False}]
    schema = {**PAYMENTS_SCHEMA_BODY, "format": "protobuf", "registry": {"url": registry.url}, "fields": fields}
    _, pipeline = pipeline_file(tmp_path / "pipeline", broker.bootstrap, topic, schema=schema)
    subject = str(pipeline.registry_subject)
    framing = registry_framing(pipeline, malformed=True)
    writers = framing["writers"]
    assert writers.first.schema_id != writers.evolved.schema_id
    summary = _produced(broker, pipeline, 600, seed=13, **framing)
    committed = [r for r in summary.records if not r.aborted]
    kinds = Counter(r.kind for r in committed if r.kind != "valid")
    assert set(kinds) == set(framed_kinds(Generator(pipeline.schema), reasons=PROTOBUF_REASONS)), kinds
    valid = [r for r in committed if r.kind == "valid"]

    # the evolved message registered as confluent-kafka's Python serializer does: a base64 descriptor
    client = Registry(pipeline.schema.registry)  # type: ignore[arg-type]
    own = descriptor_pb2.FileDescriptorSet.FromString(file_set(writers.evolved.text)).file[-1]
    b64 = client.register(subject, base64.b64encode(own.SerializeToString()).decode(), PROTOBUF_TYPE)
    assert b64 not in (writers.first.schema_id, writers.evolved.schema_id)
    as_bytes = ProtoWriter(b64, writers.evolved.text)
    extra = [_payment(1000 + i, channel="web") for i in range(20)]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for p in extra:
        producer.produce(topic, frame(b64, as_bytes.encode(p)), key=b"k")
    assert producer.flush(30) == 0

    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished", result
    paths = table_paths(pipeline)
    bronze, quarantine = (DeltaTable(paths[s]).to_pyarrow_table().to_pylist() for s in ("bronze", "quarantine"))
    assert sorted(r["event_id"] for r in bronze) == sorted([r.event_id for r in valid] + [p["event_id"] for p in extra])
    assert Counter(r["reason"] for r in quarantine) == kinds
    first = {r.event_id for r in valid if unframe(r.value)[0] == writers.first.schema_id}  # type: ignore[index,arg-type]
    assert all(r["channel"] is None for r in bronze if r["event_id"] in first)
    assert any(r["channel"] is not None for r in bronze if r["event_id"] not in first)
    by_id = {r["event_id"]: r for r in bronze}
    assert by_id[extra[3]["event_id"]]["amount"] == extra[3]["amount"]
    assert by_id[extra[3]["event_id"]]["event_time"] == extra[3]["event_time"]

    judge = ProtobufJudge(pipeline.schema, client, subject)
    job = {(r["_partition"], r["_offset"]): r["reason"] for r in quarantine}
    for part, o, _, v in read_records(KafkaClient(broker.bootstrap), topic):
        assert judge.judge(v).reason == job.get((part, o)), (part, o, v[:12] if v else v)

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    failed = {c["name"]: c["detail"] for c in outcome.summary["checks"] if c["status"] == "failed"}
    assert outcome.status == "passed", failed

    # `fields: registry` reads the subject's latest version (the base64 one): its message's fields
    from devkit.pipelines import table_sinks

    folder = tmp_path / "from-registry"
    only_counts = table_sinks(folder, {"group_by": ["account_id"], "metrics": {"events": "count"}})
    _, from_registry = pipeline_file(
        folder, broker.bootstrap, topic, schema={**schema, "fields": "registry"}, sinks=only_counts
    )
    read = from_registry.schema
    assert [(f.name, f.type, f.required) for f in read.fields] == [
        ("event_id", "string", True),
        ("account_id", "string", True),
        ("amount", "string", True),  # a decimal travels as a string of its text: the schema says string
        ("currency", "string", True),
        ("event_time", "timestamp", True),  # a Timestamp has presence; named as event_time, it is required
        ("channel", "string", False),
    ]


@pytest.mark.parametrize("converter", ["avro", "json_schema"])
def test_debezium_envelopes_in_the_wire_format_fold_into_the_keyed_table_and_every_kind_has_its_reason(
    broker, spark, registry, topic, tmp_path, converter
):
    """A Debezium pipeline whose connector runs the AvroConverter (`converter: avro`) or the
    JsonSchemaConverter (`converter: json_schema`): `onceflow produce` registers the envelope's
    schema and writes a change stream in it (duplicates, late changes, deletes and their
    tombstones); with Avro, beside malformed ones in JSON, under unknown ids, cut short, and broken
    envelopes Avro holds; with JSON Schema, every broken envelope of the JSON stream after the header.
    The keyed table ends as the database's final table, every committed record but the tombstones is
    in bronze or quarantine exactly once with the generator's reason, and the audit (its own readers
    of the format and the JSON envelope parser) passes."""
    from devkit.pipelines import _CUSTOMERS_CDC, cdc_pipeline_file
    from onceflow.generate.framing import registry_framing
    from onceflow.registry import unframe
    from tests.exactly_once import assert_current_exactly_once

    schema = copy.deepcopy(_CUSTOMERS_CDC["schema"])
    schema.update(converter=converter, registry={"url": registry.url})
    if converter == "avro":  # an Avro decimal reaches the view as its text
        next(f for f in schema["fields"] if f["name"] == "balance")["encoding"] = "string"
    _, pipeline = cdc_pipeline_file(tmp_path / "pipeline", broker.bootstrap, f"{topic}.public.customers", schema=schema)
    framing = registry_framing(pipeline, malformed=True)
    assert set(framing) == {"envelope" if converter == "avro" else "frame_id"}
    summary = _produced(broker, pipeline, 700, seed=19, keyed=pipeline.keyed, **framing)
    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished", result
    figures = assert_current_exactly_once(pipeline, broker.bootstrap, summary.changes)
    assert figures["rows"] > 10 and figures["tombstones"] > 0, figures

    committed = [r for r in summary.records if not r.aborted and r.change != "tombstone"]
    kinds = Counter(r.kind for r in committed if r.kind != "valid")
    quarantine = DeltaTable(table_paths(pipeline)["quarantine"]).to_pyarrow_table().to_pylist()
    assert Counter(r["reason"] for r in quarantine) == kinds
    assert len([k for k in kinds if k.startswith("cdc_")]) >= 3, kinds
    if converter == "avro":
        assert {"avro_not_framed", "avro_unknown_schema", "avro_undecodable"} <= set(kinds), kinds
    else:
        assert "invalid_json" in kinds and all(r.value is not None and unframe(r.value) for r in committed), kinds

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    failed = {c["name"]: c["detail"] for c in outcome.summary["checks"] if c["status"] == "failed"}
    assert outcome.status == "passed", failed
