"""Airflow connections as onceflow reads them where Airflow is not: from the environment.

Airflow itself reads a connection from AIRFLOW_CONN_<ID>, in JSON (`{"conn_type": ..., "login":
..., "extra": {...}}`) or URI form (`http://login:password@host:port/schema?key=value`).
onceflow's Airflow side (onceflow.airflow.kafka, onceflow.airflow.registry) also hands a
connection it read from Airflow's metadata DB to the processes it starts, as JSON in a variable of
its own (ONCEFLOW_<KIND>_CONN_<ID>), never through an operator's fields or a command line. The
Kafka clients (onceflow.kafka.client) and the schema registry's client (onceflow.registry) read them
here.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


def env_name(conn_id: str) -> str:
    """A connection id as Airflow spells it in a variable's name (kafka-prod -> KAFKA_PROD)."""
    return re.sub(r"[^A-Z0-9]", "_", conn_id.upper())


def airflow_conn_env(conn_id: str) -> str:
    """The variable Airflow itself reads a connection from (AIRFLOW_CONN_<ID>)."""
    return f"AIRFLOW_CONN_{env_name(conn_id)}"


def handed_env(kind: str, conn_id: str) -> str:
    """The variable onceflow's Airflow side hands a connection of `kind` (KAFKA, REGISTRY) on in."""
    return f"ONCEFLOW_{kind}_CONN_{env_name(conn_id)}"


def extra_of(text: str) -> dict:
    """The extra of an Airflow connection in AIRFLOW_CONN_<ID>: JSON or URI form."""
    text = text.strip()
    if text.startswith("{"):
        extra = json.loads(text).get("extra") or {}
    else:
        query = parse_qs(urlsplit(text).query)
        extra = query["__extra__"][0] if "__extra__" in query else {k: v[-1] for k, v in query.items()}
    return json.loads(extra) if isinstance(extra, str) else dict(extra)


def fields_of(text: str) -> dict[str, Any]:
    """A connection in AIRFLOW_CONN_<ID> form (JSON or URI): conn_type, host, port, schema, login,
    password and extra (a dict). ValueError when it is neither."""
    text = text.strip()
    if text.startswith("{"):
        found = json.loads(text)
        if not isinstance(found, dict):
            raise ValueError("not a JSON object")
        return {
            "conn_type": found.get("conn_type"),
            "host": found.get("host"),
            "port": found.get("port"),
            "schema": found.get("schema"),
            "login": found.get("login"),
            "password": found.get("password"),
            "extra": extra_of(text),
        }
    parts = urlsplit(text)
    if not parts.scheme:
        raise ValueError("neither JSON nor a URI")
    return {
        "conn_type": parts.scheme.replace("-", "_"),
        "host": unquote(parts.hostname or "") or None,
        "port": parts.port,
        "schema": unquote(parts.path.lstrip("/")) or None,
        "login": unquote(parts.username) if parts.username is not None else None,
        "password": unquote(parts.password) if parts.password is not None else None,
        "extra": extra_of(text),
    }
