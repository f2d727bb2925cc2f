"""Debezium's envelopes in Avro, without a registry (generate/debezium_avro.py): the envelope's
schema made of the declared fields, every valid change read back by fastavro and the JSON envelope
parser as the change it was, each malformed one with the reason its kind says. The job reads them
in tests/integration/test_registry_topics.py."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from devkit.pipelines import _CUSTOMERS_CDC, cdc_pipeline_file
from onceflow.cdc.envelope import Change, Envelope, Malformed
from onceflow.errors import ConfigError
from onceflow.generate.changes import ChangeStream
from onceflow.generate.debezium_avro import AvroChanges, envelope_schema
from onceflow.generate.records import VALID
from onceflow.registry import unframe
from onceflow.schema.avro_reference import VIEW_BYTES, AvroReader

SCHEMA = copy.deepcopy(_CUSTOMERS_CDC["schema"])
SCHEMA.update(converter="avro", registry={"url": "http://127.0.0.1:1/apis/ccompat/v7"})
for _f in SCHEMA["fields"]:
    if _f["name"] == "balance":
        _f["encoding"] = "string"


def _pipeline(tmp_path, schema=None):
    return cdc_pipeline_file(tmp_path, "127.0.0.1:1", "onceflow.public.customers", schema=schema or SCHEMA)[1]


def test_a_precise_decimal_under_the_avro_converter_is_refused_with_the_fix(tmp_path):
    schema = copy.deepcopy(SCHEMA)
    next(f for f in schema["fields"] if f["name"] == "balance")["encoding"] = "precise"
    with pytest.raises(ConfigError, match="declare `encoding: string`"):
        _pipeline(tmp_path, schema)
    with pytest.raises(ConfigError, match="needs `registry`"):
        _pipeline(tmp_path, {k: v for k, v in SCHEMA.items() if k != "registry"})
    json_schema = {**schema, "converter": "json_schema"}  # balance stays `encoding: precise`
    with pytest.raises(ConfigError, match="format debezium with converter json_schema needs `registry`"):
        _pipeline(tmp_path, {k: v for k, v in json_schema.items() if k != "registry"})
    assert _pipeline(tmp_path, json_schema).schema.framing == "json_schema"  # precise decimals stay base64
    with pytest.raises(ConfigError, match="format: debezium only"):
        from devkit.pipelines import PAYMENTS_SCHEMA_BODY, pipeline_file

        pipeline_file(tmp_path / "p", "127.0.0.1:1", "t", schema={**PAYMENTS_SCHEMA_BODY, "converter": "avro"})


def test_changes_in_avro_read_back_as_the_changes_and_each_kind_as_its_reason(tmp_path):
    pipeline = _pipeline(tmp_path)
    assert pipeline.schema.framing == "avro" and pipeline.keyed is not None
    envelope = envelope_schema(pipeline.schema, "customers")
    stream = ChangeStream(pipeline.schema, pipeline.keyed, 5, count=800, malformed_ratio=0.3)
    reader = AvroReader(__import__("json").dumps(envelope), plain=-1)
    keyed = pipeline.keyed
    parser = Envelope(pipeline.schema, [f.name for f in keyed.keys], [p.name for p in keyed.sequence])
    kinds: Counter[str] = Counter()
    for rec in AvroChanges(stream, envelope, 41, keyed):
        if rec.value is None:
            kinds["tombstone"] += 1
            continue
        kinds[rec.kind] += 1
        framed = unframe(rec.value)
        if rec.kind == "avro_not_framed":
            assert rec.value.startswith(b"{")  # the stream's JSON, which Avro could not hold
            continue
        assert framed is not None
        if rec.kind == "avro_unknown_schema":
            assert framed[0] != 41
            continue
        view = reader.view(framed[1])
        if rec.kind == "avro_undecodable":
            assert view is None
            continue
        assert view is not None
        parsed = parser.parse(rec.key, view, max_bytes=VIEW_BYTES)
        if rec.kind == VALID:
            assert isinstance(parsed, Change), (parsed, view)
        else:
            assert isinstance(parsed, Malformed) and parsed.reason == rec.kind
    assert kinds[VALID] > 400 and kinds["avro_not_framed"] > 0 and kinds["avro_undecodable"] > 0
    assert len([k for k in kinds if k.startswith("cdc_")]) >= 3, kinds  # envelopes Avro holds, broken
    assert stream.expected_rows()  # the fold of the valid changes, as for JSON
