"""The Kafka clusters of a pipeline: its settings stated once, secrets only from the environment or a
connection, the sink on the source's cluster unless it says otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onceflow import config
from onceflow.errors import ConfigError
from onceflow.kafka.client import KafkaClient, connection_env, connection_settings, sink_client, source_client

BASE = """
name: p1
source:
  bootstrap_servers: {servers}
  topic: t
{source_extra}
schema: {{event_time: ts, event_id: id, fields: [{{name: ts, type: timestamp}}, {{name: id, type: string}}]}}
sinks:
  bronze: {{path: b}}
  quarantine: {{path: q}}
{sink}
checkpoint: cp
"""
SECURED = """  kafka:
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: onceflow
    sasl.password: ${KAFKA_PASSWORD}
    ssl.ca.location: ${KAFKA_CA:-}
    socket.timeout.ms: 15000"""


def load(tmp_path: Path, env: dict, servers="b:9093", source_extra=SECURED, sink="") -> config.Pipeline:
    f = tmp_path / "p.yaml"
    f.write_text(BASE.format(servers=servers, source_extra=source_extra, sink=sink))
    return config.load(f, env=env)


def test_source_settings_come_substituted_and_an_empty_value_is_no_setting(tmp_path):
    client = source_client(load(tmp_path, {"KAFKA_PASSWORD": "s3cr3t"}))
    assert client.bootstrap == "b:9093"
    assert client.props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "onceflow",
        "sasl.password": "s3cr3t",
        "socket.timeout.ms": "15000",  # a YAML number is a setting's text
    }
    assert "s3cr3t" not in repr(client) and "s3cr3t" not in client.describe()
    assert client.describe() == "b:9093 (SASL_SSL, SCRAM-SHA-512 as onceflow)"


@pytest.mark.parametrize(
    "written", ["hunter2", "${KAFKA_PASSWORD:-hunter2}", "pre-${KAFKA_PASSWORD}"], ids=["literal", "default", "mixed"]
)
def test_a_secret_written_in_the_file_is_refused_before_substitution(tmp_path, written):
    extra = SECURED.replace("${KAFKA_PASSWORD}", written)
    with pytest.raises(ConfigError) as err:
        load(tmp_path, {"KAFKA_PASSWORD": "x"}, source_extra=extra)
    message = str(err.value)
    assert "source.kafka.sasl.password is a secret written in the file" in message
    assert "sasl.password: ${KAFKA_SASL_PASSWORD}" in message and "hunter2" not in message


def test_the_sinks_secrets_are_checked_too(tmp_path):
    sink = "  kafka: {topic: out, bootstrap_servers: other:9093, kafka: {sasl.jaas.config: 'x required;'}}"
    with pytest.raises(ConfigError, match=r"sinks\.kafka\.kafka\.sasl\.jaas\.config is a secret"):
        load(tmp_path, {"KAFKA_PASSWORD": "x"}, sink=sink)


def test_the_sink_takes_the_source_cluster_and_settings_unless_it_names_its_own(tmp_path):
    env = {"KAFKA_PASSWORD": "x"}
    same = load(tmp_path, env, sink="  kafka: {topic: out}")
    assert sink_client(same) == source_client(same)
    other = load(tmp_path, env, sink="  kafka: {topic: out, bootstrap_servers: 'o:9093'}")
    assert sink_client(other) == KafkaClient("o:9093", source_client(other).props)
    own = load(tmp_path, env, sink="  kafka: {topic: out, bootstrap_servers: 'o:9092', kafka: {client.id: sink}}")
    assert sink_client(own) == KafkaClient("o:9092", {"client.id": "sink"})
    assert sink_client(load(tmp_path, env)) is None


def test_no_servers_and_no_connection_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"source\.bootstrap_servers is empty and no kafka_connection"):
        load(tmp_path, {}, servers='""', source_extra="")


def _conn(extra: dict) -> str:
    return json.dumps({"conn_type": "kafka", "extra": extra})


def test_a_kafka_connection_gives_the_servers_and_settings(tmp_path, monkeypatch):
    extra = {"bootstrap.servers": "c:9093", "security.protocol": "SASL_SSL", "sasl.password": "pw"}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", _conn(extra))
    pipeline = load(tmp_path, {}, servers='""', source_extra="  kafka_connection: kafka_prod")
    assert source_client(pipeline) == KafkaClient("c:9093", {"security.protocol": "SASL_SSL", "sasl.password": "pw"})
    # the file's own settings override the connection's; its servers win if it names them
    pipeline = load(
        tmp_path, {}, servers="mine:9093", source_extra="  kafka_connection: kafka_prod\n  kafka: {client.id: x}"
    )
    client = source_client(pipeline)
    assert (
        client.bootstrap == "mine:9093" and client.props["client.id"] == "x" and client.props["sasl.password"] == "pw"
    )


def test_connection_names_and_refusals(monkeypatch):
    """The forms of AIRFLOW_CONN_<ID> and which variable wins: test_client_connection_uri.py."""
    monkeypatch.setenv(connection_env("k-uri"), json.dumps({"bootstrap.servers": "v:1"}))
    assert connection_env("k-uri") == "ONCEFLOW_KAFKA_CONN_K_URI"
    assert connection_settings("k-uri") == {"bootstrap.servers": "v:1"}
    with pytest.raises(ConfigError, match=r"'nope' is not known here.*AIRFLOW_CONN_NOPE"):
        connection_settings("nope")
    monkeypatch.setenv("AIRFLOW_CONN_BROKEN", "{not json")
    with pytest.raises(ConfigError, match=r"not readable"):
        connection_settings("broken")
