"""`schema.fields: registry` at load (schema/registry_fields.py), where no registry answers: a load
never hangs on it, falls back on the fields it read last (with a warning), and without them fails
naming the file, the field and the fix. Reading a real registry's latest schema, and a new version
becoming a new column: tests/integration/test_registry_topics.py."""

from __future__ import annotations

import json
import logging

import pytest

from devkit.pipelines import PAYMENTS_SCHEMA_BODY, write_pipeline
from onceflow import config
from onceflow.errors import ConfigError
from onceflow.local.service import free_port
from onceflow.schema.avro_declared import declared_avro_schema, fields_of_avro
from onceflow.schema.registry_fields import CACHE_FILE

DOWN = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"  # nothing listens: refused at once


def _file(tmp_path, **schema):
    body = {**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": DOWN, "timeout_seconds": 1}, **schema}
    return write_pipeline(tmp_path, "localhost:9092", "orders", name="orders", schema={**body, "fields": "registry"})


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def test_a_registry_that_does_not_answer_and_no_fields_read_before_fail_the_load_with_the_fix(tmp_path, state):
    with pytest.raises(ConfigError) as caught:
        config.load(_file(tmp_path))
    message = str(caught.value)
    assert "orders.yaml: schema.fields: registry: the registry could not be asked for orders-value's latest" in message
    assert "Fix: start the registry or point schema.registry.url at it, or list the fields" in message


def test_a_registry_that_does_not_answer_leaves_the_fields_read_last_with_a_warning(tmp_path, state, caplog):
    base = config.Schema.model_validate(PAYMENTS_SCHEMA_BODY)
    kept = fields_of_avro(declared_avro_schema(base, "orders"))
    (state / "pipelines" / "orders").mkdir(parents=True)
    (state / "pipelines" / "orders" / CACHE_FILE).write_text(
        json.dumps({"subject": "orders-value", "id": 7, "fields": kept})
    )
    with caplog.at_level(logging.WARNING, logger="onceflow.config"):
        pipeline = config.load(_file(tmp_path))
    assert [f.name for f in pipeline.schema.fields] == [f.name for f in base.fields]
    assert "does not answer" in caplog.text and "as last read (id 7)" in caplog.text


def test_fields_read_for_another_subject_are_not_taken(tmp_path, state):
    (state / "pipelines" / "orders").mkdir(parents=True)
    (state / "pipelines" / "orders" / CACHE_FILE).write_text(json.dumps({"subject": "x-value", "id": 1, "fields": []}))
    with pytest.raises(ConfigError, match="could not be asked"):
        config.load(_file(tmp_path))


def test_registry_fields_are_for_the_registry_formats_and_need_a_valid_registry(tmp_path, state):
    with pytest.raises(
        ConfigError, match=r"reads an Avro, Protobuf or JSON Schema schema.s fields, and this schema.s format is json"
    ):
        config.load(_file(tmp_path, format="json", registry=None))
    with pytest.raises(ConfigError) as caught:
        config.load(_file(tmp_path, registry={"url": "ftp://nowhere"}))
    assert "field `schema.registry.url`: Value error, 'ftp://nowhere' is not an http(s) URL" in str(caught.value)
    assert "field `schema.fields`: Value error, `registry` reads the fields from schema.registry, which is not" in str(
        caught.value
    )
