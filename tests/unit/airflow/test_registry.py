"""An Airflow connection as the login to a pipeline's schema registry (onceflow/airflow/registry.py):
read through Airflow, handed on in this process's environment only, the password masked."""

from __future__ import annotations

import importlib
import json
import os

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow import config  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow import registry  # noqa: E402
from onceflow.errors import ConfigError  # noqa: E402
from onceflow.registry import connection_env  # noqa: E402
from tests.airflow_helpers import ROOT  # noqa: E402


def _pipeline(tmp_path, conn_id: str) -> config.Pipeline:
    text = (ROOT / "pipelines" / "payments_avro.yaml").read_text()
    marker = "    url: ${ONCEFLOW_REGISTRY_URL:-http://127.0.0.1:8081/apis/ccompat/v7}\n"
    assert marker in text
    file = tmp_path / "payments_avro.yaml"
    file.write_text(text.replace(marker, marker + f"    connection: {conn_id}\n"))
    return config.load(file)


@pytest.fixture
def clean(monkeypatch):
    monkeypatch.setattr(registry, "_APPLIED", set())
    names = [connection_env(c) for c in ("sr_prod", "sr_missing")]
    for name in names:
        monkeypatch.delenv(name, raising=False)
    yield
    for name in names:
        os.environ.pop(name, None)


def test_the_named_connection_is_handed_on_in_the_environment(tmp_path, monkeypatch, clean):
    conn = {"conn_type": "http", "login": "reader", "password": "canary-sr", "extra": {"ca_location": "/etc/sr.pem"}}
    monkeypatch.setenv("AIRFLOW_CONN_SR_PROD", json.dumps(conn))
    pipeline = _pipeline(tmp_path, "sr_prod")
    assert pipeline.schema.registry is not None and pipeline.schema.registry.connection == "sr_prod"
    assert "canary-sr" not in pipeline.schema.model_dump_json()  # the declaration holds only the id
    assert registry.use_registry_connection(pipeline) == "sr_prod"
    handed = json.loads(os.environ[connection_env("sr_prod")])
    assert handed == {"login": "reader", "password": "canary-sr", "ca_location": "/etc/sr.pem"}


def test_a_missing_connection_is_an_error_with_the_fix(tmp_path, clean):
    with pytest.raises(ConfigError, match=r"no Airflow connection 'sr_missing'. Fix: create it .*type http"):
        registry.use_registry_connection(_pipeline(tmp_path, "sr_missing"))


def test_a_pipeline_without_one_applies_nothing(clean):
    assert registry.use_registry_connection(config.load(ROOT / "pipelines" / "payments.yaml")) is None
