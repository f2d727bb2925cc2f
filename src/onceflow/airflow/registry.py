"""An Airflow connection as the login to a pipeline's schema registry (docs/registry.md).

A pipeline's `schema.registry.connection` names an Airflow connection (type http): its login and
password are the registry's HTTP basic auth, its extra's `ca_location` the CA of an https registry.
The tasks, triggers and the page of the pipeline read it here, mask its password in Airflow's
logs, and hand it on as JSON in this process's environment only (ONCEFLOW_REGISTRY_CONN_<ID>, which
onceflow.registry reads): never in an operator's templated fields, Spark settings or spark-submit's
command line; a local spark-submit inherits it. Where the driver runs elsewhere (YARN, Kubernetes),
supply AIRFLOW_CONN_<ID> there from a secret.
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from onceflow.airflow.kafka import mask
from onceflow.connections import airflow_conn_env
from onceflow.errors import ConfigError
from onceflow.registry import connection_env

if TYPE_CHECKING:
    from onceflow.config import Pipeline

_APPLIED: set[str] = set()
_GUARD = threading.Lock()


def login_of(conn_id: str) -> dict[str, str | None]:
    """The connection's login, password and extra.ca_location, the password masked in Airflow's logs."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise ConfigError(
            f"schema.registry.connection: there is no Airflow connection {conn_id!r}. Fix: create it (Admin -> "
            f"Connections -> +, id {conn_id}, type http, login and password) or export {airflow_conn_env(conn_id)} "
            "where Airflow runs (docs/registry.md)"
        ) from None
    extra = conn.extra_dejson if isinstance(conn.extra_dejson, dict) else {}
    found = {"login": conn.login, "password": conn.password, "ca_location": extra.get("ca_location")}
    if conn.password:
        mask({"password": conn.password})
    return found


def use_registry_connection(pipeline: Pipeline) -> str | None:
    """Put the registry connection the pipeline names into this process's environment, once; its id."""
    spec = pipeline.schema.registry
    conn_id = spec.connection if spec is not None else None
    if not conn_id:
        return None
    with _GUARD:
        if conn_id not in _APPLIED:
            os.environ[connection_env(conn_id)] = json.dumps(login_of(conn_id))
            _APPLIED.add(conn_id)
    return conn_id
