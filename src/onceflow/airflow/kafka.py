"""An Airflow `kafka` connection as the Kafka cluster a pipeline names (docs/airflow.md).

A pipeline's `source.kafka_connection` (and `sinks.kafka.kafka_connection`) names an Airflow
connection of type `kafka` (the apache-kafka provider's): its extra is a librdkafka config dict,
`bootstrap.servers` included, as the provider's own hooks take it. The tasks, triggers and the page
of the pipeline read it here, every secret value in it is masked in Airflow's logs, and it goes, as
JSON, into this process's environment only (ONCEFLOW_KAFKA_CONN_<ID>, which
onceflow.kafka.client.connection_settings reads): never into an operator's templated fields
(Airflow stores rendered templates), its env_vars, Spark settings or spark-submit's command line; a
local spark-submit inherits it. On YARN or Kubernetes the driver runs elsewhere: supply the
connection there (AIRFLOW_CONN_<ID> from a secret the driver's container mounts).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from onceflow.config import client_settings, is_secret_setting
from onceflow.connections import airflow_conn_env
from onceflow.errors import ConfigError
from onceflow.kafka.client import connection_env

if TYPE_CHECKING:
    from onceflow.config import Pipeline

_APPLIED: set[str] = set()
_GUARD = threading.Lock()
# librdkafka callbacks the provider resolves from dotted paths: nothing onceflow's clients can take
_CALLBACKS = ("error_cb", "throttle_cb", "stats_cb", "log_cb", "oauth_cb", "on_commit")


def connection_ids(pipeline: Pipeline) -> dict[str, tuple[str, str]]:
    """{connection id: (the field naming it, the servers the pipeline itself states there)}."""
    named: dict[str, tuple[str, str]] = {}
    sink = pipeline.sinks.kafka
    if sink is not None and sink.kafka_connection:
        named[sink.kafka_connection] = ("sinks.kafka.kafka_connection", sink.bootstrap_servers or "")
    if pipeline.source.kafka_connection:  # the source's wins a shared id: it needs the servers most
        named[pipeline.source.kafka_connection] = ("source.kafka_connection", pipeline.source.bootstrap_servers)
    return named


def _fix(conn_id: str) -> str:
    return (
        f"Fix: create it (Admin -> Connections -> +, id {conn_id}, type kafka, extra = a librdkafka config dict "
        'like {"bootstrap.servers": "broker:9093", "security.protocol": "SASL_SSL", ...}) or export '
        f"{airflow_conn_env(conn_id)} where Airflow runs "
        "(docs/airflow.md)"
    )


def settings_of(conn_id: str, field: str = "source.kafka_connection", servers: str = "") -> dict[str, str]:
    """The connection's librdkafka config dict, values as text, every secret masked in Airflow's logs.
    ConfigError with the fix when the connection is missing, or has no bootstrap.servers and the
    pipeline states none (`servers`)."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise ConfigError(f"{field}: there is no Airflow connection {conn_id!r}. {_fix(conn_id)}") from None
    extra = conn.extra_dejson  # Airflow masks the values of keys with sensitive names here
    if not isinstance(extra, dict):
        raise ConfigError(
            f"{field}: the extra of the Airflow connection {conn_id!r} is not a JSON object. {_fix(conn_id)}"
        )
    callbacks = sorted(set(extra) & set(_CALLBACKS))
    if callbacks:
        raise ConfigError(
            f"the Kafka connection {conn_id!r}: {', '.join(callbacks)} in its extra is a callback, not a client "
            "setting onceflow can pass on. Fix: remove it; state each setting as text"
        )
    try:
        settings = client_settings(extra)
    except ValueError as exc:  # a nested value
        raise ConfigError(
            f"the Kafka connection {conn_id!r}: {exc}. Fix: remove it; state each setting as text"
        ) from None
    mask(settings)
    if not settings.get("bootstrap.servers", "").strip() and not servers.strip():
        raise ConfigError(
            f"{field}: the Airflow connection {conn_id!r} (type {conn.conn_type}) has no bootstrap.servers in its "
            "extra and the pipeline states no bootstrap_servers. Fix: add bootstrap.servers to the connection's "
            "extra (a librdkafka config dict), or set the pipeline's bootstrap_servers"
        )
    return settings


def _maskers() -> Iterator[Callable[..., None]]:
    """Airflow's mask_secret: the task SDK's (tasks, triggerer; it tells the supervisor too), and
    the core's where Airflow's own processes (the API server of the page) log through it."""
    from airflow.sdk.log import mask_secret

    yield mask_secret
    try:
        from airflow._shared.secrets_masker import mask_secret as core_mask_secret
    except ImportError:  # a worker with the task SDK only
        return
    yield core_mask_secret


def mask(settings: Mapping[str, str]) -> None:
    """Hide the settings' secrets in Airflow's logs: the dict (by key name, as Airflow masks a
    connection's extra) and each secret value by itself, whatever its key is called (ssl.key.pem),
    a PEM's lines one by one too (a key printed in part)."""
    for mask_secret in _maskers():
        mask_secret(dict(settings))
        for key, value in settings.items():
            if not is_secret_setting(key):
                continue
            mask_secret(value)
            for line in value.splitlines():
                if line.strip() and not line.lstrip().startswith("-----"):
                    mask_secret(line.strip())


def use_kafka_connections(pipeline: Pipeline) -> list[str]:
    """Put each Airflow `kafka` connection the pipeline names into this process's environment,
    once per id, for onceflow.kafka.client (and a local spark-submit) to read; the ids applied."""
    named = connection_ids(pipeline)
    with _GUARD:
        for conn_id, (field, servers) in named.items():
            if conn_id in _APPLIED:
                continue
            os.environ[connection_env(conn_id)] = json.dumps(settings_of(conn_id, field, servers))
            _APPLIED.add(conn_id)
    return list(named)
