"""An Airflow `kafka` connection a pipeline names: the cluster it resolves to, its secrets masked
in Airflow's logs, handed on through this process's environment only, never through an operator."""

from __future__ import annotations

import importlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow import config  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow import kafka  # noqa: E402
from onceflow.errors import ConfigError  # noqa: E402
from onceflow.kafka.client import KafkaClient, connection_env, connection_settings, sink_client, source_client  # noqa: E402
from tests.airflow_helpers import ROOT  # noqa: E402

SERVERS = "broker-1.example:9093,broker-2.example:9093"


@pytest.fixture
def canary() -> str:
    return f"canary-{uuid.uuid4().hex}"


@pytest.fixture
def connections(monkeypatch, canary):
    """AIRFLOW_CONN_KAFKA_PROD (SASL_SSL, the canary as its password), nothing applied yet; the
    variables use_kafka_connections sets are removed afterwards."""
    extra = {
        "bootstrap.servers": SERVERS,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "onceflow",
        "sasl.password": canary,
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "enable.ssl.certificate.verification": True,
    }
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", json.dumps({"conn_type": "kafka", "extra": extra}))
    monkeypatch.setattr(kafka, "_APPLIED", set())
    names = [connection_env(c) for c in ("kafka_prod", "kafka_out", "kafka_missing", "kafka_bare")]
    for name in names:
        monkeypatch.delenv(name, raising=False)
    yield extra
    for name in names:
        os.environ.pop(name, None)


def _pipeline(tmp_path: Path, source: str, sink: str = "") -> config.Pipeline:
    text = (ROOT / "pipelines" / "payments.yaml").read_text()
    text = text.replace("  bootstrap_servers: ${ONCEFLOW_KAFKA_BOOTSTRAP:-localhost:9092}\n", source)
    if sink:
        text = text.replace("sinks:\n", "sinks:\n" + sink, 1)
    assert source in text
    file = tmp_path / "pipelines" / "payments.yaml"
    file.parent.mkdir(exist_ok=True)
    file.write_text(text)
    return config.load(file)


def test_the_connection_resolves_to_its_cluster_and_reaches_the_clients_through_the_environment(
    tmp_path, monkeypatch, connections, canary
):
    pipeline = _pipeline(tmp_path, "  kafka_connection: kafka_prod\n")
    assert kafka.use_kafka_connections(pipeline) == ["kafka_prod"]
    # the extra as JSON in ONCEFLOW_KAFKA_CONN_KAFKA_PROD, values as librdkafka takes them
    stored = json.loads(os.environ["ONCEFLOW_KAFKA_CONN_KAFKA_PROD"])
    assert stored["sasl.password"] == canary and stored["enable.ssl.certificate.verification"] == "true"
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_PROD")  # from here on only what onceflow set is read
    assert connection_settings("kafka_prod") == stored
    client = source_client(pipeline)
    assert client == KafkaClient(
        SERVERS,
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "onceflow",
            "sasl.password": canary,
            "ssl.ca.location": "/etc/kafka/ca.pem",
            "enable.ssl.certificate.verification": "true",
        },
    )
    assert client.librdkafka()["bootstrap.servers"] == SERVERS
    assert canary not in repr(client) and canary not in client.describe()
    # once per id: a second pipeline naming it asks Airflow no more
    assert kafka.use_kafka_connections(pipeline) == ["kafka_prod"]


def test_the_sinks_own_connection_is_applied_too(tmp_path, monkeypatch, connections):
    out = {"conn_type": "kafka", "extra": {"bootstrap.servers": "out.example:9092", "client.id": "onceflow-out"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_OUT", json.dumps(out))
    pipeline = _pipeline(
        tmp_path,
        "  kafka_connection: kafka_prod\n",
        "  kafka: {topic: payments-out, kafka_connection: kafka_out}\n",
    )
    assert sorted(kafka.use_kafka_connections(pipeline)) == ["kafka_out", "kafka_prod"]
    assert json.loads(os.environ["ONCEFLOW_KAFKA_CONN_KAFKA_OUT"])["bootstrap.servers"] == "out.example:9092"
    sink = sink_client(pipeline)
    assert sink is not None and sink.bootstrap == "out.example:9092" and sink.props == {"client.id": "onceflow-out"}


def test_every_secret_is_masked_in_airflows_logs_whatever_its_key_is_called(canary):
    from airflow.sdk._shared.secrets_masker import redact

    key_line = f"MIIE{canary}"
    pem = f"-----BEGIN PRIVATE KEY-----\n{key_line}\n-----END PRIVATE KEY-----"
    kafka.mask({"ssl.key.pem": pem, "sasl.oauthbearer.client.secret": f"oauth-{canary}", "client.id": "onceflow"})
    # ssl.key.pem is no sensitive name to Airflow: masked because onceflow knows it is a secret
    assert redact(f"loaded {pem}") == "loaded ***"
    assert redact(f"the key's line {key_line} printed alone") == "the key's line *** printed alone"
    assert redact(f"token oauth-{canary}") == "token ***"
    assert redact("client onceflow") == "client onceflow"  # not a secret: left as it is


def test_the_applied_connections_password_is_redacted_in_a_logged_line(tmp_path, connections, canary):
    from airflow.sdk._shared.secrets_masker import redact  # what Airflow's log processors apply

    kafka.use_kafka_connections(_pipeline(tmp_path, "  kafka_connection: kafka_prod\n"))
    assert redact(f"connecting as onceflow with sasl.password={canary}") == (
        "connecting as onceflow with sasl.password=***"
    )
    shown = redact(f"env: {os.environ['ONCEFLOW_KAFKA_CONN_KAFKA_PROD']}")  # the variable printed whole
    assert canary not in shown and SERVERS in shown


def test_a_missing_connection_is_an_error_with_the_fix(tmp_path, connections):
    pipeline = _pipeline(tmp_path, "  kafka_connection: kafka_missing\n")
    with pytest.raises(ConfigError) as err:
        kafka.use_kafka_connections(pipeline)
    message = str(err.value)
    assert "source.kafka_connection: there is no Airflow connection 'kafka_missing'" in message
    assert "type kafka" in message and "AIRFLOW_CONN_KAFKA_MISSING" in message and "Fix:" in message
    assert connection_env("kafka_missing") not in os.environ


def test_a_connection_without_bootstrap_servers_needs_the_pipelines_own(tmp_path, monkeypatch, connections):
    bare = {"conn_type": "kafka", "extra": {"security.protocol": "SSL"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_BARE", json.dumps(bare))
    with pytest.raises(ConfigError, match=r"has no bootstrap\.servers in its extra .* Fix: add bootstrap\.servers"):
        kafka.use_kafka_connections(_pipeline(tmp_path, "  kafka_connection: kafka_bare\n"))
    # the pipeline states the servers: the connection gives the settings only
    pipeline = _pipeline(tmp_path, "  bootstrap_servers: mine.example:9093\n  kafka_connection: kafka_bare\n")
    kafka.use_kafka_connections(pipeline)
    assert source_client(pipeline) == KafkaClient("mine.example:9093", {"security.protocol": "SSL"})


def test_a_callback_in_the_extra_is_refused(monkeypatch, connections):
    odd = {"conn_type": "kafka", "extra": {"bootstrap.servers": "b:9092", "error_cb": "my.pkg.on_error"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_BARE", json.dumps(odd))
    with pytest.raises(ConfigError, match=r"error_cb .* Fix: remove it"):
        kafka.settings_of("kafka_bare")


def test_no_operator_carries_the_secret_in_its_fields_env_or_command(tmp_path, monkeypatch, connections, canary):
    """The DAGs of a pipeline naming the connection, built, rendered, prepared for spark-submit and
    serialized as the DAG processor stores them, with the connection applied to this process."""
    from airflow.serialization.serialized_objects import DagSerialization

    from onceflow.airflow.dag_factory import build_dags
    from onceflow.airflow.spark_submit import OnceflowSparkSubmitOperator

    jars = tmp_path / "jars" / "spark"
    jars.mkdir(parents=True)
    (jars / "spark-sql-kafka-0-10_2.13-4.2.0.jar").write_bytes(b"PK")
    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path / "jars"))
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    pipeline = _pipeline(tmp_path, "  kafka_connection: kafka_prod\n")
    kafka.use_kafka_connections(pipeline)
    assert canary in os.environ["ONCEFLOW_KAFKA_CONN_KAFKA_PROD"]  # the process has it ...

    class TI:
        def xcom_pull(self, task_ids=None, **_):
            return {"since": 1.0, "verdict": "healthy", "reasons": [], "start": {"0": 0}, "end": {"0": 1}}

    dags = build_dags(tmp_path / "pipelines")
    assert "invalid_pipeline_payments" not in dags and len(dags) == 5
    seen = 0
    for dag in dags.values():
        assert canary not in json.dumps(DagSerialization.serialize_dag(dag), default=str), dag.dag_id
        for task in dag.tasks:
            context: Any = {
                "params": dag.params.validate(),
                "ti": TI(),
                "run_id": "manual__1",
                "dag": dag,
                "task": task,
            }
            task.render_template_fields(context)  # ... and no rendered field gets it
            for field in task.template_fields:
                assert canary not in repr(getattr(task, field, None)), (dag.dag_id, task.task_id, field)
            if isinstance(task, OnceflowSparkSubmitOperator):
                task.prepare(context)  # what the provider's hook gets: env_vars, conf, the command line
                command = task._get_hook()._build_spark_submit_command(task.application)
                shown = [repr(task.env_vars), repr(task.conf), repr(task.application_args), repr(command)]
                assert not [s for s in shown if canary in s], (dag.dag_id, task.task_id)
                assert not any(k.startswith("ONCEFLOW_KAFKA_CONN_") for k in task.env_vars or {})
                seen += 1
    assert seen >= 5  # stream, ingest, audit(s), recovery's start, backfill
