"""onceflow.kafka.client.connection_settings reads an Airflow `kafka` connection from
AIRFLOW_CONN_<ID> in both of Airflow's forms: JSON and URI (`kafka://?__extra__=<urlencoded JSON>`)."""

from __future__ import annotations

import importlib
import json
from urllib.parse import quote, urlencode

import pytest

from onceflow.errors import ConfigError
from onceflow.kafka.client import connection_env, connection_settings

EXTRA = {
    "bootstrap.servers": "b-1.example:9096,b-2.example:9096",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "onceflow",
    "sasl.password": "p@ss word/with&odd=chars?#",
}


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv(connection_env("kafka_prod"), raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_PROD", raising=False)


def test_the_uri_form_with_the_extra_as_urlencoded_json(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", "kafka://?__extra__=" + quote(json.dumps(EXTRA), safe=""))
    assert connection_settings("kafka_prod") == EXTRA


@pytest.mark.parametrize("more, form", [({}, "bootstrap.servers="), ({"socket.timeout.ms": 30000}, "__extra__=")])
def test_the_uri_form_as_airflow_writes_it(monkeypatch, more, form):
    """Connection.get_uri() of a kafka connection: host-less; a flat extra of text as query
    parameters, any other as __extra__."""
    importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported
    from airflow.sdk import Connection

    uri = Connection(conn_id="kafka_prod", conn_type="kafka", extra=json.dumps({**EXTRA, **more})).get_uri()
    assert uri.startswith("kafka://") and form in uri
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", uri)
    assert connection_settings("kafka_prod") == {**EXTRA, **{k: str(v) for k, v in more.items()}}


def test_the_uri_form_with_the_extra_as_plain_query_parameters(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", "kafka://?" + urlencode(EXTRA))
    assert connection_settings("kafka_prod") == EXTRA


def test_onceflows_own_variable_comes_first(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", "kafka://?__extra__=" + quote(json.dumps(EXTRA), safe=""))
    monkeypatch.setenv(connection_env("kafka_prod"), json.dumps({"bootstrap.servers": "applied:9092"}))
    assert connection_settings("kafka_prod") == {"bootstrap.servers": "applied:9092"}


def test_an_unreadable_uri_is_an_error_with_the_fix(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", "kafka://?__extra__=%7Bnot-json")
    with pytest.raises(ConfigError, match=r"\$AIRFLOW_CONN_KAFKA_PROD is not readable .* Fix:"):
        connection_settings("kafka_prod")
