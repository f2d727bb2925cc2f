"""Airflow connections read from the environment without Airflow (onceflow/connections.py): the
JSON and URI forms Airflow itself accepts in AIRFLOW_CONN_<ID>."""

from __future__ import annotations

import json

import pytest

from onceflow.connections import airflow_conn_env, extra_of, fields_of, handed_env


def test_names_are_airflows():
    assert airflow_conn_env("schema-registry.prod") == "AIRFLOW_CONN_SCHEMA_REGISTRY_PROD"
    assert handed_env("REGISTRY", "sr") == "ONCEFLOW_REGISTRY_CONN_SR"


def test_the_json_form():
    text = json.dumps(
        {"conn_type": "http", "host": "sr.example", "port": 8081, "login": "u", "password": "p@ss", "extra": {"a": 1}}
    )
    found = fields_of(text)
    assert (found["conn_type"], found["host"], found["port"], found["login"], found["password"]) == (
        "http",
        "sr.example",
        8081,
        "u",
        "p@ss",
    )
    assert found["extra"] == {"a": 1} == extra_of(text)


def test_the_uri_form_with_escapes_and_an_extra():
    found = fields_of("https://reader:p%40ss%2Fword@sr.example:8443/apis?ca_location=%2Fetc%2Fca.pem")
    assert found["conn_type"] == "https" and found["host"] == "sr.example" and found["port"] == 8443
    assert (found["login"], found["password"], found["schema"]) == ("reader", "p@ss/word", "apis")
    assert found["extra"] == {"ca_location": "/etc/ca.pem"}
    assert fields_of("http://sr.example")["login"] is None


@pytest.mark.parametrize("text", ["not a connection", "[1, 2]"])
def test_what_is_neither_form_is_refused(text):
    with pytest.raises(ValueError):
        fields_of(text)
